"""TOML rules files (``graphgrad rewrite --rules FILE``), read and parsed; the
rules in them are checked by :func:`graphgrad.edits.select.rules_from_document`."""

from ..errors import GraphgradError
from ..files.reading import read_small_file

RULES_LIMIT = 1 << 20  # bytes: a rules file is a few rules


def read_rules_file(path: str) -> dict:
    """A TOML rules file, parsed (not yet checked)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    data = read_small_file(path, RULES_LIMIT, "rules file")
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise GraphgradError(f"{path} is not valid TOML: it is not UTF-8 text ({error.reason} at byte "
                             f"{error.start})") from None
    except tomllib.TOMLDecodeError as error:
        raise GraphgradError(f"{path} is not valid TOML: {error}") from None
    except RecursionError:
        raise GraphgradError(f"{path} is not a usable rules file: it nests tables or arrays too deeply") from None
    except ValueError as error:  # e.g. an integer past Python's limit on digits
        raise GraphgradError(f"{path} is not a usable rules file: {error}") from None
