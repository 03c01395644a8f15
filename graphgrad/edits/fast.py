"""Rewrite and summary of a binary GraphDef on its fast reading
(:func:`graphgrad.files.stored.open_stored`): only what the job looks at is
decoded; every other byte is copied as it was. The output is a valid GraphDef
equal in meaning to what the full parse's job gives (the tests compare both), and
the same input and rules give the same bytes.
"""

from collections import Counter

from google.protobuf.message import DecodeError

from ..files.io import SourceFile
from ..files.protos import GraphDef, NodeDef
from ..files.scan import Library, ScannedGraph, node_headers, override_at
from ..files.small_nodes import HeadGraph, flat_columns, node_inputs
from ..files.stored import in_memory_chunks, open_stored, scan_view
from ..files.wireformat import NotApplicable
from ..graph.functions import calls_into_overrides, functions_with_overrides, saved_gradients, unrouted_calls_note
from ..names import ATTR_BYTES, CALL_OPS
from .rewrite import (
    RewriteOptions,
    RewriteReport,
    apply_rules,
    changes_signs,
    refuse_misfits,
    sign_trap_notes,
)
from .select import choose_by_op_type, op_types_needed
from .traps import ADDS, SIGN, no_gradient_notes, scopes_of


def rewrite_graphdef_bytes(data: bytes, options: RewriteOptions) -> tuple[list, RewriteReport]:
    """Apply ``options`` to a binary GraphDef given as bytes.

    Returns ``(chunks, report)``: the output as byte strings to write in order.
    Raises :class:`NotApplicable` when the bytes are not a binary GraphDef this
    path suits (the caller then parses them whole).
    """
    chunks, report = _rewrite(data, lambda: data, options)
    return in_memory_chunks(data, chunks), report


def rewrite_graphdef_file(source: SourceFile, options: RewriteOptions) -> tuple[list, RewriteReport]:
    """:func:`rewrite_graphdef_bytes` for a file open as a :class:`graphgrad.files.io.SourceFile`.

    The chunks are as :func:`graphgrad.files.io.write_chunks` takes them with this
    source: what stays as it was is a range of the input, copied in the kernel,
    so a frozen model's constants are never read into this process.
    """
    return _rewrite(*scan_view(source), options)


def _rewrite(data, whole, options: RewriteOptions):
    if options.embed:
        raise NotApplicable("--embed edits the graph structure")
    if any(rule.spec.tensor_refs for rule in options.rules):
        raise NotApplicable("tensor parameters are checked against the parsed graph")
    graph = open_stored(data, whole)
    library = graph.library
    op_types = op_types_needed(options.rules, options.match, options.exclude)
    functions = library.function_nodes(op_types) if options.functions else []

    def all_nodes():
        return graph.candidates() + (library.function_nodes() if options.functions else [])

    if isinstance(graph, HeadGraph) and op_types is not None and not functions and not graph.has_overrides:
        report = _apply_to_heads(graph, op_types, options, all_nodes)
    else:
        report = apply_rules(graph.candidates(op_types) + functions, options, all_nodes=all_nodes,
                             saved=lambda: {("", value): function for value, function
                                            in saved_gradients(library.graph()).items()})
    calls = _unrouted_calls(graph, library) if options.functions else []
    report.notes += [unrouted_calls_note(calls)] if calls else []
    report.notes += no_gradient_notes(report.by_op_type)
    if changes_signs(report):
        report.notes += _top_level_sign_notes(graph, report)
        for prefix, nodes in scopes_of(library.graph())[1:]:
            report.notes += sign_trap_notes(report, "", prefix, nodes)
    return graph.chunks(library.changed_bytes()), report


# Above this many top-level nodes, the fast path of small nodes does not look for
# larq's shifted Signs: reading every Add of a 100k-node graph would cost a third of
# the rewrite (and one protobuf arena per node). Binarized nets are far smaller.
SIGN_TRAP_NODE_LIMIT = 20_000


def _top_level_sign_notes(graph, report: RewriteReport) -> list[str]:
    if isinstance(graph, HeadGraph) and len(graph.encoded.node) > SIGN_TRAP_NODE_LIMIT:
        return [f"larq-style Signs of Sign(x) + c were not looked for: the graph has over {SIGN_TRAP_NODE_LIMIT} "
                "nodes; graphgrad check looks for them in any graph"]
    return sign_trap_notes(report, "", "", None, *graph.nodes_of_types(SIGN, ADDS))


def _unrouted_calls(graph, library: Library) -> list[str]:
    """:func:`graphgrad.graph.functions.calls_into_overrides` of a rewritten graph; the
    top-level NodeDefs are parsed only for the nodes that may call."""
    bodies = {function.signature.name: function.node_def for function in library.functions()}
    if not functions_with_overrides(bodies):  # before the top level is looked at
        return []
    callers = graph.candidates(set(CALL_OPS).union(bodies))
    if isinstance(graph, HeadGraph):
        try:
            top_level = [NodeDef.FromString(node.head.SerializeToString()) for node in callers]
        except DecodeError:  # let the full parse report the broken node
            raise NotApplicable("a node does not parse") from None
    else:
        top_level = [node.node for node in callers]
    return calls_into_overrides(top_level, bodies)


def _apply_to_heads(graph: HeadGraph, op_types, options: RewriteOptions, all_nodes) -> RewriteReport:
    """:func:`apply_rules` for the commonest case, without an object per node:
    plain --op rules, and no node has an override yet (so every selected node
    changes, and none is refused)."""
    indices, names, ops = graph.select(op_types)
    chosen, notes = choose_by_op_type(
        Counter(ops), options.rules, options.allow_missing, all_nodes,
        names_of=lambda op_type: [name for name, op in zip(names, ops) if op == op_type],
    )
    refuse_misfits((op_type, rule.spec, names[ops.index(op_type)]) for op_type, rule in chosen.items())
    values = {op_type: rule.spec.attr_value for op_type, rule in chosen.items()}
    graph.add_overrides(indices, ops, values)
    changes = (("",) * len(names), names, ops, (None,) * len(names), list(map(values.get, ops)))
    return RewriteReport.from_columns(changes, notes=notes)


def graphdef_bodies(data: bytes, functions: bool = True) -> list:
    """What ``graphgrad ops`` reads of a binary GraphDef (``summary.Body`` of the
    top level, then of each function body), from cut-down parses or the scan: no
    NodeDef of the top level is built. Raises :class:`NotApplicable` as
    :func:`rewrite_graphdef_bytes` does."""
    return _bodies(data, lambda: data, functions)


def graphdef_file_bodies(source: SourceFile, functions: bool = True) -> list:
    """:func:`graphdef_bodies` for a file open as a :class:`graphgrad.files.io.SourceFile`:
    a frozen model's constants are never read."""
    return _bodies(*scan_view(source), functions)


def _bodies(data, whole, functions: bool) -> list:
    from .summary import Body, bodies_of  # as in api: rewrites do not load the summary layer

    graph = open_stored(data, whole)
    if isinstance(graph, HeadGraph):
        encoded = graph.data
        names, ops, inputs, overrides, library = flat_columns(encoded)
        inputs_by_node = lambda: node_inputs(encoded)  # noqa: E731
        node_defs = lambda op_types: [node for node in _parsed(encoded).node if node.op in op_types]  # noqa: E731
    else:
        names, ops, inputs, overrides, inputs_by_node = _scanned_columns(graph)
        library = graph.library_payloads()
        node_defs = lambda op_types: [node.node for node in graph.nodes if node.op_type in op_types]  # noqa: E731
    library_graph = graph.library.graph() if library else None  # parsed once, for both below
    saved = saved_gradients(library_graph) if library_graph is not None else {}
    top = Body(None, names, ops, inputs, set(), overrides, saved, inputs_by_node, node_defs)
    if not (functions and library):
        return [top]
    return [top] + bodies_of(library_graph)[1:]


def _parsed(data) -> GraphDef:
    try:
        return GraphDef.FromString(data)
    except DecodeError:  # let the full parse report the broken file
        raise NotApplicable("the GraphDef does not parse") from None


def _scanned_columns(graph: ScannedGraph):
    """``(names, ops, inputs, overrides, inputs by node)`` of a scanned graph's top
    level (as :func:`graphgrad.files.small_nodes.flat_columns`), from each node's field
    headers: attribute values (the constants) are skipped."""
    inputs_of, overrides = [], []
    for node in graph.nodes:
        inputs, attrs = node_headers(graph.data, *node._span)
        inputs_of.append(inputs)
        if ATTR_BYTES in attrs:
            overrides.append((node.name, node.op_type, override_at(graph.data, attrs[ATTR_BYTES])))
    names = [node.name for node in graph.nodes]
    flat_inputs = [name for inputs in inputs_of for name in inputs]
    return names, [node.op_type for node in graph.nodes], flat_inputs, overrides, lambda: zip(names, inputs_of)
