"""graphgrad reset: remove gradient overrides and undo inserted or embedded gradients."""

from functools import partial

import click

from ..edits.surgery import ResetOptions
from ..jobs.api import reset_files
from ..jobs.batch import BatchOptions
from . import options
from .render import finish_batch, in_graph, progress_bar


@click.command("reset")
@options.models_argument
@options.reset_op_option
@options.reset_node_option
@options.batch_output_options
@options.functions_option
@options.format_option
@options.json_option
@options.debug_option
def reset_command(models, op_types, globs, out, in_place, dry_run, encoding, out_dir, backup, recursive, jobs, quiet,
                  functions, kind, as_json):
    """Remove overrides and undo graphgrad's inserted and embedded nodes.

    All of them, or those of the selected nodes; the original wiring is restored.

    \b
    Examples:
      graphgrad reset patched.pb -o plain.pb
      graphgrad reset patched.pb --op Sign -o without_sign_overrides.pb
    """
    output = options.make_output(out, in_place, dry_run, encoding, out_dir, backup)
    batch = BatchOptions(recursive=recursive, out_dir=out_dir, jobs=jobs)
    progress = partial(progress_bar, label="resetting")
    results = reset_files(list(models), ResetOptions(op_types, globs, functions), output, kind, batch, progress)
    return finish_batch(results, as_json, _render_report, _summarize_report, quiet=quiet)


def _summarize_report(report) -> str:
    return f"{len(report.overrides)} override(s) removed, {len(report.undone)} edit(s) undone"


def _render_report(report, dry_run) -> list[str]:
    remove, undo = ("would remove", "would undo") if dry_run else ("removed", "undid")
    lines = [f"  {in_graph(c.graph)}{remove} override {c.old!r} from {c.node}" for c in report.overrides]
    lines += [f"  {in_graph(graph)}{undo} {node}, restoring {source}" for graph, node, source in report.undone]
    return lines or ["  nothing to reset"]
