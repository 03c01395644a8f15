"""The scan of binary GraphDefs of large nodes (graphgrad.readings.scan): only selected nodes decoded."""

import pytest
from conftest import fast_rewrite as fast
from conftest import fast_summary, fixture, run_cli, stored_reading, written
from conftest import rule_options as options
from graphs import calling_graph, chain_graph, frozen_graph, many_nodes
from hypothesis import given, settings
from hypothesis import strategies as st

from graphgrad import SelectionError, iter_nodes, read_model, rewrite_model
from graphgrad.edits.rewrite import rewrite
from graphgrad.edits.summary import summarize_reading
from graphgrad.readings.errors import NotApplicable
from graphgrad.readings.scan import ScannedGraph
from graphgrad.graph.model import Model


@pytest.fixture
def reads(monkeypatch):
    """(start, end) of every read of a model file, as they happen."""
    from graphgrad.files.reading import SourceFile

    recorded = []
    original_read = SourceFile.read
    monkeypatch.setattr(SourceFile, "read", lambda self, start, end: recorded.append((start, end)) or
                        original_read(self, start, end))
    return recorded


@pytest.fixture
def frozen():
    return frozen_graph().SerializeToString(deterministic=True)


def test_same_meaning_as_a_full_parse_and_untouched_bytes_kept(frozen):
    rules = options(("op", "Relu=guided_relu"), ("op", "Sign=ste"))
    output, report = fast(frozen, rules)
    full, full_report = rewrite_model(Model(frozen_graph(), "graphdef", "binary"), rules)
    assert read_model_bytes(output) == full.message
    assert [c.node for c in report.changes] == [c.node for c in full_report.changes]
    assert "binarize/Sign" in [c.node for c in report.changes]
    for node in frozen_graph().node:
        if node.op == "Const":  # big constants are copied, byte for byte
            assert node.SerializeToString(deterministic=True) in output


@pytest.mark.parametrize("graph, rule, count", [
    (frozen_graph, "Relu=guided_relu", 8),  # scanned here
    (many_nodes, "Sign=ste", 151),  # parsed with graphgrad.readings.small_nodes's cut-down schema
])
def test_deterministic_idempotent_and_lossless(graph, rule, count):
    data = graph().SerializeToString(deterministic=True)
    rules = options(("op", rule))
    first, _ = fast(data, rules)
    assert fast(data, rules)[0] == first
    again, report = fast(first, rules)
    assert again == first and not report.changes and len(report.unchanged) == count
    untouched, report = fast(data, options(("node", "nothing*=ste"), allow_missing=True))
    assert untouched == data and not report.changes


def test_conflicts_force_and_hints_work_as_in_the_full_path(frozen):
    first, _ = fast(frozen, options(("op", "Relu=guided_relu")))
    with pytest.raises(Exception, match="already carry a different gradient override"):
        fast(first, options(("op", "Relu=identity")))
    with pytest.raises(Exception, match="case-sensitive: did you mean Relu"):
        fast(frozen, options(("op", "relu=identity")))
    forced, report = fast(first, options(("op", "Relu=identity"), force=True))
    assert len(report.changes) == 8 and all(c.old == "graphgrad/guided_relu" for c in report.changes)


def test_small_nodes_and_other_kinds_take_the_full_path():
    with pytest.raises(NotApplicable):
        ScannedGraph(chain_graph(2000).SerializeToString())
    for name in ("model.meta", "binary_net.pbtxt", "binary_net.pb"):
        with pytest.raises(NotApplicable):
            ScannedGraph(open(fixture(name), "rb").read())


def test_cli_uses_it_for_frozen_graphs(tmp_path):
    frozen = frozen_graph(layers=40, width=16).SerializeToString(deterministic=True)
    source = tmp_path / "frozen.pb"
    source.write_bytes(frozen)
    out = tmp_path / "out.pb"
    result = run_cli("rewrite", source, "--op", "Relu=guided_relu", "-o", out)
    assert "changed 40 node(s)" in result.stdout
    assert out.read_bytes() == fast(frozen, options(("op", "Relu=guided_relu")))[0]
    values = {r.override for r in iter_nodes(read_model(str(out))) if r.override}
    assert values == {"graphgrad/guided_relu"}
    in_place = tmp_path / "in_place.pb"
    in_place.write_bytes(out.read_bytes())
    again = run_cli("rewrite", in_place, "--op", "Relu=guided_relu", "--in-place")
    assert "changed 0 node(s); 40 already as asked" in again.stdout


def read_model_bytes(data):
    from graphgrad.files.reading import parse_model_bytes

    return parse_model_bytes(data)[0]


def calls_with_an_override() -> bytes:
    """Call ops whose function holds an override: the notes read the callers' NodeDefs."""
    graph_def = calling_graph()
    graph_def.library.function[0].node_def[0].attr["_gradient_op_type"].s = b"graphgrad/ste(clip=1.0)"
    return graph_def.SerializeToString()


@pytest.mark.parametrize("graph", [
    frozen_graph(layers=2, width=12).SerializeToString(),  # scanned here
    chain_graph(40).SerializeToString(),  # parsed with graphgrad.readings.small_nodes's cut-down schema
    calls_with_an_override(),
])
@settings(max_examples=300, deadline=2000)
@given(data=st.data())
def test_mutated_bytes_never_crash(graph, data):
    mutated = bytearray(graph)
    for _ in range(data.draw(st.integers(1, 6))):
        mutated[data.draw(st.integers(0, len(mutated) - 1))] = data.draw(st.integers(0, 255))
    try:  # once a reading is open, nothing in it steps aside: the file was found a GraphDef
        with stored_reading(bytes(mutated)) as opened:
            (_, bodies), = opened.bodies()
            summary = summarize_reading(opened)
            assert all(len(body.names) == len(body.ops) for body in bodies)
            assert summary.nodes_top == len(bodies[0].names)
            rewrite(opened, options(("op", "Relu=ste"), ("op", "Sign=ste"), allow_missing=True))
            assert isinstance(written(opened), bytes)
    except NotApplicable:
        pass  # the factory parses the file whole and reports what is wrong
    except SelectionError as error:  # a mutated override is one a rule may not replace without --force
        assert "add --force" in str(error)


def test_function_edits_survive_a_rule_that_misses(frozen):
    """The hint path looks at every node; it must not drop edits already made."""
    output, report = fast(frozen, options(("op", "Sign=ste"), ("op", "Round=ste"), allow_missing=True))
    assert [c.node for c in report.changes] == ["binarize/Sign"]
    assert "no node has op type 'Round'" in report.notes[0]
    functions = read_model_bytes(output).library.function
    assert functions[0].node_def[0].attr["_gradient_op_type"].s == b"graphgrad/ste(clip=1.0)"


def test_constants_are_copied_in_the_kernel_never_read(tmp_path, reads):
    from graphgrad.readings import open_reading

    frozen = frozen_graph(layers=8, width=256).SerializeToString(deterministic=True)
    source_path, out = tmp_path / "frozen.pb", tmp_path / "out.pb"
    source_path.write_bytes(frozen)
    with open_reading(str(source_path)) as opened:
        rewrite(opened, options(("op", "Relu=guided_relu")))
        assert opened.write(str(out), None, True)
    assert sum(end - start for start, end in reads) < len(frozen) / 20, "the scan read the constants"
    assert out.read_bytes() == fast(frozen, options(("op", "Relu=guided_relu")))[0]


def test_ops_on_a_frozen_model_reads_no_constant_and_sees_what_a_full_parse_sees(tmp_path, reads):
    from graphgrad.edits.summary import summarize
    from graphgrad.jobs.api import summarize_file

    graph_def = frozen_graph(layers=8, width=256)
    graph_def.node[3].attr["_gradient_op_type"].s = b"graphgrad/guided_relu"
    graph_def.node[6].attr["_gradient_op_type"].s = b"CustomGradient-9"  # dangling
    graph_def.node[5].input.extend(["^gone", "nowhere:1"])
    graph_def.node[8].name = graph_def.node[9].name  # a duplicate
    data = graph_def.SerializeToString(deterministic=True)
    path = tmp_path / "frozen.pb"
    path.write_bytes(data)
    summary = summarize_file(str(path))
    assert sum(end - start for start, end in reads) < len(data) / 20, "the summary read the constants"
    assert summary == summarize(Model(graph_def, "graphdef", "binary", str(path)))
    assert [o.status for o in summary.problems] == ["dangling"] and len(summary.graph_problems) == 3


def test_ops_takes_the_last_of_repeated_override_entries_as_protobuf_does():
    from graphgrad.edits.summary import summarize
    from graphgrad.readings.small_nodes import _attr_field
    from graphgrad.files.wireformat import encode_varint as _encode_varint

    graph_def = frozen_graph(layers=2, width=256, with_function=False)
    graph_def.node[3].attr["_gradient_op_type"].s = b"first"
    encodings = [node.SerializeToString(deterministic=True) for node in graph_def.node]
    encodings[3] += _attr_field("graphgrad/identity")  # a second entry of the same key, later on the wire
    data = b"".join(b"\x0a" + _encode_varint(len(encoded)) + encoded for encoded in encodings)
    stored = fast_summary(data)
    full = summarize(Model(read_model_bytes(data), "graphdef", "binary", stored.path))
    assert stored == full and [o.value for o in full.overrides] == ["graphgrad/identity"]


def test_a_small_file_is_read_once(tmp_path, reads):
    from graphgrad.readings import open_reading
    from graphgrad.readings.factory import WHOLE_READ_LIMIT

    frozen = frozen_graph(layers=8, width=64).SerializeToString(deterministic=True)
    assert len(frozen) <= WHOLE_READ_LIMIT
    source_path = tmp_path / "frozen.pb"
    source_path.write_bytes(frozen)
    out = tmp_path / "out.pb"
    with open_reading(str(source_path)) as opened:
        rewrite(opened, options(("op", "Relu=guided_relu")))
        assert reads == [(0, len(frozen))]
        opened.write(str(out), None, True)  # untouched ranges still copied in the kernel
    assert out.read_bytes() == fast(frozen, options(("op", "Relu=guided_relu")))[0]


@pytest.mark.parametrize("reset", [
    {}, {"op_types": ("Relu", "Identity")}, {"globs": ("dense1/*", "binarize/*", "layer1*")}, {"functions": False},
])
@pytest.mark.parametrize("graph", [
    lambda: frozen_graph(layers=8, width=256),  # scanned here
    many_nodes,  # parsed with graphgrad.readings.small_nodes's cut-down schema
])
def test_reset_without_inserted_nodes_equals_the_full_one(graph, reset):
    from graphgrad.edits.surgery import ResetOptions, reset_in, reset_model
    from graphgrad.readings import Needs

    rewritten, _ = fast(graph().SerializeToString(deterministic=True),
                        options(("op", "Relu=guided_relu"), ("op", "Sign=ste"), ("op", "Identity=identity"),
                                allow_missing=True))
    reset_options = ResetOptions(**reset)
    with stored_reading(rewritten, Needs(edits=True)) as opened:
        stored_report = reset_in(opened.scopes(reset_options.functions), reset_options)
        output = written(opened)
    full, report = reset_model(Model(read_model_bytes(rewritten), "graphdef", "binary"), reset_options)
    assert read_model_bytes(output) == full.message
    assert stored_report == report and report.overrides


def test_reset_of_a_frozen_model_reads_no_constant(tmp_path, reads):
    frozen = frozen_graph(layers=8, width=256)
    source = tmp_path / "frozen.pb"
    source.write_bytes(frozen.SerializeToString(deterministic=True))
    run_cli("rewrite", source, "--op", "Relu=guided_relu", "--op", "Sign=ste", "--in-place")
    reads.clear()
    result = run_cli("reset", source, "--in-place")
    assert sum(end - start for start, end in reads) < source.stat().st_size / 20, "the reset read the constants"
    assert "removed override 'graphgrad/guided_relu' from dense0/Relu" in result.stdout
    assert read_model(str(source)).message == frozen


def test_reset_undoes_inserted_nodes_without_reading_constants(tmp_path, reads):
    frozen = frozen_graph(layers=8, width=256)
    source, inserted, restored = tmp_path / "frozen.pb", tmp_path / "inserted.pb", tmp_path / "restored.pb"
    source.write_bytes(frozen.SerializeToString(deterministic=True))
    run_cli("insert", source, "--at", "dense3/Relu:0", "--grad", "ste", "--embed", "-o", inserted)
    reads.clear()
    result = run_cli("reset", inserted, "-o", restored)  # on the skeleton
    assert sum(end - start for start, end in reads) < source.stat().st_size / 20, "the reset read the constants"
    assert "dense3/Relu" in result.stdout
    assert read_model(str(restored)).message == frozen


@pytest.mark.parametrize("args", [
    ["insert", "--at", "dense3/Relu:0", "--grad", "scale(0.5)"],
    ["insert", "--at", "dense3/Relu:0", "--grad", "ste", "--embed"],
    ["insert", "--at", "dense3/kernel:0", "--grad", "reverse"],  # a constant's own output: its value is not read
    ["rewrite", "--op", "Relu=identity|scale(2)", "--embed"],
    ["rewrite", "--op", "Relu=zero", "--op", "Sign=ste", "--embed"],  # the Sign in a function body
])
def test_node_level_edits_of_a_frozen_model_read_no_constant(tmp_path, reads, args):
    """insert and --embed on the skeleton (graphgrad.readings.skeleton): the constants
    are copied by range, never read, and the result is the full parse's, byte for
    byte once parsed; a second run finds it up to date."""
    from graphgrad import parse_spec, rewrite_model
    from graphgrad.edits.surgery import InsertOptions, insert_gradient

    frozen = frozen_graph(layers=8, width=256)
    source, out = tmp_path / "frozen.pb", tmp_path / "out.pb"
    source.write_bytes(frozen.SerializeToString(deterministic=True))
    reads.clear()
    run_cli(args[0], source, *args[1:], "-o", out)
    assert sum(end - start for start, end in reads) < source.stat().st_size / 20, "the edit read the constants"
    model = Model(frozen, "graphdef", "binary")
    if args[0] == "insert":
        spec, embed = parse_spec(args[4]), "--embed" in args
        expected, _ = insert_gradient(model, InsertOptions(args[2], spec, embed=embed))
    else:
        rules = [("op", args[i + 1]) for i, a in enumerate(args) if a == "--op"]
        expected, _ = rewrite_model(model, options(*rules, embed=True, allow_missing=True))
    assert read_model(str(out)).message == expected.message
    run_cli(args[0], out, *args[1:], "-o", tmp_path / "again.pb")  # idempotent: nothing more to do
    assert read_model(str(tmp_path / "again.pb")).message == expected.message
    run_cli(args[0], source, *args[1:], "-o", tmp_path / "twice.pb")  # equal inputs give equal bytes
    assert (tmp_path / "twice.pb").read_bytes() == out.read_bytes()


def test_ranges_are_copied_where_the_kernel_cannot(tmp_path, monkeypatch):
    import os

    refused = []

    def refuse(*args):
        refused.append(args)
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(os, "copy_file_range", refuse)
    frozen = frozen_graph(layers=8, width=256).SerializeToString(deterministic=True)  # over WHOLE_READ_LIMIT
    source = tmp_path / "frozen.pb"
    source.write_bytes(frozen)
    run_cli("rewrite", source, "--op", "Relu=guided_relu", "--in-place")
    assert refused and source.read_bytes() == fast(frozen, options(("op", "Relu=guided_relu")))[0]


def test_in_place_copies_from_the_file_it_replaces(tmp_path):
    frozen = frozen_graph(layers=8, width=256).SerializeToString(deterministic=True)
    source = tmp_path / "frozen.pb"
    source.write_bytes(frozen)
    run_cli("rewrite", source, "--op", "Relu=guided_relu", "--in-place", "--backup", ".orig")
    assert source.read_bytes() == fast(frozen, options(("op", "Relu=guided_relu")))[0]
    assert (tmp_path / "frozen.pb.orig").read_bytes() == frozen
