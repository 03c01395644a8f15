"""Frozen TF1 while loops (control flow v1 in a GraphDef, whose loop contexts freezing
lost): their structure, and gradients through them once graphgrad rebuilds the
contexts (graphgrad.tf.loops)."""

import numpy as np
import pytest

from conftest import fixture, run_cli
from graphgrad import read_model
from graphgrad.graph.loops import EXIT_SUFFIX, add_missing_exits, loops_of

X = np.array([1.1, 0.9], np.float32)


def test_the_loops_of_a_frozen_graph_are_found_from_its_structure():
    graph_def = read_model(fixture("tf1_nested_loops.pb")).message
    outer, inner = loops_of(graph_def)
    assert (outer.frame, outer.outer) == ("outer/while_context", "")
    assert (inner.frame, inner.outer) == ("outer/inner/while_context", "outer/while_context")
    assert (inner.pivot, inner.pivot_for_pred, inner.pivot_for_body) == (
        "outer/inner/LoopCond", "outer/inner/Merge", "outer/inner/Identity")
    assert "outer/pow" in outer.members and "outer/pow" not in inner.members  # an outer op reading a capture
    assert ("outer/inner/mul/Enter", True) in outer.enters  # x, captured for the inner loop, enters outer first


def test_an_exit_that_freezing_pruned_is_added_back():
    graph_def = read_model(fixture("tf1_nested_loops.pb")).message
    del graph_def.node[[node.name for node in graph_def.node].index("outer/Exit")]  # the counter, read by nobody
    assert add_missing_exits(graph_def) == ["outer/Switch" + EXIT_SUFFIX]
    assert add_missing_exits(graph_def) == []


def gradient_of(source, scope=""):
    from tf_helpers import tf, v1

    import graphgrad

    graph = tf.Graph()
    with graph.as_default():
        graphgrad.import_graph_def(source, name=scope)
        prefix = f"{scope}/" if scope else ""
        x, y = graph.get_tensor_by_name(prefix + "x:0"), graph.get_tensor_by_name(prefix + "y:0")
        [gradient] = v1.gradients(y, [x])
        with v1.Session(graph=graph) as session:
            return session.run(gradient, {x: X})


@pytest.mark.parametrize("scope", ["", "net"])
def test_nested_frozen_loops_differentiate(scope):
    np.testing.assert_allclose(gradient_of(fixture("tf1_nested_loops.pb"), scope), 12 * X.astype(np.float64) ** 11,
                               rtol=1e-5)


def test_a_frozen_loop_with_a_pruned_exit_differentiates(tmp_path):
    graph_def = read_model(fixture("tf1_nested_loops.pb")).message
    del graph_def.node[[node.name for node in graph_def.node].index("outer/Exit")]
    frozen = tmp_path / "pruned.pb"
    frozen.write_bytes(graph_def.SerializeToString())
    np.testing.assert_allclose(gradient_of(str(frozen)), 12 * X.astype(np.float64) ** 11, rtol=1e-5)


def test_the_graph_def_of_a_tf1_loop_meta_differentiates_without_its_collections(tmp_path):
    frozen = tmp_path / "loop.pb"
    frozen.write_bytes(read_model(fixture("tf1_loop.meta")).message.graph_def.SerializeToString())
    np.testing.assert_allclose(gradient_of(str(frozen)), 3 * X.astype(np.float64) ** 2, rtol=1e-5)


def test_an_override_in_a_frozen_loop_applies_at_every_round(tmp_path):
    """scale(2) on every Mul of both loops: what TensorFlow's gradient_override_map
    gives when the graph is imported under it (the contexts rebuilt the same way)."""
    from tf_helpers import tf, v1

    from graphgrad.tf.runtime import import_tf1_loops

    out = tmp_path / "scaled.pb"
    run_cli("rewrite", fixture("tf1_nested_loops.pb"), "--op", "Mul=scale(2)", "-o", out)
    try:
        # Mul's own gradient, doubled (the loops' Muls take equal shapes: no broadcast to undo)
        tf.RegisterGradient("TestDoubledMul")(lambda op, dy: [2 * dy * op.inputs[1], 2 * dy * op.inputs[0]])
    except KeyError:  # registered by an earlier run in this process
        pass
    graph = tf.Graph()
    with graph.as_default(), graph.gradient_override_map({"Mul": "TestDoubledMul"}):
        graph_def = v1.GraphDef.FromString(open(fixture("tf1_nested_loops.pb"), "rb").read())
        import_tf1_loops(tf, graph_def, name="")
    with graph.as_default():
        x, y = graph.get_tensor_by_name("x:0"), graph.get_tensor_by_name("y:0")
        [gradient] = v1.gradients(y, [x])
        with v1.Session(graph=graph) as session:
            reference = session.run(gradient, {x: X})
    scaled = gradient_of(str(out))
    np.testing.assert_allclose(scaled, reference, rtol=1e-5)
    assert not np.allclose(scaled, 12 * X.astype(np.float64) ** 11, rtol=1e-3)


def test_check_differentiates_frozen_loops():
    pytest.importorskip("tensorflow", reason="check runs the graph")
    report = run_cli("check", fixture("tf1_nested_loops.pb"), "--x", "x", "--y", "y").stdout
    assert "finite" in report and "ok" in report.splitlines()[-1]
