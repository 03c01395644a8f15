"""graphgrad rewrite: give selected nodes a gradient, by op type or node name."""

from functools import partial

import click

from ..edits.rewrite import RewriteOptions
from ..edits.rules_file import read_rules_file
from ..edits.select import NODE, OP, parse_rule, repair_rule, rules_from_document
from ..gradients.user_modules import load_gradient_module
from ..jobs.api import rewrite_files
from ..jobs.batch import BatchOptions
from . import options
from .render import finish_batch, in_graph, progress_bar, table


@click.command("rewrite")
@options.models_argument
@options.op_rule_option
@options.node_rule_option
@options.rules_file_option
@options.repair_option
@options.match_option
@options.exclude_option
@options.batch_output_options
@options.embed_option
@options.force_option
@options.allow_missing_option
@options.functions_option
@options.format_option
@options.gradients_module_option
@options.json_option
@options.debug_option
def rewrite_command(models, op_rules, node_rules, rules_files, repair, match, exclude, out, in_place, dry_run,
                    encoding, out_dir, backup, recursive, jobs, quiet, embed, force, allow_missing, functions, kind,
                    gradient_modules, as_json):
    """Set the gradient of selected nodes (their _gradient_op_type attribute).

    MODELS are files, directories (-r: recursively; a directory holding
    saved_model.pb is one SavedModel) and globs.

    \b
    Examples:
      graphgrad rewrite model.pb --op Sign=ste -o patched.pb
      graphgrad rewrite model.pb --op PyFunc='identity|clip_norm(1.0)' --in-place
      graphgrad rewrite model.meta --node 'encoder/*/Round=QuantizeGrad' --exclude '*/head/*' -o out.meta
      graphgrad rewrite model.meta --repair-dangling identity -o repaired.meta
      graphgrad rewrite model.pb --op Sign=ste --embed -o self_contained.pb
      graphgrad rewrite -r zoo/ --rules rules.toml --out-dir patched/ -j 2

    GRADIENT is a spec from `graphgrad gradients` (pipelines like ste|scale(0.5)),
    or tf:NAME for a name TensorFlow's own registry answers.
    """
    output = options.make_output(out, in_place, dry_run, encoding, out_dir, backup)
    if not (op_rules or node_rules or rules_files or repair):
        raise click.UsageError(
            "give at least one rule: --op TYPE=GRADIENT, --node GLOB=GRADIENT, --rules FILE or --repair-dangling"
        )
    for module in gradient_modules:
        load_gradient_module(module)
    rules = tuple(parse_rule(OP, text) for text in op_rules) + tuple(parse_rule(NODE, text) for text in node_rules)
    for path in rules_files:
        rules += rules_from_document(read_rules_file(path), path)
    if repair:
        rules += (repair_rule(repair),)
    rewrite_options = RewriteOptions(
        rules=rules, match=match, exclude=exclude, functions=functions,
        force=force, allow_missing=allow_missing, embed=embed,
    )
    batch = BatchOptions(recursive=recursive, out_dir=out_dir, jobs=jobs, gradient_modules=gradient_modules)
    progress = partial(progress_bar, label="rewriting")
    results = rewrite_files(list(models), rewrite_options, output, kind, batch, progress)
    return finish_batch(results, as_json, _render_report, _summarize_report, notes_of=lambda report: report.notes,
                 quiet=quiet)


def _summarize_report(report) -> str:
    return ", ".join(f"{op_type} {count}" for op_type, count in report.by_op_type.items())


def _render_report(report, dry_run) -> list[str]:
    rows = []
    for op_type, new, count, replaced, nodes in report.groups():
        text = ", ".join(in_graph(graph) + name for graph, name in nodes[:2]) + (", ..." if count > 2 else "")
        rows.append([op_type, count, new, text + (f"  ({replaced} replaced)" if replaced else "")])
    lines = table(rows)
    summary = f"  {'would change' if dry_run else 'changed'} {sum(row[1] for row in rows)} node(s)"
    if report.unchanged:
        summary += f"; {len(report.unchanged)} already as asked"
    return lines + [summary] + [f"  note: {note}" for note in report.notes]
