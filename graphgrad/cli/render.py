"""Text and JSON output of the commands."""

import dataclasses
import json

import click


def table(rows, indent: str = "  ") -> str:
    """Rows of cells as left-aligned columns (numbers right-aligned)."""
    rows = [[str(cell) for cell in row] for row in rows]
    if not rows:
        return ""
    widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(max(map(len, rows)))]
    lines = []
    for row in rows:
        cells = [
            cell.rjust(widths[i]) if cell.isdigit() or cell == "-" else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        lines.append((indent + "  ".join(cells)).rstrip())
    return "\n".join(lines)


def to_jsonable(value):
    if dataclasses.is_dataclass(value):
        data = {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        for name in ("status", "problems"):
            if hasattr(type(value), name):
                data[name] = to_jsonable(getattr(value, name))
        return data
    if isinstance(value, (list, tuple)):
        return [to_jsonable(item) for item in value]
    if isinstance(value, dict):
        return {key: to_jsonable(item) for key, item in value.items()}
    return value


def echo_json(document) -> None:
    click.echo(json.dumps(to_jsonable(document), indent=2, sort_keys=True))


def error(message: str) -> None:
    click.echo(f"graphgrad: error: {message}", err=True)


def render_change_results(results, render_report) -> None:
    """Per file: ``input -> output``, the report's lines, or the error.

    ``render_report(report, dry_run)`` returns the lines for one report.
    """
    for result in results:
        if result.error:
            error(result.error)
            continue
        click.echo(f"{result.input} -> {result.output or '(dry run)'}")
        for line in render_report(result.report, result.output is None):
            click.echo(line)
        if result.output and result.report.changed and not result.written:
            click.echo("  output already up to date, not rewritten")
