"""The columns a summary reads of one list of nodes (a :class:`Body`), so that
they can come from a full parse or a cut-down one."""

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ..graph.functions import saved_gradients
from ..graph.model import override_of
from ..names import ATTR


@dataclass
class Body:
    """One list of nodes, a graph's top level or a function body, as the columns
    a summary reads (so that they can come from a full parse or a cut-down one)."""

    function: str | None
    names: Sequence
    ops: Sequence
    inputs: Sequence  # every node's inputs, one node after another
    arguments: set
    overrides: list  # (node name, op type, value)
    saved_gradients: dict  # of the top level: the graph's (see graphgrad.graph.functions.saved_gradients)
    node_inputs: Callable[[], Iterable]  # (node name, its inputs) per node; read when an input is missing
    node_defs: Callable[..., Iterable]  # (op types=None) its NodeDefs, of those op types if given

    @cached_property
    def distinct_names(self) -> set:
        return set(self.names)

    @cached_property
    def unnamed_inputs(self) -> set:
        """The inputs that are not a node's name as they stand: ``name:1``, ``^name``,
        a function's arguments, or a name no node has."""
        if self.distinct_names.issuperset(self.inputs):  # the common case, without a set of inputs
            return set()
        return set(self.inputs) - self.distinct_names


def bodies_of(graph_def: Any, functions: bool = True) -> list[Body]:
    """The top level and (unless ``functions`` is false) the function bodies of a GraphDef."""
    bodies = [nodes_body(None, graph_def.node, set(), saved_gradients(graph_def))]
    if functions:
        bodies += [
            nodes_body(f.signature.name, f.node_def, {arg.name for arg in f.signature.input_arg})
            for f in graph_def.library.function
        ]
    return bodies


def nodes_body(function: str | None, nodes: Sequence, arguments: set, saved: dict | None = None) -> Body:
    """A :class:`Body` of NodeDefs."""
    return Body(
        function=function,
        names=[node.name for node in nodes],
        ops=[node.op for node in nodes],
        inputs=[reference for node in nodes for reference in node.input],
        arguments=arguments,
        overrides=[(node.name, node.op, override_of(node)) for node in nodes if ATTR in node.attr],
        saved_gradients=saved or {},
        node_inputs=lambda: ((node.name, node.input) for node in nodes),
        node_defs=lambda op_types=None: nodes if op_types is None else [n for n in nodes if n.op in op_types],
    )
