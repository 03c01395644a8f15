"""A frozen model as a GraphDef without its constants: node-level edits (insert,
``--embed``, reset of inserted nodes) run on it as on any parsed graph, and the
result is written back around the constants, which never enter the process.

:func:`skeleton_of` builds, from a :class:`~graphgrad.readings.scan.ScannedGraph`,
a real GraphDef (so :mod:`graphgrad.edits` needs no second implementation): every
top-level node parsed from its bytes with its heavy attribute entries (over
``HEAVY_ATTR_BYTES``: a constant's ``value``) left out, and the function library
parsed whole. :meth:`Skeleton.chunks` writes the edited skeleton back: an
untouched node as the range of the input it came from, a changed one re-encoded
with its heavy entries appended as ranges of the input (protobuf merges map
entries wherever they occur), nodes the edit added after the last node, nodes it
removed left out. No edit reads a heavy attribute: the edits look at names, op
types, inputs, devices, dtypes and graphgrad's own markers.
"""

from dataclasses import dataclass, field

from ..graph.model import BINARY, GRAPHDEF, Model
from ..files.protos import GraphDef, NodeDef
from ..files.wireformat import encode_varint
from .scan import LIBRARY_FIELD, NODE_FIELD, Library, ScannedGraph
from .wire import fields

HEAVY_ATTR_BYTES = 1 << 12
_ATTR_FIELD = 5


@dataclass
class _Original:
    """Where a node of the skeleton came from."""

    entry: tuple[int, int]  # the node's whole field in the input
    heavy: list  # (start, end) of each attribute entry left out, as fields of the node
    encoded: bytes  # the skeleton node as built, to tell whether an edit changed it


@dataclass
class Skeleton:
    """A scanned GraphDef as a :class:`Model` without its heavy attributes, and what
    :meth:`chunks` needs to write the edited model back around them."""

    graph: ScannedGraph
    model: Model
    originals: dict = field(default_factory=dict)  # node name -> _Original
    names_by_entry: dict = field(default_factory=dict)  # where a node's field starts -> its name
    library: bytes = b""  # the library as parsed, to tell whether an edit changed it

    def chunks(self) -> list:
        """The edited model as the chunks :func:`graphgrad.files.writing.write_chunks` takes."""
        graph_def = self.model.message
        kept = {node.name: node for node in graph_def.node if node.name in self.originals}
        added = [node for node in graph_def.node if node.name not in self.originals]
        library = graph_def.library.SerializeToString(deterministic=True)
        chunks: list = []
        last_node = max((i for i, (number, *_) in enumerate(self.graph.fields) if number == NODE_FIELD), default=-1)
        library_written = False
        for index, (number, entry, payload, end) in enumerate(self.graph.fields):
            if number == NODE_FIELD:
                name = self.names_by_entry.get(entry)
                node = kept.get(name) if name is not None else None
                if name is None:
                    _extend(chunks, (entry, end))  # not a node this reading parsed (a field of another wire type)
                elif node is not None:
                    for chunk in self._node_chunks(node, self.originals[name]):
                        if isinstance(chunk, tuple):
                            _extend(chunks, chunk)
                        else:
                            chunks.append(chunk)
                if index == last_node:
                    chunks += [_field(NODE_FIELD, node.SerializeToString(deterministic=True)) for node in added]
            elif number == LIBRARY_FIELD and library != self.library:
                if not library_written:  # repeated library fields merge into one
                    chunks.append(_field(LIBRARY_FIELD, library))
                    library_written = True
            else:
                _extend(chunks, (entry, end))
        if library != self.library and not library_written:
            chunks.append(_field(LIBRARY_FIELD, library))
        return chunks

    @staticmethod
    def _node_chunks(node, original: _Original) -> list:
        encoded = node.SerializeToString(deterministic=True)
        if encoded == original.encoded:
            return [original.entry]
        heavy = sum(end - start for start, end in original.heavy)
        return [bytes([NODE_FIELD << 3 | 2]) + encode_varint(len(encoded) + heavy) + encoded, *original.heavy]


def skeleton_of(graph: ScannedGraph, library: Library, path: str) -> Skeleton:
    """The :class:`Skeleton` of a scanned (and validated) GraphDef read from ``path``."""
    graph_def = GraphDef()
    skeleton = Skeleton(graph, Model(graph_def, GRAPHDEF, BINARY, path))
    data = graph.data
    for scanned, (number, entry, payload, end) in zip(graph.nodes, _node_fields(graph)):
        light, heavy = [], []
        for field_number, wire_type, start, _, stop in fields(data, payload, end):
            if field_number == _ATTR_FIELD and wire_type == 2 and stop - start > HEAVY_ATTR_BYTES:
                heavy.append((start, stop))
            else:
                light.append(bytes(data[start:stop]))
        node = NodeDef.FromString(b"".join(light))  # valid: the scan checked every field
        assert node.name not in skeleton.originals, "opened only with distinct names (readings.factory)"
        graph_def.node.append(node)
        skeleton.originals[node.name] = _Original((entry, end), heavy, node.SerializeToString(deterministic=True))
        skeleton.names_by_entry[entry] = node.name
    graph_def.library.CopyFrom(library.graph().library)
    skeleton.library = graph_def.library.SerializeToString(deterministic=True)
    return skeleton


def _node_fields(graph: ScannedGraph) -> list:
    """The top-level fields of ``graph`` that hold its scanned nodes, in order."""
    starts = {node.span[0] for node in graph.nodes}
    return [f for f in graph.fields if f[0] == NODE_FIELD and f[2] in starts]


def _field(number: int, encoded: bytes) -> bytes:
    return bytes([number << 3 | 2]) + encode_varint(len(encoded)) + encoded


def _extend(chunks: list, span: tuple[int, int]) -> None:
    """Append a range of the input, merged with the range before it if they touch."""
    if chunks and isinstance(chunks[-1], tuple) and chunks[-1][1] == span[0]:
        chunks[-1] = (chunks[-1][0], span[1])
    else:
        chunks.append(span)
