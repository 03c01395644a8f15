"""Binary GraphDefs rewritten and summarised without decoding what the job never touches.

Every binary GraphDef goes this way (:class:`NotApplicable` sends anything else,
or a file that does not parse, to a full parse, which says what is wrong).
Frozen models are mostly constant tensors. This module reads the protobuf wire
format of a GraphDef's top level only: for each ``node`` entry its byte span,
name and op (fields 1 and 2 of NodeDef, which serializers write first). Rules
are matched on those; only the selected nodes (and the function library, when a
rule reaches into it) are parsed with protobuf, changed and re-encoded; every
other byte is copied as it was. The output is a valid GraphDef equal in meaning
to what a full parse would give, and the same input and rules give the same bytes.
``graphgrad ops`` reads each node's field headers the same way: its inputs and
its override, never its attribute values; ``graphgrad reset`` finds there the
overrides it removes.

Graphs of many small nodes are cheaper to parse in C than to scan here: they go
to :mod:`graphgrad.partial`, which parses them with cut-down schemas.
Every reading is first given the full parse's verdict on the bytes
(:func:`open_stored`, :mod:`graphgrad.validity`): a corrupt constant that no rule
selects is refused, never copied into an output.
"""

from collections import Counter
from functools import cached_property

from google.protobuf.message import DecodeError

from .functions import calls_into_overrides, functions_with_overrides, saved_gradients, unrouted_calls_note
from .names import CALL_OPS
from .model import iter_graph_nodes, override_of, set_override
from .partial import HeadGraph, flat_columns, node_inputs, parse
from .names import ATTR_BYTES
from .protos import AttrValue, GraphDef, NodeDef
from .rewrite import (
    NodeChange, RewriteOptions, RewriteReport, apply_rules, changes_signs, refuse_misfits, sign_trap_notes,
)
from .select import choose_by_op_type, op_types_needed
from .names import ATTR
from .traps import ADDS, SIGN, no_gradient_notes, scopes_of
from .validity import SAMPLE, Invalid, plausible, require, require_field
from .wireformat import NotApplicable, encode_varint, fields

NODE_FIELD = 1
LIBRARY_FIELD = 2
_GRAPHDEF_FIELDS = {1, 2, 3, 4, 5}
# Below this average size a node is cheaper to parse with protobuf (see
# graphgrad.partial) than to scan here.
MIN_AVERAGE_NODE_BYTES = 256
_SAMPLE = 64
# Files up to this size are read whole and scanned as bytes: one read costs less
# than the Python call per byte looked at through a Window (a 0.9 MB frozen graph:
# 0.9 against 1.4 ms per rewrite).
WHOLE_READ_LIMIT = 1 << 20


class SmallNodes(NotApplicable):
    """A binary GraphDef, but of nodes too small for this scanner."""


class Window:
    """A :class:`graphgrad.io.SourceFile` as ``data[i]``, ``data[a:b]`` and
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

    __slots__ = ("graph", "function", "name", "op_type", "dirty", "_data", "_span", "_bytes", "_node")

    def __init__(self, data, span, name: str, op_type: str):
        self.graph, self.function = "", None
        self.name, self.op_type = name, op_type
        self.dirty = False
        self._data, self._span, self._bytes, self._node = data, span, None, None

    @property
    def encoded(self) -> bytes:
        if self._bytes is None:
            self._bytes = bytes(self._data[self._span[0]:self._span[1]])
        return self._bytes

    @property
    def node(self):
        if self._node is None:
            try:
                self._node = NodeDef.FromString(self.encoded)
            except DecodeError:  # let the full parse report the broken file
                raise NotApplicable(f"node {self.name} does not parse") from None
        return self._node

    @property
    def override(self):
        # A byte search (in C): a node without the name is never parsed.
        if ATTR_BYTES not in self.encoded:
            return None
        return override_of(self.node)

    def set_override(self, value) -> None:
        set_override(self.node, value)
        self.dirty = True


class ScannedGraph:
    """A binary GraphDef as spans: nodes, the library, and everything else.

    ``data`` is bytes or a :class:`Window` on a file.
    """

    def __init__(self, data, checked: bool = False):
        """``checked``: ``data`` is known to parse as a GraphDef (else each field is
        checked as the scan passes it, see :func:`graphgrad.validity.require_field`)."""
        self.data = memoryview(data) if isinstance(data, (bytes, bytearray)) else data
        self.fields = []  # (number, entry start, payload start, end)
        spans, names_and_ops = [], []
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
        """``(name, op)`` of the first nodes, for :func:`graphgrad.validity.plausible`."""
        return [(node.name, node.op_type) for node in self.nodes[:SAMPLE]]

    def candidates(self, op_types=None) -> list:
        """The top-level nodes (of ``op_types`` only, if given)."""
        return [node for node in self.nodes if op_types is None or node.op_type in op_types]

    def nodes_of_types(self, one: str, others) -> tuple[list, list]:
        """The NodeDefs of the top-level nodes of op type ``one``, and of those of ``others``."""
        return ([node.node for node in self.nodes if node.op_type == one],
                [node.node for node in self.nodes if node.op_type in others])

    def may_have_attrs(self, keys) -> bool:
        """Whether a top-level node has an attribute named by one of ``keys`` (bytes)."""
        return any(key in attrs for attrs in self._attrs for key in keys)

    def overriding(self) -> list:
        """The top-level nodes that carry an override, found from their field headers."""
        return [node for node, attrs in zip(self.nodes, self._attrs) if ATTR_BYTES in attrs]

    @cached_property
    def _attrs(self) -> list:
        return [_node_headers(self.data, *node._span)[1] for node in self.nodes]

    def library_payloads(self) -> list:
        return [self.data[payload:end] for number, _, payload, end in self.fields if number == LIBRARY_FIELD]

    def chunks(self, library: bytes | None) -> list:
        """The output: ``(start, end)`` ranges of the input for what stays as it
        was, bytes for re-encoded changed nodes and, if given, ``library``
        (merged and re-encoded) in place of the library fields."""
        by_start = {node._span[0]: node for node in self.nodes if node.dirty}
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
        self._payloads = payloads
        self._graph = None

    def graph(self):
        """A GraphDef holding only the library (its first call parses it)."""
        if self._graph is None:
            self._graph = GraphDef()
            try:
                for payload in self._payloads:
                    self._graph.library.MergeFromString(bytes(payload))
            except DecodeError:
                raise NotApplicable("the function library does not parse") from None
            self._original = self._graph.library.SerializeToString(deterministic=True)
        return self._graph

    def functions(self) -> list:
        """The FunctionDefs."""
        return list(self.graph().library.function) if self._payloads else []

    def function_nodes(self, op_types=None) -> list:
        """References to the nodes of the function bodies (edits stay in the one parse)."""
        if not self._payloads:
            return []
        return [ref for ref in iter_graph_nodes(self.graph(), "", True, op_types) if ref.function is not None]

    def changed_bytes(self) -> bytes | None:
        """The re-encoded library if a rule changed it, else None."""
        if self._graph is None:
            return None
        encoded = self._graph.library.SerializeToString(deterministic=True)
        return encoded if encoded != self._original else None


def rewrite_graphdef_bytes(data, options: RewriteOptions):
    """Apply ``options`` to a binary GraphDef given as bytes.

    Returns ``(chunks, report)``: the output as byte strings to write in order.
    Raises :class:`NotApplicable` when the bytes are not a binary GraphDef this
    path suits (the caller then parses them whole).
    """
    chunks, report = _rewrite(data, lambda: data, options)
    return _in_memory(data, chunks), report


def rewrite_graphdef_file(source, options: RewriteOptions):
    """:func:`rewrite_graphdef_bytes` for a file open as a :class:`graphgrad.io.SourceFile`.

    The chunks are as :func:`graphgrad.io.write_chunks` takes them with this
    source: what stays as it was is a range of the input, copied in the kernel,
    so a frozen model's constants are never read into this process.
    """
    return _rewrite(*_scan_view(source), options)


def _scan_view(source) -> tuple:
    """``(data, whole)`` to scan a :class:`graphgrad.io.SourceFile` by: a
    :class:`Window`, or the bytes of a file of up to ``WHOLE_READ_LIMIT``; and a
    function that gives all its bytes."""
    if source.size <= WHOLE_READ_LIMIT:
        data = source.read(0, source.size)
        return data, lambda: data
    return Window(source), lambda: source.read(0, source.size)


def _in_memory(data, chunks) -> list:
    """Chunks with their ranges of ``data`` as memoryviews."""
    view = memoryview(data)
    return [view[chunk[0]:chunk[1]] if isinstance(chunk, tuple) else chunk for chunk in chunks]


def open_stored(data, whole):
    """The fast reading of a binary GraphDef: a :class:`ScannedGraph` of ``data``,
    or a :class:`HeadGraph` of ``whole()`` when its nodes are small, with its
    :class:`Library` as ``library``.

    Raises :class:`NotApplicable` unless the full parse would take the bytes for a
    GraphDef too (:mod:`graphgrad.validity`): a fast reading accepts a file only
    if every reading does.
    """
    if data[0:1] == b"\x08":  # field 1 as a varint: the full parse reads a SavedModel
        raise Invalid("a SavedModel's schema version")
    in_memory = not isinstance(data, Window)
    if in_memory:
        require(data)
    try:
        graph = ScannedGraph(data, checked=in_memory)
    except SmallNodes:
        graph = HeadGraph(data if in_memory else whole())
        if not in_memory:
            require(graph.data)
    graph.library = Library(graph.library_payloads())
    functions = [(function.signature.name, [(node.name, node.op) for node in function.node_def[:SAMPLE]])
                 for function in graph.library.functions()[:SAMPLE]]
    if not plausible(graph.sample(), functions):
        raise Invalid("names and op types unlike a GraphDef's")
    return graph


def _rewrite(data, whole, options: RewriteOptions):
    if options.embed:
        raise NotApplicable("--embed edits the graph structure")
    graph = open_stored(data, whole)
    library = graph.library
    op_types = op_types_needed(options.rules, options.match, options.exclude)
    functions = library.function_nodes(op_types) if options.functions else []

    def all_nodes():
        return graph.candidates() + (library.function_nodes() if options.functions else [])

    if isinstance(graph, HeadGraph) and op_types is not None and not functions and not graph.has_overrides:
        report = _apply_to_heads(graph, op_types, options, all_nodes)
    else:
        report = apply_rules(graph.candidates(op_types) + functions, options, all_nodes=all_nodes,
                             saved=lambda: {("", value): function for value, function
                                            in saved_gradients(library.graph()).items()})
    calls = _unrouted_calls(graph, library) if options.functions else []
    report.notes += [unrouted_calls_note(calls)] if calls else []
    report.notes += no_gradient_notes(report.by_op_type)
    if changes_signs(report):
        report.notes += _top_level_sign_notes(graph, report)
        for prefix, nodes in scopes_of(library.graph())[1:]:
            report.notes += sign_trap_notes(report, "", prefix, nodes)
    return graph.chunks(library.changed_bytes()), report


# Above this many top-level nodes, the fast path of small nodes does not look for
# larq's shifted Signs: reading every Add of a 100k-node graph would cost a third of
# the rewrite (and one protobuf arena per node). Binarized nets are far smaller.
SIGN_TRAP_NODE_LIMIT = 20_000


def _top_level_sign_notes(graph, report: RewriteReport) -> list[str]:
    if isinstance(graph, HeadGraph) and len(graph.encoded.node) > SIGN_TRAP_NODE_LIMIT:
        return [f"larq-style Signs of Sign(x) + c were not looked for: the graph has over {SIGN_TRAP_NODE_LIMIT} "
                "nodes; graphgrad check looks for them in any graph"]
    return sign_trap_notes(report, "", "", None, *graph.nodes_of_types(SIGN, ADDS))


def _unrouted_calls(graph, library: Library) -> list[str]:
    """:func:`graphgrad.functions.calls_into_overrides` of a rewritten graph; the
    top-level NodeDefs are parsed only for the nodes that may call."""
    bodies = {function.signature.name: function.node_def for function in library.functions()}
    if not functions_with_overrides(bodies):  # before the top level is looked at
        return []
    callers = graph.candidates(set(CALL_OPS).union(bodies))
    if isinstance(graph, HeadGraph):
        try:
            top_level = [NodeDef.FromString(node.head.SerializeToString()) for node in callers]
        except DecodeError:  # let the full parse report the broken node
            raise NotApplicable("a node does not parse") from None
    else:
        top_level = [node.node for node in callers]
    return calls_into_overrides(top_level, bodies)


def _apply_to_heads(graph: HeadGraph, op_types, options: RewriteOptions, all_nodes) -> RewriteReport:
    """:func:`apply_rules` for the commonest case, without an object per node:
    plain --op rules, and no node has an override yet (so every selected node
    changes, and none is refused)."""
    indices, names, ops = graph.select(op_types)
    chosen, notes = choose_by_op_type(
        Counter(ops), options.rules, options.allow_missing, all_nodes,
        names_of=lambda op_type: [name for name, op in zip(names, ops) if op == op_type],
    )
    refuse_misfits((op_type, rule.spec, names[ops.index(op_type)]) for op_type, rule in chosen.items())
    values = {op_type: rule.spec.attr_value for op_type, rule in chosen.items()}
    graph.add_overrides(indices, ops, values)
    changes = (("",) * len(names), names, ops, (None,) * len(names), list(map(values.get, ops)))
    return RewriteReport.from_columns(changes, notes=notes)


def graphdef_bodies(data, functions: bool = True) -> list:
    """What ``graphgrad ops`` reads of a binary GraphDef (``summary.Body`` of the
    top level, then of each function body), from cut-down parses or the scan: no
    NodeDef of the top level is built. Raises :class:`NotApplicable` as
    :func:`rewrite_graphdef_bytes` does."""
    return _bodies(data, lambda: data, functions)


def graphdef_file_bodies(source, functions: bool = True) -> list:
    """:func:`graphdef_bodies` for a file open as a :class:`graphgrad.io.SourceFile`:
    a frozen model's constants are never read."""
    return _bodies(*_scan_view(source), functions)


def _bodies(data, whole, functions: bool) -> list:
    from .summary import Body, bodies_of  # as in api: rewrites do not load the summary layer

    graph = open_stored(data, whole)
    if isinstance(graph, HeadGraph):
        encoded = graph.data
        names, ops, inputs, overrides, library = flat_columns(encoded)
        inputs_by_node = lambda: node_inputs(encoded)  # noqa: E731
        node_defs = lambda op_types: [node for node in _parsed(encoded).node if node.op in op_types]  # noqa: E731
    else:
        names, ops, inputs, overrides, inputs_by_node = _scanned_columns(graph)
        library = graph.library_payloads()
        node_defs = lambda op_types: [node.node for node in graph.nodes if node.op_type in op_types]  # noqa: E731
    library_graph = graph.library.graph() if library else None  # parsed once, for both below
    saved = saved_gradients(library_graph) if library_graph is not None else {}
    top = Body(None, names, ops, inputs, set(), overrides, saved, inputs_by_node, node_defs)
    if not (functions and library):
        return [top]
    return [top] + bodies_of(library_graph)[1:]


def _parsed(data) -> GraphDef:
    try:
        return GraphDef.FromString(data)
    except DecodeError:  # let the full parse report the broken file
        raise NotApplicable("the GraphDef does not parse") from None


def _scanned_columns(graph: ScannedGraph):
    """``(names, ops, inputs, overrides, inputs by node)`` of a scanned graph's top
    level (as :func:`graphgrad.partial.flat_columns`), from each node's field
    headers: attribute values (the constants) are skipped."""
    inputs_of, overrides = [], []
    for node in graph.nodes:
        inputs, attrs = _node_headers(graph.data, *node._span)
        inputs_of.append(inputs)
        if ATTR_BYTES in attrs:
            overrides.append((node.name, node.op_type, _override_at(graph.data, attrs[ATTR_BYTES])))
    names = [node.name for node in graph.nodes]
    flat_inputs = [name for inputs in inputs_of for name in inputs]
    return names, [node.op_type for node in graph.nodes], flat_inputs, overrides, lambda: zip(names, inputs_of)


def _node_headers(data, start: int, end: int) -> tuple[list, dict]:
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
                raise NotApplicable("an input is not UTF-8") from None
        elif number == 5:
            key, value = b"", None
            for entry_number, entry_type, _, entry_payload, entry_stop in fields(data, payload, stop):
                if entry_type == 2 and entry_number == 1:
                    key = bytes(data[entry_payload:entry_stop])
                elif entry_type == 2 and entry_number == 2:
                    value = (entry_payload, entry_stop)
            attrs[key] = value
    return inputs, attrs


def _override_at(data, span) -> str:
    """The ``_gradient_op_type`` whose AttrValue is at ``span`` (None: an empty value)."""
    try:
        return AttrValue.FromString(bytes(data[span[0]:span[1]]) if span else b"").s.decode("utf-8", "replace")
    except DecodeError:
        raise NotApplicable(f"the {ATTR} of a node does not parse") from None


def remove_overrides_bytes(data, selects, functions: bool, markers=()):
    """Remove the override of every node ``selects(name, op type)`` picks from a
    binary GraphDef given as bytes (function bodies too, if ``functions``).

    Returns ``(chunks, changes)`` as :func:`rewrite_graphdef_bytes` does, with a
    :class:`graphgrad.rewrite.NodeChange` per removed override. Raises
    :class:`NotApplicable` also when a node carries one of the attributes
    ``markers`` (graphgrad's inserted nodes, which only a full parse undoes).
    """
    chunks, changes = _remove_overrides(data, lambda: data, selects, functions, markers)
    return _in_memory(data, chunks), changes


def remove_overrides_file(source, selects, functions: bool, markers=()):
    """:func:`remove_overrides_bytes` for a :class:`graphgrad.io.SourceFile`, its
    chunks as :func:`rewrite_graphdef_file` gives them: constants are never read."""
    return _remove_overrides(*_scan_view(source), selects, functions, markers)


def _remove_overrides(data, whole, selects, functions: bool, markers):
    graph = open_stored(data, whole)
    marker_keys = [marker.encode() for marker in markers]
    library = graph.library
    function_nodes = library.function_nodes() if functions else []
    if graph.may_have_attrs(marker_keys) or any(
        marker in ref.node.attr for ref in function_nodes for marker in markers
    ):
        raise NotApplicable("graphgrad's inserted nodes are undone on a full parse")
    changes = []
    for ref in graph.overriding() + function_nodes:
        old = ref.override
        if old is not None and selects(ref.name, ref.op_type):
            ref.set_override(None)
            changes.append(NodeChange(ref.graph, ref.name, ref.op_type, old, None))
    return graph.chunks(library.changed_bytes()), changes
