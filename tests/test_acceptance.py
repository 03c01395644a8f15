"""The reference cases: plain graph built with TensorFlow (fixtures/acceptance),
rewritten with the CLI, loaded, registered, differentiated."""

import numpy as np

from conftest import fixture
from tf_helpers import assert_close, gradients, load, rewrite_and_load, run_cli, tf, v1

import graphgrad


def test_gradient_reversal(tmp_path):
    source = fixture("acceptance", "reversal.pb")
    feed = {"x1:0": 1.0, "x2:0": 2.0}
    assert_close(gradients(load(source), "out:0", "sum:0", feed)[0], 1.0)
    graph = rewrite_and_load(tmp_path, source, "--node", "out=reverse")
    assert_close(gradients(graph, "out:0", "sum:0", feed)[0], -1.0)
    assert_close(gradients(graph, "out:0", ["x1:0", "x2:0"], feed), [-1.0, -1.0])


def test_clip_value_and_scale_on_identity(tmp_path):
    source = fixture("acceptance", "identity.pb")
    feed = {"x:0": [3.0]}
    assert_close(gradients(load(source), "out:0", "x:0", feed)[0], [1.0])
    clipped = rewrite_and_load(tmp_path, source, "--op", "Identity=clip_value(-0.1, 0.1)")
    assert_close(gradients(clipped, "out:0", "x:0", feed)[0], [0.1])
    scaled = rewrite_and_load(tmp_path, source, "--op", "Identity=scale(5.0)")
    assert_close(gradients(scaled, "out:0", "x:0", feed)[0], [5.0])


def test_quantize_grad_on_sign(tmp_path):
    source = fixture("acceptance", "sign_sum.pb")
    feed = {"x:0": [0.5, -2.0, 0.0]}
    assert_close(gradients(load(source), "y:0", "x:0", feed)[0], [0.0, 0.0, 0.0])
    graph = rewrite_and_load(tmp_path, source, "--op", "Sign=QuantizeGrad")
    assert_close(gradients(graph, "y:0", "x:0", feed)[0], [2.0, 0.0, 2.0])


def test_select_on_pack(tmp_path):
    source = fixture("acceptance", "pack.pb")
    feed = {"x:0": [1.0, 2.0]}
    grad_ys = np.array([[3.0, 4.0], [6.0, 8.0]], np.float32)
    assert_close(gradients(load(source), "stacked:0", "x:0", feed, grad_ys)[0], [9.0, 12.0])
    graph = rewrite_and_load(tmp_path, source, "--op", "Pack=select(0)")
    assert_close(gradients(graph, "stacked:0", "x:0", feed, grad_ys)[0], [3.0, 4.0])


def test_clip_norm_through_pyfunc_identities(tmp_path):
    # PyFunc nodes refer to Python functions of the process that made them, so
    # this plain graph is built here rather than loaded from fixtures/.
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [2, 2], name="x")
        y = v1.placeholder(tf.float32, [2, 2], name="y")
        cx = v1.py_func(lambda a: a, [x], tf.float32, name="cx")
        cy = v1.py_func(lambda a: a, [y], tf.float32, name="cy")
        cx.set_shape([2, 2])
        cy.set_shape([2, 2])
        tf.reduce_sum(tf.matmul(cx, cy), name="loss")
    source = tmp_path / "pyfunc.pb"
    source.write_bytes(graph.as_graph_def().SerializeToString())
    feed = {"x:0": [[1.0, 2.0], [3.0, 4.0]], "y:0": [[1.0, 2.0], [3.0, 4.0]]}
    assert gradients(load(source), "loss:0", "x:0", feed) == [None]
    plain = rewrite_and_load(tmp_path, source, "--op", "PyFunc=identity")
    assert_close(gradients(plain, "loss:0", "x:0", feed)[0], [[3, 7], [3, 7]])
    clipped = rewrite_and_load(
        tmp_path, source, "--node", "cx=identity|clip_norm(1.0)", "--node", "cy=identity|clip_norm(0.5)"
    )
    assert_close(
        gradients(clipped, "loss:0", "x:0", feed)[0],
        [[0.278543, 0.6499337], [0.278543, 0.6499337]],
    )


def test_sign_graph_in_tf2_with_wrap_function_and_gradient_tape(tmp_path):
    out = tmp_path / "sign_ste.pb"
    run_cli("rewrite", fixture("acceptance", "sign_sum.pb"), "--op", "Sign=QuantizeGrad", "-o", out)
    graph_def = graphgrad.read_model(str(out)).message
    graphgrad.register_gradients(graph_def)
    tf_graph_def = tf.compat.v1.GraphDef.FromString(graph_def.SerializeToString())
    wrapped = v1.wrap_function(lambda: v1.import_graph_def(tf_graph_def, name=""), [])
    function = wrapped.prune(feeds="x:0", fetches="y:0")
    x = tf.constant([0.5, -2.0, 0.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = function(x)
    assert_close(tape.gradient(y, x), [2.0, 0.0, 2.0])


def test_override_map_gives_the_same_numbers():
    """The reference: TensorFlow's own gradient_override_map with graphgrad's name."""
    name = graphgrad.parse_spec("QuantizeGrad").attr_value
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [3], name="x")
        with graph.gradient_override_map({"Sign": name}):
            y = tf.reduce_sum(2.0 * tf.sign(x))
    graphgrad.register_gradients(graph)
    assert_close(gradients(graph, y, x, {x: [0.5, -2.0, 0.0]})[0], [2.0, 0.0, 2.0])
