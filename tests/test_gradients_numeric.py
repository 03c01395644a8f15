"""Every built-in gradient against its formula, on random inputs, in TensorFlow."""

import numpy as np
import pytest

from tf_helpers import assert_close, gradients, tf, v1

import graphgrad
from graphgrad import REGISTRY

RNG = np.random.default_rng(1234)
X = RNG.uniform(-2.0, 2.0, 64).astype(np.float32)
W = RNG.uniform(-2.0, 2.0, 64).astype(np.float32)
DY = RNG.normal(size=64).astype(np.float32)


def unary(op_type, spec, x=X, dy=DY):
    """d op(x) / dx with upstream dy, where op is Sign, Relu, Identity, ..."""
    build = {"Sign": tf.sign, "Relu": tf.nn.relu, "Identity": tf.identity, "Round": tf.round}[op_type]
    graph = tf.Graph()
    with graph.as_default():
        xt = v1.placeholder(tf.float32, x.shape)
        y = build(xt)
        graphgrad.override(graph, {op_type: spec})
        return gradients(graph, y, xt, {xt: x}, grad_ys=dy)[0]


def binary(spec, op_type="Mul", dy=DY):
    """Gradients of op(x, w) for both inputs with upstream dy."""
    build = {"Mul": tf.multiply, "AddV2": tf.add}[op_type]
    graph = tf.Graph()
    with graph.as_default():
        xt = v1.placeholder(tf.float32, X.shape)
        wt = v1.placeholder(tf.float32, W.shape)
        y = build(xt, wt)
        graphgrad.override(graph, {op_type: spec})
        return gradients(graph, y, [xt, wt], {xt: X, wt: W}, grad_ys=dy)


def swish_sign(x, beta):
    return beta * (2 - beta * x * np.tanh(beta * x / 2)) / (1 + np.cosh(beta * x))


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("identity", DY),
        ("ste", DY * (np.abs(X) <= 1.0)),
        ("ste(clip=0.5)", DY * (np.abs(X) <= 0.5)),
        ("QuantizeGrad", DY * (np.abs(X) <= 1.0)),
        ("approx_sign", DY * np.maximum(0, 2 - 2 * np.abs(X))),
        ("swish_sign", DY * swish_sign(X, 5.0)),
        ("swish_sign(beta=2)", DY * swish_sign(X, 2.0)),
        ("triangle", DY * np.maximum(0, 1 - np.abs(X))),
        ("zero", np.zeros_like(X)),
        ("ste(clip=0.5)|scale(2)", 2 * DY * (np.abs(X) <= 0.5)),
        ("triangle|reverse(0.5)", -0.5 * DY * np.maximum(0, 1 - np.abs(X))),
        ("identity|clip_value(-0.3, 0.2)", np.clip(DY, -0.3, 0.2)),
        ("identity|clip_norm(0.5)", DY * 0.5 / max(np.linalg.norm(DY), 0.5)),
        ("identity|noise(0.0)", DY),
    ],
)
def test_replacements_and_pipelines_on_sign(spec, expected):
    assert_close(unary("Sign", spec), expected)


def test_guided_relu():
    y = np.maximum(X, 0)
    expected = DY * (DY > 0) * (y > 0)
    assert_close(unary("Relu", "guided_relu"), expected)
    assert_close(unary("Relu", "GuidedRelu"), expected)


@pytest.mark.parametrize(
    "spec, expected_x, expected_w",
    [
        ("scale(2.5)", 2.5 * DY * W, 2.5 * DY * X),
        ("reverse", -DY * W, -DY * X),
        ("reverse(0.5)", -0.5 * DY * W, -0.5 * DY * X),
        ("clip_value(-0.3, 0.2)", np.clip(DY * W, -0.3, 0.2), np.clip(DY * X, -0.3, 0.2)),
        (
            "clip_norm(1.0)",
            DY * W / max(np.linalg.norm(DY * W), 1.0),
            DY * X / max(np.linalg.norm(DY * X), 1.0),
        ),
        ("select(0)", DY * W, np.zeros_like(X)),
        ("select(1)", np.zeros_like(X), DY * X),
        ("select(1)|scale(-2)", np.zeros_like(X), -2 * DY * X),
        ("zero", np.zeros_like(X), np.zeros_like(X)),
        ("ste", DY * (np.abs(X) <= 1.0), None),
        ("identity", DY, None),
    ],
)
def test_multi_input_ops(spec, expected_x, expected_w):
    grad_x, grad_w = binary(spec)
    assert_close(grad_x, expected_x)
    if expected_w is None:
        assert grad_w is None, "a replacement that speaks of x alone gives None to other inputs"
    else:
        assert_close(grad_w, expected_w)


def test_identity_passes_each_output_to_its_input():
    graph = tf.Graph()
    with graph.as_default():
        a = v1.placeholder(tf.float32, [3])
        b = v1.placeholder(tf.float32, [3])
        out_a, out_b = tf.identity_n([tf.sign(a), tf.round(b)])
        graphgrad.override(graph, {"IdentityN": "identity", "Sign": "identity", "Round": "identity"})
        ys = 2.0 * out_a + 3.0 * out_b
        grads = gradients(graph, ys, [a, b], {a: [1.0, 2.0, 3.0], b: [1.0, 2.0, 3.0]})
    assert_close(grads[0], [2.0, 2.0, 2.0])
    assert_close(grads[1], [3.0, 3.0, 3.0])


def test_noise_has_the_asked_spread():
    big = RNG.normal(size=20000).astype(np.float32)
    ones = np.ones_like(big)
    noisy = unary("Identity", "noise(0.5, seed=3)", x=big, dy=ones)
    difference = noisy - ones
    assert abs(difference.mean()) < 0.02
    assert abs(difference.std() - 0.5) < 0.02


def test_sparse_gradients_stay_sparse_under_transforms():
    graph = tf.Graph()
    with graph.as_default():
        params = v1.placeholder(tf.float32, [4])
        gathered = tf.gather(params, [0, 2, 0])
        graphgrad.override(graph, {"GatherV2": "scale(3)|clip_value(-5, 5)"})
        grad = v1.gradients(tf.reduce_sum(gathered), params)[0]
        assert isinstance(grad, tf.IndexedSlices)
        with v1.Session() as session:
            dense = session.run(tf.convert_to_tensor(grad), {params: [1.0, 2.0, 3.0, 4.0]})
    assert_close(dense, [6.0, 0.0, 3.0, 0.0])


def test_call_differentiates_the_body_with_its_overrides(tmp_path):
    """A call op in an imported graph: graph mode would differentiate it in C++ and
    ignore the Sign's override; `call` (here written explicitly, with a transform
    after it) differentiates the body in Python."""
    from tf_helpers import rewrite_and_load

    @tf.function
    def body(x):
        return tf.sign(x) * 3.0

    graph = tf.Graph()
    with graph.as_default():
        tf.identity(body(v1.placeholder(tf.float32, X.shape, name="x")), name="y")
    source = tmp_path / "calls.pb"
    source.write_bytes(graph.as_graph_def().SerializeToString())
    [call_op] = [op for op in graph.get_operations() if op.type.endswith("PartitionedCall")]
    loaded = rewrite_and_load(tmp_path, source, "--op", "Sign=ste", "--op", f"{call_op.type}=call|scale(2)", "--force")
    assert_close(gradients(loaded, "y:0", "x:0", {"x:0": X}, grad_ys=DY)[0], DY * 3.0 * (np.abs(X) <= 1.0) * 2.0)
    # Without a gradient on the call, graphgrad.import_graph_def routes it through `call`.
    loaded = rewrite_and_load(tmp_path, source, "--op", "Sign=ste")
    assert loaded.get_operation_by_name(call_op.name).get_attr("_gradient_op_type") == b"graphgrad/call"
    assert_close(gradients(loaded, "y:0", "x:0", {"x:0": X}, grad_ys=DY)[0], DY * 3.0 * (np.abs(X) <= 1.0))
    # TF2: under a GradientTape the gradient is built in a graph of its own.
    patched = str(tmp_path / "patched.pb")
    function = v1.wrap_function(lambda: graphgrad.import_graph_def(patched, name=""), []).prune("x:0", "y:0")
    x = tf.constant(X)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = function(x)
    assert_close(tape.gradient(y, x, output_gradients=tf.constant(DY)), DY * 3.0 * (np.abs(X) <= 1.0))


def test_call_on_an_op_that_calls_nothing_is_a_clear_error():
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [2])
        y = tf.identity(x, name="plain")
        graphgrad.override(graph, {"Identity": "call"})
        with pytest.raises(ValueError, match="call on node 'plain' \\(Identity\\): it calls no function of the graph"):
            v1.gradients(y, x)


def test_every_builtin_is_covered_here():
    tested = {"identity", "ste", "approx_sign", "swish_sign", "triangle", "zero", "guided_relu",
              "scale", "reverse", "clip_value", "clip_norm", "noise", "select", "call"}
    tested |= {"deconvnet", "eps_lrp", "eps_lrp_linear", "lrp_alpha_beta", "deeplift",
               "redirected_relu", "signal_take_all"}  # in tests/test_attribution.py
    tested |= {"thermometer"}  # in tests/test_bypass.py
    assert {entry.name for entry in REGISTRY.entries() if entry.kind != "user"} == tested


def test_select_out_of_range_is_a_clear_error():
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [2])
        y = tf.stack([x, x])
        graphgrad.override(graph, {"Pack": "select(5)"})
        with pytest.raises(ValueError, match=r"select\(index=5\) on node 'stack' \(Pack\), which has only 2 inputs"):
            v1.gradients(y, x)
