"""Node-level edits of a binary GraphDef as stored, for every reading: the
:class:`~graphgrad.edits.nodes.Scope`\\ s that ``insert``, ``bypass`` and
``--embed`` are written against, and the output to write back.

:func:`open_for_edits` is the one factory. A frozen model is edited on its
skeleton (:mod:`graphgrad.files.skeleton`: no constant is read). Many small nodes
are edited as stored: a :class:`StoredScope` indexes the top level from flat
parses (names, op types, inputs: no object per node), makes a node only when an
edit asks for it, re-encodes only the nodes an edit changed, and appends what it
adds to the stored encodings. Function bodies are parsed scopes of the library.
Anything else raises :class:`~graphgrad.files.wireformat.NotApplicable`, and the
caller parses the file whole (:func:`graphgrad.jobs.api._change_graphdef_file`).
"""

from bisect import bisect_left, bisect_right
from itertools import accumulate
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass
from typing import Any

from ..files.scan import ScannedGraph
from ..files.skeleton import skeleton_of
from ..files.small_nodes import HeadGraph, HeadNode
from ..files.stored import open_stored
from .nodes import GROUP, SOURCE, Scope, name_scopes, scopes

_GROUP_BYTES, _SOURCE_BYTES = GROUP.encode(), SOURCE.encode()


_COLUMNS = ("_names", "_ops", "_inputs", "_starts")


class _Uses(dict):
    """``producer name -> {(consumer name, input position)}`` as Scope keeps it, each
    set made when first asked for, from the inputs sorted by producer: one sort in C
    instead of a set per node (most of them never asked for)."""

    def __init__(self, names: list, inputs: list, starts: list):
        super().__init__()
        producers = [ref.partition(":")[0] if ref[:1] != "^" else "" for ref in inputs]  # "": a control input
        self._order = sorted(range(len(producers)), key=producers.__getitem__)
        self._producers = [producers[position] for position in self._order]
        self._names, self._starts = names, starts

    def __missing__(self, producer: str) -> set:
        low, high = bisect_left(self._producers, producer), bisect_right(self._producers, producer)
        uses = set()
        for position in self._order[low:high]:
            owner = bisect_right(self._starts, position) - 1
            uses.add((self._names[owner], position - self._starts[owner]))
        self[producer] = uses
        return uses

    def get(self, producer: str, default: Any = None) -> Any:
        return self[producer] if producer else default


class StoredScope(Scope):
    """The top level of a :class:`~graphgrad.files.small_nodes.HeadGraph` as a Scope.

    Edited once: after :meth:`commit` the stored graph holds the edit, and reading
    it again means opening the output.
    """

    def __init__(self, graph: HeadGraph):
        super().__init__("", graph.encoded)  # the added nodes join the stored encodings
        self.stored = graph
        self.nodes = None  # no NodeDefs: the index below comes from the columns
        self._made: dict = {}  # index -> HeadNode
        self._spent = False

    def __getattr__(self, name):
        if name in _COLUMNS:  # made with the index
            self._index()
            return getattr(self, name)
        return super().__getattr__(name)

    def _index(self):
        if self._spent:
            raise RuntimeError("a stored scope is edited once: open the output to edit it again")
        names, ops, inputs, counts = self.stored.columns()
        self._names, self._ops, self._inputs = names, ops, inputs
        self._starts = [0, *accumulate(counts)]  # node i's inputs: inputs[starts[i]:starts[i + 1]]
        self._loop_nodes = None
        self._by_name: dict = dict(zip(names, range(len(names))))  # name -> index, or an AddedNode
        self._name_scopes = name_scopes(names)
        self._uses = _Uses(names, inputs, self._starts)
        self._stand_ins = {}
        for index in self.stored.holding(_SOURCE_BYTES) if self.stored.may_have_attrs([_SOURCE_BYTES]) else ():
            node = self._node_at(index)
            if SOURCE in node.attr:
                self._stand_ins[self.canonical(node.attr[SOURCE].s.decode())] = node
        self._groups = {}

    def _node_at(self, index: int) -> HeadNode:
        node = self._made.get(index)
        if node is None:
            node = self._made[index] = self.stored.node_at(index)
        return node

    def node(self, name: str) -> Any:
        found = self._by_name.get(name)
        if isinstance(found, int):
            return self._node_at(found)
        return found if found is not None else super().node(name)

    def _input(self, consumer: str | None, position: Any) -> str:
        index = self._by_name.get(consumer)
        if isinstance(index, int) and index not in self._made:  # as stored: from the columns
            return self._inputs[self._starts[index] + position]
        return super()._input(consumer, position)

    def candidates(self, op_types: Container[str] | None = None) -> list[tuple[Any, Any]]:
        indices: Iterable[int] = range(len(self._names)) if op_types is None else [
            index for index, op in enumerate(self._ops) if op in op_types
        ]
        nodes = [self._node_at(index) for index in indices]
        if self.stored.may_have_attrs([_GROUP_BYTES]):
            nodes = [node for node in nodes if GROUP not in node.attr]
        return [(node, node) for node in nodes]  # a HeadNode is its own reference

    def _enter_names(self) -> list[str]:
        return [name for name, op in zip(self._names, self._ops) if op in ("Enter", "RefEnter")]

    def _changed(self, node: Any) -> None:
        if isinstance(node, HeadNode):
            node.dirty = True

    def _node_holder(self) -> Any:
        return self.stored.encoded

    def commit(self) -> None:
        super().commit()
        self._spent = True


@dataclass
class Editable:
    """A binary GraphDef opened for node-level edits: its scopes (top level first,
    then function bodies), and ``chunks()``, the edited graph as the chunks
    :func:`graphgrad.files.io.write_chunks` takes."""

    scopes: list
    chunks: Callable[[], list]


def open_for_edits(data: Any, whole: Callable[[], bytes], path: str, functions: bool = True) -> Editable:
    """The :class:`Editable` of a binary GraphDef (``data`` and ``whole`` as
    :func:`graphgrad.files.stored.open_stored` takes them; ``path`` names it): a
    frozen model's skeleton, or many small nodes as stored. Raises
    :class:`NotApplicable` unless every reading takes the bytes for a graph."""
    graph = open_stored(data, whole)
    if isinstance(graph, ScannedGraph):
        skeleton = skeleton_of(graph, path)
        return Editable(scopes(skeleton.model, functions), skeleton.chunks)
    bodies = [Scope("", function) for function in graph.library.functions()] if functions else []
    return Editable([StoredScope(graph)] + bodies, lambda: graph.chunks(graph.library.changed_bytes()))
