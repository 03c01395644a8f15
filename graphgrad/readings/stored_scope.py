"""The top level of many small nodes, edited as stored: a :class:`StoredScope`
indexes it from flat parses (names, op types, inputs: no object per node), makes
a node only when an edit asks for it, re-encodes only the nodes an edit changed,
appends what it adds to the stored encodings, and removes nodes from them.
"""

from bisect import bisect_left, bisect_right
from itertools import accumulate
from collections.abc import Container, Iterable
from typing import Any

from ..names import ATTR_BYTES, GROUP, SOURCE, TF1_LOOP_ENTERS
from .scope import INDEX_PARTS, IndexPart, Scope, name_scopes, runs_of
from .small_nodes import HeadGraph, HeadNode

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
    """The top level of a :class:`~graphgrad.readings.small_nodes.HeadGraph` as a Scope.

    Once a commit has appended nodes, the stored graph holds them but the columns
    do not: editing it again means opening the output.
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
            raise RuntimeError("a stored scope is edited again after nodes were added: open the output to edit it")
        if "_names" not in self.__dict__:  # the columns, read once and then kept up to date
            names, ops, inputs, counts = self.stored.columns()
            self._names, self._ops, self._inputs = names, ops, inputs
            self._starts = [0, *accumulate(counts)]  # node i's inputs: inputs[starts[i]:starts[i + 1]]
        names = self._names
        self._loop_nodes = None
        self._by_name: dict = dict(zip(names, range(len(names))))  # name -> index, or an AddedNode
        if len(self._by_name) != len(names):
            self._refuse_duplicate_names(names)
        self._name_scopes = name_scopes(names)
        self._uses = _Uses(names, self._inputs, self._starts)
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
        """Remove the stored nodes named ``names`` (nodes added since the last commit
        are committed first, and stay), from the encodings and the columns."""
        self.commit()
        doomed = [index for index, name in enumerate(self._names) if name in names]
        self.stored.remove_nodes(runs_of(doomed))
        starts, inputs = self._starts, self._inputs
        for start, stop in reversed(runs_of(doomed)):
            del self._names[start:stop], self._ops[start:stop], inputs[starts[start]:starts[stop]]
        counts = [starts[index + 1] - starts[index] for index in range(len(starts) - 1)]
        removed = set(doomed)
        self._starts = [0, *accumulate(count for index, count in enumerate(counts) if index not in removed)]
        self._made = {}
        for part in INDEX_PARTS:  # made again from the columns when next read
            self.__dict__.pop(part, None)

    def _node_at(self, index: int) -> HeadNode:
        node = self._made.get(index)
        if node is None:
            names = self.__dict__.get("_names")  # the columns, if an edit already needed the index
            node = self._made[index] = (self.stored.node_at(index) if names is None
                                        else self.stored.node_at(index, names[index], self._ops[index]))
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
        self._spent = self._spent or bool(self._added)
        super().commit()
