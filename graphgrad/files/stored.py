"""The fast reading of a binary GraphDef as stored, chosen by what the file holds.

:func:`open_stored` is the one factory: a :class:`~graphgrad.files.scan.ScannedGraph`
for large nodes, a :class:`~graphgrad.files.small_nodes.HeadGraph` for many small
ones, each with its function library as a :class:`~graphgrad.files.scan.Library`.
Both hand out nodes with ``graph``, ``function``, ``name``, ``op_type``,
``override`` and ``set_override``, and write back as ``chunks``; a job that
needs more than they give raises :class:`~graphgrad.files.wireformat.NotApplicable`,
and its caller falls back to the full parse in one place
(:func:`graphgrad.jobs.api._change_graphdef_file`).

Every reading is first given the full parse's verdict on the bytes
(:mod:`graphgrad.files.validity`): a file is a graph for every reading or for
none, and a corrupt constant that no rule selects is refused, never copied.
"""

from collections.abc import Callable, Sequence
from typing import Any

from .scan import Library, ScannedGraph, SmallNodes, Window
from .small_nodes import HeadGraph
from .validity import SAMPLE, Invalid, plausible, require

# Files up to this size are read whole and scanned as bytes: one read costs less
# than the Python call per byte looked at through a Window (a 0.9 MB frozen graph:
# 0.9 against 1.4 ms per rewrite).
WHOLE_READ_LIMIT = 1 << 20


def scan_view(source: Any) -> tuple["bytes | Window", Callable[[], bytes]]:
    """``(data, whole)`` to scan a :class:`graphgrad.files.io.SourceFile` by: a
    :class:`Window`, or the bytes of a file of up to ``WHOLE_READ_LIMIT``; and a
    function that gives all its bytes."""
    if source.size <= WHOLE_READ_LIMIT:
        data = source.read(0, source.size)
        return data, lambda: data
    return Window(source), lambda: source.read(0, source.size)


def in_memory_chunks(data: bytes, chunks: Sequence) -> list:
    """Chunks with their ranges of ``data`` as memoryviews."""
    view = memoryview(data)
    return [view[chunk[0]:chunk[1]] if isinstance(chunk, tuple) else chunk for chunk in chunks]


def open_stored(data: Any, whole: Callable[[], bytes]) -> ScannedGraph | HeadGraph:
    """The fast reading of a binary GraphDef: a :class:`ScannedGraph` of ``data``,
    or a :class:`HeadGraph` of ``whole()`` when its nodes are small, with its
    :class:`Library` as ``library``.

    Raises :class:`NotApplicable` unless the full parse would take the bytes for a
    GraphDef too (:mod:`graphgrad.files.validity`): a fast reading accepts a file only
    if every reading does.
    """
    if data[0:1] == b"\x08":  # field 1 as a varint: the full parse reads a SavedModel
        raise Invalid("a SavedModel's schema version")
    in_memory = not isinstance(data, Window)
    if in_memory:
        require(data)
    graph: ScannedGraph | HeadGraph
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
