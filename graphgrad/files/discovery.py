"""Finding model files: in folders (recursively, links followed once), by pattern,
and SavedModel directories."""

import os

from ..errors import ModelReadError
from .reading import SAVED_MODEL_FILES

MODEL_SUFFIXES = (".pb", ".pbtxt", ".meta")


KERAS2_METADATA = "keras_metadata.pb"
NOT_MODELS = {"fingerprint.pb", KERAS2_METADATA}


def find_models(path: str, recursive: bool = False, skipped: list | None = None) -> list[str]:
    """Model files and SavedModel directories named by ``path``.

    A file is itself; a SavedModel directory is one model; another directory
    gives its ``.pb``/``.pbtxt``/``.meta`` files and SavedModels (and, with
    ``recursive``, those of its subdirectories). Each directory is searched once:
    one reached again through a symbolic link (a loop, ``ln -s . zoo/self``) is
    skipped, and said in ``skipped`` if given.
    """
    if not os.path.isdir(path) or is_saved_model_dir(path):
        return [path]
    found = _search(path, recursive, set(), skipped if skipped is not None else [], os.path.realpath(path))
    if not found:
        raise ModelReadError(
            f"{path} holds no model (.pb, .pbtxt, .meta files or SavedModel directories)"
            + ("" if recursive else "; to search its subdirectories, add -r")
        )
    return found


def _search(path: str, recursive: bool, visited: set, skipped: list, tree: str) -> list[str]:
    """:func:`find_models` of one directory; ``visited``: the (device, inode) of those
    searched; ``tree``: the real path of the directory named, out of which no link
    is followed (as find, cp -R, rsync -r and grep -r do not)."""
    try:
        status = os.stat(path)
        identity = (status.st_dev, status.st_ino)
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError as error:
        if not visited:
            raise ModelReadError(f"cannot list {path}: {error.strerror or error}") from None
        skipped.append(f"{path}: cannot list it ({error.strerror or error}); skipped")
        return []
    if identity in visited:
        skipped.append(f"{path}: a link to a directory already searched; skipped")
        return []
    visited.add(identity)
    found = []
    for entry in entries:
        if entry.is_symlink() and (entry.is_dir() or entry.name.endswith(MODEL_SUFFIXES)):
            real = os.path.realpath(entry.path)
            if os.path.commonpath([real, tree]) != tree:
                skipped.append(f"{entry.path}: a link out of the tree searched (to {real}); skipped")
                continue
        if entry.is_dir():
            if is_saved_model_dir(entry.path):
                found.append(entry.path)
            elif recursive:
                found.extend(_search(entry.path, recursive, visited, skipped, tree))
        elif entry.name.endswith(MODEL_SUFFIXES) and entry.name not in NOT_MODELS:
            found.append(entry.path)
    return found


def is_saved_model_dir(path: str) -> bool:
    """Whether ``path`` is a directory holding saved_model.pb or saved_model.pbtxt."""
    return any(os.path.isfile(os.path.join(path, name)) for name in SAVED_MODEL_FILES.values())


def holds_keras2_metadata(path: str) -> bool:
    """Whether ``path`` is a SavedModel (its directory or its saved_model.pb) that
    Keras 2 wrote, with the metadata its ``load_model`` revives layers from."""
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    return is_saved_model_dir(folder) and os.path.isfile(os.path.join(folder, KERAS2_METADATA))


def expand_pattern(pattern: str) -> list[str]:
    """Paths a glob pattern matches (``**`` recurses), sorted; an existing path is itself."""
    if os.path.exists(pattern) or not any(c in pattern for c in "*?["):
        return [pattern]
    import glob

    matches = sorted(glob.glob(pattern, recursive=True))
    if not matches:
        raise ModelReadError(f"no file matches {pattern}")
    return matches
