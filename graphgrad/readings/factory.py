"""The one factory of readings: :func:`open_reading` opens a model for a job,
with the fastest reading that gives what the job needs, and falls back to the
full parse in this one place.

A binary GraphDef is read as stored: a :class:`~graphgrad.readings.frozen.FrozenReading`
scans a file of large nodes (a frozen model: its constants never enter the
process), a :class:`~graphgrad.readings.stored.StoredReading` parses many small
nodes with cut-down schemas. Each is first given the full parse's verdict on the
bytes (:mod:`graphgrad.readings.validity`): a file is a graph for every reading or
for none, and a corrupt constant that no rule selects is refused, never copied.
Anything else, and any file a fast reading steps aside from
(:class:`~graphgrad.readings.errors.NotApplicable`), is parsed whole
(:class:`~graphgrad.readings.parsed.ParsedReading`).
"""

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ..files.reading import SourceFile, model_from_bytes, read_model
from ..graph.model import GRAPHDEF, Model
from .errors import Invalid, NotApplicable, SmallNodes
from .frozen import FrozenReading
from .parsed import ParsedReading
from .protocol import Reading
from .scan import Library, ScannedGraph, Window
from .small_nodes import HeadGraph
from .stored import StoredReading
from .validity import plausible_sample, require

# Files up to this size are read whole and scanned as bytes: one read costs less
# than the Python call per byte looked at through a Window (a 0.9 MB frozen graph:
# 0.9 against 1.4 ms per rewrite).
WHOLE_READ_LIMIT = 1 << 20


@dataclass(frozen=True)
class Needs:
    """What a job needs of a reading beyond what every reading gives (nodes for
    rules, columns for summaries, a listing for ``diff``, the write).

    ``edits``: scopes to edit the structure (insert, bypass, ``--embed``, reset);
    a frozen model whose nodes share a name is parsed whole (its skeleton edits
    nodes by name). ``parse``: the model parsed whole (a text output; tensor
    parameters, checked against parsed nodes).
    """

    edits: bool = False
    parse: bool = False


@contextmanager
def open_reading(source: str | Model, kind: str | None = None, needs: Needs = Needs()) -> Iterator[Reading]:
    """The :class:`Reading` of ``source`` (a model file's path, or a loaded
    :class:`Model`) for a job that ``needs`` what it says, open while the job runs
    (a stored reading writes ranges of the file it reads)."""
    if isinstance(source, Model):
        yield ParsedReading(source)
        return
    if needs.parse or kind not in (None, GRAPHDEF) or not os.path.isfile(source):
        yield ParsedReading(read_model(source, kind))
        return
    with SourceFile(source) as file:
        try:
            stored = open_stored(file, source, needs)
        except NotApplicable:
            stored = None
            # the file's bytes are not kept past the parse: they would double a frozen model's footprint
            model = model_from_bytes(file.read(0, file.size), source, kind)
        if stored is not None:
            yield stored
            return
    yield ParsedReading(model)


def open_stored(file: SourceFile, path: str, needs: Needs) -> Reading:
    """The fast reading of a binary GraphDef file: a :class:`FrozenReading` of
    large nodes, or a :class:`StoredReading` of many small ones. Raises
    :class:`NotApplicable` unless the full parse would take the bytes for a
    GraphDef too, or where the reading cannot give what the job ``needs``."""
    data, whole = _scan_view(file)
    if data[0:1] == b"\x08":  # field 1 as a varint: the full parse reads a SavedModel
        raise Invalid("a SavedModel's schema version")
    in_memory = not isinstance(data, Window)
    if in_memory:
        require(data)
    try:
        scanned = ScannedGraph(data, checked=in_memory)
    except SmallNodes:
        graph = HeadGraph(data) if isinstance(data, bytes) else HeadGraph(whole())
        if not in_memory:
            require(graph.data)
        library = _plausible_library(graph.sample(), graph.library_payloads())
        return StoredReading(graph, library, path, file)
    library = _plausible_library(scanned.sample(), scanned.library_payloads())
    if needs.edits and len({node.name for node in scanned.nodes}) != len(scanned.nodes):
        raise NotApplicable("two nodes share a name: a skeleton edits nodes by name, the full parse by place")
    return FrozenReading(scanned, library, path, file)


def _plausible_library(sample: list, payloads: list) -> Library:
    """The :class:`Library` of the payloads, once the graph's first nodes and
    functions look like a GraphDef's (as the full parse requires)."""
    library = Library(payloads)
    if not plausible_sample(sample, library):
        raise Invalid("names and op types unlike a GraphDef's")
    return library


def _scan_view(file: SourceFile) -> tuple["bytes | Window", Callable[[], bytes]]:
    """``(data, whole)`` to scan a file by: a :class:`Window`, or the bytes of a file
    of up to ``WHOLE_READ_LIMIT``; and a function that gives all its bytes."""
    if file.size <= WHOLE_READ_LIMIT:
        data = file.read(0, file.size)
        return data, lambda: data
    return Window(file), lambda: file.read(0, file.size)
