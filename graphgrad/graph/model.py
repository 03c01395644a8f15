"""A loaded model file and the nodes in it.

A :class:`Model` wraps one protobuf message (GraphDef, MetaGraphDef or
SavedModel) with how it was stored. Its graphs are the GraphDefs it holds; the
nodes of a graph are its top-level ``node`` list and, unless asked otherwise,
the ``node_def`` lists of the function bodies in ``library.function``, named
``function_name/node_name``.

The functions here accept messages of either proto flavour (tensorboard's or
TensorFlow's own): they only use field names, which the two share.
"""

from collections.abc import Container
from dataclasses import dataclass, replace
from typing import Any

from ..names import ATTR

GRAPHDEF = "graphdef"
METAGRAPH = "metagraph"
SAVEDMODEL = "savedmodel"
KINDS = (GRAPHDEF, METAGRAPH, SAVEDMODEL)
KIND_NAMES = {GRAPHDEF: "GraphDef", METAGRAPH: "MetaGraphDef", SAVEDMODEL: "SavedModel"}
TFLITE = "tflite"  # a TensorFlow Lite model: read as the GraphDef rebuilt from it
BINARY = "binary"
TEXT = "text"
ENCODINGS = (BINARY, TEXT)


@dataclass(frozen=True)
class Model:
    """One model file: its message, kind, encoding and where it came from.

    ``root`` is the SavedModel directory for SavedModels, else None.
    ``rebuilt_from``: "tflite" for the frozen GraphDef rebuilt from a TensorFlow
    Lite model (:mod:`graphgrad.files.tflite_graph`), which is written as a
    GraphDef, never back into the ``.tflite``.
    """

    message: Any  # a GraphDef, MetaGraphDef or SavedModel message
    kind: str
    encoding: str
    path: str = ""
    root: str | None = None
    rebuilt_from: str = ""

    def copy(self) -> "Model":
        message = type(self.message)()
        message.CopyFrom(self.message)
        return replace(self, message=message)

    def graphs(self) -> list[tuple[str, Any]]:
        """(label, GraphDef) for each graph; the label is empty for a lone graph."""
        return graphs_of(self.message, self.kind)

    def describe(self) -> str:
        return f"{KIND_NAMES[self.kind]}, {self.encoding}"


def graphs_of(message: Any, kind: str) -> list[tuple[str, Any]]:
    if kind == GRAPHDEF:
        return [("", message)]
    return [(label, meta.graph_def) for label, meta in meta_graphs_of(message, kind)]


def meta_graphs_of(message: Any, kind: str) -> list[tuple[str, Any]]:
    """(label, MetaGraphDef) for each MetaGraphDef, labelled as in :func:`graphs_of`;
    none for a GraphDef."""
    if kind == GRAPHDEF:
        return []
    if kind == METAGRAPH:
        return [("", message)]
    return [
        (f"meta_graph {index} [{','.join(meta.meta_info_def.tags)}]", meta)
        for index, meta in enumerate(message.meta_graphs)
    ]


def signatures_of(meta_graph_def: Any) -> list[tuple[str, list, list]]:
    """``(key, [(input, tensor)], [(output, tensor)])`` of a MetaGraphDef's signatures,
    by key; TensorFlow's own (keys starting with ``__``, such as its init op) left out.
    A sparse or composite tensor, which has no name of its own, is its components,
    each named for its part (``features (values)``)."""
    return [
        (key, [pair for name, info in sorted(signature.inputs.items()) for pair in _tensors_of(name, info)],
         [pair for name, info in sorted(signature.outputs.items()) for pair in _tensors_of(name, info)])
        for key, signature in sorted(meta_graph_def.signature_def.items()) if not key.startswith("__")
    ]


def _tensors_of(name: str, info: Any) -> list[tuple[str, str]]:
    """The ``(name, tensor)`` pairs a signature's TensorInfo stands for: its tensor; a
    SparseTensor's values, indices and dense shape; a composite tensor's components."""
    encoding = info.WhichOneof("encoding")
    if encoding == "coo_sparse":
        sparse = info.coo_sparse
        return [(f"{name} ({part})", tensor) for part, tensor in (
            ("values", sparse.values_tensor_name), ("indices", sparse.indices_tensor_name),
            ("dense_shape", sparse.dense_shape_tensor_name)) if tensor]
    if encoding == "composite_tensor":
        return [pair for index, component in enumerate(info.composite_tensor.components)
                for pair in _tensors_of(f"{name} (component {index})", component)]
    return [(name, info.name)] if info.name else []


class NodeRef:
    """A node of a graph, top level (``function`` None) or in a function body.

    A plain slotted class: graphs have 100k nodes and this is made for each.
    """

    __slots__ = ("graph", "function", "node", "name", "op_type")

    def __init__(self, graph: str, function: str | None, node):
        self.graph = graph
        self.function = function
        self.node = node  # NodeDef
        self.name = node.name if function is None else f"{function}/{node.name}"
        self.op_type = node.op

    def __repr__(self) -> str:
        return f"NodeRef({self.graph!r}, {self.name!r}, {self.op_type!r})"

    @property
    def override(self) -> str | None:
        return override_of(self.node)

    def set_override(self, value: str | None) -> None:
        set_override(self.node, value)


def override_of(node_def: Any) -> str | None:
    """The node's ``_gradient_op_type``, or None. Never adds the attribute."""
    if ATTR not in node_def.attr:
        return None
    return node_def.attr[ATTR].s.decode("utf-8", "replace")


def set_override(node_def: Any, value: str | None) -> None:
    """Set (or, with None, remove) the node's ``_gradient_op_type``."""
    if value is None:
        if ATTR in node_def.attr:
            del node_def.attr[ATTR]
        return
    node_def.attr[ATTR].s = value.encode("utf-8")  # AttrValue's value is a oneof: this replaces any other


def iter_graph_nodes(graph_def: Any, label: str = "", functions: bool = True,
                     op_types: Container[str] | None = None) -> list[NodeRef]:
    """Nodes of one GraphDef: top level first, then function bodies.

    ``op_types`` (a set) skips other nodes before any per-node object is made.
    """
    bodies = [(None, graph_def.node)]
    if functions:
        bodies += [(function.signature.name, function.node_def) for function in graph_def.library.function]
    if op_types is None:
        return [NodeRef(label, name, node) for name, nodes in bodies for node in nodes]
    return [NodeRef(label, name, node) for name, nodes in bodies for node in nodes if node.op in op_types]


def scopes_of(graph_def: Any) -> list:
    """``(prefix, nodes)`` of a GraphDef's top level (prefix "") and of each function
    body (prefix ``FUNCTION/``)."""
    return [("", graph_def.node)] + [(f.signature.name + "/", f.node_def) for f in graph_def.library.function]


def iter_nodes(model: Model, functions: bool = True, op_types: Container[str] | None = None) -> list[NodeRef]:
    """Every node of every graph in ``model`` (of ``op_types`` only, if given)."""
    return [
        ref for label, graph_def in model.graphs() for ref in iter_graph_nodes(graph_def, label, functions, op_types)
    ]


# Attributes that give the dtype of a node's outputs, in order of trust.
_DTYPE_ATTRS = ("T", "dtype", "DstT", "out_type", "Tout", "output_types", "Toutput_types")


def dtype_in(attr: Any, index: int = 0) -> int | None:
    """The dtype of output ``index`` of a node with attributes ``attr`` (None if unknown)."""
    for key in _DTYPE_ATTRS:
        if key not in attr:
            continue
        value = attr[key]
        if value.HasField("type"):
            return value.type
        if value.HasField("list") and len(value.list.type) > index:
            return value.list.type[index]
    return None
