"""The files a model names, kept inside the model's own folder.

A SavedModel's loader joins each asset's file name to ``assets/``: a name that
climbs out with ``../``, or an absolute one, makes loading read any file (a table
initialised from it quotes its first line in an error). A checkpoint's shards and
a training folder's ``checkpoint`` file can point elsewhere the same way, through
a path or a symbolic link. Each is refused here from the file alone, before
TensorFlow is imported.
"""

import os
from collections.abc import Iterable

from ..errors import GraphgradError


def inside(folder: str, path: str) -> bool:
    """Whether ``path``, its links followed, lies in ``folder`` (its links followed too)."""
    root = os.path.realpath(folder)
    return os.path.commonpath([root, os.path.realpath(path)]) == root


def refuse_escaping_assets(root: str, filenames: Iterable[str]) -> None:
    """Refuse asset file names of the SavedModel at ``root`` that resolve outside its
    ``assets/`` folder (``../``, an absolute path, a link out)."""
    assets = os.path.join(root, "assets")
    for name in filenames:
        if not name or os.path.isabs(name) or not inside(assets, os.path.join(assets, name)):
            raise GraphgradError(
                f"{root}: its asset {name!r} lies outside the SavedModel's assets/ folder, so loading it would read "
                "a file the model does not hold; graphgrad refuses to load such a model (re-export it with its "
                "assets inside)")


def refuse_escaping_shards(prefix: str, folder: str) -> None:
    """Refuse a checkpoint at ``prefix`` whose index or data shards resolve outside
    ``folder`` (a link that points elsewhere)."""
    import glob

    for path in [prefix + ".index"] + glob.glob(glob.escape(prefix) + ".data-*"):
        if os.path.lexists(path) and not inside(folder, path):
            raise GraphgradError(
                f"checkpoint file {path} points outside {folder} (to {os.path.realpath(path)}); restoring from it "
                "would read a file the model does not hold: copy the checkpoint's files into the folder")


def checkpoint_in_folder(folder: str, named: str) -> str:
    """The checkpoint prefix a training folder's ``checkpoint`` file names
    (``named``), taken from the folder's own files: a folder that was moved or
    copied keeps the old absolute path in that file, so its last part is looked
    up in ``folder``; a name that leads outside the folder is refused."""
    own = os.path.join(folder, os.path.basename(named))
    if os.path.isfile(own + ".index"):
        return own
    target = named if os.path.isabs(named) else os.path.join(folder, named)
    if not inside(folder, target):
        raise GraphgradError(
            f"{folder}: its checkpoint file names {named}, outside the folder, and the folder holds no "
            f"{os.path.basename(named)}.index; give the checkpoint's .meta or prefix instead")
    return target
