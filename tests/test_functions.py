"""Call ops whose functions hold overrides: found without TensorFlow, and named
by `ops` and `rewrite` with what to do (graph mode ignores those overrides unless
the calls are routed; see test_runtime for the routing itself)."""

import json

import numpy as np
import pytest
from conftest import fixture, run_cli
from graphs import calling_graph

from graphgrad import read_model, summarize
from graphgrad.graph.functions import (
    called_function, calls_behind_branches, calls_into_overrides, function_bodies, functions_with_overrides,
    graph_calls_into_overrides, unrouted_calls_note,
)
from graphgrad.files.protos import NodeDef
from graphgrad.tf.runtime import route_calls_in, with_routed_calls

NOTE = "call op(s) run functions that hold gradient overrides"


def with_override(graph_def, function: str):
    [body] = [f for f in graph_def.library.function if f.signature.name == function]
    body.node_def[0].attr["_gradient_op_type"].s = b"graphgrad/ste(clip=1.0)"
    return graph_def


def test_an_override_reaches_every_function_that_runs_its_function():
    graph_def = with_override(calling_graph(), "binarize")
    assert functions_with_overrides(function_bodies(graph_def)) == {"binarize", "outer"}


def test_tf_functions_own_call_names_and_plain_bodies_are_no_overrides():
    assert functions_with_overrides(function_bodies(calling_graph())) == set()
    assert graph_calls_into_overrides(calling_graph()) == []


def test_calls_into_overriding_functions_top_level_first():
    graph_def = with_override(calling_graph(), "binarize")
    assert graph_calls_into_overrides(graph_def) == ["model/call", "outer/call_binarize"]


def test_an_override_in_a_branch_needs_no_routing():
    """If/While gradients are built in Python from the branch functions, so the
    overrides inside apply; only calls are differentiated in C++."""
    graph_def = with_override(calling_graph(), "branch")
    assert functions_with_overrides(function_bodies(graph_def)) == {"branch"}
    assert calls_into_overrides(graph_def.node, function_bodies(graph_def)) == []


def test_a_node_whose_op_type_is_a_function_is_a_call():
    graph_def = with_override(calling_graph(), "binarize")
    graph_def.node.add(name="direct", op="binarize", input=["x"])
    assert graph_calls_into_overrides(graph_def)[:2] == ["model/call", "direct"]


def test_a_call_op_without_f_calls_nothing_and_is_left_as_it_was():
    node = NodeDef(name="broken", op="PartitionedCall")
    assert called_function(node.op, node.attr) == ""
    assert "f" not in node.attr


def with_call_in_branch(graph_def):
    """``branch`` (an If's branch at the top level) calls ``binarize`` too."""
    [branch] = [f for f in graph_def.library.function if f.signature.name == "branch"]
    call = branch.node_def.add(name="call", op="PartitionedCall", input=["a"])
    call.attr["f"].func.name = "binarize"
    return graph_def


def test_calls_behind_branches_are_those_a_built_graph_cannot_route():
    graph_def = with_override(calling_graph(), "binarize")
    assert calls_behind_branches(graph_def.node, function_bodies(graph_def)) == []  # reached through calls only
    with_call_in_branch(graph_def)
    assert graph_calls_into_overrides(graph_def) == ["model/call", "outer/call_binarize", "branch/call"]
    assert calls_behind_branches(graph_def.node, function_bodies(graph_def)) == ["branch/call"]


def test_a_branch_inside_a_branch_function_is_behind_a_branch_too():
    graph_def = with_override(with_call_in_branch(calling_graph()), "binarize")
    [branch] = [f for f in graph_def.library.function if f.signature.name == "branch"]
    outer_branch = graph_def.library.function.add()
    outer_branch.signature.name = "outer_branch"
    cond = outer_branch.node_def.add(name="cond", op="StatelessIf")
    cond.attr["then_branch"].func.name = "branch"
    graph_def.node[-1].attr["then_branch"].func.name = "outer_branch"  # the top level's If
    graph_def.node[-1].attr["else_branch"].func.name = "outer_branch"
    assert calls_behind_branches(graph_def.node, function_bodies(graph_def)) == ["branch/call"]
    assert branch.node_def[-1].name == "call"


def test_routing_marks_every_call_into_an_override_before_the_graph_is_built():
    graph_def = with_override(with_call_in_branch(calling_graph()), "binarize")
    routed = with_routed_calls(graph_def)
    assert routed is not graph_def and graph_calls_into_overrides(graph_def) != []  # the input is left as it was
    assert graph_calls_into_overrides(routed) == []
    assert route_calls_in(graph_def) == ["model/call", "outer/call_binarize", "branch/call"]
    assert graph_def.node[-2].attr["_gradient_op_type"].s == b"graphgrad/call"
    plain = calling_graph()
    assert with_routed_calls(plain) is plain


@pytest.mark.parametrize("frozen", [False, True], ids=["small nodes", "frozen (scanned)"])
def test_rewrite_and_ops_name_the_calls_and_the_fix(tmp_path, frozen):
    source, out = tmp_path / "model.pb", tmp_path / "out.pb"
    source.write_bytes(calling_graph(frozen).SerializeToString())
    assert NOTE not in run_cli("ops", source).output
    rewritten = run_cli("rewrite", source, "--op", "Sign=ste", "-o", out).output
    expected = "2 call op(s) run functions that hold gradient overrides (model/call, outer/call_binarize)"
    assert expected in rewritten
    assert "To apply them, import with graphgrad.import_graph_def, or run graphgrad.register_gradients(graph)" \
        in rewritten
    assert expected in run_cli("ops", out).output
    assert json.loads(run_cli("ops", out, "--json").output)["files"][0]["unrouted_calls"] == [
        "model/call", "outer/call_binarize",
    ]


def test_no_note_when_only_branches_hold_overrides(tmp_path):
    source, out = tmp_path / "model.pb", tmp_path / "out.pb"
    source.write_bytes(calling_graph().SerializeToString())
    rewritten = run_cli("rewrite", source, "--node", "branch/Sign=ste", "-o", out).output
    assert "changed 1 node(s)" in rewritten and NOTE not in rewritten
    assert json.loads(run_cli("ops", out, "--json").output)["files"][0]["unrouted_calls"] == []


def test_a_tf2_saved_model_names_its_graph(tmp_path):
    out = tmp_path / "sm"
    rewritten = run_cli("rewrite", fixture("tf2_saved_model"), "--op", "Sign=ste", "-o", out).output
    calls = summarize(read_model(str(out))).unrouted_calls
    assert calls[0] == "meta_graph 0 [serve]: PartitionedCall"
    assert f"{len(calls)} {NOTE} ({', '.join(calls)})" in rewritten
    assert summarize(read_model(fixture("tf2_saved_model"))).unrouted_calls == []


def test_a_batch_prints_each_distinct_note_once_with_its_files(tmp_path):
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    for name in ("a.pb", "b.pb"):
        (zoo / name).write_bytes(calling_graph().SerializeToString())
    output = run_cli("rewrite", zoo, "--op", "Sign=ste", "--op", "Round=ste", "--allow-missing",
                     "--out-dir", tmp_path / "out").output
    notes = [line for line in output.splitlines() if line.startswith("note (")]
    assert notes == [
        f"note (2 files, as {zoo / 'a.pb'}): no node has op type 'Round'",
        f"note (2 files, as {zoo / 'a.pb'}): {unrouted_calls_note(['model/call', 'outer/call_binarize'])}",
    ]


def test_a_batch_lists_five_distinct_notes_and_counts_the_rest(tmp_path):
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    for name in ("a.pb", "b.pb"):
        (zoo / name).write_bytes(calling_graph().SerializeToString())
    missing = [f"--op=Missing{index}=ste" for index in range(7)]
    output = run_cli("rewrite", zoo, "--op", "Sign=ste", *missing, "--allow-missing", "--dry-run").output
    assert sum(line.startswith("note (2 files") for line in output.splitlines()) == 5
    assert "(+3 more notes: --json gives every file's)" in output


@pytest.mark.parametrize("name, body", [("call_in_branch.pb", "cond_true_"), ("call_in_loop.pb", "while_body_")])
def test_calls_in_branches_and_loop_bodies_of_traced_graphs(tmp_path, name, body):
    out = tmp_path / "out.pb"
    run_cli("rewrite", fixture(name), "--op", "Sign=ste", "-o", out)
    graph_def = read_model(str(out)).message
    [call] = graph_calls_into_overrides(graph_def)
    assert call.startswith(body) and call.endswith("/PartitionedCall")
    assert calls_behind_branches(graph_def.node, function_bodies(graph_def)) == [call]


def test_call_cycles_are_found_and_chains_are_not():
    from graphgrad.graph.functions import call_cycle

    def node(name, op, f=None):
        made = NodeDef(name=name, op=op)
        if f is not None:
            made.attr["f"].func.name = f
        return made

    chain = {"a": [node("n", "b")], "b": [node("n", "c")], "c": [node("n", "Add")]}
    assert call_cycle(chain) == []
    assert call_cycle({**chain, "c": [node("n", "PartitionedCall", "a")]}) == ["a", "b", "c", "a"]
    assert call_cycle({"f": [node("n", "f")]}) == ["f", "f"]
    diamond = {"a": [node("n", "b"), node("m", "c")], "b": [node("n", "d")], "c": [node("n", "d")], "d": []}
    assert call_cycle(diamond) == []


def test_check_through_twenty_nested_calls_ends_and_is_right(tmp_path):
    """Twenty tf.functions each calling the next: the call gradient's copies inline the
    calls below them, where kept as calls they made TensorFlow's first run grow
    exponentially with the depth (48 s at 12, unfinished in 420 s at 20)."""
    tf = pytest.importorskip("tensorflow", reason="needs TensorFlow")
    graph = tf.Graph()
    with graph.as_default():
        function = tf.function(lambda t: tf.sin(t) * 2.0)
        for _ in range(20):
            function = tf.function(lambda t, inner=function: inner(t) + 1.0)
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        tf.identity(function(x), name="y")
    path = tmp_path / "nested.pb"
    path.write_bytes(graph.as_graph_def().SerializeToString())
    report = json.loads(run_cli("check", path, "--x", "x", "--y", "y", "--feed", "x=[0.5,1,2]", "--json").stdout)
    expected = 2 * np.cos(np.array([0.5, 1.0, 2.0]))  # d/dx (2 sin x + 20)
    assert report["gradients"][0]["norm"] == pytest.approx(float(np.linalg.norm(expected)), rel=1e-5)


def test_functions_with_overrides_walk_back_a_chain_of_ten_thousand_calls():
    """f0 calls f1 ... calls f9999, whose Sign carries an override: every function of
    the chain holds it (through its calls), and one beside the chain does not. The
    walk goes back along the calls once (a fixpoint over every function, repeated
    once a level, took minutes on such a chain: issue 49.5)."""
    depth = 10_000
    bodies = {f"f{i}": [NodeDef(name="inner", op=f"f{i + 1}")] for i in range(depth - 1)}
    sign = NodeDef(name="sign", op="Sign")
    sign.attr["_gradient_op_type"].s = b"graphgrad/ste(clip=1.0)"
    bodies[f"f{depth - 1}"] = [sign]
    bodies["beside"] = [NodeDef(name="add", op="AddV2")]
    assert functions_with_overrides(bodies) == {f"f{i}" for i in range(depth)}
