"""The full parse as a reading: a loaded :class:`~graphgrad.graph.model.Model`
(any kind: GraphDef, MetaGraphDef, SavedModel, binary or text), every node a
NodeDef. The reference every other reading is tested against."""

from collections.abc import Collection, Container
from typing import Any

from ..files.writing import write_model
from ..graph.functions import graph_calls_into_overrides, saved_gradients
from ..graph.model import Model, iter_nodes, meta_graphs_of, scopes_of, signatures_of
from .bodies import Body, bodies_of
from .protocol import BulkOverrides, Encodings, EditScope, NodeReference, SignatureRow, SignList


class ParsedReading:
    """A :class:`~graphgrad.readings.protocol.Reading` of a parsed model (edited in place)."""

    def __init__(self, model: Model):
        self._model = model
        self.path, self.kind, self.encoding = model.path, model.kind, model.encoding

    def candidates(self, op_types: Container[str] | None = None, functions: bool = True) -> list[NodeReference]:
        return list(iter_nodes(self._model, functions, op_types))

    def bulk_overrides(self, op_types: Collection[str], functions: bool) -> BulkOverrides | None:
        return None  # a NodeDef per node is already made: rules set overrides on them

    def saved_gradients(self) -> dict[tuple[str, str], str]:
        return {(label, value): function for label, graph_def in self._model.graphs()
                for value, function in saved_gradients(graph_def).items()}

    def unrouted_calls(self) -> list[str]:
        return [f"{label}: {name}" if label else name
                for label, graph_def in self._model.graphs() for name in graph_calls_into_overrides(graph_def)]

    def sign_lists(self) -> tuple[list[SignList], list[str]]:
        return [(label, prefix, nodes, None, None) for label, graph_def in self._model.graphs()
                for prefix, nodes in scopes_of(graph_def)], []

    def scopes(self, functions: bool = True) -> list[EditScope]:
        from .scope import scopes  # edits only: a rewrite does not pay for its imports

        return list(scopes(self._model, functions))

    def bodies(self, functions: bool = True) -> list[tuple[str, list[Body]]]:
        return [(label, bodies_of(graph_def, functions)) for label, graph_def in self._model.graphs()]

    def signatures(self) -> list[SignatureRow]:
        return [(label, key, dict(inputs), dict(outputs))
                for label, meta in meta_graphs_of(self._model.message, self._model.kind)
                for key, inputs, outputs in signatures_of(meta)]

    def stored_nodes(self) -> tuple[list, list, Encodings] | None:
        return None

    def library_graph(self) -> Any:
        raise TypeError("a parsed model has its library in each graph: read model()")

    def rest(self) -> Any:
        raise TypeError("a parsed model is compared whole: read model()")

    def model(self) -> Model:
        return self._model

    def write(self, target: str, encoding: str | None, sweep_temporaries: bool) -> bool:
        return write_model(self._model, target, encoding, sweep_temporaries)
