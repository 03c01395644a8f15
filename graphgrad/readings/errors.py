"""Why a fast reading steps aside. Raised only inside this package, and caught in
one place, :func:`graphgrad.readings.factory.open_reading`, which then reads the
file with the full parse (and the full parse says what, if anything, is wrong).
Once a reading is open, its bytes are known to parse: what fails to then is a
read error (:func:`changed_while_read`)."""

from ..errors import ModelReadError


class NotApplicable(Exception):
    """The bytes are not a binary GraphDef this reading should handle."""


class Invalid(NotApplicable):
    """The bytes are not a GraphDef as the full parse reads one (or not surely)."""


class SmallNodes(NotApplicable):
    """A binary GraphDef, but of nodes too small for the scan: a cut-down parse is faster."""


def changed_while_read(what: str) -> ModelReadError:
    """The error for bytes that no longer parse, though the whole file did when its
    reading was opened (:mod:`graphgrad.readings.validity`): a file read through a
    window was changed by another process while graphgrad read it."""
    return ModelReadError(f"{what} does not parse, though the file did when graphgrad opened it: the file changed "
                          "while graphgrad read it; run the command again once nothing else writes it")
