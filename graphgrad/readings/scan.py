"""Binary GraphDefs of large nodes (frozen models), read as spans of the wire format.

Frozen models are mostly constant tensors. :class:`ScannedGraph` reads the
protobuf wire format of a GraphDef's top level only: for each ``node`` entry its
byte span, name and op type. Rules are matched on those; only the nodes a job
selects (and the function library, when a rule reaches into it) are parsed with
protobuf, changed and re-encoded; every other byte is copied as it was, as a range
of the input (:meth:`ScannedGraph.chunks`). A file is read through a
:class:`Window`, so constants never enter the process. ``ops`` reads each node's
field headers the same way (:func:`node_headers`): its inputs and its override,
never its attribute values.

Graphs of many small nodes are cheaper to parse in C than to scan: they go to
:mod:`graphgrad.readings.small_nodes` (see :func:`graphgrad.readings.factory.open_stored`).
"""

from collections.abc import Container, Iterable
from functools import cached_property
from typing import Any

from google.protobuf.message import DecodeError

from ..graph.model import iter_graph_nodes, override_of, set_override
from ..names import ATTR, ATTR_BYTES
from ..files.plausible import SAMPLE
from ..files.protos import AttrValue, GraphDef, NodeDef
from ..files.wireformat import encode_varint
from .errors import NotApplicable, SmallNodes, changed_while_read
from .small_nodes import parse
from .validity import require_field
from .wire import fields

NODE_FIELD = 1
LIBRARY_FIELD = 2
_GRAPHDEF_FIELDS = {1, 2, 3, 4, 5}
# Below this average size a node is cheaper to parse with protobuf (see
# graphgrad.readings.small_nodes) than to scan here.
MIN_AVERAGE_NODE_BYTES = 256
_SAMPLE = 64


class Window:
    """A :class:`graphgrad.files.reading.SourceFile` as ``data[i]``, ``data[a:b]`` and
    ``len(data)``, read in blocks around the scan: the payloads it skips (a frozen
    model's constants) are never read."""

    BLOCK = 4096  # a few small nodes' headers; a large node costs one such read

    def __init__(self, source):
        self._source = source
        self._start, self._block = 0, b""

    def __len__(self) -> int:
        return self._source.size

    def __getitem__(self, key):
        if isinstance(key, slice):
            start, stop = key.start, min(key.stop, self._source.size)
        else:
            start, stop = key, key + 1
        if not (self._start <= start and stop <= self._start + len(self._block)):
            self._start = start
            self._block = self._source.read(start, max(stop, min(start + self.BLOCK, self._source.size)))
        piece = self._block[start - self._start:stop - self._start]
        return piece if isinstance(key, slice) else piece[0]


class ScannedNode:
    """A top-level node known by its span; read and parsed only when a rule needs it."""

    __slots__ = ("graph", "function", "name", "op_type", "dirty", "_data", "span", "_bytes", "_node")

    def __init__(self, data, span, name: str, op_type: str):
        self.graph, self.function = "", None
        self.name, self.op_type = name, op_type
        self.dirty = False
        self._data, self.span = data, span
        self._bytes: bytes | None = None
        self._node = None

    @property
    def encoded(self) -> bytes:
        if self._bytes is None:
            self._bytes = bytes(self._data[self.span[0]:self.span[1]])
        return self._bytes

    @property
    def node(self) -> Any:
        if self._node is None:
            try:
                self._node = NodeDef.FromString(self.encoded)
            except DecodeError:
                raise changed_while_read(f"node {self.name}") from None
        return self._node

    @property
    def override(self) -> str | None:
        # A byte search (in C): a node without the name is never parsed.
        if ATTR_BYTES not in self.encoded:
            return None
        return override_of(self.node)

    def set_override(self, value: str | None) -> None:
        set_override(self.node, value)
        self.dirty = True


class _Encodings:
    """The encodings of spans of ``data``, read one by one."""

    def __init__(self, data, spans: list):
        self._data, self.spans = data, spans

    def __len__(self) -> int:
        return len(self.spans)

    def __getitem__(self, index: int) -> bytes:
        start, end = self.spans[index]
        return bytes(self._data[start:end])


class ScannedGraph:
    """A binary GraphDef as spans: nodes, the library, and everything else.

    ``data`` is bytes or a :class:`Window` on a file.
    """

    def __init__(self, data, checked: bool = False):
        """``checked``: ``data`` is known to parse as a GraphDef (else each field is
        checked as the scan passes it, see :func:`graphgrad.readings.validity.require_field`)."""
        self.data = memoryview(data) if isinstance(data, (bytes, bytearray)) else data
        self.fields = []  # (number, entry start, payload start, end)
        spans: list[tuple[int, int]] = []
        names_and_ops: list = []
        sampled_bytes = 0
        for number, wire_type, entry, payload, end in fields(self.data, 0, len(self.data)):
            if number not in _GRAPHDEF_FIELDS:
                raise NotApplicable(f"field {number} is not a GraphDef field")
            self.fields.append((number, entry, payload, end))
            name_and_op = None if checked else require_field(self.data, entry, end)
            if number == NODE_FIELD and wire_type == 2:
                if len(spans) < _SAMPLE:
                    sampled_bytes += end - payload
                    if len(spans) == _SAMPLE - 1 and sampled_bytes < _SAMPLE * MIN_AVERAGE_NODE_BYTES:
                        raise SmallNodes("small nodes: a cut-down parse is faster")  # before scanning them all
                spans.append((payload, end))
                names_and_ops.append(name_and_op)
        if not spans:
            raise NotApplicable("no nodes")
        if sampled_bytes < min(len(spans), _SAMPLE) * MIN_AVERAGE_NODE_BYTES:
            raise SmallNodes("small nodes: a cut-down parse is faster")
        if checked:  # names and op types as protobuf reads them (the last of repeated fields wins)
            names_and_ops = [(node.name, node.op) for node in parse("GraphNames", self.data).node]
        self.nodes = [ScannedNode(self.data, span, name, op) for span, (name, op) in zip(spans, names_and_ops)]

    def sample(self) -> list:
        """``(name, op)`` of the first nodes, for :func:`graphgrad.files.plausible.plausible`."""
        return [(node.name, node.op_type) for node in self.nodes[:SAMPLE]]

    def candidates(self, op_types: Container[str] | None = None) -> list:
        """The top-level nodes (of ``op_types`` only, if given)."""
        return [node for node in self.nodes if op_types is None or node.op_type in op_types]

    def nodes_of_types(self, one: str, others: Container[str]) -> tuple[list, list]:
        """The NodeDefs of the top-level nodes of op type ``one``, and of those of ``others``."""
        return ([node.node for node in self.nodes if node.op_type == one],
                [node.node for node in self.nodes if node.op_type in others])

    def may_have_attrs(self, keys: Iterable[bytes]) -> bool:
        """Whether a top-level node has an attribute named by one of ``keys`` (bytes)."""
        return any(key in attrs for attrs in self._attrs for key in keys)

    def overriding(self) -> list:
        """The top-level nodes that carry an override, found from their field headers."""
        return [node for node, attrs in zip(self.nodes, self._attrs) if ATTR_BYTES in attrs]

    @cached_property
    def _attrs(self) -> list:
        return [node_headers(self.data, *node.span)[1] for node in self.nodes]

    def library_payloads(self) -> list:
        return [self.data[payload:end] for number, _, payload, end in self.fields if number == LIBRARY_FIELD]

    def top_level(self) -> tuple[list, list, "_Encodings"]:
        """``(names, op types, encodings)`` of the top-level nodes; each encoding is
        read when asked for, and not kept (a frozen model's constants are its bulk)."""
        return ([node.name for node in self.nodes], [node.op_type for node in self.nodes],
                _Encodings(self.data, [node.span for node in self.nodes]))

    def rest(self) -> Any:
        """A GraphDef of every field but the top-level nodes (the library, versions, ...)."""
        # Each field was checked as the scan passed it (or the whole file before).
        return GraphDef.FromString(b"".join(bytes(self.data[entry:end])
                                            for number, entry, _, end in self.fields if number != NODE_FIELD))

    def chunks(self, library: bytes | None) -> list:
        """The output: ``(start, end)`` ranges of the input for what stays as it
        was, bytes for re-encoded changed nodes and, if given, ``library``
        (merged and re-encoded) in place of the library fields."""
        by_start = {node.span[0]: node for node in self.nodes if node.dirty}
        chunks, library_written = [], False
        for number, entry, payload, end in self.fields:
            node = by_start.get(payload) if number == NODE_FIELD else None
            if node is not None:
                encoded = node.node.SerializeToString(deterministic=True)
                chunks.append(bytes([NODE_FIELD << 3 | 2]) + encode_varint(len(encoded)) + encoded)
            elif number == LIBRARY_FIELD and library is not None:
                if not library_written:  # repeated library fields merge into one
                    chunks.append(bytes([LIBRARY_FIELD << 3 | 2]) + encode_varint(len(library)) + library)
                    library_written = True
            elif chunks and isinstance(chunks[-1], tuple) and chunks[-1][1] == entry:
                chunks[-1] = (chunks[-1][0], end)  # one range for a run of untouched fields
            else:
                chunks.append((entry, end))
        return chunks


class Library:
    """A GraphDef's function library, given as the payloads of its ``library``
    fields and parsed (merged, as protobuf would) only when a rule reaches into it."""

    def __init__(self, payloads):
        self.payloads = payloads
        self._graph = None

    def graph(self) -> Any:
        """A GraphDef holding only the library (its first call parses it)."""
        if self._graph is None:
            self._graph = GraphDef()
            try:
                for payload in self.payloads:
                    self._graph.library.MergeFromString(bytes(payload))
            except DecodeError:
                raise changed_while_read("the function library") from None
            self._original = self._graph.library.SerializeToString(deterministic=True)
        return self._graph

    def functions(self) -> list:
        """The FunctionDefs."""
        return list(self.graph().library.function) if self.payloads else []

    def function_nodes(self, op_types: Container[str] | None = None) -> list:
        """References to the nodes of the function bodies (edits stay in the one parse)."""
        if not self.payloads:
            return []
        return [ref for ref in iter_graph_nodes(self.graph(), "", True, op_types) if ref.function is not None]

    def changed_bytes(self) -> bytes | None:
        """The re-encoded library if a rule changed it, else None."""
        if self._graph is None:
            return None
        encoded = self._graph.library.SerializeToString(deterministic=True)
        return encoded if encoded != self._original else None


def node_headers(data: Any, start: int, end: int) -> tuple[list, dict]:
    """A NodeDef's inputs (field 3), and its attribute keys (field 5), each with the
    span of its value (None if it has none), the last entry of a key winning, as
    when a map is parsed. Values are not read."""
    inputs, attrs = [], {}
    for number, wire_type, _, payload, stop in fields(data, start, end):
        if wire_type != 2:
            continue
        if number == 3:
            try:
                inputs.append(bytes(data[payload:stop]).decode())
            except UnicodeDecodeError:
                raise changed_while_read("a node's input") from None
        elif number == 5:
            key, value, known = b"", None, True
            for entry_number, entry_type, _, entry_payload, entry_stop in fields(data, payload, stop):
                if entry_type == 2 and entry_number == 1:
                    key = bytes(data[entry_payload:entry_stop])
                elif entry_type == 2 and entry_number == 2:
                    value = (entry_payload, entry_stop)
                else:
                    known = False
            if known:  # protobuf keeps an entry with other fields out of the map (an unknown field)
                attrs[key] = value
    return inputs, attrs


def override_at(data: Any, span: tuple[int, int] | None) -> str:
    """The ``_gradient_op_type`` whose AttrValue is at ``span`` (None: an empty value)."""
    try:
        return AttrValue.FromString(bytes(data[span[0]:span[1]]) if span else b"").s.decode("utf-8", "replace")
    except DecodeError:
        raise changed_while_read(f"the {ATTR} of a node") from None
