"""Binary GraphDefs of many small nodes, parsed with cut-down schemas.

A full parse builds every node's attribute map, and then Python touches each node.
Rules and summaries need far less, so protobuf (in C) parses the same bytes with
schemas that declare only that:

- ``GraphNodes``, the output: each node as its undecoded encoding, so every node
  a rule does not change is written back byte for byte. Everything else of the
  GraphDef (versions, debug info) stays a protobuf *unknown field*, kept as its
  bytes and written back after the nodes and the library.
- For the commonest rewrite (plain op-type rules, no override in the graph yet),
  a selected node gets its ``_gradient_op_type`` entry appended to its encoding (a
  later field merges into the message as if written in place). Op types come
  from ``GraphOps`` (below); no Python object per node.
- ``GraphHeads``, for every other rewrite: per node its name, op, inputs, device,
  and its attribute map entries as undecoded bytes, every other field of it an
  unknown field. A changed node is re-encoded from it: the declared fields in
  number order, its new ``_gradient_op_type`` entry the last attribute entry,
  then the rest.
- ``GraphFlat``, for summaries: ``node`` declared as one singular message whose
  fields are all repeated. Protobuf merges repeated occurrences of a singular
  message field, so the parse concatenates every node's name, op and inputs
  into three flat lists, without one Python object per node.
  (A node with neither name nor op, which TensorFlow refuses anyway, would go
  uncounted; a node with one of the two makes the lists disagree, and its
  columns are then read node by node from ``GraphHeads``.) ``GraphOps`` is the
  same with names and op types only. The lists line up with the nodes when their
  lengths agree; only a node missing its op *and* another holding two op fields
  (which no serializer writes, and TensorFlow refuses) would shift them unseen.
"""

from collections.abc import Collection, Container, Iterable, Iterator
from functools import cached_property, lru_cache
from itertools import compress
from typing import Any

from google.protobuf.message import DecodeError

from ..graph.model import dtype_in
from ..names import ATTR, ATTR_BYTES
from ..files.plausible import SAMPLE
from ..files.protos import AttrValue, GraphDef
from .errors import changed_while_read
from .wire import fields

# (message name, [(field name, number, repeated, type)]); a type that is not a
# scalar name is a message of this file.
_SCHEMA = [
    ("AttrEntry", [("key", 1, False, "string"), ("value", 2, False, "bytes")]),
    ("NodeHead", [
        ("name", 1, False, "string"), ("op", 2, False, "string"), ("input", 3, True, "string"),
        ("device", 4, False, "string"), ("attr", 5, True, "bytes"),
    ]),
    ("GraphHeads", [("node", 1, True, "NodeHead"), ("library", 2, True, "bytes")]),
    ("FlatNodes", [("name", 1, True, "string"), ("op", 2, True, "string"), ("input", 3, True, "string")]),
    ("GraphFlat", [("node", 1, False, "FlatNodes"), ("library", 2, True, "bytes")]),
    ("NamesAndOps", [("name", 1, True, "string"), ("op", 2, True, "string")]),
    ("GraphOps", [("node", 1, False, "NamesAndOps")]),
    ("GraphNodes", [("node", 1, True, "bytes"), ("library", 2, True, "bytes")]),  # undecoded
    ("NodeLinks", [("name", 1, False, "string"), ("op", 2, False, "string"), ("input", 3, True, "string")]),
    ("NodeName", [("name", 1, False, "string"), ("op", 2, False, "string")]),
    ("GraphNames", [("node", 1, True, "NodeName")]),
]


@lru_cache(maxsize=None)
def message_class(name: str) -> Any:
    """The message class ``name`` of the cut-down schema."""
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(_pool().FindMessageTypeByName(f"graphgrad.{name}"))


@lru_cache(maxsize=None)
def _pool():
    """The cut-down schema, declared once, in a descriptor pool of its own."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    field_type = descriptor_pb2.FieldDescriptorProto
    scalars = {"string": field_type.TYPE_STRING, "bytes": field_type.TYPE_BYTES}
    proto = descriptor_pb2.FileDescriptorProto(name="graphgrad/partial.proto", package="graphgrad", syntax="proto3")
    for message_name, declared in _SCHEMA:
        message = proto.message_type.add(name=message_name)
        for field_name, number, repeated, kind in declared:
            label = field_type.LABEL_REPEATED if repeated else field_type.LABEL_OPTIONAL
            if kind in scalars:
                message.field.add(name=field_name, number=number, label=label, type=scalars[kind])
            else:
                message.field.add(name=field_name, number=number, label=label, type=field_type.TYPE_MESSAGE,
                                  type_name=f".graphgrad.{kind}")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return pool


def parse(name: str, data: Any) -> Any:
    """``data`` (bytes the reading's validity check passed) parsed as message ``name``."""
    try:
        return message_class(name).FromString(data)
    except DecodeError:
        raise changed_while_read("the graph") from None


_UNREAD = object()  # HeadNode's override before it is read


class HeadNode:
    """A top-level node of a :class:`HeadGraph`, as rules see it, and read as a
    NodeDef is (``op``, ``input``, ``device``, ``attr``) by edits of its inputs
    (set ``dirty`` then); its attributes are decoded when first asked for."""

    __slots__ = ("name", "op_type", "head", "index", "dirty", "_maybe_override", "_attr", "_override")
    graph, function = "", None  # the top level of a lone GraphDef

    def __init__(self, head, op_type: str, index: int, maybe_override: bool, name: str | None = None):
        """``name``: the node's name if at hand (reading it from ``head`` decodes it)."""
        self.name, self.op_type = head.name if name is None else name, op_type
        self.head, self.index, self.dirty = head, index, False
        self._maybe_override = maybe_override
        self._attr: dict | None = None
        self._override: Any = _UNREAD

    @property
    def op(self) -> str:
        return self.op_type

    @property
    def input(self) -> Any:
        return self.head.input

    @property
    def device(self) -> str:
        return self.head.device

    @property
    def attr(self) -> dict:
        """The attributes as ``{key: AttrValue}``: read them, never change them (the
        values are shared between nodes); :meth:`set_override` edits the node."""
        if self._attr is None:
            self._attr = dict(filter(None, map(_attr_entry, self.head.attr)))  # the last entry of a key wins
        return self._attr

    @property
    def override(self) -> str | None:
        if self._override is _UNREAD:  # read once: rules and reset ask more than once
            self._override = _head_override(self.head) if self._maybe_override else None
        return self._override

    def set_override(self, value: str | None) -> None:
        if self._maybe_override:
            entries = self.head.attr
            for index in reversed(range(len(entries))):
                if ATTR_BYTES in entries[index] and _override_in(entries[index]) is not None:
                    del entries[index]
        if value is not None:
            self.head.MergeFromString(_attr_field(value))  # one more entry, as if read from the wire
        self.dirty, self._attr, self._override = True, None, value


def _head_override(head) -> str | None:
    """The ``_gradient_op_type`` of a ``NodeHead``, or None."""
    value = None
    for raw in head.attr:  # the last entry wins, as when a map is parsed
        found = _override_in(raw) if ATTR_BYTES in raw else None  # a byte search spares the rest
        if found is not None:
            value = found
    return value


@lru_cache(maxsize=4096)
def _dtype_of_entries(entries: tuple, output: int) -> int | None:
    return dtype_in(dict(filter(None, map(_attr_entry, entries))), output)


@lru_cache(maxsize=4096)  # a graph repeats a few entries thousands of times (T: float)
def _attr_entry(raw: bytes) -> tuple[str, Any] | None:
    """``(key, AttrValue)`` of an undecoded map entry; None for an entry that protobuf
    keeps out of the map (see :func:`map_entry_known`)."""
    if not map_entry_known(raw):
        return None
    entry = parse("AttrEntry", raw)
    try:
        return entry.key, AttrValue.FromString(entry.value)
    except DecodeError:
        raise changed_while_read("an attribute") from None


@lru_cache(maxsize=256)  # a rewritten graph repeats a few entries thousands of times
def _override_in(raw: bytes) -> str | None:
    """The override the map entry ``raw`` sets, if its key is ``_gradient_op_type``; else None."""
    if not map_entry_known(raw):
        return None
    entry = parse("AttrEntry", raw)
    if entry.key != ATTR:
        return None
    return AttrValue.FromString(entry.value).s.decode("utf-8", "replace")


def map_entry_known(raw: bytes) -> bool:
    """Whether a map entry holds only its key and value fields: protobuf's parse keeps
    an entry with any other field out of the map (as an unknown field of the message),
    so every reading must."""
    return all(number in (1, 2) for number, *_ in fields(raw, 0, len(raw)))


@lru_cache(maxsize=64)
def _attr_field(value: str) -> bytes:
    """The encoded ``attr`` field that maps ``_gradient_op_type`` to ``value``."""
    entry = message_class("AttrEntry")(key=ATTR, value=AttrValue(s=value.encode("utf-8")).SerializeToString())
    return message_class("NodeHead")(attr=[entry.SerializeToString()]).SerializeToString()


class HeadGraph:
    """A binary GraphDef of small nodes, as node encodings (see the module
    docstring): :meth:`add_overrides` edits the encodings of nodes chosen by op
    type; :meth:`candidates` hands out nodes parsed as ``NodeHead``, and those
    changed replace their encodings in :meth:`chunks`."""

    def __init__(self, data: bytes):
        self.data = data
        # A byte search (in C): when the name occurs nowhere, no node's attributes need a look.
        self.has_overrides = ATTR_BYTES in data
        self._handed_out: list = []
        self._appended: list = []

    @cached_property
    def encoded(self) -> Any:
        return parse("GraphNodes", self.data)

    @cached_property
    def _heads(self):
        return parse("GraphHeads", self.data)

    @cached_property
    def _head_nodes(self) -> Any:
        return self._heads.node  # the container, looked up once

    def candidates(self, op_types: Container[str] | None = None) -> list:
        """The top-level nodes (of ``op_types`` only, if given)."""
        maybe, heads = self.has_overrides, self._heads.node
        if op_types is None:
            nodes = [HeadNode(head, head.op, index, maybe) for index, head in enumerate(heads)]
        else:
            nodes = [
                HeadNode(head, op, index, maybe) for index, head in enumerate(heads) if (op := head.op) in op_types
            ]
        self._handed_out += nodes
        return nodes

    def node_at(self, index: int, name: str | None = None, op_type: str | None = None) -> HeadNode:
        """The top-level node at ``index``, for edits: its changes are written back.
        ``name`` and ``op_type``, as the :meth:`columns` hold them, if at hand."""
        head = self._head_nodes[index]
        node = HeadNode(head, head.op if op_type is None else op_type, index, self.has_overrides, name)
        self._handed_out.append(node)
        return node

    def set_inputs(self, index: int, inputs: list) -> None:
        """Give the top-level node at ``index`` these inputs (its encoding is made anew)."""
        head = self._head_nodes[index]
        head.input[:] = inputs
        self.encoded.node[index] = head.SerializeToString()

    def dtype_at(self, index: int, output: int = 0) -> int | None:
        """The dtype of output ``output`` of the top-level node at ``index``, from its
        attribute entries (a few distinct lists of them in a whole graph: decoded once)."""
        # A slice copies the entries in one call; iterating the container costs one per entry.
        return _dtype_of_entries(tuple(self._head_nodes[index].attr[:]), output)

    def columns(self) -> tuple[list, list, list, list]:
        """``(names, op types, inputs, input counts)`` of the top-level nodes, the
        inputs of all nodes in one flat list, from flat parses (no object per node)."""
        flat = parse("GraphFlat", self.data).node
        names, ops, inputs = flat.name[:], flat.op[:], flat.input[:]  # lists, each copied in one call
        counts = [len(head.input) for head in self._heads.node]
        if not len(names) == len(ops) == len(counts) or sum(counts) != len(inputs):
            heads = self._heads.node
            names, ops, inputs = [head.name for head in heads], [head.op for head in heads], [
                ref for head in heads for ref in head.input]
        return names, ops, inputs, counts

    def holding(self, key: bytes) -> list[int]:
        """The indices of the top-level nodes whose encodings hold ``key`` (a byte search)."""
        return [index for index, encoded in enumerate(self.encoded.node) if key in encoded]

    def sample(self) -> list:
        """``(name, op)`` of the first nodes, for :func:`graphgrad.files.plausible.plausible`:
        parsed from the bytes up to the end of the ``SAMPLE``-th top-level field."""
        end = 0
        for count, (_, _, _, _, end) in enumerate(fields(self.data, 0, len(self.data)), 1):
            if count == SAMPLE:
                break
        return [(node.name, node.op) for node in parse("GraphNames", self.data[:end]).node[:SAMPLE]]

    def may_have_attrs(self, keys: Iterable[bytes]) -> bool:
        """Whether a top-level node may have an attribute named by one of ``keys``
        (bytes): a byte search, so True can also mean the name occurs elsewhere."""
        return any(key in self.data for key in keys)

    def overriding(self) -> list:
        """The top-level nodes that carry an override (only the nodes whose bytes
        hold the attribute's name are parsed)."""
        if not self.has_overrides:
            return []
        heads = self._heads.node
        hits = [index for index, encoded in enumerate(self.encoded.node) if ATTR_BYTES in encoded]
        nodes = [HeadNode(heads[index], heads[index].op, index, True) for index in hits]
        self._handed_out += nodes
        return [node for node in nodes if node.override is not None]

    def select(self, op_types: Collection[str]) -> tuple[list, list, list]:
        """``(indices, names, op types)`` of the top-level nodes whose op type is in
        ``op_types``, without an object per node: the op types come from one flat parse."""
        names, ops = self._names_and_ops()
        indices = list(compress(range(len(ops)), map(op_types.__contains__, ops)))
        shared = {op_type: op_type for op_type in op_types}  # one string per op type, not per node
        return indices, [names[index] for index in indices], [shared[ops[index]] for index in indices]

    def nodes_of_types(self, one: str, others: Iterable[str]) -> tuple[list, list]:
        """Name, op and inputs of the top-level nodes of op type ``one``, and of those
        of ``others``: picked by op type from the flat parse, in C, from a parse that
        holds no attribute (their bytes would double a graph's footprint)."""
        ops, encoded = parse("GraphOps", self.data).node.op[:], self.encoded.node
        read = message_class("NodeLinks").FromString  # each picked node alone: no object for the others

        def pick(wanted: set) -> list:
            try:
                return [read(encoded[i]) for i in compress(range(len(ops)), map(wanted.__contains__, ops))]
            except DecodeError:
                raise changed_while_read("a node") from None

        return pick({one}), pick(set(others))

    def add_overrides(self, indices: list, ops: list, values: dict) -> None:
        """Give the top-level nodes at ``indices`` (``ops``: their op types, as from
        :meth:`select`) the override ``values[op type]``, by appending the attribute
        entry to their encodings. The graph must carry no override yet."""
        suffixes = {op_type: _attr_field(value) for op_type, value in values.items()}
        nodes = self.encoded.node
        for index, op_type in zip(indices, ops):
            nodes[index] += suffixes[op_type]

    def library_payloads(self) -> list:
        return list(self.encoded.library)

    def top_level(self) -> tuple[list, list, Any]:
        """``(names, op types, encodings)`` of the top-level nodes, from the flat parse
        and the nodes as undecoded bytes."""
        names, ops = self._names_and_ops()
        return list(names), ops, self.encoded.node

    def _names_and_ops(self) -> tuple[Any, list]:
        """The names (protobuf's container: read by index, no string made for the
        others) and op types of the top-level nodes, from one flat parse."""
        flat = parse("GraphOps", self.data).node  # not kept: its arena would raise the peak of a big graph
        names, ops = flat.name, flat.op[:]  # a slice copies in one call
        if not len(names) == len(ops) == len(self.encoded.node):  # a node without its name or op (module docstring)
            heads = self._heads.node
            return [head.name for head in heads], [head.op for head in heads]
        return names, ops

    def rest(self) -> Any:
        """A GraphDef of every field but the top-level nodes (the library, versions, ...)."""
        others = parse("GraphNodes", self.data)  # the library as bytes, every other field unknown: kept
        del others.node[:]
        return GraphDef.FromString(others.SerializeToString())

    def chunks(self, library: bytes | None) -> list:
        """The output; ``library`` (merged and re-encoded) replaces the library fields if given."""
        nodes = self.encoded.node
        for node in self._handed_out:
            if node.dirty:
                nodes[node.index] = node.head.SerializeToString()
        if library is not None:
            del self.encoded.library[:]
            self.encoded.library.append(library)
        return [self.encoded.SerializeToString(), *self._appended]

    def remove_nodes(self, runs: Iterable[tuple[int, int]]) -> None:
        """Remove the top-level nodes at the ``(start, stop)`` runs of indices; the
        nodes handed out so far are written back first, and not read again."""
        nodes, heads = self.encoded.node, self._head_nodes
        for node in self._handed_out:
            if node.dirty:
                nodes[node.index] = node.head.SerializeToString()
        self._handed_out = []
        for start, stop in reversed(list(runs)):
            del nodes[start:stop]
            del heads[start:stop]

    def summary_columns(self) -> tuple[list, list, list, list]:
        """``(names, ops, inputs, overrides)`` of the top-level nodes (the first
        three as flat lists, from one parse as ``GraphFlat``; overrides as
        ``(name, op, value)``), without an object per node."""
        nodes = parse("GraphFlat", self.data).node
        if len(nodes.name) != len(nodes.op):  # a node without its name or op: see the module docstring
            heads = self._heads.node
            names, ops, inputs = [h.name for h in heads], [h.op for h in heads], [r for h in heads for r in h.input]
        else:  # lists, once: set and counting operations read a list faster than protobuf's containers
            names, ops, inputs = list(nodes.name), list(nodes.op), list(nodes.input)
        # overriding() starts with a byte search (in C) instead of parsing every attribute key
        return names, ops, inputs, [(node.name, node.op_type, node.override) for node in self.overriding()]

    def node_inputs(self) -> Iterator[tuple[str, Any]]:
        """``(name, inputs)`` of each top-level node."""
        return ((head.name, head.input) for head in parse("GraphHeads", self.data).node)

    def append_nodes(self, fields: Iterable[bytes]) -> None:
        """Add top-level nodes, encoded as GraphDef ``node`` fields (in pieces, each
        written as it is): written after the rest, where a parse appends them to the
        nodes as if they followed the last one (parsing them into the stored
        encodings would cost as much again)."""
        self._appended += fields
