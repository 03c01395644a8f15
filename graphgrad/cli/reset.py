"""graphgrad reset: remove gradient overrides and undo inserted or embedded gradients."""

import click

from ..api import reset_files
from ..surgery import ResetOptions
from . import options
from .render import echo_json, render_change_results


@click.command("reset")
@options.models_argument
@options.reset_op_option
@options.reset_node_option
@options.output_options
@options.functions_option
@options.format_option
@options.json_option
@options.debug_option
def reset_command(models, op_types, globs, out, in_place, dry_run, encoding, functions, kind, as_json):
    """Remove overrides (all, or of the selected nodes) and undo graphgrad's
    inserted and embedded nodes, restoring the original wiring."""
    output = options.make_output(out, in_place, dry_run, encoding)
    results = reset_files(list(models), ResetOptions(op_types, globs, functions), output, kind)
    if as_json:
        echo_json({"files": results})
    else:
        render_change_results(results, _render_report)
    if any(result.error for result in results):
        raise SystemExit(1)


def _render_report(report, dry_run) -> list[str]:
    remove, undo = ("would remove", "would undo") if dry_run else ("removed", "undid")
    lines = [f"  {remove} override {c.old!r} from {c.node}" for c in report.overrides]
    lines += [f"  {undo} {node}, restoring {source}" for _, node, source in report.undone]
    return lines or ["  nothing to reset"]
