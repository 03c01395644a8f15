"""What the two readings of a binary GraphDef as stored share: the function
library (parsed only when a job reaches into it), the saved gradients, the calls
into overrides, the function bodies' lists, and the write, around what no edit
changed, from the file they read."""

from abc import ABC, abstractmethod
from collections.abc import Callable, Container
from typing import Any

from ..files.reading import SourceFile, model_from_bytes
from ..files.writing import write_chunks
from ..graph.functions import calls_into_overrides, functions_with_overrides, saved_gradients
from ..graph.model import BINARY, GRAPHDEF, Model, scopes_of
from ..names import CALL_OPS
from .bodies import Body, bodies_of
from .protocol import NodeReference, SignatureRow, SignList
from .scan import Library


class AsStored(ABC):
    """The base of :class:`~graphgrad.readings.frozen.FrozenReading` and
    :class:`~graphgrad.readings.stored.StoredReading`: a lone binary GraphDef read
    from ``file`` (open while the job runs), its library as ``library``."""

    kind, encoding = GRAPHDEF, BINARY

    def __init__(self, library: Library, path: str, file: SourceFile):
        self.library, self.path, self._file = library, path, file

    def candidates(self, op_types: Container[str] | None = None, functions: bool = True) -> list[NodeReference]:
        return self._top_level(op_types) + (self.library.function_nodes(op_types) if functions else [])

    def saved_gradients(self) -> dict[tuple[str, str], str]:
        return {("", value): function for value, function in saved_gradients(self.library.graph()).items()}

    def unrouted_calls(self) -> list[str]:
        bodies = {function.signature.name: function.node_def for function in self.library.functions()}
        if not functions_with_overrides(bodies):  # before the top level is looked at
            return []
        return calls_into_overrides(self._top_level_node_defs(set(CALL_OPS).union(bodies)), bodies)

    def _body_sign_lists(self) -> list[SignList]:
        return [("", prefix, nodes, None, None) for prefix, nodes in scopes_of(self.library.graph())[1:]]

    def _with_bodies(self, names: list, ops: list, inputs: list, overrides: list, node_inputs: Callable,
                     node_defs: Callable, functions: bool) -> list[tuple[str, list[Body]]]:
        """The summary's columns: the top level's as given, then (if ``functions``) the bodies'."""
        library = self.library.graph() if self.library.payloads else None  # parsed once, for both below
        saved = saved_gradients(library) if library is not None else {}
        top = Body(None, names, ops, inputs, set(), overrides, saved, node_inputs, node_defs)
        return [("", [top] + (bodies_of(library)[1:] if functions and library is not None else []))]

    def signatures(self) -> list[SignatureRow]:
        return []

    def library_graph(self) -> Any:
        return self.library.graph()

    def model(self) -> Model:
        return model_from_bytes(self._file.read(0, self._file.size), self.path, GRAPHDEF)

    def write(self, target: str, encoding: str | None, sweep_temporaries: bool) -> bool:
        assert encoding in (None, BINARY), "a text output is written from the parse: open it with Needs(parse=True)"
        return write_chunks(target, self._chunks(), self._file, sweep_temporaries)

    @abstractmethod
    def _top_level(self, op_types: Container[str] | None) -> list[NodeReference]:
        """The top-level nodes as rules see them (of ``op_types`` only, if given)."""

    @abstractmethod
    def _top_level_node_defs(self, op_types: Container[str]) -> list:
        """The NodeDefs of the top-level nodes of ``op_types``."""

    @abstractmethod
    def _chunks(self) -> list:
        """The output as :func:`graphgrad.files.writing.write_chunks` takes it."""
