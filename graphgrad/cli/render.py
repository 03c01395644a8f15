"""Text and JSON output of the commands."""

import contextlib
import dataclasses
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import click



TABLE_WIDTH = 100  # the columns a batch's table fits in


# What a terminal acts on instead of showing (C0 and C1 controls, DEL) and what reorders
# or breaks the text after it (Unicode's line and paragraph separators, bidirectional
# overrides and isolates). A graph's names, op types and attribute names hold whatever
# its author put there: printed raw, "\x1b]0;T\x07" sets the terminal's title and a
# "\n~ node" in an attribute name forges a line of diff.
_UNSHOWABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def shown(text: str) -> str:
    """``text`` as one line a terminal shows as it is: each character of
    :data:`_UNSHOWABLE` written as Python writes it in a string (``\\n``, ``\\x1b``,
    ``\\u202e``). Applied twice, the same (its output has no such character)."""
    return _UNSHOWABLE.sub(_escape, text)


def _escape(match: re.Match) -> str:
    character = match.group()
    code = ord(character)
    return _NAMED_ESCAPES.get(character) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def echo(*lines: str, err: bool = False) -> None:
    """Print ``lines``, each as one line (:func:`shown`): the only way text reaches
    the terminal, so nothing a graph holds is sent to it raw. Pass lines, never text
    joined with newlines (the newlines would be shown escaped)."""
    click.echo("\n".join(shown(line) for line in lines), err=err)


def table(rows: Sequence[Sequence], indent: str = "  ", width: int | None = None) -> list[str]:
    """Rows of cells as lines of left-aligned columns (numbers right-aligned). With
    ``width``, the first column's long cells are shortened in the middle so that
    lines fit (the other columns' cells are cut at the end)."""
    rows = [[shown(str(cell)) for cell in row] for row in rows]
    if not rows:
        return []
    if width:
        rows = _fitted(rows, width - len(indent))
    widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(max(map(len, rows)))]
    lines = []
    for row in rows:
        cells = [
            cell.rjust(widths[i]) if cell.isdigit() or cell == "-" else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        lines.append((indent + "  ".join(cells)).rstrip())
    return lines


def _fitted(rows: list, width: int) -> list:
    """``rows`` whose lines fit ``width``: the first column gets what the others
    leave (at least a third), shortened in the middle; the last is cut at the end."""
    others = [max((len(row[i]) for row in rows if i < len(row)), default=0) for i in range(1, max(map(len, rows)))]
    first = max(width // 3, width - sum(others) - 2 * len(others))
    fitted = []
    for row in rows:
        row = [shortened(row[0], first)] + row[1:]
        line = sum(map(len, row)) + 2 * (len(row) - 1)
        if line > width and len(row) > 1:
            row[-1] = shortened(row[-1], max(8, len(row[-1]) - (line - width)), middle=False)
        fitted.append(row)
    return fitted


def shortened(text: str, width: int, middle: bool = True) -> str:
    """``text`` in at most ``width`` characters: its middle (or its end) replaced by "..."."""
    if len(text) <= width:
        return text
    if not middle:
        return text[:width - 3] + "..."
    head = (width - 3 + 1) // 2
    return text[:head] + "..." + text[len(text) - (width - 3 - head):]


def to_jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        data = {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        for name, attribute in vars(type(value)).items():
            if isinstance(attribute, property):
                data[name] = to_jsonable(getattr(value, name))
        return data
    if isinstance(value, (list, tuple, Sequence)) and not isinstance(value, str):
        return [to_jsonable(item) for item in value]
    if isinstance(value, dict):
        return {key: to_jsonable(item) for key, item in value.items()}
    return value


def in_graph(graph: str) -> str:
    """The prefix that names a graph of a model that holds several (a SavedModel's
    MetaGraphDefs); empty for a lone graph."""
    return f"{graph}: " if graph else ""


def echo_json(document: Any) -> None:
    """Print ``document`` as JSON: ASCII, every control character escaped by json itself."""
    click.echo(json.dumps(to_jsonable(document), indent=2, sort_keys=True, ensure_ascii=True))


def error(message: str) -> None:
    echo(f"graphgrad: error: {message}", err=True)


def json_error(message: str, exit_code: int) -> None:
    """The --json document of a command that fails as a whole (nothing if not --json)."""
    context = click.get_current_context(silent=True)
    if context is not None and context.find_root().meta.get("graphgrad.json"):
        echo_json({"error": message, "exit_code": exit_code})


LISTED_NOTES = 5  # distinct notes; a zoo rewritten with --allow-missing repeats a few in every file


def finish_one(result: Any, as_json: bool, render_report: Callable) -> None:
    """Print one file's result of a command that changes one model (insert, bypass)."""
    if as_json:
        echo_json({"files": [result]})
    else:
        render_change_results([result], render_report)


def render_change_results(results: Sequence, render_report: Callable, summarize_report: Callable | None = None,
                          notes_of: Callable | None = None) -> None:
    """One file: ``input -> output`` and the report's lines (or the error).
    Several: a table, one row per file, a count, and the distinct notes.

    ``render_report(report, dry_run)`` returns the lines for one report;
    ``summarize_report(report)`` one cell for the table; ``notes_of(report)`` its notes.
    """
    if len(results) > 1 and summarize_report:
        _render_table(results, summarize_report, notes_of)
        return
    for result in results:
        if result.error:
            error(result.error)
            continue
        echo(f"{result.input} -> {result.output or '(dry run)'}", *render_report(result.report, result.output is None))
        if result.output and result.report.changed and not result.written:
            echo("  output already up to date, not rewritten")


def _render_table(results, summarize_report, notes_of) -> None:
    """A row per file that did not fail (the failures are said once per cause
    below), then the counts, the notes and the causes."""
    rows = [["file", "status", "changes"]]
    rows += [[result.input, result.status, summarize_report(result.report)] for result in results if not result.error]
    if len(rows) > 1:
        echo(*table(rows, indent="", width=TABLE_WIDTH))
    counts: dict = {}
    for result in results:
        counts[result.status] = counts.get(result.status, 0) + 1
    echo(f"{_count(len(results), 'file')}: " + ", ".join(
        _count(n, status) if status == "error" else f"{n} {status}" for status, n in sorted(counts.items())
    ))
    if notes_of:
        _render_notes(results, notes_of)
    render_failures([result for result in results if result.error])


def render_failures(failed: Sequence) -> None:
    """One line per cause: files that failed with the same message (but for their
    own path) share it, with their count."""
    by_cause: dict = {}
    for result in failed:
        cause = result.error.replace(result.input, "\0")
        if result.output:  # each file's own output, or its folder, in a message of one cause
            cause = cause.replace(result.output, "\1").replace(os.path.dirname(result.output) or "\1", "\2")
        by_cause.setdefault(cause, []).append(result)
    for cause, results in by_cause.items():
        first = results[0]
        message = cause.replace("\0", first.input)
        if first.output:
            message = message.replace("\1", first.output).replace("\2", os.path.dirname(first.output))
        error(message if len(results) == 1 else f"{len(results)} files like this one: {message}")


def _render_notes(results, notes_of) -> None:
    """Each distinct note once, with the files it is about."""
    files_by_note: dict = {}
    for result in results:
        for note in [] if result.error else notes_of(result.report):
            files_by_note.setdefault(note, []).append(result.input)
    for note, files in list(files_by_note.items())[:LISTED_NOTES]:
        where = files[0] if len(files) == 1 else f"{len(files)} files, as {files[0]}"
        echo(f"note ({where}): {note}")
    if len(files_by_note) > LISTED_NOTES:
        echo(f"(+{len(files_by_note) - LISTED_NOTES} more notes: --json gives every file's)")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


@contextlib.contextmanager
def native_stderr_shown(show: bool) -> Iterator[None]:
    """Hide what TensorFlow's C++ side writes to stderr while the block runs (absl's
    pre-init warning, oneDNN and CPU-feature notices, grappler lines: they ignore
    TF_CPP_MIN_LOG_LEVEL), or pass it through when ``show``. Python's own errors are
    printed after the block, so they are never hidden."""
    if show:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


@contextlib.contextmanager
def tensorflow_quiet(verbose: bool = False) -> Iterator[None]:
    """TensorFlow's own log lines hidden while the block runs (its C++ log level at
    2 unless the caller set one, and what ignores that level), unless ``verbose`` or
    ``--debug``; for every command that imports TensorFlow."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    context = click.get_current_context(silent=True)
    debug = bool(context and context.find_root().meta.get("graphgrad.debug", False))
    with native_stderr_shown(verbose or debug):
        yield


@contextlib.contextmanager
def progress_bar(count: int, label: str) -> Iterator[Callable | None]:
    """A progress bar on a terminal (files done/total, current file); nothing when piped."""
    stream = sys.stderr
    if count < 2 or not stream.isatty():
        yield None
        return
    with click.progressbar(length=count, label=label, file=stream, show_pos=True,
                           item_show_func=lambda path: path and os.path.basename(path)) as bar:
        yield lambda item: bar.update(1, item.path)


def finish_batch(results: Sequence, as_json: bool, render_report: Callable, summarize_report: Callable | None,
                 notes_of: Callable | None = None, quiet: bool = False) -> bool:
    """Print a batch's results (JSON or text; ``quiet``: errors only); whether no file failed."""
    if as_json:
        echo_json({"files": results})
    elif quiet:
        render_failures([result for result in results if result.error])
    else:
        render_change_results(results, render_report, summarize_report, notes_of)
    return not any(result.error for result in results)
