"""graphgrad ops: op types with counts, and the gradient overrides a model carries."""

import click

from ..edits.summary import DANGLING, SAVED, UNRESOLVED
from ..graph.functions import first_names, unrouted_calls_note
from ..graph.model import KIND_NAMES
from ..jobs.api import summarize_files
from . import options
from .render import echo, echo_json, in_graph, render_failures, table, tensorflow_quiet, to_jsonable

LISTED_OVERRIDES = 20
LISTED_ENDS = 5


@click.command("ops")
@options.models_argument
@options.recursive_option
@options.format_option
@options.functions_option
@click.option("--grad-status", is_flag=True,
              help="Also say what TensorFlow's own gradient is for each op type: registered, zero, None or missing "
              "(imports TensorFlow).")
@options.verify_option
@options.json_option
@options.debug_option
def ops_command(models, recursive, kind, functions, grad_status, verify, as_json):
    """List op types with node counts, and gradient overrides with their status.

    MODELS are files, directories (-r: recursively) and globs. Flags overrides
    no loading process can resolve, above all the CustomGradient-<n> names
    tf.custom_gradient leaves in frozen graphs, and graphs TensorFlow would
    refuse (duplicate node names, inputs that name no node).

    \b
    Examples:
      graphgrad ops model.pb
      graphgrad ops -r zoo/ --json
      graphgrad ops saved_model_dir/ --grad-status
      graphgrad ops model.tflite --verify
    """
    summaries, failures = summarize_files(models, recursive, kind, functions)
    render_failures(failures)
    statuses = [_grad_status(summary) if grad_status and summary.kind != "tflite" else None
                for summary in summaries]
    verified = [_verified(summary) if verify else None for summary in summaries]
    if as_json:
        files = [to_jsonable(summary) | ({"grad_status": status} if status else {})
                 | ({"verified": [difference.__dict__ for difference in found]} if found is not None else {})
                 for summary, status, found in zip(summaries, statuses, verified)]
        echo_json({"files": files, "errors": failures})
    elif summaries:
        rendered = [_render(summary, status) + _render_verified(found)
                    for summary, status, found in zip(summaries, statuses, verified)]
        echo(*[line for index, lines in enumerate(rendered) for line in ([""] if index else []) + lines])
    return not failures


def _verified(summary) -> list:
    """Of a .tflite: check --verify's differences, on check's random feeds (imports TensorFlow)."""
    from ..errors import UsageError
    from ..files.tflite_graph import end_node_name
    from ..methods.options import RunOptions
    from ..tf.check import CheckOptions, check_model

    if summary.kind != "tflite":
        raise UsageError(f"--verify compares a TensorFlow Lite model's rebuilt graph with TensorFlow Lite's "
                         f"interpreter; {summary.path} is not a .tflite")
    with tensorflow_quiet():
        return check_model(summary.path, RunOptions(y=end_node_name(summary.outputs[0].name)),
                           CheckOptions(verify=True)).verified


def _render_verified(found) -> list[str]:
    return [f"  {difference.describe()}" for difference in found or []]


def _grad_status(summary) -> dict:
    from ..tf.blockers import gradient_status

    with tensorflow_quiet():
        return gradient_status([count.op_type for count in summary.op_types])


def _render_lite(summary) -> list[str]:
    """A TensorFlow Lite model: its ends, signatures, op types and quantisation."""
    lines = [f"{summary.path}  (TensorFlow Lite, schema version {summary.version}): {summary.subgraphs} "
             f"subgraph(s), {summary.operators} operators"]
    for label, ends in (("inputs", summary.inputs), ("outputs", summary.outputs)):
        lines.append(f"  {label}: " + (", ".join(
            f"{end.name} {end.dtype} {end.shape}" + (f" ({end.quantised})" if end.quantised else "")
            for end in ends) or "none"))
    for key, inputs, outputs in summary.signatures:
        lines.append(f"  signature {key}: " + ", ".join(f"{name} = {tensor}" for name, tensor in inputs)
                     + " -> " + ", ".join(f"{name} = {tensor}" for name, tensor in outputs))
    lines += table([["op type", "operators"]] + [[op, str(count)] for op, count in sorted(summary.op_types.items())])
    types = ", ".join(f"{dtype.lower()} {count}" for dtype, count in sorted(summary.tensor_types.items()))
    lines.append(f"  tensors: {types}; quantised: {summary.quantised_tensors} ({summary.per_channel_tensors} "
                 "per-channel)")
    lines.append(f"  {summary.rebuilt}")
    if not summary.overrides:
        lines.append("  gradient overrides: none (a TensorFlow Lite model carries none)")
    for op_type, specs in sorted(summary.overrides.items()):  # the quantisation simulated in the rebuilt graph
        lines.append(f"  gradient overrides in the rebuilt graph: {op_type} " + ", ".join(
            f"{spec} x{count}" for spec, count in sorted(specs.items())) + _QUANTISATION_ROLES.get(op_type, ""))
    return lines


# What the overrides a rebuild of integer quantisation writes stand for (graphgrad/files/tflite_quantisation.py)
_QUANTISATION_ROLES = {"Round": " (quantisation's rounding: the straight-through estimator)",
                       "Sign": " (which way a rounding's tie goes: no gradient, on purpose)"}


def _render(summary, status=None) -> list[str]:
    if summary.kind == "tflite":
        return _render_lite(summary)
    graphs = f", {summary.graphs} graphs" if summary.graphs > 1 else ""
    functions = (
        f", {summary.functions} functions ({summary.nodes_functions} nodes)" if summary.functions else ""
    )
    lines = [
        f"{summary.path}  ({KIND_NAMES[summary.kind]}, {summary.encoding}{graphs}): "
        f"{summary.nodes_top} nodes{functions}"
    ]
    lines += _ends(summary)
    rows = [["op type", "nodes", "in functions"] + (["TF gradient"] if status else [])]
    rows += [[c.op_type, c.top or "-", c.functions or "-"] + ([status[c.op_type]] if status else [])
             for c in summary.op_types]
    lines += table(rows)
    lines += [f"  ! {problem}" for problem in summary.graph_problems]
    if not summary.overrides:
        lines.append("  gradient overrides: none")
        return lines
    lines.append(f"  gradient overrides ({len(summary.overrides)}):")
    lines += table(_override_rows(summary.overrides), indent="    ")
    for problem in _unique_problems(summary):
        lines.append(f"  ! {problem.value}: {problem.detail}")
        lines.append(
            f"    fix: graphgrad rewrite {summary.path} --node '{problem.node}=identity' --force "
            "-o OUT  (or: --repair-dangling identity)"
        )
    saved = {o.value: o.detail for o in summary.overrides if o.status == SAVED}
    lines += [f"  {value}: {detail}" for value, detail in saved.items()]
    if summary.unrouted_calls:
        lines.append(f"  note: {unrouted_calls_note(summary.unrouted_calls)}")
    return lines


def _ends(summary) -> list:
    """What to feed and what to fetch: the signatures of the graphs that have some,
    the likely inputs and outputs of the others, as TensorFlow's summarize_graph
    finds them."""
    lines = [
        f"  signature {in_graph(s.graph)}{s.key}: {_pairs(s.inputs)} -> {_pairs(s.outputs)}"
        for s in summary.signatures
    ]
    signed = {s.graph for s in summary.signatures}
    inputs = [in_graph(end.graph) + end.node for end in summary.inputs if end.graph not in signed]
    outputs = [f"{in_graph(end.graph)}{end.node} ({end.op_type})" for end in summary.outputs if end.graph not in signed]
    if inputs or outputs or not signed:
        lines += [f"  inputs: {first_names(inputs, LISTED_ENDS) or 'none'}",
                  f"  outputs: {first_names(outputs, LISTED_ENDS) or 'none'}"]
    return lines


def _pairs(names_to_tensors: dict) -> str:
    return ", ".join(f"{name} = {tensor}" for name, tensor in names_to_tensors.items())


def _override_rows(overrides) -> list[list[object]]:
    """One row per node; past LISTED_OVERRIDES (a rewritten graph has thousands),
    one row per op type, value and status, with a count and examples."""
    if len(overrides) <= LISTED_OVERRIDES:
        return [["node", "op type", "_gradient_op_type", "status"]] + [
            [_where(o), o.op_type, o.value, _status(o.status)] for o in overrides
        ]
    groups: dict = {}
    for override in overrides:
        groups.setdefault((override.op_type, override.value, override.status), []).append(override)
    header: list[list[object]] = [["op type", "nodes", "_gradient_op_type", "status", "nodes (all of them: --json)"]]
    return header + [
        [op_type, len(group), value, _status(status),
         ", ".join(_where(o) for o in group[:2]) + (", ..." if len(group) > 2 else "")]
        for (op_type, value, status), group in groups.items()
    ]


def _where(override) -> str:
    return in_graph(override.graph) + override.node


def _status(status: str) -> str:
    return status.upper() if status in (DANGLING, UNRESOLVED) else status


def _unique_problems(summary):
    seen = set()
    for override in summary.problems:
        if override.value not in seen:
            seen.add(override.value)
            yield override
