"""insert and --embed under TensorFlow: forward values unchanged, gradients as specified."""

import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT, fixture, run_cli
from tf_helpers import assert_close, gradients, load, tf, v1

import graphgrad
from graphgrad.edits.embed import EMBEDDABLE

RNG = np.random.default_rng(7)


def forward(graph, fetch, feed):
    with v1.Session(graph=graph) as session:
        return session.run(graph.get_tensor_by_name(fetch), feed)


def dense_feed(rows=5):
    return {"x:0": RNG.normal(size=(rows, 4)).astype(np.float32)}


@pytest.mark.parametrize(
    "args, factor",
    [
        (["--at", "l1_dense/BiasAdd:0", "--grad", "scale(0.8)"], 0.8),
        (["--at", "l1_dense/relu:0", "--grad", "reverse", "--consumer", "l2_dense/MatMul"], -1.0),
        (["--at", "l1_dense/BiasAdd:0", "--grad", "scale(0.5)", "--embed"], 0.5),
        (["--at", "l1_dense/relu:0", "--grad", "reverse(2)", "--embed"], -2.0),
    ],
)
def test_insert_keeps_forward_and_scales_the_gradient(tmp_path, args, factor):
    out = tmp_path / "inserted.pb"
    run_cli("insert", fixture("dense_net.pb"), *args, "-o", out)
    plain, patched = load(fixture("dense_net.pb")), load(out)
    feed = dense_feed()
    assert np.array_equal(forward(plain, "logits:0", feed), forward(patched, "logits:0", feed))
    expected = factor * gradients(plain, "loss:0", "x:0", feed)[0]
    assert_close(gradients(patched, "loss:0", "x:0", feed)[0], expected)


def surrogate_and_registered(tmp_path, spec, graph="sign_sum.pb"):
    embedded, registered = tmp_path / "embedded.pb", tmp_path / "registered.pb"
    source = fixture("acceptance", graph)
    run_cli("rewrite", source, "--op", f"Sign={spec}", "--embed", "-o", embedded)
    run_cli("rewrite", source, "--op", f"Sign={spec}", "-o", registered)
    return load(embedded), load(registered)


@pytest.mark.parametrize(
    "spec",
    ["identity", "ste", "ste(clip=0.5)", "approx_sign", "triangle", "swish_sign", "swish_sign(beta=2)",
     "QuantizeGrad|scale(3)", "triangle|reverse(0.5)"],
)
def test_embedded_gradient_equals_the_registered_one(tmp_path, spec):
    x = RNG.uniform(-2, 2, 3).astype(np.float32)
    embedded, registered = surrogate_and_registered(tmp_path, spec)
    feed = {"x:0": x}
    assert np.array_equal(forward(embedded, "y:0", feed), forward(registered, "y:0", feed))
    assert not any(op.node_def.attr.get("_gradient_op_type") for op in embedded.get_operations()
                   if "_gradient_op_type" in op.node_def.attr)
    np.testing.assert_allclose(
        gradients(embedded, "y:0", "x:0", feed)[0], gradients(registered, "y:0", "x:0", feed)[0], rtol=1e-5, atol=1e-6
    )


def test_an_embedded_swish_sign_keeps_its_slope_in_the_tails(tmp_path):
    """Where beta x > 7, sigmoid(beta x) rounds towards 1 in float32: a surrogate built
    on 1 - sigmoid(beta x) had 1e-4 of the slope wrong there. Both sides against the
    formula in float64 (y sums two Signs of x: twice the slope)."""
    embedded, _ = surrogate_and_registered(tmp_path, "swish_sign")
    x = np.array([-1.9, 1.7, 0.0], dtype=np.float32)
    bx = 5 * x.astype(np.float64)
    slope = 2 * 5 * (2 - bx * np.tanh(bx / 2)) / (1 + np.cosh(bx))
    np.testing.assert_allclose(gradients(embedded, "y:0", "x:0", {"x:0": x})[0], slope, rtol=2e-6)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("spec", ["ste(clip=0.5)", "approx_sign", "swish_sign(beta=2)", "triangle|reverse(0.5)",
                                  "identity|scale(3)", "zero"])
def test_embed_in_half_width_floats(tmp_path, dtype, spec):
    numpy_dtype = tf.as_dtype(dtype).as_numpy_dtype
    embedded, registered = surrogate_and_registered(tmp_path, spec, graph=f"sign_sum_{dtype}.pb")
    feed = {"x:0": np.array([-1.5, -0.25, 0.75], dtype=numpy_dtype)}
    y = forward(embedded, "y:0", feed)
    assert y.dtype == numpy_dtype and y.tobytes() == forward(registered, "y:0", feed).tobytes()
    [got], [expected] = gradients(embedded, "y:0", "x:0", feed), gradients(registered, "y:0", "x:0", feed)
    if spec == "zero":
        assert got is None and not np.asarray(expected, dtype=np.float32).any()
    else:
        assert got.dtype == numpy_dtype
        np.testing.assert_allclose(got.astype(np.float32), expected.astype(np.float32), rtol=1e-2, atol=1e-2)
        assert np.asarray(expected, dtype=np.float32).any()


@pytest.mark.parametrize("dtype, spec, x, overflowing", [
    ("float16", "swish_sign(beta=2)", [40000.0, -0.5, 0.5], 1),  # beta x overflows float16
    ("float16", "identity|scale(3)", [30000.0, 1.0, -1.0], 1),
    ("bfloat16", "identity", [float("inf"), float("-inf"), 1.0], 2),  # h = x itself is not finite
])
def test_embed_forward_stays_exact_where_the_surrogate_overflows(tmp_path, dtype, spec, x, overflowing):
    numpy_dtype = tf.as_dtype(dtype).as_numpy_dtype
    embedded, registered = surrogate_and_registered(tmp_path, spec, graph=f"sign_sum_{dtype}.pb")
    feed = {"x:0": np.array(x, dtype=numpy_dtype)}
    assert forward(embedded, "y:0", feed).tobytes() == forward(registered, "y:0", feed).tobytes()
    [got], [expected] = gradients(embedded, "y:0", "x:0", feed), gradients(registered, "y:0", "x:0", feed)
    np.testing.assert_allclose(got[overflowing:].astype(np.float32), expected[overflowing:].astype(np.float32),
                               rtol=1e-2)


def test_embed_refuses_a_constant_that_does_not_fit_float16(tmp_path):
    source = fixture("acceptance", "sign_sum_float16.pb")
    result = run_cli("rewrite", source, "--op", "Sign=ste(clip=1e6)", "--embed", "-o", tmp_path / "x.pb", expect=1)
    assert "the constant -1000000.0 of the gradient spec does not fit float16" in result.output
    assert not (tmp_path / "x.pb").exists()


def test_embedded_zero_stops_the_gradient(tmp_path):
    embedded, _ = surrogate_and_registered(tmp_path, "zero")
    assert gradients(embedded, "y:0", "x:0", {"x:0": [0.5, -2.0, 0.0]}) == [None]


def test_embed_forward_is_bit_identical_on_random_feeds(tmp_path):
    out = tmp_path / "embedded.pb"
    run_cli("rewrite", fixture("binary_net.pb"), "--op", "Sign=swish_sign|scale(0.3)", "--embed", "-o", out)
    plain, patched = load(fixture("binary_net.pb")), load(out)
    for _ in range(5):
        feed = {"x:0": RNG.normal(scale=3, size=(16, 4)).astype(np.float32)}
        assert np.array_equal(forward(plain, "dense2/logits:0", feed), forward(patched, "dense2/logits:0", feed))


def test_embed_in_function_bodies(tmp_path):
    out = tmp_path / "embedded.pb"
    run_cli("rewrite", fixture("functions.pb"), "--op", "Sign=ste", "--embed", "-o", out)
    # TensorFlow keeps the <branch>_rewritten functions cond_v2 makes for gradients
    # process-wide, by branch name: the original's branches, differentiated by other
    # tests in this process, would clash with these. The renaming users are told of:
    model = graphgrad.read_model(str(out))
    graphgrad.rename_functions(model, "_embedded")
    graphgrad.write_model(model, str(out))
    graph = load(out)
    x = [0.5, -2.0, 0.0]
    assert_close(gradients(graph, "Identity:0", "x:0", {"x:0": x, "flag:0": True})[0], [2.0, 0.0, 2.0])
    assert_close(forward(graph, "Identity:0", {"x:0": x, "flag:0": False}), [0.0, -2.0, -1.0])


@pytest.mark.slow  # a fresh process imports TensorFlow
def test_embedded_graph_needs_no_graphgrad_in_a_tf2_process(tmp_path):
    out = tmp_path / "embedded.pb"
    run_cli("rewrite", fixture("acceptance", "sign_sum.pb"), "--op", "Sign=QuantizeGrad", "--embed", "-o", out)
    code = f"""
import sys
import tensorflow as tf
graph_def = tf.compat.v1.GraphDef.FromString(open({str(out)!r}, "rb").read())
wrapped = tf.compat.v1.wrap_function(lambda: tf.compat.v1.import_graph_def(graph_def, name=""), [])
function = wrapped.prune(feeds="x:0", fetches="y:0")
x = tf.constant([0.5, -2.0, 0.0])
with tf.GradientTape() as tape:
    tape.watch(x)
    y = function(x)
print(tape.gradient(y, x).numpy().tolist(), "graphgrad" in sys.modules)
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.stdout.strip().splitlines()[-1] == "[2.0, 0.0, 2.0] False", result.stderr


def test_every_embeddable_spec_is_tested_here():
    # thermometer, which changes the shape, in test_bypass.py: as a bypass's surrogate and as an override
    assert set(EMBEDDABLE) == {"identity", "ste", "approx_sign", "triangle", "swish_sign", "zero", "scale", "reverse",
                               "thermometer"}
