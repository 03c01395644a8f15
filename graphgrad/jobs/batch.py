"""Many inputs: expanding files, directories and globs into models, mirroring
them under an output directory, and running the work in worker processes.

Results come back in input order whatever the number of workers, so ``-j N``
reports and writes exactly what ``-j 1`` does. One failing file never stops
the others.
"""

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..errors import GraphgradError
from ..files.discovery import expand_pattern, find_models, is_saved_model_dir
from ..files.reading import SAVED_MODEL_FILES
from ..files.writing import remove_stale_temporaries
from ..gradients.user_modules import load_gradient_module


@dataclass(frozen=True)
class BatchOptions:
    """How inputs are found and processed: ``recursive`` directories, ``out_dir``
    mirroring the input tree, ``jobs`` worker processes, user ``gradient_modules``
    to import in each worker."""

    recursive: bool = False
    out_dir: str | None = None
    jobs: int = 1
    gradient_modules: tuple = ()


@dataclass(frozen=True)
class Item:
    """One model to process, and where its output goes (None: in place or dry run)."""

    path: str
    out: str | None = None
    out_dir: str | None = None  # the --out-dir that ``out`` lies in
    in_batch: bool = False  # one of several models: a failure that others may not share says how to pass over it


def plan(paths: Sequence[str], batch: BatchOptions) -> tuple[list[Item], list[tuple[str, str]]]:
    """Items for every model the arguments name, and (argument, error) for those naming none."""
    items: list = []
    problems: list = []
    seen_outputs: dict = {}
    for argument in paths:
        skipped: list = []
        try:
            base = _mirror_base(argument)
            models = [model for match in expand_pattern(argument)
                      for model in find_models(match, batch.recursive, skipped)]
        except GraphgradError as error:
            problems.append((argument, str(error)))
            continue
        finally:
            problems += [(argument, message) for message in skipped]
        for model in models:
            out = None
            if batch.out_dir:
                relative = os.path.relpath(model, base) if base else _as_named(model)
                out = os.path.normpath(os.path.join(batch.out_dir, relative))
                if not _inside(out, batch.out_dir):
                    problems.append((model, f"{model} would be written to {out}, outside --out-dir "
                                            f"{batch.out_dir} (its path climbs out with '..'); name it without '..'"))
                    continue
                if out in seen_outputs:
                    problems.append((model, f"{model} and {seen_outputs[out]} would both be written to {out}"))
                    continue
                seen_outputs[out] = model
            items.append(Item(model, out, batch.out_dir))
    if len(items) > 1:
        items = [replace(item, in_batch=True) for item in items]
    return items, problems


def _inside(path: str, directory: str) -> bool:
    """Whether ``path`` lies inside ``directory`` (by their absolute, normalised names)."""
    path, directory = os.path.abspath(path), os.path.abspath(directory)
    return os.path.commonpath([path, directory]) == directory and path != directory


def _as_named(model: str) -> str:
    """Where ``--out-dir`` mirrors a model named on the command line: its path as
    given, less a leading ``/`` and ``..`` parts (as tar stores names), so that two
    files of one name in two folders do not collide; a SavedModel named by its
    ``saved_model.pb`` goes with its folder (written there, as a SavedModel)."""
    parts = [part for part in os.path.normpath(model).split(os.sep) if part not in ("", ".", "..")]
    if len(parts) == 1 and os.path.basename(model) in SAVED_MODEL_FILES.values():
        parts = [os.path.basename(os.path.dirname(os.path.abspath(model))), parts[0]]
    return os.path.join(*parts) if parts else os.path.basename(os.path.abspath(model))


def _mirror_base(argument: str) -> str | None:
    """The folder an argument's models are mirrored relative to."""
    if any(c in argument for c in "*?[") and not os.path.exists(argument):
        static = []
        for part in argument.split(os.sep):
            if any(c in part for c in "*?["):
                break
            static.append(part)
        return os.sep.join(static) or "."
    if os.path.isdir(argument) and not is_saved_model_dir(argument):
        return argument
    return None


def _start_worker(parent: int | None, paths) -> None:
    """Each worker: ends when the process that started it ends (a killed batch
    leaves no worker running, holding its caller's pipes open), then imports the
    user's gradient modules."""
    end_with_parent(parent)
    for path in paths:
        load_gradient_module(path)


def end_with_parent(parent: int | None) -> None:
    """On Linux, ask the kernel to end this process when its parent ends
    (PR_SET_PDEATHSIG); ``parent``: the pid it must still have, else it ends now."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if parent is not None and os.getppid() != parent:  # it ended before the request was made
        os._exit(1)


def run(items: Sequence[Item], work: Callable, batch: BatchOptions, progress: Callable | None = None) -> list:
    """``work(item)`` for every item, in order; ``progress(item)`` after each."""
    if batch.jobs <= 1 or len(items) <= 1:
        results = []
        for item in items:
            results.append(work(item))
            if progress:
                progress(item)
        return results
    from concurrent.futures import ProcessPoolExecutor  # only for -j > 1
    from concurrent.futures.process import BrokenProcessPool

    results = []
    context = worker_context()
    # forked workers are our children; a fork server's are its own (and it ends with us)
    parent = os.getpid() if context is not None and context.get_start_method() == "fork" else None
    with ProcessPoolExecutor(
        max_workers=batch.jobs, mp_context=context, initializer=_start_worker,
        initargs=(parent, batch.gradient_modules),
    ) as pool:
        try:
            chunk = max(1, len(items) // (batch.jobs * 8))  # fewer round trips for many small files
            for item, result in zip(items, pool.map(work, items, chunksize=chunk)):
                results.append(result)
                if progress:
                    progress(item)
        except BrokenProcessPool:
            pass  # a worker died; the files it did not finish are reported below
    return results + [None] * (len(items) - len(results))


def worker_context() -> Any:
    """How workers start. On Linux, forked when this process runs one thread (the
    command line always does): they inherit its imports instead of paying them
    again. With more threads (a program that has loaded TensorFlow, say), a fork
    could deadlock a worker, so they come from a fork server, as by default from
    Python 3.14 on, whatever the version. Elsewhere, Python's default (None)."""
    if not sys.platform.startswith("linux"):
        return None
    import multiprocessing

    return multiprocessing.get_context("fork" if thread_count() == 1 else "forkserver")


def thread_count() -> int:
    """This process's threads, those started outside Python included (without
    /proc, only Python's own)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        import threading

        return threading.active_count()


def sweep(items: Sequence[Item], output: Any) -> None:
    """Remove the temporaries killed writers left where the items will be written:
    one listing per directory, where each file's own write would list its
    directory again (quadratic in a zoo of one folder). :func:`with_output` then
    turns the per-file sweep off."""
    if output.dry_run or not output.sweep_temporaries:
        return
    directories = set()
    for item in items:
        target = item.out or output.out or (item.path if output.in_place else None)
        if target:
            directories.add(os.path.dirname(os.path.abspath(target)))
            if os.path.isdir(target):  # a SavedModel rewritten in its own directory
                directories.add(target)
    for directory in sorted(directories):
        remove_stale_temporaries(directory)


def with_output(output: Any, item: Item) -> Any:
    """The per-file output options for ``item`` (whose directory :func:`sweep` did)."""
    if item.out:
        return replace(output, out=item.out, make_directories=True, sweep_temporaries=False, within=item.out_dir)
    return replace(output, sweep_temporaries=False)
