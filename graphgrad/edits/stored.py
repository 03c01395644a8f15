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
from ..files.wireformat import NotApplicable
from ..names import ATTR_BYTES, TF1_LOOP_ENTERS
from .nodes import GROUP, SOURCE, IndexPart, Scope, name_scopes, scopes

_GROUP_BYTES = GROUP.encode()


class _Uses(dict):
    """``producer name -> {(consumer name, input position)}`` as Scope keeps it, each
    set made when first asked for, from the inputs sorted by producer: one sort in C
    instead of a set per node (most of them never asked for)."""

    def __init__(self, names: list, inputs: list, starts: list):
        super().__init__()
        producers = [ref.partition(":")[0] for ref in inputs]  # a control input's is "^name", never asked for
        self._order = sorted(range(len(producers)), key=producers.__getitem__)
        self._in_order = [producers[position] for position in self._order]  # a producer's run found by bisection
        self._names, self._starts = names, starts
        self._added: dict = {}  # producer -> uses added before its set was made

    def add(self, producer: str, use: tuple) -> None:
        """Record a new use, without making the producer's set yet."""
        if producer in self:
            self[producer].add(use)
        else:
            self._added.setdefault(producer, []).append(use)

    def __missing__(self, producer: str) -> set:
        uses = set(self._added.pop(producer, ()))
        if producer[:1] not in ("", "^"):  # "^...": control inputs, which are no data uses of any node
            in_order, order, starts = self._in_order, self._order, self._starts
            sorted_position = bisect_left(in_order, producer)
            while sorted_position < len(in_order) and in_order[sorted_position] == producer:
                position = order[sorted_position]
                owner = bisect_right(starts, position) - 1
                uses.add((self._names[owner], position - starts[owner]))
                sorted_position += 1
        self[producer] = uses
        return uses


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
        self._edited: set = set()  # indices of the nodes whose inputs an edit changed (in the columns)
        self._spent = False

    # The columns, made with the rest of the index.
    _names = IndexPart()
    _ops = IndexPart()
    _inputs = IndexPart()
    _starts = IndexPart()

    def _index(self):
        if self._spent:
            raise RuntimeError("a stored scope is edited once: open the output to edit it again")
        names, ops, inputs, counts = self.stored.columns()
        self._names, self._ops, self._inputs = names, ops, inputs
        self._starts = [0, *accumulate(counts)]  # node i's inputs: inputs[starts[i]:starts[i + 1]]
        self._loop_nodes = None
        self._by_name: dict = dict(zip(names, range(len(names))))  # name -> index, or an AddedNode
        if len(self._by_name) != len(names):
            self._refuse_duplicate_names(names)
        self._name_scopes = name_scopes(names)
        self._uses = _Uses(names, inputs, self._starts)
        self._stand_ins = {self.canonical(node.attr[SOURCE].s.decode()): node for node in self.marked(SOURCE)}
        self._groups = {}

    def marked(self, key: str) -> list:
        if not self.stored.may_have_attrs([key.encode()]):  # a byte search: most graphs have no marker
            return []
        return [node for node in map(self._node_at, self.stored.holding(key.encode())) if key in node.attr]

    def overriding(self) -> list[tuple[Any, Any]]:
        if not self.stored.has_overrides:
            return []
        nodes = map(self._node_at, self.stored.holding(ATTR_BYTES))  # one node object per index, as edits need
        return [(node, node) for node in nodes if node.override is not None]  # a HeadNode is its own reference

    def remove(self, names: set) -> None:
        raise RuntimeError("a stored scope removes no node: open_for_edits(removes=True) reads such graphs otherwise")

    def _node_at(self, index: int) -> HeadNode:
        node = self._made.get(index)
        if node is None:
            node = self._made[index] = self.stored.node_at(index, self._names[index], self._ops[index])
            if index in self._edited:
                node.input[:] = self._inputs[self._starts[index]:self._starts[index + 1]]
        return node

    def node(self, name: str) -> Any:
        found = self._by_name.get(name)
        if isinstance(found, int):
            return self._node_at(found)
        return found if found is not None else super().node(name)

    def _input(self, consumer: str | None, position: Any) -> str:
        index = self._by_name.get(consumer)
        if isinstance(index, int):  # the columns hold a stored node's inputs, edits included
            return self._inputs[self._starts[index] + position]
        return super()._input(consumer, position)

    def data_inputs(self, node: Any) -> list[str]:
        index = self._by_name.get(node.name)
        if not isinstance(index, int):
            return super().data_inputs(node)
        starts = self._starts  # the columns hold a stored node's inputs, edits included
        return [ref for ref in self._inputs[starts[index]:starts[index + 1]] if ref[:1] != "^"]

    def candidates(self, op_types: Container[str] | None = None) -> list[tuple[Any, Any]]:
        indices: Iterable[int] = range(len(self._names)) if op_types is None else [
            index for index, op in enumerate(self._ops) if op in op_types
        ]
        nodes = [self._node_at(index) for index in indices]
        if self.stored.may_have_attrs([_GROUP_BYTES]):
            nodes = [node for node in nodes if GROUP not in node.attr]
        return [(node, node) for node in nodes]  # a HeadNode is its own reference

    def _enter_names(self) -> list[str]:
        if b"Enter" not in self.stored.data:  # a byte search (in C): most graphs have no TF1 loop
            return []
        return [name for name, op in zip(self._names, self._ops) if op in TF1_LOOP_ENTERS]

    def _set_input(self, consumer: str, position: int, ref: str) -> None:
        index = self._by_name.get(consumer)
        if not isinstance(index, int):
            return super()._set_input(consumer, position, ref)
        self._inputs[self._starts[index] + position] = ref  # the columns hold a stored node's inputs
        self._edited.add(index)
        made = self._made.get(index)
        if made is not None:
            made.input[position] = ref

    def dtype_of(self, ref: str) -> int | None:
        name, _, index = ref.partition(":")  # a top level: node or node:index
        found = self._by_name.get(name)
        if isinstance(found, int) and (not index or index.isdigit()):  # from its encoded attribute entries
            return self.stored.dtype_at(found, int(index or 0))  # (edits change no dtype attribute)
        return super().dtype_of(ref)

    def _append(self, fields: list[bytes]) -> None:
        self.stored.append_nodes(fields)  # kept apart to the write: joined, they would be copied once more

    def commit(self) -> None:
        for index in self._edited:  # written anew, inputs from the columns
            made = self._made.get(index)
            if made is not None:
                made.dirty = True  # HeadGraph.chunks writes it
            else:
                self.stored.set_inputs(index, self._inputs[self._starts[index]:self._starts[index + 1]])
        self._edited = set()
        super().commit()
        self._spent = True


@dataclass
class Editable:
    """A binary GraphDef opened for node-level edits: its scopes (top level first,
    then function bodies), and ``chunks()``, the edited graph as the chunks
    :func:`graphgrad.files.io.write_chunks` takes."""

    scopes: list
    chunks: Callable[[], list]


def open_for_edits(data: Any, whole: Callable[[], bytes], path: str, functions: bool = True,
                   removes: bool = False) -> Editable:
    """The :class:`Editable` of a binary GraphDef (``data`` and ``whole`` as
    :func:`graphgrad.files.stored.open_stored` takes them; ``path`` names it): a
    frozen model's skeleton, or many small nodes as stored. Raises
    :class:`NotApplicable` unless every reading takes the bytes for a graph, and
    for an edit that ``removes`` graphgrad's nodes from many small nodes: a
    :class:`StoredScope` removes none (undoing 20,000 surrogates there measured
    slower than the full parse: each of their 200,000 nodes is decoded to read its
    group)."""
    graph = open_stored(data, whole)
    if isinstance(graph, ScannedGraph):
        skeleton = skeleton_of(graph, path)
        return Editable(scopes(skeleton.model, functions), skeleton.chunks)
    if removes and graph.may_have_attrs([_GROUP_BYTES]):
        raise NotApplicable("graphgrad's nodes among many small nodes are removed on the full parse")
    bodies = [Scope("", function) for function in graph.library.functions()] if functions else []
    return Editable([StoredScope(graph)] + bodies, lambda: graph.chunks(graph.library.changed_bytes()))
