"""File-level operations: read, act, write. The CLI is a thin layer over these."""

import os
from dataclasses import dataclass, field

from .errors import GraphgradError, ModelWriteError
from .io import read_model, write_model
from .rewrite import RewriteOptions, RewriteReport, rewrite_model
from .summary import ModelSummary, summarize


@dataclass(frozen=True)
class OutputOptions:
    """Where and how a rewritten model is written.

    Exactly one of ``out`` / ``in_place`` / ``dry_run`` applies. ``encoding``
    (binary or text) defaults to the input's.
    """

    out: str | None = None
    in_place: bool = False
    dry_run: bool = False
    encoding: str | None = None


@dataclass
class FileResult:
    """The outcome of one file: where it went, what changed, or the error."""

    input: str
    output: str | None = None
    written: bool = False
    report: RewriteReport = field(default_factory=RewriteReport)
    error: str | None = None

    @property
    def status(self) -> str:
        if self.error:
            return "error"
        if not self.report.changed:
            return "unchanged"
        return "changed" if self.written else "would change"


def rewrite_file(path: str, options: RewriteOptions, output: OutputOptions, kind: str | None = None) -> FileResult:
    """Rewrite one model file. Raises :class:`GraphgradError`; writes nothing on error.

    With ``output.in_place`` and nothing to change, the file is not touched.
    """
    target = _target(path, output)
    model = read_model(path, kind)
    result_model, report = rewrite_model(model, options, inplace=True)
    result = FileResult(input=path, output=target, report=report)
    unchanged_in_place = output.in_place and not report.changed and (
        output.encoding in (None, model.encoding)
    )
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
        raise ModelWriteError(
            f"output {output.out} is the input file; to overwrite it, use --in-place"
        )
    return output.out


def rewrite_files(paths, options: RewriteOptions, output: OutputOptions, kind: str | None = None) -> list[FileResult]:
    """Rewrite several files; one failure is recorded and the rest go on."""
    if output.out and len(paths) > 1:
        raise GraphgradError(f"-o names one output, but {len(paths)} models were given; use --in-place")
    results = []
    for path in paths:
        try:
            results.append(rewrite_file(path, options, output, kind))
        except GraphgradError as error:
            results.append(FileResult(input=path, error=_with_path(path, error)))
    return results


def summarize_file(path: str, kind: str | None = None, functions: bool = True) -> ModelSummary:
    """Read ``path`` and summarise its op types and overrides."""
    return summarize(read_model(path, kind), functions)


def _with_path(path: str, error: Exception) -> str:
    message = str(error)
    return message if path in message else f"{path}: {message}"
