"""What differs between two models: nodes added, removed, rewired, and changed
attributes (``_gradient_op_type`` above all), top level and function bodies."""

from dataclasses import dataclass, field

from ..graph.model import Model, iter_nodes
from ..names import ATTR

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


def _without_nodes(model: Model):
    copy = model.copy()
    for _, graph_def in copy.graphs():
        del graph_def.node[:]
        for function in graph_def.library.function:
            del function.node_def[:]
    return copy


def diff_models(a: Model, b: Model) -> ModelDifference:
    """Compare ``a`` and ``b`` node by node (matched by graph and qualified name)."""
    difference = ModelDifference()
    if (a.kind, len(a.graphs())) != (b.kind, len(b.graphs())):
        difference.other.append(f"kind: {a.describe()} with {len(a.graphs())} graph(s) -> "
                                f"{b.describe()} with {len(b.graphs())} graph(s)")
    left = {(r.graph, r.name): r for r in iter_nodes(a)}
    right = {(r.graph, r.name): r for r in iter_nodes(b)}
    for key in left.keys() | right.keys():
        old, new = left.get(key), right.get(key)
        if old is not None and new is None:
            difference.nodes.append(NodeDifference(key[0], key[1], old.op_type, REMOVED))
        elif new is not None and old is None:
            details: tuple[str, ...] = (f"inputs: {list(new.node.input)}",)
            if new.override is not None:
                details += (f"{ATTR}: {new.override!r}",)
            difference.nodes.append(NodeDifference(key[0], key[1], new.op_type, ADDED, details))
        elif old is not None and new is not None and old.node != new.node:
            difference.nodes.append(
                NodeDifference(key[0], key[1], new.op_type, CHANGED, _node_details(old.node, new.node))
            )
    difference.nodes.sort(key=lambda d: (d.graph, d.node))
    rest_a, rest_b = _without_nodes(a), _without_nodes(b)
    if rest_a.kind == rest_b.kind and rest_a.message != rest_b.message:
        fields = sorted(
            {f.name for f, _ in rest_a.message.ListFields()} ^ {f.name for f, _ in rest_b.message.ListFields()}
            | {f.name for f, v in rest_a.message.ListFields() if getattr(rest_b.message, f.name) != v}
        )
        difference.other.append(f"fields other than nodes differ: {', '.join(fields) or 'nested fields'}")
    return difference
