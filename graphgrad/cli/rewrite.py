"""graphgrad rewrite: give selected nodes a gradient, by op type or node name."""

import click

from ..api import OutputOptions, rewrite_files
from ..io import load_gradient_module
from ..rewrite import RewriteOptions
from ..select import NODE, OP, parse_rule
from . import options
from .render import echo_json, error, table


@click.command("rewrite")
@options.models_argument
@options.op_rule_option
@options.node_rule_option
@options.match_option
@options.exclude_option
@options.output_option
@options.in_place_option
@options.dry_run_option
@options.force_option
@options.allow_missing_option
@options.functions_option
@options.format_option
@options.encoding_option
@options.gradients_module_option
@options.json_option
@options.debug_option
def rewrite_command(models, op_rules, node_rules, match, exclude, out, in_place, dry_run, force,
                    allow_missing, functions, kind, encoding, gradient_modules, as_json):
    """Set the gradient of selected nodes (their _gradient_op_type attribute).

    \b
    Examples:
      graphgrad rewrite model.pb --op Sign=ste -o patched.pb
      graphgrad rewrite model.pb --op PyFunc='identity|clip_norm(1.0)' --in-place
      graphgrad rewrite model.meta --node 'encoder/*/Round=QuantizeGrad' --exclude '*/head/*' -o out.meta
      graphgrad rewrite model.pb --node IdentityN=identity --force -o repaired.pb

    GRADIENT is a spec from `graphgrad gradients` (pipelines like ste|scale(0.5)),
    or tf:NAME for a name TensorFlow's own registry answers.
    """
    if sum(bool(x) for x in (out, in_place, dry_run)) != 1:
        raise click.UsageError("say where to write: exactly one of -o OUT, --in-place, --dry-run")
    if not op_rules and not node_rules:
        raise click.UsageError("give at least one rule: --op TYPE=GRADIENT or --node GLOB=GRADIENT")
    for module in gradient_modules:
        load_gradient_module(module)
    rules = tuple(parse_rule(OP, text) for text in op_rules) + tuple(
        parse_rule(NODE, text) for text in node_rules
    )
    rewrite_options = RewriteOptions(
        rules=rules, match=match, exclude=exclude, functions=functions,
        force=force, allow_missing=allow_missing,
    )
    output = OutputOptions(out=out, in_place=in_place, dry_run=dry_run, encoding=encoding)
    results = rewrite_files(list(models), rewrite_options, output, kind)
    if as_json:
        echo_json({"files": results})
    else:
        for result in results:
            _render(result)
    if any(result.error for result in results):
        raise SystemExit(1)


def _render(result) -> None:
    if result.error:
        error(result.error)
        return
    report = result.report
    target = result.output or "(dry run)"
    click.echo(f"{result.input} -> {target}")
    groups = {}
    for change in report.changes:
        groups.setdefault((change.op_type, change.new), []).append(change)
    rows = []
    for (op_type, new), changes in groups.items():
        examples = ", ".join(c.node for c in changes[:2]) + (", ..." if len(changes) > 2 else "")
        replaced = sum(1 for c in changes if c.old is not None)
        rows.append([op_type, len(changes), new, examples + (f"  ({replaced} replaced)" if replaced else "")])
    if rows:
        click.echo(table(rows))
    verb = "would change" if result.output is None else "changed"
    summary = f"  {verb} {len(report.changes)} node(s)"
    if report.unchanged:
        summary += f"; {len(report.unchanged)} already as asked"
    if result.output and not result.written:
        summary += "; output already up to date, not rewritten"
    click.echo(summary)
    for note in report.notes:
        click.echo(f"  note: {note}")
