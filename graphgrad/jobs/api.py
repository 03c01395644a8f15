"""File-level operations: read, act, write. The CLI is a thin layer over these.

Each command needs only some of the layers below, so the modules only one of
them uses (surgery, diff, summary) are imported by the functions that use them:
``graphgrad rewrite`` on a big graph should not pay for ``diff``.
"""

import os
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Protocol

from ..edits.apply import rewrite_reading
from ..edits.rewrite import RewriteOptions, RewriteReport
from ..files.tflite import is_tflite_file, tflite_summary_of
from ..errors import GraphgradError, ModelWriteError, NothingSelectedError, UsageError
from ..files.outputs import Output, model_files, refuse_outputs_over_inputs
from ..files.discovery import holds_keras2_metadata
from ..files.writing import (
    backup_file,
    first_missing,
    make_directory,
    make_parent_directories,
    remove_empty_directories,
    same_model,
)
from ..graph.model import BINARY
from ..readings import Needs, open_reading
from ..readings.protocol import Reading
from .batch import BatchOptions, Item, plan, run, sweep, with_output

if TYPE_CHECKING:  # imported by the jobs that use them: `graphgrad rewrite` does not pay for diff or surgery
    from ..edits.diff import ModelDifference
    from ..edits.summary import ModelSummary
    from ..edits.surgery import BypassOptions, InsertOptions, ResetOptions


# Keras 2 revives a SavedModel it wrote from its layers' Python config, tracing
# them again: the saved functions, and the overrides in them, are not used.
KERAS2_LOAD_NOTE = (
    "the model carries Keras 2 metadata (keras_metadata.pb): tf_keras.models.load_model rebuilds its layers "
    "from their Python config and drops the overrides; load it with tf.saved_model.load (after "
    "graphgrad.register_gradients), or override the loaded model's traced call (docs/python-api.md, 'Live graphs')"
)


@dataclass(frozen=True)
class OutputOptions:
    """Where and how a changed model is written.

    Exactly one of ``out`` / ``in_place`` / ``dry_run`` applies. ``encoding``
    (binary or text) defaults to the input's. ``sweep_temporaries``: remove the
    temporaries killed writers left for the target before writing it (a batch
    does that once per directory instead, and turns it off for its files).
    """

    out: str | None = None
    in_place: bool = False
    dry_run: bool = False
    encoding: str | None = None
    backup: str | None = None
    make_directories: bool = False
    sweep_temporaries: bool = True
    within: str | None = None  # --out-dir: where the write must land, links resolved


@dataclass
class InsertReport:
    insertions: list = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(i.status == "inserted" for i in self.insertions)


class Report(Protocol):
    """What a file's job reports (a RewriteReport, InsertReport or ResetReport)."""

    @property
    def changed(self) -> bool: ...


@dataclass
class FileResult:
    """The outcome of one file: where it went and what changed (its ``report``), or
    its ``error`` (and no report): every command reports a failed file so.

    ``status``: error, unchanged (nothing to change), changed (written), would
    change (a dry run), or up to date (the output already held the result).
    """

    input: str
    output: str | None = None
    written: bool = False
    report: Report | None = None
    error: str | None = None

    @property
    def status(self) -> str:
        if self.error or self.report is None:
            return "error"
        if not self.report.changed:
            return "unchanged"
        if self.written:
            return "changed"
        return "would change" if self.output is None else "up to date"


def _change_file(path: str, output: OutputOptions, kind: str | None, needs: Needs,
                 edit: Callable[[Reading], Report]) -> FileResult:
    """Open ``path`` with the reading its job ``needs`` (the parse, for a text
    output), apply ``edit(reading) -> report`` in place, write unless dry run."""
    target = _target(path, output)
    if output.encoding not in (None, BINARY):  # a text output is written from the parse
        needs = replace(needs, parse=True)
    with open_reading(path, kind, needs) as reading:
        report = edit(reading)
        same_encoding = output.encoding in (None, reading.encoding)
        return _finish(path, target, output, report, same_encoding,
                       lambda out: reading.write(out, output.encoding, output.sweep_temporaries))


def _finish(path: str, target: str | None, output: OutputOptions, report, same_encoding: bool, write) -> FileResult:
    """Write the result (``write(target) -> written``), with its backup and
    directories, unless this is a dry run or an in-place file with nothing to change."""
    result = FileResult(input=path, output=target, report=report)
    if target and not (output.in_place and not report.changed and same_encoding):
        if output.in_place and output.backup:
            backup_file(path, output.backup, output.sweep_temporaries)
        if output.within:  # before any folder is made on the way
            _refuse_outside(target, output.within)
        if output.make_directories:
            make_parent_directories(target)
        result.written = write(target)
    return result


def _refuse_outside(target: str, directory: str) -> None:
    """Refuse a write that would land outside ``directory`` once links are followed
    (a link the batch itself copied there, from a SavedModel, say): the check at
    planning reads names only."""
    real, root = os.path.realpath(target), os.path.realpath(directory)
    if os.path.commonpath([real, root]) != root:
        raise ModelWriteError(f"{target} would be written to {real}, outside --out-dir {directory}, through a "
                              "link; nothing was written there")


def _target(path: str, output: OutputOptions) -> str | None:
    if output.dry_run:
        return None
    if is_tflite_file(path) and (output.in_place or (output.out or "").endswith(".tflite")):
        raise UsageError(f"{path} is a TensorFlow Lite model, which cannot carry gradients: graphgrad reads it as "
                         "the TensorFlow graph it rebuilds, and writes that as a frozen GraphDef; give -o OUT.pb")
    if output.in_place:
        return path
    if not output.out:
        raise UsageError("say where to write: -o OUT, --in-place, or --dry-run")
    if output.out == "-":
        raise UsageError("-o - : graphgrad writes models to files, not to standard output; name a file")
    if same_model(path, output.out):
        raise ModelWriteError(f"output {output.out} is the input {path}; to overwrite it, use --in-place")
    refuse_outputs_over_inputs({f"the model {path}": model_files(path)},
                               [Output("-o", output.out, folder=os.path.isdir(path))], folders_made=True)
    return output.out


def rewrite_file(path: str, options: RewriteOptions, output: OutputOptions, kind: str | None = None) -> FileResult:
    """Rewrite one model file (overrides, or surrogates with ``options.embed``).

    A binary GraphDef is read as stored (:func:`graphgrad.readings.open_reading`):
    only what rules look at is decoded; other bytes are copied as they were.
    """
    needs = Needs(edits=options.embed, parse=any(rule.spec.tensor_refs for rule in options.rules))
    result = _change_file(path, output, kind, needs, lambda reading: rewrite_reading(reading, options))
    if isinstance(result.report, RewriteReport) and result.report.changed and holds_keras2_metadata(path):
        result.report.notes.append(KERAS2_LOAD_NOTE)
    return result


def rewrite_files(paths: Sequence[str], options: RewriteOptions, output: OutputOptions, kind: str | None = None,
                  batch: BatchOptions = BatchOptions(), progress: Callable | None = None) -> list[FileResult]:
    """Rewrite every model that ``paths`` (files, directories, globs) name.

    One failure is recorded and the rest go on; results are in input order.
    """
    return _batch(paths, output, batch, partial(_rewrite_item, options, output, kind), progress)


def _rewrite_item(options, output, kind, item: Item) -> FileResult:
    result = _guarded(item, lambda: rewrite_file(item.path, options, with_output(output, item), kind))
    if isinstance(result.report, RewriteReport):
        result.report = result.report.packed()  # thousands of files' node names, kept until printed
    return result


def insert_file(path: str, options: "InsertOptions", output: OutputOptions, kind: str | None = None) -> FileResult:
    """Put a gradient on one tensor of a model file (``options``: surgery.InsertOptions)."""
    from ..edits.surgery import insert_in

    return _change_file(path, output, kind, Needs(edits=True),
                        lambda reading: InsertReport(insert_in(reading.scopes(), options)))


@dataclass
class BypassReport:
    bypasses: list = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(b.status == "bypassed" for b in self.bypasses)


def bypass_file(path: str, options: "BypassOptions", output: OutputOptions, kind: str | None = None) -> FileResult:
    """BPDA across a region of one model file (``options``: surgery.BypassOptions);
    a frozen model's constants are never read."""
    from ..edits.surgery import bypass_in

    return _change_file(path, output, kind, Needs(edits=True),
                        lambda reading: BypassReport(bypass_in(reading.scopes(), options)))


def reset_files(paths: Sequence[str], options: "ResetOptions", output: OutputOptions, kind: str | None = None,
                batch: BatchOptions = BatchOptions(), progress: Callable | None = None) -> list[FileResult]:
    """Remove overrides and graphgrad's nodes from every model ``paths`` name
    (``options``: surgery.ResetOptions)."""
    return _batch(paths, output, batch, partial(_reset_item, options, output, kind), progress)


def _reset_item(options, output, kind, item: Item) -> FileResult:
    return _guarded(item, lambda: reset_file(item.path, options, with_output(output, item), kind))


def reset_file(path: str, options: "ResetOptions", output: OutputOptions, kind: str | None = None) -> FileResult:
    """Remove overrides and graphgrad's nodes from one model file (``options``:
    surgery.ResetOptions). A binary GraphDef is reset as stored: a frozen model's
    constants are never read."""
    from ..edits.surgery import reset_in

    return _change_file(path, output, kind, Needs(edits=True),
                        lambda reading: reset_in(reading.scopes(options.functions), options))


def diff_files(a: str, b: str, kind: str | None = None) -> "ModelDifference":
    """What differs between two model files (a diff.ModelDifference). Two binary
    GraphDefs are compared as stored (:func:`graphgrad.edits.diff.diff_readings`)."""
    from ..edits.diff import diff_readings

    with open_reading(a, kind) as left, open_reading(b, kind) as right:
        return diff_readings(left, right)


def _batch(paths, output: OutputOptions, batch: BatchOptions, work, progress) -> list[FileResult]:
    """Plan, then run ``work`` on every item. ``progress(count)``, if given, is a
    context manager yielding a per-item callback (or None)."""
    items, problems = plan(paths, batch)
    if output.out and len(items) + len(problems) > 1:
        raise UsageError(
            f"-o names one output, but {len(items) + len(problems)} models were given; use --out-dir or --in-place"
        )
    created = None
    if batch.out_dir and items and not output.dry_run:
        created = first_missing(batch.out_dir)
        make_directory(batch.out_dir)  # one error for an unusable --out-dir, not one per file
    sweep(items, output)
    try:
        with progress(len(items)) if progress else nullcontext() as tick:
            results = run(items, work, batch, tick)
    finally:
        if created:  # what this command made and left empty (every file failed): gone
            remove_empty_directories(created)
    results = [
        result or FileResult(input=item.path, error=f"{item.path}: the worker process died before finishing it")
        for item, result in zip(items, results)
    ]
    return [FileResult(input=argument, error=message) for argument, message in problems] + results


def _guarded(item: Item, process) -> FileResult:
    """Run one file's work; its failure becomes its result, never the batch's."""
    try:
        return process()
    except NothingSelectedError as error:
        skip = "; to pass over the models that have none, add --allow-missing" if item.in_batch else ""
        return FileResult(input=item.path, output=item.out, error=_with_path(item.path, error) + skip)
    except GraphgradError as error:
        return FileResult(input=item.path, output=item.out, error=_with_path(item.path, error))
    except (RecursionError, MemoryError, OSError) as error:
        return FileResult(input=item.path, output=item.out,
                          error=f"{item.path}: {type(error).__name__}: {error}")


def summarize_file(path: str, kind: str | None = None, functions: bool = True) -> "ModelSummary":
    """Read ``path`` and summarise its op types and overrides (a summary.ModelSummary).

    A binary GraphDef is read as stored: its top-level NodeDefs are not built.
    """
    from ..edits.summary import summarize_reading

    with open_reading(path, kind) as reading:
        return summarize_reading(reading, functions)


def summarize_files(paths: Sequence[str], recursive: bool = False, kind: str | None = None,
                    functions: bool = True) -> tuple[list, list[FileResult]]:
    """Summaries of every model ``paths`` name (a TensorFlow Lite model's a
    :class:`~graphgrad.files.tflite.LiteSummary`), and a :class:`FileResult` with its
    error for each that failed (as a batch reports a failed file)."""
    items, problems = plan(paths, BatchOptions(recursive=recursive))
    summaries, failures = [], [FileResult(input=argument, error=message) for argument, message in problems]
    for item in items:
        try:
            lite = tflite_summary_of(item.path) if kind in (None, "tflite") else None
            summaries.append(lite or summarize_file(item.path, kind, functions))
        except GraphgradError as error:
            failures.append(FileResult(input=item.path, error=_with_path(item.path, error)))
    return summaries, failures


def _with_path(path: str, error: Exception) -> str:
    message = str(error)
    return message if path in message else f"{path}: {message}"
