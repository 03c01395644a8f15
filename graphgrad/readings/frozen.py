"""A frozen model read as stored: the scan of its large nodes
(:mod:`graphgrad.readings.scan`) for rules, summaries and ``diff``, and its
skeleton (:mod:`graphgrad.readings.skeleton`) for edits of its structure. Only
what a job looks at is decoded; the constants are copied as ranges of the file."""

from collections.abc import Collection, Container
from typing import Any

from ..files.reading import SourceFile
from ..names import ADDS, ATTR_BYTES, SIGN
from .as_stored import AsStored
from .bodies import Body
from .protocol import BulkOverrides, Encodings, EditScope, NodeReference, SignList
from .scan import Library, ScannedGraph, node_headers, override_at


class FrozenReading(AsStored):
    """A :class:`~graphgrad.readings.protocol.Reading` of a :class:`ScannedGraph`."""

    def __init__(self, graph: ScannedGraph, library: Library, path: str, file: SourceFile):
        super().__init__(library, path, file)
        self.graph = graph
        self._skeleton: Any = None  # the Skeleton that scopes() edits

    def _top_level(self, op_types: Container[str] | None) -> list[NodeReference]:
        return self.graph.candidates(op_types)

    def _top_level_node_defs(self, op_types: Container[str]) -> list:
        return [node.node for node in self.graph.candidates(op_types)]

    def bulk_overrides(self, op_types: Collection[str], functions: bool) -> BulkOverrides | None:
        return None  # a frozen model has few nodes: one object each costs nothing

    def sign_lists(self) -> tuple[list[SignList], list[str]]:
        signs, adds = self.graph.nodes_of_types(SIGN, ADDS)
        return [("", "", None, signs, adds), *self._body_sign_lists()], []

    def scopes(self, functions: bool = True) -> list[EditScope]:
        from .scope import scopes  # edits only: a rewrite does not pay for these imports
        from .skeleton import skeleton_of

        if self._skeleton is None:
            self._skeleton = skeleton_of(self.graph, self.library, self.path)
        return list(scopes(self._skeleton.model, functions))

    def bodies(self, functions: bool = True) -> list[tuple[str, list[Body]]]:
        """The top level's columns from each node's field headers: attribute values
        (the constants) are skipped."""
        graph = self.graph
        inputs_of, overrides = [], []
        for node in graph.nodes:
            inputs, attrs = node_headers(graph.data, *node.span)
            inputs_of.append(inputs)
            if ATTR_BYTES in attrs:
                overrides.append((node.name, node.op_type, override_at(graph.data, attrs[ATTR_BYTES])))
        names = [node.name for node in graph.nodes]
        return self._with_bodies(
            names, [node.op_type for node in graph.nodes], [name for inputs in inputs_of for name in inputs],
            overrides, lambda: zip(names, inputs_of),
            lambda op_types: [node.node for node in graph.nodes if node.op_type in op_types], functions)

    def stored_nodes(self) -> tuple[list, list, Encodings] | None:
        return self.graph.top_level()

    def rest(self) -> Any:
        return self.graph.rest()

    def _chunks(self) -> list:
        if self._skeleton is not None:
            return self._skeleton.chunks()
        return self.graph.chunks(self.library.changed_bytes())
