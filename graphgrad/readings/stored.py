"""Many small nodes read as stored: the cut-down parses of
:mod:`graphgrad.readings.small_nodes` for rules and summaries, a
:class:`~graphgrad.readings.stored_scope.StoredScope` for edits of the structure.
No NodeDef of the top level is built; a node's encoding is made anew only where
a job changed it."""

from collections.abc import Collection, Container
from typing import Any

from ..files.reading import SourceFile
from ..files.protos import GraphDef, NodeDef
from ..names import ADDS, SIGN
from .as_stored import AsStored
from .bodies import Body
from .protocol import EditScope, Encodings, NodeReference, SignList
from .scan import Library
from .small_nodes import HeadGraph

# Above this many top-level nodes, larq's shifted Signs are not looked for here:
# reading every Add of a 100k-node graph would cost a third of the rewrite (and
# one protobuf arena per node). Binarized nets are far smaller.
SIGN_TRAP_NODE_LIMIT = 20_000


class BulkHeads:
    """The top-level nodes of some op types, as columns
    (:class:`~graphgrad.readings.protocol.BulkOverrides`)."""

    def __init__(self, graph: HeadGraph, op_types: Collection[str]):
        self._graph = graph
        self._indices, self.names, self.ops = graph.select(op_types)

    def apply(self, values: dict[str, str]) -> None:
        self._graph.add_overrides(self._indices, self.ops, values)


class StoredReading(AsStored):
    """A :class:`~graphgrad.readings.protocol.Reading` of a :class:`HeadGraph`."""

    def __init__(self, graph: HeadGraph, library: Library, path: str, file: SourceFile):
        super().__init__(library, path, file)
        self.graph = graph

    def _top_level(self, op_types: Container[str] | None) -> list[NodeReference]:
        return self.graph.candidates(op_types)

    def _top_level_node_defs(self, op_types: Container[str]) -> list:
        return [NodeDef.FromString(node.head.SerializeToString()) for node in self.graph.candidates(op_types)]

    def bulk_overrides(self, op_types: Collection[str], functions: bool) -> BulkHeads | None:
        if self.graph.has_overrides or (functions and self.library.function_nodes(op_types)):
            return None  # an override to weigh, or a body to rewrite: node by node
        return BulkHeads(self.graph, op_types)

    def sign_lists(self) -> tuple[list[SignList], list[str]]:
        if len(self.graph.encoded.node) > SIGN_TRAP_NODE_LIMIT:
            return self._body_sign_lists(), [
                f"larq-style Signs of Sign(x) + c were not looked for: the graph has over {SIGN_TRAP_NODE_LIMIT} "
                "nodes; graphgrad check looks for them in any graph"]
        signs, adds = self.graph.nodes_of_types(SIGN, ADDS)
        return [("", "", None, signs, adds), *self._body_sign_lists()], []

    def scopes(self, functions: bool = True) -> list[EditScope]:
        from .scope import Scope  # edits only: a rewrite does not pay for these imports
        from .stored_scope import StoredScope

        bodies: list[EditScope] = [Scope("", function) for function in self.library.functions()] if functions else []
        return [StoredScope(self.graph), *bodies]

    def bodies(self, functions: bool = True) -> list[tuple[str, list[Body]]]:
        graph = self.graph
        names, ops, inputs, overrides = graph.summary_columns()
        return self._with_bodies(
            names, ops, inputs, overrides, graph.node_inputs,
            lambda op_types: [node for node in GraphDef.FromString(graph.data).node if node.op in op_types], functions)

    def stored_nodes(self) -> tuple[list, list, Encodings] | None:
        return self.graph.top_level()

    def rest(self) -> Any:
        return self.graph.rest()

    def _chunks(self) -> list:
        return self.graph.chunks(self.library.changed_bytes())
