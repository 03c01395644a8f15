"""Attribution rules and graphgrad attribute, under TensorFlow: each rule against its
formula written directly in TensorFlow, and the methods' promises (completeness,
equality with the textbook route, coverage named before anything runs)."""

import json

import numpy as np
import pytest

from conftest import fixture, run_cli
from tf_helpers import tf, v1

import graphgrad

RNG = np.random.default_rng(21)


def rule_and_reference(op_type, spec, reference, x_value, dy_value):
    """The library's gradient for one op of ``op_type`` against ``reference(x, y, dy)``."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.constant(x_value)
        y = getattr(tf.raw_ops, op_type)(features=x) if op_type != "Tanh" else tf.tanh(x)
        dy = tf.constant(dy_value)
        stage = graphgrad.parse_spec(spec).stages[0]
        [got] = stage.definition.function(tf, y.op, [dy], **dict(stage.args))
        want = reference(x, y, dy)
        with v1.Session(graph=graph) as session:
            return session.run([got, want])


def test_deconvnet_is_relu_of_dy():
    x, dy = RNG.normal(size=(4, 6)).astype(np.float32), RNG.normal(size=(4, 6)).astype(np.float32)
    got, want = rule_and_reference("Relu", "deconvnet", lambda x, y, dy: tf.nn.relu(dy), x, dy)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op_type", ["Relu", "Tanh"])
def test_eps_lrp_is_dy_times_y_over_stabilised_x(op_type):
    x = np.concatenate([RNG.normal(size=(3, 5)), np.zeros((1, 5))]).astype(np.float32)  # sign(0) = 1
    dy = RNG.normal(size=(4, 5)).astype(np.float32)
    got, want = rule_and_reference(
        op_type, "eps_lrp(eps=0.01)",
        lambda x, y, dy: dy * y / (x + 0.01 * tf.where(x >= 0, tf.ones_like(x), -tf.ones_like(x))), x, dy)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_deeplift_rescales_by_the_difference_to_the_baseline_half_of_the_batch():
    x_in, x_ref = RNG.normal(size=(3, 5)).astype(np.float32), RNG.normal(size=(3, 5)).astype(np.float32)
    x_ref[0, 0] = x_in[0, 0]  # no difference: the op's own gradient there
    dy = RNG.normal(size=(6, 5)).astype(np.float32)

    def reference(x, y, dy):
        multiplier = (tf.tanh(x_in) - tf.tanh(x_ref)) / (x_in - x_ref)
        own = dy * (1 - y * y)
        tiled = tf.concat([multiplier, multiplier], 0)
        same = tf.concat([x_in == x_ref, x_in == x_ref], 0)
        return tf.where(same, own, dy * tiled)

    got, want = rule_and_reference("Tanh", "deeplift", reference, np.concatenate([x_in, x_ref]), dy)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_redirected_relu_lets_a_dead_row_through_except_what_pushes_it_lower():
    x = np.array([[-1.0, -2.0, -0.5], [1.0, -1.0, 2.0]], np.float32)  # row 0: every unit off
    dy = np.array([[0.5, -0.3, -0.2], [0.4, 0.7, -0.1]], np.float32)
    got, _ = rule_and_reference("Relu", "redirected_relu", lambda x, y, dy: dy, x, dy)
    np.testing.assert_array_equal(got, np.array([[0.0, -0.3, -0.2], [0.4, 0.0, -0.1]], np.float32))


def attribute(tmp_path, model, method, rows, *args, expect=0):
    source, out = tmp_path / "rows.npy", tmp_path / "out.npy"
    np.save(source, rows)
    result = run_cli("attribute", fixture(model), "--method", method, "--input", source, "-o", out, "--json",
                     *args, expect=expect)
    return (np.load(out) if expect == 0 else None), json.loads(result.stdout)


def gradient_times_input(model, rows, y="logits:0", target=0):
    graph = tf.Graph()
    with graph.as_default():
        graphgrad.import_graph_def(fixture(model), name="")
        x = graph.get_tensor_by_name("x:0")
        [grad] = v1.gradients(graph.get_tensor_by_name(y)[..., target], [x])
        with v1.Session(graph=graph) as session:
            return session.run(grad, {x: rows}) * rows


def test_eps_lrp_with_a_tiny_eps_is_gradient_times_input_on_a_relu_network(tmp_path):
    rows = RNG.normal(size=(6, 4)).astype(np.float32)
    lrp, report = attribute(tmp_path, "classifier.pb", "eps_lrp(eps=1e-9)", rows, "--y", "logits", "--target", "2")
    assert report["rules"] == {"Relu": "eps_lrp(eps=1e-09)"} and report["uncovered"] == []
    np.testing.assert_allclose(lrp, gradient_times_input("classifier.pb", rows, target=2), rtol=1e-4, atol=1e-6)


def test_deeplift_is_complete_through_relu_tanh_and_sigmoid_and_is_not_gradient_times_input(tmp_path):
    rows = RNG.normal(size=(5, 5)).astype(np.float32)
    lift, report = attribute(tmp_path, "activations_net.pb", "deeplift", rows, "--target", "1")
    assert set(report["rules"]) == {"Relu", "Tanh", "Sigmoid"}
    for check in report["completeness"]:
        assert check["attribution_sum"] == pytest.approx(check["output_difference"], rel=1e-5, abs=1e-5)
    assert not np.allclose(lift, gradient_times_input("activations_net.pb", rows, target=1), atol=1e-3)


def test_integrated_gradients_approach_completeness(tmp_path):
    """A Riemann sum: its error shrinks with the steps (as 1/steps at ReLU's kinks)."""
    rows = RNG.normal(size=(3, 5)).astype(np.float32)
    errors = []
    for steps in (20, 400):
        _, report = attribute(tmp_path, "activations_net.pb", f"integrated_gradients(steps={steps})", rows,
                              "--target", "0")
        errors.append(max(abs(c["attribution_sum"] - c["output_difference"]) for c in report["completeness"]))
    assert errors[1] < errors[0] / 5 and errors[1] < 5e-3


@pytest.mark.parametrize("method, textbook", [
    ("guided_backprop", lambda op, dy: tf.where(op.inputs[0] > 0, tf.nn.relu(dy), tf.zeros_like(dy))),
    ("deconvnet", lambda op, dy: tf.nn.relu(dy)),
])
def test_guided_backprop_and_deconvnet_equal_the_textbook_override_map(tmp_path, method, textbook):
    name = f"Textbook_{method}"
    try:
        tf.RegisterGradient(name)(textbook)
    except KeyError:  # registered by an earlier run in this process
        pass
    rows = RNG.normal(size=(6, 4)).astype(np.float32)
    got, _ = attribute(tmp_path, "classifier.pb", method, rows, "--y", "logits", "--target", "0")
    graph = tf.Graph()
    with graph.as_default(), graph.gradient_override_map({"Relu": name}):
        v1.import_graph_def(v1.GraphDef.FromString(open(fixture("classifier.pb"), "rb").read()), name="")
    with graph.as_default():
        x = graph.get_tensor_by_name("x:0")
        [grad] = v1.gradients(graph.get_tensor_by_name("logits:0")[..., 0], [x])
        with v1.Session(graph=graph) as session:
            np.testing.assert_allclose(got, session.run(grad, {x: rows}), rtol=1e-6)


def test_an_op_without_a_rule_is_named_before_the_run(tmp_path):
    rows = RNG.normal(size=(2, 5)).astype(np.float32)
    result = run_cli("attribute", fixture("erf_net.pb"), "--method", "deeplift", "--input",
                     _saved(tmp_path, rows), "-o", tmp_path / "out.npy", expect=1)
    assert "deeplift has no rule for Erfc" in result.stderr and "--allow-uncovered" in result.stderr
    assert not (tmp_path / "out.npy").exists()
    _, report = attribute(tmp_path, "erf_net.pb", "deeplift", rows, "--allow-uncovered")
    assert "Erfc" in report["uncovered"]


def _saved(tmp_path, rows):
    path = tmp_path / "rows.npy"
    np.save(path, rows)
    return path


@pytest.mark.parametrize("method, message, code", [
    ("smoothgrad", "no such method; the methods are gradient, grad_x_input", 2),
    ("eps_lrp(eps=-1)", "eps must be positive", 1),
    ("integrated_gradients(steps=0)", "steps must be at least 1", 2),
])
def test_a_wrong_method_is_one_line(tmp_path, method, message, code):
    result = run_cli("attribute", fixture("classifier.pb"), "--method", method, "--input",
                     _saved(tmp_path, np.zeros((1, 4), np.float32)), "-o", tmp_path / "o.npy", expect=code)
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_image_attributions_are_drawn_as_a_heat_map_grid(tmp_path):
    from PIL import Image

    out, picture = tmp_path / "saliency.npy", tmp_path / "saliency.png"
    run_cli("attribute", fixture("image_net.pb"), "--method", "gradient", "--input", fixture("image_rows.npy"),
            "--target", "1", "-o", out, "--image", picture)
    attributions = np.load(out)
    assert attributions.shape == (4, 8, 8, 3)
    image = np.asarray(Image.open(picture).convert("RGB"))
    assert image.shape == (2 * 128 + 2, 2 * 128 + 2, 3)  # four rows: a 2 x 2 grid, 8 x 8 enlarged 16 times
    heat = attributions[0].sum(axis=2)
    strongest = np.unravel_index(np.abs(heat).argmax(), heat.shape)
    pixel = image[strongest[0] * 16, strongest[1] * 16]
    assert list(pixel) == ([255, 0, 0] if heat[strongest] > 0 else [0, 0, 255])  # full colour at the peak


def test_a_heat_map_of_inputs_that_are_not_images_is_refused(tmp_path):
    result = run_cli("attribute", fixture("classifier.pb"), "--method", "gradient", "--input",
                     fixture("classifier_rows.npy"), "--y", "logits", "-o", tmp_path / "a.npy", "--image",
                     tmp_path / "a.png", expect=2)
    assert "--image draws attributions of images, shaped (N, H, W, C); these are [3, 4]" in result.stderr
    assert not (tmp_path / "a.npy").exists()


def test_attribute_runs_the_graph_so_effects_outside_it_are_refused(tmp_path):
    result = run_cli("attribute", fixture("ops_mix.pb"), "--method", "gradient", "--x", "x", "--y", "out",
                     "--input", fixture("classifier_rows.npy"), "-o", tmp_path / "a.npy", expect=1)
    assert "attribute runs the graph" in result.stderr and "py_identity (PyFunc)" in result.stderr
    assert "--allow-effects" in result.stderr and not (tmp_path / "a.npy").exists()


@pytest.mark.parametrize("rows, baseline, message", [
    (np.zeros((2, 5), np.float32), None, r"--input has shape \[2, 5\], and x takes \[None, 4\]"),
    (np.zeros((2, 4), np.float32), np.zeros((3,), np.float32), r"--baseline has shape \[3\]"),
])
def test_inputs_and_baselines_of_the_wrong_shape_are_one_line(tmp_path, rows, baseline, message):
    args = []
    if baseline is not None:
        np.save(tmp_path / "base.npy", baseline)
        args = ["--baseline", tmp_path / "base.npy"]
    result = run_cli("attribute", fixture("classifier.pb"), "--method", "deeplift", "--y", "logits", "--input",
                     _saved(tmp_path, rows), "-o", tmp_path / "a.npy", *args, expect=2)
    assert len(result.stderr.strip().splitlines()) == 1
    import re
    assert re.search(message, result.stderr), result.stderr


def test_attribution_through_a_frozen_tf1_loop(tmp_path):
    """A frozen while loop (y = x^12): its contexts rebuilt, gradient x input = 12 y."""
    rows = np.array([[1.1, 0.9]], np.float32).reshape(1, 2)
    attributions, report = attribute(tmp_path, "tf1_nested_loops.pb", "grad_x_input", rows.reshape(2), "--y", "y")
    np.testing.assert_allclose(attributions, 12 * rows.reshape(2).astype(np.float64) ** 12, rtol=1e-5)


def test_an_input_that_is_not_npy_is_one_line(tmp_path):
    result = run_cli("attribute", fixture("classifier.pb"), "--method", "gradient", "--input",
                     fixture("classifier.pb"), "-o", tmp_path / "a.npy", expect=2)
    assert "is not a .npy file (save the array with numpy.save)" in result.stderr


def test_a_real_frozen_gru_names_its_gate_products_not_its_loop_plumbing(tmp_path):
    """DL4J's frozen GRU (dynamic_rnn, TF1 loops): the loop and TensorArray ops pass
    through; the gates' products of two activations have no rule, so deeplift
    refuses; gradient x input runs through the rebuilt loop contexts."""
    import os

    from conftest import REALGRAPHS

    source = os.path.join(REALGRAPHS, "dl4j-tf-examples/src/main/resources/tf_graphs/examples/primitive_gru_dynamic/"
                                      "frozen_model.pb")
    if not os.path.isfile(source):
        pytest.skip(f"real graph files not present at {REALGRAPHS}")
    rows = _saved(tmp_path, RNG.normal(size=(3, 2, 6)))
    refused = run_cli("attribute", source, "--method", "deeplift", "--input", rows, "--y", "add", "--target", "0",
                      "-o", tmp_path / "a.npy", expect=1)
    assert "deeplift has no rule for Mul (of two tensors computed from x) on the path" in refused.stderr
    result = run_cli("attribute", source, "--method", "grad_x_input", "--input", rows, "--y", "add", "--target", "0",
                     "-o", tmp_path / "a.npy", "--json")
    assert json.loads(result.stdout)["shape"] == [3, 2, 6] and np.isfinite(np.load(tmp_path / "a.npy")).all()
