"""The one factory of readings (graphgrad.readings.open_reading): what it opens,
and that the per-reading fixture covers every module that opens a reading."""

import importlib
import sys

import pytest
from conftest import fixture

from graphgrad import read_model
from graphgrad.readings import Needs, open_reading

READING_CLASS = {"parsed": "ParsedReading", "scanned": "FrozenReading", "stored": "StoredReading"}


def test_a_new_module_that_opens_a_reading_is_covered_by_the_per_reading_fixture(reading, tmp_path, monkeypatch):
    """A module written after the fixture, which imports the factory by name, still
    opens the reading the fixture forces: the fixture patches the factory's one
    choice, not the modules that call it."""
    (tmp_path / "a_new_job.py").write_text(
        "from graphgrad.readings import open_reading\n\n\n"
        "def reading_of(path):\n"
        "    with open_reading(path) as opened:\n"
        "        return type(opened).__name__, len(opened.candidates())\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    new_job = importlib.import_module("a_new_job")
    try:
        name, count = new_job.reading_of(fixture("dense_net.pb"))
    finally:
        sys.modules.pop("a_new_job", None)
    assert name == READING_CLASS[reading.name]
    assert count == len(read_model(fixture("dense_net.pb")).message.node)


@pytest.mark.parametrize("name, needs, expected", [
    ("dense_net.pb", Needs(), "StoredReading"),  # many small nodes
    ("ste_sign_frozen.pb", Needs(), "StoredReading"),
    ("dense_net.pb", Needs(parse=True), "ParsedReading"),  # a text output, tensor parameters
    ("model.meta", Needs(), "ParsedReading"),  # not a lone GraphDef
    ("binary_net.pbtxt", Needs(), "ParsedReading"),
])
def test_the_factory_opens_the_fastest_reading_that_gives_what_the_job_needs(name, needs, expected):
    with open_reading(fixture(name), needs=needs) as opened:
        assert type(opened).__name__ == expected
        assert opened.model().message == read_model(fixture(name)).message


def test_a_frozen_model_is_read_through_its_scan_unless_its_nodes_share_a_name_for_edits(tmp_path):
    from graphs import frozen_graph

    graph_def = frozen_graph(layers=3, width=256)
    path = tmp_path / "frozen.pb"
    path.write_bytes(graph_def.SerializeToString())
    with open_reading(str(path), needs=Needs(edits=True)) as opened:
        assert type(opened).__name__ == "FrozenReading"
    graph_def.node[4].name = graph_def.node[5].name
    path.write_bytes(graph_def.SerializeToString())
    with open_reading(str(path)) as opened:
        assert type(opened).__name__ == "FrozenReading"  # rules and summaries read nodes by place
    with open_reading(str(path), needs=Needs(edits=True)) as opened:
        assert type(opened).__name__ == "ParsedReading"  # a skeleton edits nodes by name


def test_a_loaded_model_is_read_as_it_is_and_edited_in_place():
    model = read_model(fixture("dense_net.pb"))
    with open_reading(model) as opened:
        (node, *_) = opened.candidates({"Relu"})
        node.set_override("graphgrad/identity")
        assert opened.model() is model
    assert sum(ref.override == "graphgrad/identity" for ref in opened.candidates()) == 1
