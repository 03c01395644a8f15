"""What differs between two models: nodes added, removed, rewired, and changed
attributes (``_gradient_op_type`` above all), top level and function bodies.

Written once over *listings*: every node by graph and qualified name, and the
rest of each graph. A parsed model gives one (:func:`diff_models`); two binary
GraphDefs read as stored are compared as stored (:func:`diff_readings`): a
top-level node whose bytes are the same on both sides is equal, left out before
anything is decoded, so a frozen model's constants are compared as bytes, never parsed.
"""

from dataclasses import dataclass, field
from typing import Any

from ..files.protos import NodeDef
from ..graph.model import Model, iter_graph_nodes, iter_nodes, override_of
from ..names import ATTR
from ..readings.protocol import Reading

ADDED, REMOVED, CHANGED = "added", "removed", "changed"


@dataclass(frozen=True)
class NodeDifference:
    graph: str
    node: str
    op_type: str
    kind: str  # added / removed / changed
    details: tuple = ()


@dataclass
class ModelDifference:
    nodes: list = field(default_factory=list)
    other: list = field(default_factory=list)  # differences outside the nodes

    @property
    def equal(self) -> bool:
        return not self.nodes and not self.other


class _Parsed:
    """A node of a parsed graph."""

    __slots__ = ("op_type", "node")

    def __init__(self, op_type: str, node: Any):
        self.op_type, self.node = op_type, node


class _Stored:
    """A top-level node as stored, parsed when asked for."""

    __slots__ = ("op_type", "_encodings", "_index")

    def __init__(self, op_type: str, encodings: Any, index: int):
        self.op_type, self._encodings, self._index = op_type, encodings, index

    @property
    def node(self) -> Any:
        return NodeDef.FromString(self._encodings[self._index])  # the reading found the file a GraphDef


@dataclass
class _Listing:
    """Every node of a model by (graph, qualified name), and its graphs without their nodes."""

    nodes: dict
    rest: Any  # a message to compare, or None where the kinds differ (reported once)


def _short(attr) -> str:
    from google.protobuf import text_format

    text = text_format.MessageToString(attr, as_one_line=True)
    return text if len(text) <= 60 else text[:57] + "..."


def _node_details(a, b) -> tuple:
    details = []
    if a.op != b.op:
        details.append(f"op: {a.op} -> {b.op}")
    if list(a.input) != list(b.input):
        details.append(f"inputs: {list(a.input)} -> {list(b.input)}")
    if a.device != b.device:
        details.append(f"device: {a.device!r} -> {b.device!r}")
    for key in sorted(set(a.attr) | set(b.attr), key=lambda k: (k != ATTR, k)):
        old = a.attr[key] if key in a.attr else None
        new = b.attr[key] if key in b.attr else None
        if old == new:
            continue
        if key == ATTR:
            describe = lambda v: "(none)" if v is None else repr(v.s.decode("utf-8", "replace"))  # noqa: E731
            details.append(f"{ATTR}: {describe(old)} -> {describe(new)}")
        elif old is None:
            details.append(f"attr {key} added: {_short(new)}")
        elif new is None:
            details.append(f"attr {key} removed")
        else:
            details.append(f"attr {key}: {_short(old)} -> {_short(new)}")
    if not details and a != b:
        details.append("other NodeDef fields differ")
    return tuple(details)


def _clear_nodes(graph_defs) -> None:
    """Remove every node of these GraphDefs, top level and function bodies: what is left is compared whole."""
    for graph_def in graph_defs:
        del graph_def.node[:]
        for function in graph_def.library.function:
            del function.node_def[:]


def _listing(model: Model) -> _Listing:
    rest = model.copy()
    _clear_nodes(graph_def for _, graph_def in rest.graphs())
    return _Listing({(ref.graph, ref.name): _Parsed(ref.op_type, ref.node) for ref in iter_nodes(model)},
                    rest.message)


def diff_models(a: Model, b: Model) -> ModelDifference:
    """Compare ``a`` and ``b`` node by node (matched by graph and qualified name)."""
    other = []
    if (a.kind, len(a.graphs())) != (b.kind, len(b.graphs())):
        other.append(f"kind: {a.describe()} with {len(a.graphs())} graph(s) -> "
                     f"{b.describe()} with {len(b.graphs())} graph(s)")
    left, right = _listing(a), _listing(b)
    if a.kind != b.kind:
        left.rest = right.rest = None
    return _difference(left, right, other)


def diff_readings(a: Reading, b: Reading) -> ModelDifference:
    """Compare two readings of models: as stored where both are binary GraphDefs
    read so (a frozen model's spans or many small nodes' encodings), as
    :func:`diff_models` compares their parses; else their parses."""
    stored_a, stored_b = a.stored_nodes(), b.stored_nodes()
    if stored_a is None or stored_b is None:
        return diff_models(a.model(), b.model())
    return _diff_stored(a, stored_a, b, stored_b)


def _diff_stored(a: Reading, top_a: tuple, b: Reading, top_b: tuple) -> ModelDifference:
    (names_a, ops_a, stored_a), (names_b, ops_b, stored_b) = top_a, top_b
    at_a, at_b = dict(zip(names_a, range(len(names_a)))), dict(zip(names_b, range(len(names_b))))  # the last wins
    # Equal as stored, so equal: left out before any is decoded.
    same = {name for name, i in at_a.items() if (j := at_b.get(name)) is not None and stored_a[i] == stored_b[j]}
    return _difference(_stored_listing(a, at_a, ops_a, stored_a, same),
                       _stored_listing(b, at_b, ops_b, stored_b, same), [])


def _stored_listing(reading: Reading, at: dict, ops: list, encodings: Any, same: set) -> _Listing:
    nodes: dict = {("", name): _Stored(ops[index], encodings, index) for name, index in at.items() if name not in same}
    nodes.update(((ref.graph, ref.name), _Parsed(ref.op_type, ref.node))
                 for ref in iter_graph_nodes(reading.library_graph(), "", True) if ref.function is not None)
    rest = reading.rest()
    _clear_nodes([rest])
    return _Listing(nodes, rest)


def _difference(left: _Listing, right: _Listing, other: list) -> ModelDifference:
    difference = ModelDifference(other=other)
    for key in left.nodes.keys() | right.nodes.keys():
        old, new = left.nodes.get(key), right.nodes.get(key)
        if old is not None and new is None:
            difference.nodes.append(NodeDifference(key[0], key[1], old.op_type, REMOVED))
        elif new is not None and old is None:
            node = new.node
            details: tuple[str, ...] = (f"inputs: {list(node.input)}",)
            if (override := override_of(node)) is not None:
                details += (f"{ATTR}: {override!r}",)
            difference.nodes.append(NodeDifference(key[0], key[1], new.op_type, ADDED, details))
        elif old is not None and new is not None:
            old_node, new_node = old.node, new.node
            if old_node != new_node:
                difference.nodes.append(
                    NodeDifference(key[0], key[1], new.op_type, CHANGED, _node_details(old_node, new_node))
                )
    difference.nodes.sort(key=lambda d: (d.graph, d.node))
    rest_a, rest_b = left.rest, right.rest
    if rest_a is not None and rest_b is not None and rest_a != rest_b:
        fields = sorted(
            {f.name for f, _ in rest_a.ListFields()} ^ {f.name for f, _ in rest_b.ListFields()}
            | {f.name for f, v in rest_a.ListFields() if getattr(rest_b, f.name) != v}
        )
        difference.other.append(f"fields other than nodes differ: {', '.join(fields) or 'nested fields'}")
    return difference
