"""graphgrad rewrite: give selected nodes a gradient, by op type or node name."""

import click

from ..api import rewrite_files
from ..io import load_gradient_module
from ..rewrite import RewriteOptions
from ..select import NODE, OP, parse_rule, repair_rule
from . import options
from .render import echo_json, render_change_results, table


@click.command("rewrite")
@options.models_argument
@options.op_rule_option
@options.node_rule_option
@options.repair_option
@options.match_option
@options.exclude_option
@options.output_options
@options.embed_option
@options.force_option
@options.allow_missing_option
@options.functions_option
@options.format_option
@options.gradients_module_option
@options.json_option
@options.debug_option
def rewrite_command(models, op_rules, node_rules, repair, match, exclude, out, in_place, dry_run, encoding,
                    embed, force, allow_missing, functions, kind, gradient_modules, as_json):
    """Set the gradient of selected nodes (their _gradient_op_type attribute).

    \b
    Examples:
      graphgrad rewrite model.pb --op Sign=ste -o patched.pb
      graphgrad rewrite model.pb --op PyFunc='identity|clip_norm(1.0)' --in-place
      graphgrad rewrite model.meta --node 'encoder/*/Round=QuantizeGrad' --exclude '*/head/*' -o out.meta
      graphgrad rewrite model.meta --repair-dangling identity -o repaired.meta
      graphgrad rewrite model.pb --op Sign=ste --embed -o self_contained.pb

    GRADIENT is a spec from `graphgrad gradients` (pipelines like ste|scale(0.5)),
    or tf:NAME for a name TensorFlow's own registry answers.
    """
    output = options.make_output(out, in_place, dry_run, encoding)
    if not op_rules and not node_rules and not repair:
        raise click.UsageError("give at least one rule: --op TYPE=GRADIENT, --node GLOB=GRADIENT or --repair-dangling")
    for module in gradient_modules:
        load_gradient_module(module)
    rules = tuple(parse_rule(OP, text) for text in op_rules) + tuple(parse_rule(NODE, text) for text in node_rules)
    if repair:
        rules += (repair_rule(repair),)
    rewrite_options = RewriteOptions(
        rules=rules, match=match, exclude=exclude, functions=functions,
        force=force, allow_missing=allow_missing, embed=embed,
    )
    results = rewrite_files(list(models), rewrite_options, output, kind)
    if as_json:
        echo_json({"files": results})
    else:
        render_change_results(results, _render_report)
    if any(result.error for result in results):
        raise SystemExit(1)


def _render_report(report, dry_run) -> list[str]:
    groups = {}
    for change in report.changes:
        groups.setdefault((change.op_type, change.new), []).append(change)
    rows = []
    for (op_type, new), changes in groups.items():
        examples = ", ".join(c.node for c in changes[:2]) + (", ..." if len(changes) > 2 else "")
        replaced = sum(1 for c in changes if c.old is not None)
        rows.append([op_type, len(changes), new, examples + (f"  ({replaced} replaced)" if replaced else "")])
    lines = [table(rows)] if rows else []
    summary = f"  {'would change' if dry_run else 'changed'} {len(report.changes)} node(s)"
    if report.unchanged:
        summary += f"; {len(report.unchanged)} already as asked"
    return lines + [summary] + [f"  note: {note}" for note in report.notes]
