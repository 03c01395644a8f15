"""The cut-down parses for GraphDefs of many small nodes (graphgrad.readings.small_nodes)."""

import pytest
from conftest import fast_rewrite as fast
from conftest import rule_options as options
from conftest import fast_summary, run_cli, stored_reading
from graphs import chain_graph, frozen_graph, many_nodes

from graphgrad import iter_nodes, read_model, rewrite_model
from graphgrad.files.reading import parse_model_bytes
from graphgrad.readings.errors import NotApplicable, SmallNodes
from graphgrad.readings.scan import ScannedGraph
from graphgrad.readings.small_nodes import HeadGraph, parse
from graphgrad.graph.model import Model
from graphgrad.names import ATTR


@pytest.fixture
def data():
    return many_nodes().SerializeToString(deterministic=True)


def test_small_nodes_take_the_cut_down_parse(data):
    with pytest.raises(SmallNodes):
        ScannedGraph(data)
    assert len(HeadGraph(data).candidates({"Sign"})) == 150


def test_same_meaning_as_a_full_parse(data):
    rules = options(("op", "Sign=ste"), ("node", "layer1?/Identity=reverse"))
    output, report = fast(data, rules)
    full, full_report = rewrite_model(Model(many_nodes(), "graphdef", "binary"), rules)
    assert parse_model_bytes(output)[0] == full.message
    assert [(c.node, c.old, c.new) for c in report.changes] == [(c.node, c.old, c.new) for c in full_report.changes]
    assert len(report.changes) == 150 + 5 + 1  # Signs, layer10..18 Identities, the function's Sign


def test_untouched_bytes_kept_and_no_change_is_the_same_file(data):
    untouched, report = fast(data, options(("node", "nothing*=ste"), allow_missing=True))
    assert untouched == data and not report.changes
    output, _ = fast(data, options(("op", "Identity=reverse")))
    for node in many_nodes().node:
        if node.op != "Identity":
            assert node.SerializeToString(deterministic=True) in output


@pytest.mark.parametrize("rules", [
    [("op", "Sign=ste")],  # node encodings edited by op type
    [("node", "layer1*/Sign=ste"), ("op", "Identity=reverse")],  # nodes parsed as NodeHead
])
def test_a_second_run_gives_the_same_bytes_with_fields_after_the_attributes(rules):
    graph_def = chain_graph(300)
    for node in graph_def.node:  # field 6, written after attr (5) by every serializer
        node.experimental_debug_info.original_node_names.append(node.name + "/original")
    data = graph_def.SerializeToString(deterministic=True)
    first, report = fast(data, options(*rules))
    again, again_report = fast(first, options(*rules))
    assert report.changes and not again_report.changes and again == first
    full, _ = rewrite_model(Model(graph_def, "graphdef", "binary"), options(*rules))
    assert parse_model_bytes(first)[0] == full.message


def test_refusal_and_force_leave_one_entry_per_node(data):
    first, _ = fast(data, options(("op", "Sign=ste")))
    with pytest.raises(Exception, match="already carry a different gradient override"):
        fast(first, options(("op", "Sign=identity")))
    forced, report = fast(first, options(("op", "Sign=identity"), force=True))
    assert len(report.changes) == 151 and {c.old for c in report.changes} == {"graphgrad/ste(clip=1.0)"}
    for head in parse("GraphHeads", forced).node:
        keys = [parse("AttrEntry", raw).key for raw in head.attr]
        assert keys.count(ATTR) == (head.op == "Sign")
    values = {ref.override for ref in iter_nodes(Model(parse_model_bytes(forced)[0], "graphdef", "binary"))}
    assert values == {None, "graphgrad/identity"}


def test_hints_see_every_node_and_keep_function_edits(data):
    output, report = fast(data, options(("op", "Sign=ste"), ("op", "sign=ste"), allow_missing=True))
    assert "case-sensitive: did you mean Sign" in report.notes[0]
    functions = parse_model_bytes(output)[0].library.function
    assert functions[0].node_def[0].attr[ATTR].s == b"graphgrad/ste(clip=1.0)"


def test_cli_rewrites_a_chain_through_it(tmp_path):
    chain = chain_graph(40000).SerializeToString(deterministic=True)
    source, out = tmp_path / "chain.pb", tmp_path / "out.pb"
    source.write_bytes(chain)
    result = run_cli("rewrite", source, "--op", "Sign=ste", "-o", out)
    assert "changed 20000 node(s)" in result.stdout
    assert out.read_bytes() == fast(chain, options(("op", "Sign=ste")))[0]
    overrides = [ref.override for ref in iter_nodes(read_model(str(out))) if ref.op_type == "Sign"]
    assert len(overrides) == 20000 and set(overrides) == {"graphgrad/ste(clip=1.0)"}


def summaries(data, functions=True):
    """(cut-down summary, full-parse summary) of GraphDef bytes."""
    from graphgrad.edits.summary import summarize

    stored = fast_summary(data, functions)
    full = summarize(Model(parse_model_bytes(data)[0], "graphdef", "binary", stored.path), functions)
    return stored, full


@pytest.mark.parametrize("functions", [True, False])
def test_flat_summary_equals_a_full_one(data, functions):
    rewritten, _ = fast(data, options(("op", "Sign=ste"), ("node", "layer10/Identity=reverse")))
    fast_summary, full = summaries(rewritten, functions)
    assert fast_summary == full
    assert len(full.overrides) == 150 + 1 + functions and not full.graph_problems


def test_flat_summary_finds_the_same_problems():
    graph_def = many_nodes()
    graph_def.node[3].name = graph_def.node[4].name  # a duplicate
    graph_def.node[9].input.extend(["^x", "x:1", "nowhere", "^gone", "gone:2"])
    graph_def.node[11].attr[ATTR].s = b"CustomGradient-7"
    fast_summary, full = summaries(graph_def.SerializeToString())
    assert fast_summary == full
    assert len(full.graph_problems) == 3  # the duplicate, the input of the node after it, node 9's
    assert "refers to missing input(s) nowhere, ^gone, gone:2" in full.graph_problems[-1]
    assert [o.status for o in full.problems] == ["dangling"]


def test_the_override_name_elsewhere_in_the_bytes_is_no_override():
    graph_def = many_nodes()
    graph_def.node[5].attr["note"].s = ATTR.encode()  # the name as a value, under another key
    fast_summary, full = summaries(graph_def.SerializeToString())
    assert fast_summary == full
    original = summaries(many_nodes().SerializeToString())[1]
    assert [o.node for o in full.overrides] == [o.node for o in original.overrides]


@pytest.mark.parametrize("index", [3, 100])  # in the scanner's sample, or past it
def test_a_node_without_an_op_among_the_first_is_refused_as_the_full_parse_refuses(tmp_path, index):
    graph_def = chain_graph(300)
    graph_def.node[index].op = ""
    data = graph_def.SerializeToString()
    with pytest.raises(NotApplicable):
        with stored_reading(data):
            pass
    source, out = tmp_path / "g.pb", tmp_path / "out.pb"
    source.write_bytes(data)
    result = run_cli("rewrite", source, "--op", "Sign=ste", "-o", out, expect=1)  # the full parse refuses it
    assert "is not a TensorFlow graph file" in result.stderr and not out.exists()


def test_cli_ops_groups_thousands_of_overrides(tmp_path):
    chain = tmp_path / "chain.pb"
    chain.write_bytes(chain_graph(40000).SerializeToString())
    run_cli("rewrite", chain, "--op", "Sign=ste", "--in-place")
    text = run_cli("ops", chain).stdout
    assert "gradient overrides (20000):" in text
    assert "Sign     20000  graphgrad/ste(clip=1.0)  graphgrad  layer1/Sign, layer3/Sign, ..." in text
    import json

    listed = json.loads(run_cli("ops", chain, "--json").stdout)["files"][0]["overrides"]
    assert len(listed) == 20000 and listed[0]["node"] == "layer1/Sign"


def test_a_node_without_an_op_past_the_first_reads_as_the_full_parse_reads_it():
    """Past the nodes the full parse looks at, a node without an op is read: the
    flat lists would not line up with the nodes, so they are read node by node."""
    graph_def = chain_graph(1100)
    graph_def.node[1050].op = ""
    data = graph_def.SerializeToString()
    stored, full = summaries(data)
    assert stored == full and full.nodes_top == len(graph_def.node)
    rules = options(("op", "Sign=ste"))
    output, report = fast(data, rules)
    expected, expected_report = rewrite_model(Model(graph_def, "graphdef", "binary"), rules)
    assert parse_model_bytes(output)[0] == expected.message and report == expected_report


@pytest.mark.parametrize("rules", [
    [("op", "Sign=ste"), ("op", "Identity=reverse"), ("op", "Sign=ste(clip=1)")],
    [("op", "Sign=ste"), ("op", "Round=ste")],
    [("op", "sign=ste"), ("op", "Identity=reverse")],
    [("op", "Sign=ste"), ("op", "Sign=identity")],
])
@pytest.mark.parametrize("allow_missing", [False, True])
def test_plain_op_rules_skip_the_per_node_objects_with_the_same_outcome(monkeypatch, rules, allow_missing):
    import graphgrad.edits.rewrite

    graph_def = chain_graph(300)
    data = graph_def.SerializeToString()
    rewrite_options = options(*rules, allow_missing=allow_missing)
    try:
        full, full_report = rewrite_model(Model(graph_def, "graphdef", "binary"), rewrite_options)
    except Exception as error:
        full_error = str(error)
    else:
        full_error = None
    monkeypatch.setattr(graphgrad.edits.rewrite, "apply_rules", None)  # the per-node path would fail
    try:
        output, report = fast(data, rewrite_options)
    except Exception as error:
        assert str(error) == full_error
        return
    assert full_error is None
    assert parse_model_bytes(output)[0] == full.message
    assert report == full_report


def test_an_output_that_already_holds_the_bytes_is_not_rewritten(tmp_path):
    import os

    for name, graph_def in (("chain.pb", chain_graph(300)), ("frozen.pb", frozen_graph())):
        source, out = tmp_path / name, tmp_path / f"out_{name}"
        source.write_bytes(graph_def.SerializeToString())
        run_cli("rewrite", source, "--op", "Sign=ste", "-o", out)
        os.utime(out, (1, 1))
        run_cli("rewrite", source, "--op", "Sign=ste", "-o", out)
        assert os.stat(out).st_mtime == 1, name
