"""File-level operations: read, act, write. The CLI is a thin layer over these."""

import os
from dataclasses import dataclass, field

from .diff import ModelDifference, diff_models
from .errors import GraphgradError, ModelWriteError
from .io import read_model, write_model
from .rewrite import RewriteOptions, RewriteReport, rewrite_model
from .summary import ModelSummary, summarize
from .surgery import InsertOptions, ResetOptions, embed_rules, insert_gradient, reset_model


@dataclass(frozen=True)
class OutputOptions:
    """Where and how a changed model is written.

    Exactly one of ``out`` / ``in_place`` / ``dry_run`` applies. ``encoding``
    (binary or text) defaults to the input's.
    """

    out: str | None = None
    in_place: bool = False
    dry_run: bool = False
    encoding: str | None = None


@dataclass
class InsertReport:
    insertions: list = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(i.status == "inserted" for i in self.insertions)


@dataclass
class FileResult:
    """The outcome of one file: where it went, what changed, or the error."""

    input: str
    output: str | None = None
    written: bool = False
    report: object = field(default_factory=RewriteReport)
    error: str | None = None

    @property
    def status(self) -> str:
        if self.error:
            return "error"
        if not self.report.changed:
            return "unchanged"
        return "changed" if self.written else "would change"


def _change_file(path: str, output: OutputOptions, kind: str | None, operation) -> FileResult:
    """Read ``path``, apply ``operation(model) -> (model, report)``, write unless dry run.

    With ``output.in_place`` and nothing changed, the file is not touched.
    """
    target = _target(path, output)
    model = read_model(path, kind)
    result_model, report = operation(model)
    result = FileResult(input=path, output=target, report=report)
    unchanged_in_place = output.in_place and not report.changed and output.encoding in (None, model.encoding)
    if target and not unchanged_in_place:
        result.written = write_model(result_model, target, output.encoding)
    return result


def _target(path: str, output: OutputOptions) -> str | None:
    if output.dry_run:
        return None
    if output.in_place:
        return path
    if not output.out:
        raise GraphgradError("say where to write: -o OUT, --in-place, or --dry-run")
    if os.path.exists(output.out) and os.path.samefile(output.out, path):
        raise ModelWriteError(f"output {output.out} is the input file; to overwrite it, use --in-place")
    return output.out


def rewrite_file(path: str, options: RewriteOptions, output: OutputOptions, kind: str | None = None) -> FileResult:
    """Rewrite one model file (overrides, or surrogates with ``options.embed``)."""
    operation = embed_rules if options.embed else rewrite_model
    return _change_file(path, output, kind, lambda model: operation(model, options, inplace=True))


def rewrite_files(paths, options: RewriteOptions, output: OutputOptions, kind: str | None = None) -> list[FileResult]:
    """Rewrite several files; one failure is recorded and the rest go on."""
    return _each_file(paths, output, lambda path: rewrite_file(path, options, output, kind))


def insert_file(path: str, options: InsertOptions, output: OutputOptions, kind: str | None = None) -> FileResult:
    """Put a gradient on one tensor of a model file."""

    def operation(model):
        model, insertions = insert_gradient(model, options, inplace=True)
        return model, InsertReport(insertions)

    return _change_file(path, output, kind, operation)


def reset_files(paths, options: ResetOptions, output: OutputOptions, kind: str | None = None) -> list[FileResult]:
    """Remove overrides and graphgrad's nodes from several files."""
    return _each_file(
        paths, output,
        lambda path: _change_file(path, output, kind, lambda model: reset_model(model, options, inplace=True)),
    )


def diff_files(a: str, b: str, kind: str | None = None) -> ModelDifference:
    """What differs between two model files."""
    return diff_models(read_model(a, kind), read_model(b, kind))


def _each_file(paths, output: OutputOptions, process) -> list[FileResult]:
    if output.out and len(paths) > 1:
        raise GraphgradError(f"-o names one output, but {len(paths)} models were given; use --in-place")
    results = []
    for path in paths:
        try:
            results.append(process(path))
        except GraphgradError as error:
            results.append(FileResult(input=path, error=_with_path(path, error)))
    return results


def summarize_file(path: str, kind: str | None = None, functions: bool = True) -> ModelSummary:
    """Read ``path`` and summarise its op types and overrides."""
    return summarize(read_model(path, kind), functions)


def _with_path(path: str, error: Exception) -> str:
    message = str(error)
    return message if path in message else f"{path}: {message}"
