"""The one check every command makes of its outputs against its inputs, before any
work: no output may be, contain or replace a file the command reads (a model file,
a SavedModel's members, a checkpoint's ``.meta``, ``.index``, ``.data-*`` and
``checkpoint`` files, an input array), ``--force`` or not. Only ``rewrite
--in-place`` writes over its input, which is what it says.
"""

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..errors import UsageError

CHECKPOINT_STATE = "checkpoint"  # the file naming a folder's latest checkpoint, beside its shards


@dataclass(frozen=True)
class Output:
    """Where a command writes: ``option`` as the user named it (``-o``), the
    ``path``, and whether a whole ``folder`` is put there (what it held is replaced)."""

    option: str
    path: str
    folder: bool = False


def model_files(path: str) -> list[str]:
    """The files a model at ``path`` is read from: the file; a SavedModel's directory
    and every file below it; a ``.meta``'s checkpoint beside it."""
    if os.path.isdir(path):
        return [path] + [os.path.join(root, name) for root, _, names in os.walk(path) for name in names]
    if os.path.basename(path) in ("saved_model.pb", "saved_model.pbtxt"):
        return [path] + model_files(os.path.dirname(path) or ".")
    if path.endswith(".meta"):
        return checkpoint_files(path[:-len(".meta")])
    return [path]


def checkpoint_files(prefix: str) -> list[str]:
    """The files of the checkpoint ``prefix``: its ``.meta``, ``.index``, ``.data-*``
    shards, and the folder's ``checkpoint`` file that names it."""
    folder = os.path.dirname(os.path.abspath(prefix))
    base = os.path.basename(prefix)
    try:
        shards = [os.path.join(folder, name) for name in os.listdir(folder) if name.startswith(base + ".data-")]
    except OSError:
        shards = []
    return [prefix + ".meta", prefix + ".index", os.path.join(folder, CHECKPOINT_STATE), *shards]


def refuse_outputs_over_inputs(inputs: Mapping[str, Iterable[str]], outputs: Iterable[Output],
                               folders_made: bool = False) -> None:
    """Raise :class:`UsageError` (one line, nothing written yet) where an output would
    be, contain or replace one of the ``inputs`` (what each names, e.g. ``"the model
    m.pb"``, -> the files it reads), where two outputs are one file, or where an
    output is a link to nothing or its folder is missing (unless the command makes
    the ``folders_made``) or not writable."""
    read: dict[str, str] = {}
    for what, paths in inputs.items():
        for path in paths:
            read.setdefault(os.path.realpath(path), what)
    written: dict = {}
    for output in outputs:
        _refuse_unwritable(output, folders_made)
        real = os.path.realpath(output.path)
        if real in read:
            raise UsageError(f"{output.option} {output.path} would overwrite {read[real]}; write it elsewhere")
        if output.folder:
            held = sorted(path for path in read if path.startswith(real.rstrip(os.sep) + os.sep))
            if held:
                raise UsageError(f"{output.option} {output.path} holds {read[held[0]]} ({held[0]}), which "
                                 "replacing the folder would delete; name another folder")
        if real in written:
            raise UsageError(f"{written[real]} and {output.option} name one file, {output.path}: give each its own")
        written[real] = output.option


def _refuse_unwritable(output: Output, folders_made: bool) -> None:
    if os.path.islink(output.path) and not os.path.exists(output.path):
        raise UsageError(f"{output.option} {output.path} is a link to {os.readlink(output.path)}, which does not "
                         "exist; remove the link or name another path")
    if folders_made:
        return
    folder = os.path.dirname(os.path.abspath(output.path))
    if not os.path.isdir(folder):
        raise UsageError(f"{output.option} {output.path}: no directory {folder}; create it first")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"{output.option} {output.path}: the directory {folder} is not writable")
