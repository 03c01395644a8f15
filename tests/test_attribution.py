"""Attribution rules and graphgrad attribute, under TensorFlow: each rule against its
formula written directly in TensorFlow, and the methods' promises (completeness,
equality with the textbook route, coverage named before anything runs)."""

import json
import os

import numpy as np
import pytest

from conftest import REALGRAPHS, REALGRAPHS_ABSENT, every_method, fixture, run_cli
from tf_helpers import graph_file, tf, v1

import graphgrad
import graphgrad.cli
import graphgrad.tf.coverage
from graphgrad.methods.registry import CATALOGUE, parse_method

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


@pytest.mark.parametrize("signal_from_input", [True, False])
def test_signal_take_all_gives_the_signal_its_own_gradient_and_the_gate_none(signal_from_input):
    """On sigmoid(a) * s: ds gets dy * sigmoid(a), da nothing, where s is computed from a
    placeholder; where s is a constant, the op's own gradient (the gate is the signal)."""
    a_value, s_value = RNG.normal(size=(3, 4)).astype(np.float32), RNG.normal(size=(3, 4)).astype(np.float32)
    dy = RNG.normal(size=(3, 4)).astype(np.float32)
    graph = tf.Graph()
    with graph.as_default():
        a = v1.placeholder(tf.float32, [3, 4])
        signal = tf.tanh(v1.placeholder_with_default(s_value, [3, 4])) if signal_from_input else tf.constant(s_value)
        product = tf.sigmoid(a) * signal
        graphgrad.override(graph, {"Mul": "signal_take_all"})
        to_gate, to_signal = v1.gradients(product, [a, signal], grad_ys=dy)
        with v1.Session(graph=graph) as session:
            if signal_from_input:
                assert to_gate is None
                got = session.run(to_signal, {a: a_value})
                np.testing.assert_allclose(got, dy / (1 + np.exp(-a_value)), rtol=1e-6)
            else:
                gate = 1 / (1 + np.exp(-a_value))
                np.testing.assert_allclose(session.run(to_gate, {a: a_value}), dy * s_value * gate * (1 - gate),
                                           rtol=1e-5)


def test_redirected_relu_lets_a_dead_row_through_except_what_pushes_it_lower():
    x = np.array([[-1.0, -2.0, -0.5], [1.0, -1.0, 2.0]], np.float32)  # row 0: every unit off
    dy = np.array([[0.5, -0.3, -0.2], [0.4, 0.7, -0.1]], np.float32)
    got, _ = rule_and_reference("Relu", "redirected_relu", lambda x, y, dy: dy, x, dy)
    np.testing.assert_array_equal(got, np.array([[0.0, -0.3, -0.2], [0.4, 0.0, -0.1]], np.float32))


def test_the_docs_list_every_op_type_each_method_covers():
    """docs/commands.md's table of op types with a rule, and its list of the op types
    every method passes through, are the code's."""
    docs = " ".join(open(os.path.join(os.path.dirname(__file__), "..", "docs", "commands.md")).read().split())
    rows = []
    for text in CATALOGUE.signatures():
        method = parse_method(text)
        covered = sorted({op_type for op_types, _ in method.rules for op_type in op_types} | set(method.kept))
        if covered:
            rows.append(f"| `{method.name.split('(')[0]}` | {', '.join(covered)} |")
    assert "| method | op types | |---|---| " + " ".join(rows) + " Op types every method" in docs
    passed = ", ".join(sorted(graphgrad.tf.coverage.PASS_THROUGH))
    assert f"(linear in their data input, routing values, or carrying no float): {passed}." in docs


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
    ("smoothgrad", "--method smoothgrad: not a method: SmoothGrad is --noise N,SIGMA over any method", 2),
    ("saliency", "--method saliency: no such method; did you mean gradient? The methods: gradient, grad_x_input", 2),
    ("deep_lfit", "no such method; did you mean deeplift?", 2),
    ("eps_lrp(eps=-1)", "eps must be positive", 1),
    ("integrated_gradients(steps=0)", "steps must be at least 1", 2),
])
def test_a_wrong_method_is_one_line(tmp_path, method, message, code):
    result = run_cli("attribute", fixture("classifier.pb"), "--method", method, "--input",
                     _saved(tmp_path, np.zeros((1, 4), np.float32)), "-o", tmp_path / "o.npy", expect=code)
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_image_attributions_are_drawn_beside_their_inputs_row_by_row(tmp_path):
    from PIL import Image

    from graphgrad.jobs.heatmap import BAR_WIDTH, LABEL_WIDTH, PAD, TITLE_HEIGHT

    out, picture = tmp_path / "saliency.npy", tmp_path / "saliency.png"
    run_cli("attribute", fixture("image_net.pb"), "--method", "gradient", "--input", fixture("image_rows.npy"),
            "--target", "1", "-o", out, "--image", picture)
    attributions = np.load(out)
    assert attributions.shape == (4, 8, 8, 3)
    image = np.asarray(Image.open(picture).convert("RGB"))
    side = 128  # 8 x 8 enlarged 16 times; per row: input, map, overlay, colour bar
    assert image.shape == (TITLE_HEIGHT + 4 * (side + PAD), 3 * (side + PAD) + BAR_WIDTH + LABEL_WIDTH, 3)
    heat = attributions[0].sum(axis=2)
    strongest = np.unravel_index(np.abs(heat).argmax(), heat.shape)
    pixel = image[TITLE_HEIGHT + strongest[0] * 16, side + PAD + strongest[1] * 16]  # the map, row 0
    assert list(pixel) == ([255, 0, 0] if heat[strongest] > 0 else [0, 0, 255])  # full colour at the peak


def test_a_heat_map_of_inputs_that_are_not_images_is_refused(tmp_path):
    result = run_cli("attribute", fixture("classifier.pb"), "--method", "gradient", "--input",
                     fixture("classifier_rows.npy"), "--y", "logits", "-o", tmp_path / "a.npy", "--image",
                     tmp_path / "a.png", expect=2)
    assert "--image draws attributions of images, shaped (N, H, W, C); these are [3, 4]" in result.stderr
    assert not (tmp_path / "a.npy").exists()


def test_attribute_runs_the_graph_so_effects_outside_it_are_refused(tmp_path):
    result = run_cli("attribute", fixture("ops_mix.pb"), "--method", "gradient", "--x", "x", "--y", "out",
                     "--input", _saved(tmp_path, np.ones(2, np.float32)), "-o", tmp_path / "a.npy", expect=1)
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


def gru_in_a_tf1_loop(dtype, steps=3):
    """A GRU over ``steps`` time steps in a TF1 while loop reading a TensorArray, as
    dynamic_rnn builds it: x (N, steps, 6) -> its last state (N, 4), ``y``."""
    rng = np.random.default_rng(0)
    gates, candidate = (tf.constant(rng.normal(size=shape), dtype) for shape in ((10, 8), (10, 4)))
    x = v1.placeholder(dtype, [None, steps, 6], name="x")
    times = tf.TensorArray(dtype, size=steps).unstack(tf.transpose(x, [1, 0, 2]))

    def step(t, h):
        xt = times.read(t)
        update, reset = tf.split(tf.sigmoid(tf.matmul(tf.concat([xt, h], 1), gates)), 2, 1)
        c = tf.tanh(tf.matmul(tf.concat([xt, reset * h], 1), candidate))
        return t + 1, update * h + (1 - update) * c

    _, last = v1.while_loop(lambda t, h: t < steps, step, [tf.constant(0), tf.zeros_like(x[:, 0, :4])])
    tf.identity(last, name="y")


@pytest.mark.parametrize("scale", [1.0, 10.0])
def test_deeplift_through_a_gru_in_a_tf1_loop_is_complete_on_rows_of_any_scale(tmp_path, scale):
    """Inside a loop imported from a GraphDef the tensors keep no shapes: the gates'
    product rule tells a factor that varies with the rows from a constant as the graph
    runs (it took the state for a constant, and the gaps were half of f(x) - f(0)).
    float64: complete to rounding on seeded rows nobody picked."""
    previous = v1.control_flow_v2_enabled()
    v1.disable_control_flow_v2()
    try:
        path = graph_file(tmp_path, lambda: gru_in_a_tf1_loop(tf.float64))
    finally:
        if previous:
            v1.enable_control_flow_v2()
    rows = (scale * np.random.default_rng(int(scale)).normal(size=(6, 3, 6))).astype(np.float64)
    _, report = attribute(tmp_path, path, "deeplift", rows, "--y", "y", "--target", "1")
    assert report["uncovered"] == [] and set(report["rules"]) == {"Mul", "Sigmoid", "Tanh"}
    for check in report["completeness"]:
        assert abs(check["attribution_sum"] - check["output_difference"]) < 1e-12
        assert abs(check["output_difference"]) > 1e-3  # the rows move y: the check is not of nothing


def test_a_real_frozen_gru_runs_deeplift_through_its_loop_and_gates(tmp_path):
    """DL4J's frozen GRU (dynamic_rnn, TF1 loops): the loop and TensorArray ops pass
    through, the gates' products take DeepLIFT's two-input rule, so deeplift runs
    through the rebuilt loop contexts, complete (its output moves by about 1e-5,
    and the sums meet it to 1e-12 of that); gradient x input runs too."""
    import os

    source = os.path.join(REALGRAPHS, "dl4j-tf-examples/src/main/resources/tf_graphs/examples/primitive_gru_dynamic/"
                                      "frozen_model.pb")
    if not os.path.isfile(source):
        pytest.skip(REALGRAPHS_ABSENT)
    rows = _saved(tmp_path, RNG.normal(size=(3, 2, 6)))
    lift = json.loads(run_cli("attribute", source, "--method", "deeplift", "--input", rows, "--y", "add", "--target",
                              "0", "-o", tmp_path / "a.npy", "--json").stdout)
    assert lift["uncovered"] == [] and set(lift["rules"]) == {"Mul", "Sigmoid", "Tanh"}
    for check in lift["completeness"]:
        assert abs(check["attribution_sum"] - check["output_difference"]) < 1e-12 + 1e-6 * abs(
            check["output_difference"])
    result = run_cli("attribute", source, "--method", "grad_x_input", "--input", rows, "--y", "add", "--target", "0",
                     "-o", tmp_path / "a.npy", "--json")
    assert json.loads(result.stdout)["shape"] == [3, 2, 6] and np.isfinite(np.load(tmp_path / "a.npy")).all()


def test_a_classifier_without_a_target_is_refused_as_check_refuses_it(tmp_path):
    """Its softmax's entries sum to 1: the gradient of the sum is rounding noise."""
    out = tmp_path / "out.npy"
    result = run_cli("attribute", fixture("classifier.pb"), "--method", "gradient", "--input",
                     fixture("classifier_rows.npy"), "-o", out, expect=2)
    assert "y is the softmax probs" in result.stderr and "--target INDEX" in result.stderr
    assert "--y logits" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


def feeds_graph():
    x = v1.placeholder(tf.float32, [None, 3], name="x")
    training = v1.placeholder_with_default(True, [], name="training")
    scale = v1.placeholder(tf.float32, [], name="scale")
    tf.identity(tf.where(training, x * 2.0, x * 3.0) * scale, name="y")


def test_feeds_reach_the_graph_and_a_training_flag_left_on_is_named(tmp_path):
    path = graph_file(tmp_path, feeds_graph)
    rows = RNG.normal(size=(2, 3)).astype(np.float32)
    source, out = _saved(tmp_path, rows), tmp_path / "out.npy"
    result = run_cli("attribute", path, "--method", "gradient", "--input", source, "--x", "x", "-o", out, expect=2)
    assert "y also reads scale, which --input does not feed" in result.stderr and "--feed scale=0" in result.stderr
    report = json.loads(run_cli("attribute", path, "--method", "gradient", "--input", source, "-o", out,
                                "--feed", "scale=0.5", "--json").stdout)
    np.testing.assert_array_equal(np.load(out), np.full((2, 3), 1.0))  # 2 * 0.5: dropout's branch, as in training
    assert report["training_flags"] == ["training"] and report["feeds"] == {"scale:0": "given"}
    text = run_cli("attribute", path, "--method", "gradient", "--input", source, "-o", out, "--feed", "scale=0.5")
    assert "warning: training left at its default, True" in text.stdout
    report = json.loads(run_cli("attribute", path, "--method", "gradient", "--input", source, "-o", out,
                                "--feed", "scale=0.5", "--feed", "training=false", "--json").stdout)
    np.testing.assert_array_equal(np.load(out), np.full((2, 3), 1.5))
    assert report["training_flags"] == []


def test_an_input_pipeline_on_the_path_is_refused_before_anything_waits(tmp_path):
    def build():
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        queue = tf.queue.FIFOQueue(4, [tf.float32], shapes=[[3]])
        tf.identity(x * queue.dequeue(), name="y")

    result = run_cli("attribute", graph_file(tmp_path, build), "--method", "gradient", "--x", "x", "--input",
                     _saved(tmp_path, RNG.normal(size=(2, 3)).astype(np.float32)), "-o", tmp_path / "o.npy",
                     expect=2)
    assert "the run would wait on an input pipeline" in result.stderr


WEIGHTS = RNG.normal(size=(4, 3)).astype(np.float32)


def fixed_batch_graph(rows, fixed_by):
    """y = tanh(x W) per row, x's batch fixed to ``rows`` by its shape, by a Reshape to a
    fully known shape (as an Estimator's input layer writes it), or free (None)."""
    def build():
        x = v1.placeholder(tf.float32, [rows if fixed_by == "x" else None, 4], name="x")
        shaped = tf.reshape(x, [rows if fixed_by == "reshape" else -1, 4])
        tf.tanh(tf.matmul(shaped, WEIGHTS), name="y")
    return build


@pytest.mark.parametrize("fixed_by", ["x", "reshape"])
@pytest.mark.parametrize("method", ["deeplift", "integrated_gradients(steps=7)", "grad_x_input"])
def test_a_fixed_batch_runs_in_batches_it_takes(tmp_path, fixed_by, method):
    """Inputs and baselines (DeepLIFT's 2N rows, integrated gradients' N x steps)
    run as many rows at a time as the graph takes, with the free graph's answer."""
    rows = RNG.normal(size=(4, 4)).astype(np.float32)
    baseline = RNG.normal(size=(1, 4)).astype(np.float32)
    fixed, free = (graph_file(tmp_path, fixed_batch_graph(4, by), name) for by, name in
                   [(fixed_by, "fixed.pb"), (None, "free.pb")])
    got, want = [], []
    for model, results in ((fixed, got), (free, want)):
        out = tmp_path / f"{model.stem}.npy"
        given = [] if method == "grad_x_input" else [  # it takes no baseline, and is refused one
            "--baseline", _saved_as(tmp_path / "base.npy", baseline)]
        report = json.loads(run_cli("attribute", model, "--method", method, "--input", _saved(tmp_path, rows),
                                    *given, "--target", "1", "-o", out, "--json").stdout)
        results += [np.load(out), report]
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    assert got[1]["batch"] == 4 and want[1]["batch"] is None
    for check in got[1]["completeness"] if method == "deeplift" else []:
        assert check["attribution_sum"] == pytest.approx(check["output_difference"], rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("fixed_by", ["x", "reshape"])
def test_deeplift_on_an_odd_fixed_batch_runs_its_baselines_through_a_twin(tmp_path, fixed_by):
    """A graph that takes exactly 3 rows: DeepLIFT cannot run them beside their
    baselines in one batch, so the baselines run through a renamed copy of the graph
    whose ops the rules read as references; the maps are the free graph's."""
    rows = RNG.normal(size=(5, 4)).astype(np.float32)
    fixed, free = (graph_file(tmp_path, fixed_batch_graph(3, by), name) for by, name in
                   [(fixed_by, "fixed.pb"), (None, "free.pb")])
    maps = []
    for model in (fixed, free):
        out = tmp_path / f"{model.stem}.npy"
        report = json.loads(run_cli("attribute", model, "--method", "deeplift", "--input", _saved(tmp_path, rows),
                                    "--target", "0", "-o", out, "--json").stdout)
        maps.append(np.load(out))
    assert report["batch"] is None
    np.testing.assert_allclose(maps[0], maps[1], rtol=1e-5, atol=1e-7)


def _batch_one_cnn(rows):
    """conv, relu, x * sigmoid(x) (a product of two factors that change), max pooling,
    a Reshape that fixes the batch, softmax: every DeepLIFT rule, for ``rows`` (None: free)."""
    kernel, weights = RNG.normal(size=[3, 3, 1, 4]).astype(np.float32), RNG.normal(size=[64, 5]).astype(np.float32)

    def build():
        x = v1.placeholder(tf.float32, [rows, 8, 8, 1], name="x")
        hidden = tf.nn.relu(tf.nn.conv2d(x, kernel, 1, "SAME"))
        pooled = tf.nn.max_pool2d(hidden * tf.sigmoid(hidden), 2, 2, "VALID")
        tf.nn.softmax(tf.matmul(tf.reshape(pooled, [rows or -1, 64]), weights), name="y")
    return build


@pytest.mark.parametrize("method, baseline", [("deeplift", (8, 8, 1)), ("deepshap", (4, 8, 8, 1))])
def test_deeplift_and_deepshap_on_a_graph_of_batch_one_equal_the_free_graphs(tmp_path, method, baseline):
    state = RNG.bit_generator.state
    fixed = graph_file(tmp_path, _batch_one_cnn(1), "one.pb")
    RNG.bit_generator.state = state  # the same weights
    free = graph_file(tmp_path, _batch_one_cnn(None), "free.pb")
    rng = np.random.default_rng(17)  # rows of their own: the module's generator's state depends on the test order
    rows = _saved(tmp_path, rng.uniform(0, 1, (3, 8, 8, 1)).astype(np.float32))
    base = _saved_as(tmp_path / "base.npy", rng.uniform(0, 1, baseline).astype(np.float32))
    maps, reports = [], []
    for model in (fixed, free):
        out = tmp_path / f"{model.stem}.npy"
        reports.append(json.loads(run_cli("attribute", model, "--method", method, "--input", rows, "--baseline",
                                          base, "--target", "2", "-o", out, "--json").stdout))
        maps.append(np.load(out))
    np.testing.assert_allclose(maps[0], maps[1], rtol=1e-5, atol=1e-8)
    assert reports[0]["batch"] == 1 and reports[1]["batch"] is None
    for check in reports[0]["completeness"] if method == "deeplift" else []:  # y moves by about 1e-5 here: float32's
        # rounding of two outputs of y's size is the bound on their difference, a few times 1e-8
        assert check["attribution_sum"] == pytest.approx(check["output_difference"], rel=1e-4, abs=1e-7)


def test_deeplift_on_an_odd_fixed_batch_with_functions_is_refused_naming_it(tmp_path):
    """Rules inside a function's body split its batch in halves: no twin there."""
    def build():
        x = v1.placeholder(tf.float32, [None, 4], name="x")

        @tf.function
        def layer(inputs):
            return tf.tanh(tf.matmul(inputs, WEIGHTS))

        tf.identity(layer(tf.reshape(x, [3, 4])), name="y")

    path = graph_file(tmp_path, build)
    result = run_cli("attribute", path, "--method", "deeplift", "--input",
                     _saved(tmp_path, RNG.normal(size=(3, 4)).astype(np.float32)), "--target", "0",
                     "-o", tmp_path / "o.npy", "--json", expect=1)
    error = json.loads(result.stdout)["error"]
    assert "batches of exactly 3 rows (Reshape reshapes its input to [3, 4])" in error


def _saved_as(path, array):
    np.save(path, array)
    return path


def test_outputs_never_land_on_the_model_or_the_inputs(tmp_path):
    model = tmp_path / "model.pb"
    model.write_bytes(open(fixture("classifier.pb"), "rb").read())
    rows = _saved(tmp_path, RNG.normal(size=(2, 4)).astype(np.float32))
    before = rows.read_bytes(), model.read_bytes()
    common = ["attribute", model, "--method", "gradient", "--input", rows, "--target", "0"]
    other = tmp_path / "a.npy"
    picture = tmp_path / "model.png"
    os.symlink(model, picture)  # a picture's name that is the model's file
    for extra, message in [(["-o", rows], f"-o {rows} would overwrite --input"),
                           (["-o", other, "--image", picture], f"--image {picture} would overwrite the model"),
                           (["-o", other, "--baseline", other], f"-o {other} would overwrite --baseline")]:
        assert message in run_cli(*common, *extra, expect=2).stderr
    assert (rows.read_bytes(), model.read_bytes()) == before and not (tmp_path / "a.npy").exists()


def test_attribute_stops_at_its_timeout(tmp_path):
    result = run_cli("attribute", fixture("classifier.pb"), "--method", "integrated_gradients(steps=100000000)",
                     "--input", fixture("classifier_rows.npy"), "--target", "0", "--timeout", "2",
                     "-o", tmp_path / "o.npy", expect=1)
    assert "the runs took over 2 s and were stopped" in result.stderr and not (tmp_path / "o.npy").exists()


def test_a_transposed_3d_convolution_is_linear_and_needs_no_rule(tmp_path):
    """Conv3DBackpropInputV2 (conv3d_transpose) is linear in its data input: deeplift
    passes its gradient through, and the attributions stay complete."""
    def build():
        x = v1.placeholder(tf.float32, [None, 2, 2, 2, 1], name="x")
        kernel = tf.constant(RNG.normal(size=(2, 2, 2, 3, 1)).astype(np.float32))
        up = tf.nn.conv3d_transpose(x, kernel, [tf.shape(x)[0], 4, 4, 4, 3], [1, 2, 2, 2, 1])
        tf.reduce_sum(tf.tanh(up), axis=[1, 2, 3], name="y")

    path = graph_file(tmp_path, build)
    rows = RNG.normal(size=(2, 2, 2, 2, 1)).astype(np.float32)
    out = tmp_path / "out.npy"
    report = json.loads(run_cli("attribute", path, "--method", "deeplift", "--input", _saved(tmp_path, rows),
                                "--target", "1", "-o", out, "--json").stdout)
    assert report["uncovered"] == [] and report["rules"] == {"Tanh": "deeplift"}
    for check in report["completeness"]:
        assert check["attribution_sum"] == pytest.approx(check["output_difference"], rel=1e-5, abs=1e-6)


def _npy_with_header(path, header: dict, payload: bytes = b""):
    """An .npy file with this header and payload, written by hand (as a hostile one would be)."""
    text = repr(header).encode()
    padding = (64 - (10 + len(text) + 1) % 64) % 64
    path.write_bytes(b"\x93NUMPY\x01\x00" + (len(text) + padding + 1).to_bytes(2, "little") + text
                     + b" " * padding + b"\n" + payload)
    return path


@pytest.mark.parametrize("header, payload, message", [
    ({"descr": "<f4", "fortran_order": False, "shape": (10**12, 4)}, b"\0" * 16, "its header says shape"),
    ({"descr": "<U3", "fortran_order": False, "shape": (2,)}, b"\0" * 24, "holds <U3 values; give numbers"),
    ({"descr": "|S3", "fortran_order": False, "shape": (2,)}, b"\0" * 6, "holds |S3 values"),
    ({"descr": [("a", "<f4")], "fortran_order": False, "shape": (2,)}, b"\0" * 8, "give numbers"),
    ({"descr": "|V4", "fortran_order": False, "shape": (2,)}, b"\0" * 8, "holds |V4 values"),
    ({"descr": "|O", "fortran_order": False, "shape": (2,)}, b"\0" * 16, "holds object values"),
    ({"descr": "<f4", "fortran_order": False, "shape": (2, 4), "x": "y" * 20000}, b"", "not a usable .npy array"),
])
def test_hostile_npy_inputs_are_one_line_before_anything_is_allocated(tmp_path, header, payload, message):
    path = _npy_with_header(tmp_path / "rows.npy", header, payload)
    for args in (["attribute", fixture("classifier.pb"), "--method", "gradient", "--input", path, "--target", "0",
                  "-o", tmp_path / "o.npy"],
                 ["check", fixture("classifier.pb"), "--target", "0", "--feed", f"x={path}"]):
        result = run_cli(*args, expect=2)
        assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o.npy").exists()


# -- per-row targets and SmoothGrad ---------------------------------------------------------

ROWS = RNG.normal(size=(5, 4)).astype(np.float32)


def attribute_rows(tmp_path, rows, *args, model="classifier.pb"):
    source, out = _saved_as(tmp_path / "rows_in.npy", rows), tmp_path / "out.npy"
    report = json.loads(run_cli("attribute", fixture(model), "--input", source, "-o", out, "--json", *args).stdout)
    return np.load(out), report


@pytest.mark.parametrize("method", ["gradient", "integrated_gradients(steps=5)", "deeplift", "eps_lrp(eps=0.001)"])
def test_one_target_per_row_gives_what_one_call_per_row_gives(tmp_path, method):
    targets = np.array([2, 0, 1, 2, 0], np.int64)
    together, report = attribute_rows(tmp_path, ROWS, "--method", method, "--y", "logits", "--target",
                                      _saved_as(tmp_path / "targets.npy", targets))
    assert report["targets"] == targets.tolist()
    for row, target in enumerate(targets):
        alone, _ = attribute_rows(tmp_path, ROWS[row:row + 1], "--method", method, "--y", "logits", "--target",
                                  str(target))
        np.testing.assert_allclose(together[row], alone[0], rtol=1e-5, atol=1e-7)


def test_predicted_targets_are_the_classes_y_scores_highest(tmp_path):
    graph = load_classifier()
    with v1.Session(graph=graph) as session:
        logits = session.run("logits:0", {"x:0": ROWS})
    got, report = attribute_rows(tmp_path, ROWS, "--method", "gradient", "--y", "logits", "--target", "predicted")
    assert report["targets"] == logits.argmax(axis=1).tolist()
    want, _ = attribute_rows(tmp_path, ROWS, "--method", "gradient", "--y", "logits", "--target",
                             _saved_as(tmp_path / "t.npy", logits.argmax(axis=1)))
    np.testing.assert_array_equal(got, want)


def classifier_gradients(rows):
    """logits and d logits[:, c] / dx for every class c, (classes, rows, 4), from TensorFlow."""
    graph = load_classifier()
    with graph.as_default():
        x, logits = graph.get_tensor_by_name("x:0"), graph.get_tensor_by_name("logits:0")
        each = [v1.gradients(logits[:, c], [x])[0] for c in range(3)]
        with v1.Session(graph=graph) as session:
            scores, gradients = session.run([logits, each], {x: rows})
    return scores, np.stack(gradients)


def test_top_k_targets_are_each_rows_k_highest_classes_best_first(tmp_path):
    """Attributions of shape (rows, K, 4): column r is the gradient of the class the
    row scores r-th highest, computed here with tf.gradients, and the report names them."""
    scores, gradients = classifier_gradients(ROWS)
    got, report = attribute_rows(tmp_path, ROWS, "--method", "gradient", "--y", "logits", "--target", "top:2")
    order = np.argsort(-scores, axis=1)[:, :2]
    assert got.shape == (5, 2, 4) and report["targets"] == order.tolist() and report["ranked"] == "top:2"
    for row in range(5):
        for rank in range(2):
            np.testing.assert_allclose(got[row, rank], gradients[order[row, rank], row], rtol=1e-6)


def test_all_targets_are_every_class_in_index_order_each_checked_for_completeness(tmp_path):
    """integrated_gradients of every class: column c is class c's attributions, and
    completeness is reported for each row and class, their sums against f(x) - f(0)."""
    got, report = attribute_rows(tmp_path, ROWS, "--method", "integrated_gradients(steps=32)", "--y", "logits",
                                 "--target", "all")
    scores, _ = classifier_gradients(ROWS)
    at_zero, _ = classifier_gradients(np.zeros_like(ROWS))
    assert got.shape == (5, 3, 4) and report["targets"] == [[0, 1, 2]] * 5
    checks = {(c["row"], c["target"]): c for c in report["completeness"]}
    assert sorted(checks) == [(row, c) for row in range(5) for c in range(3)]
    for (row, c), check in checks.items():
        assert check["output_difference"] == pytest.approx(scores[row, c] - at_zero[row, c], rel=1e-5, abs=1e-6)
        assert check["attribution_sum"] == pytest.approx(got[row, c].sum(), rel=1e-5, abs=1e-6)
    text = run_cli("attribute", fixture("classifier.pb"), "--method", "integrated_gradients(steps=32)", "--y",
                   "logits", "--input", _saved_as(tmp_path / "rows_in.npy", ROWS), "--target", "all", "-o",
                   tmp_path / "out.npy").stdout
    assert "attributions of logits[row, every class]" in text and "row  class  sum" in text


def score_and_slope(path, of, target):
    """``path`` imported into a graph of its own: (graph, x, the tensor ``of``,
    logits[:, target], d logits[:, target] / d ``of``)."""
    graph = tf.Graph()
    with graph.as_default():
        v1.import_graph_def(v1.GraphDef.FromString(path.read_bytes()), name="")
        x, at = graph.get_tensor_by_name("x:0"), graph.get_tensor_by_name(of)
        score = graph.get_tensor_by_name("logits:0")[:, target]
        [slope] = v1.gradients(score, [at])
    return graph, x, at, score, slope


def skip_connected_net():
    """x (N, 4) -> hidden = relu(x W) (N, 6) -> logits = tanh(hidden) U + x V: a path that bypasses the layer."""
    rng = np.random.default_rng(9)
    x = v1.placeholder(tf.float32, [None, 4], name="x")
    hidden = tf.nn.relu(tf.matmul(x, rng.standard_normal((4, 6)).astype(np.float32)), name="hidden")
    tf.add(tf.matmul(tf.tanh(hidden), rng.standard_normal((6, 3)).astype(np.float32)),
           tf.matmul(x, rng.standard_normal((4, 3)).astype(np.float32)), name="logits")


def test_integrated_gradients_at_a_layer_integrate_in_its_values_with_x_held(tmp_path):
    """alibi's layer IG: (a - a') times the mean of d logits[:, 1] / d hidden at
    a' + (k + 0.5)/steps (a - a'), hidden fed those values and x the row (so the
    bypass x V sees the row), computed here with tf.gradients; completeness is
    against logits(x) - logits(x with hidden at the baseline's)."""
    path = graph_file(tmp_path, skip_connected_net)
    rows = RNG.normal(size=(3, 4)).astype(np.float32)
    got, report = attribute(tmp_path, path, "integrated_gradients(steps=16)", rows, "--layer", "hidden",
                            "--target", "1")
    graph, x, hidden, score, slope = score_and_slope(path, "hidden:0", 1)
    with v1.Session(graph=graph) as session:
        a, at_zero = session.run(hidden, {x: rows}), session.run(hidden, {x: np.zeros_like(rows)})
        mean = np.mean([session.run(slope, {x: rows, hidden: at_zero + (k + 0.5) / 16 * (a - at_zero)})
                        for k in range(16)], axis=0)
        difference = session.run(score, {x: rows}) - session.run(score, {x: rows, hidden: at_zero})
    assert got.shape == (3, 6) and report["layer"] == "hidden:0"
    np.testing.assert_allclose(got, mean * (a - at_zero), rtol=1e-5, atol=1e-6)
    assert [c["output_difference"] for c in report["completeness"]] == pytest.approx(difference, rel=1e-5)
    with graphgrad.Explainer(str(path), "integrated_gradients(steps=16)", y="logits", layer="hidden") as explainer:
        python, _ = explainer.explain(rows, target=1)
        smoothed, _ = explainer.explain(rows, target=1, noise=(3, 0.0))  # SmoothGrad over it: the layer's shape
    np.testing.assert_array_equal(python, got)
    np.testing.assert_allclose(smoothed, got, rtol=1e-6, atol=1e-7)
    text = run_cli("attribute", path, "--method", "integrated_gradients(steps=16)", "--input", _saved(tmp_path, rows),
                   "--y", "logits", "--target", "1", "--layer", "hidden", "-o", tmp_path / "o.npy").stdout
    assert "attributions of logits[..., 1] to hidden:0 ->" in text


@pytest.mark.parametrize("method, extra, message", [
    ("gradient", [], "--layer hidden: gradient is gradient-rule and attributes to x; a layer is taken by the class "
                     "activation maps (gradcam, ...) and by integrated_gradients"),
    ("integrated_gradients", ["--tolerance", "0.01"], "--layer and --tolerance: the path is refined to a tolerance at "
                                                       "x only"),
])
def test_a_layer_the_method_does_not_take_is_refused_in_one_line(tmp_path, method, extra, message):
    path = graph_file(tmp_path, skip_connected_net)
    result = run_cli("attribute", path, "--method", method, "--input", _saved(tmp_path, ROWS[:2]), "--y", "logits",
                     "--target", "0", "--layer", "hidden", *extra, "-o", tmp_path / "o.npy", expect=2)
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_ranked_targets_in_the_python_api_and_their_refusals(tmp_path):
    scores, gradients = classifier_gradients(ROWS)
    with graphgrad.Explainer(fixture("classifier.pb"), "gradient", y="logits") as explainer:
        got, report = explainer.explain(ROWS, target="top:1")
        assert got.shape == (5, 1, 4) and report.targets == scores.argmax(axis=1)[:, None].tolist()
        np.testing.assert_allclose(got[:, 0], gradients[scores.argmax(axis=1), np.arange(5)], rtol=1e-6)
        for target, message in [("top:4", "target top:4: y has 3 classes; give top:K with K at most 3, or all"),
                                ("top:x", "target 'top:x': give top:K with K a whole number of classes"),
                                ("foo", "'predicted', 'top:K' or 'all'")]:
            with pytest.raises(graphgrad.GraphgradError, match=message.replace("(", r"\(").replace(")", r"\)")):
                explainer.explain(ROWS, target=target)


def test_ranked_targets_draw_one_picture_row_per_row_and_class(tmp_path):
    from PIL import Image

    from graphgrad.jobs.heatmap import PAD, TITLE_HEIGHT

    out, picture = tmp_path / "saliency.npy", tmp_path / "saliency.png"
    rows = _saved_as(tmp_path / "rows.npy", np.load(fixture("image_rows.npy"))[:2])
    run_cli("attribute", fixture("image_net.pb"), "--method", "gradient", "--input", rows, "--target", "top:2", "-o",
            out, "--image", picture)
    attributions = np.load(out)
    assert attributions.shape == (2, 2, 8, 8, 3)
    image = np.asarray(Image.open(picture).convert("RGB"))
    side = 128
    assert image.shape[0] == TITLE_HEIGHT + 4 * (side + PAD)
    heat = attributions[0, 1].sum(axis=2)  # row 0's second class: the picture's second row
    strongest = np.unravel_index(np.abs(heat).argmax(), heat.shape)
    pixel = image[TITLE_HEIGHT + (side + PAD) + strongest[0] * 16, side + PAD + strongest[1] * 16]
    assert list(pixel) == ([255, 0, 0] if heat[strongest] > 0 else [0, 0, 255])


def load_classifier():
    graph = tf.Graph()
    with graph.as_default():
        v1.import_graph_def(v1.GraphDef.FromString(open(fixture("classifier.pb"), "rb").read()), name="")
    return graph


@pytest.mark.parametrize("method", ["gradient", "grad_x_input", "deeplift"])
def test_smoothgrad_with_sigma_zero_is_the_method_it_wraps(tmp_path, method):
    plain, _ = attribute_rows(tmp_path, ROWS, "--method", method, "--y", "logits", "--target", "1")
    smoothed, report = attribute_rows(tmp_path, ROWS, "--method", method, "--y", "logits", "--target", "1",
                                      "--noise", "4,0")
    np.testing.assert_allclose(smoothed, plain, rtol=1e-6, atol=1e-7)
    assert report["noise"] == "4 samples, sigma 0 of each row's range, mean" and report["completeness"] == []


@pytest.mark.parametrize("aggregate, join", [("mean", lambda g: g.mean(0)), ("squared", lambda g: (g ** 2).mean(0)),
                                             ("variance", lambda g: g.var(0)), ("abs", lambda g: np.abs(g).mean(0))])
def test_smoothgrad_is_its_formula_and_repeats_bit_for_bit(tmp_path, aggregate, join):
    """The mean (square, variance) of dy/dx at x + N(0, (sigma (max - min))^2), the noise drawn
    as the seed says, computed here in TensorFlow."""
    args = ["--method", "gradient", "--y", "logits", "--target", "2", "--noise", "8,0.2",
            "--noise-aggregate", aggregate, "--seed", "7"]
    first, _ = attribute_rows(tmp_path, ROWS, *args)
    again, _ = attribute_rows(tmp_path, ROWS, *args)
    assert first.tobytes() == again.tobytes()
    other, _ = attribute_rows(tmp_path, ROWS, *args[:-1], "8")
    assert not np.array_equal(first, other)
    rng = np.random.default_rng(7)
    scale = (ROWS.max(axis=1) - ROWS.min(axis=1))[:, None] * 0.2
    noisy = [ROWS + (rng.standard_normal(ROWS.shape) * scale).astype(np.float32) for _ in range(8)]
    graph = load_classifier()
    with graph.as_default():
        x = graph.get_tensor_by_name("x:0")
        [gradient] = v1.gradients(graph.get_tensor_by_name("logits:0")[..., 2], [x])
        with v1.Session(graph=graph) as session:
            each = np.stack([session.run(gradient, {x: rows}) for rows in noisy]).astype(np.float64)
    np.testing.assert_allclose(first, join(each), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("target, message", [
    (np.array([0, 1]), "--target holds shape [2]: give one class index per row of --input (5)"),
    (np.array([0, 1, 2, 3, 9]), "holds indices 0 to 9; y has 3 classes (0 to 2)"),
    (np.zeros(5, np.float32), "give one integer class index per row"),
])
def test_bad_per_row_targets_are_one_line(tmp_path, target, message):
    result = run_cli("attribute", fixture("classifier.pb"), "--method", "gradient", "--y", "logits", "--input",
                     _saved_as(tmp_path / "rows_in.npy", ROWS), "--target", _saved_as(tmp_path / "t.npy", target),
                     "-o", tmp_path / "out.npy", expect=2)
    assert message in result.stderr and not (tmp_path / "out.npy").exists()


@pytest.mark.parametrize("noise", ["0,0.1", "5", "5,-1", "a,b"])
def test_bad_noise_is_one_line(tmp_path, noise):
    result = run_cli("attribute", fixture("classifier.pb"), "--method", "gradient", "--y", "logits", "--input",
                     _saved_as(tmp_path / "rows_in.npy", ROWS), "--noise", noise, "-o", tmp_path / "out.npy", expect=2)
    assert "expected N,SIGMA" in result.stderr


def strided_cnn():
    """x (N, 8, 8, 3) -> Conv2D stride 2 -> Relu (N, 4, 4, 5) -> Conv2D -> Relu -> mean -> logits."""
    rng = np.random.default_rng(4)
    x = v1.placeholder(tf.float32, [None, 8, 8, 3], name="x")
    first = tf.nn.relu(tf.nn.conv2d(x, rng.standard_normal((3, 3, 3, 5)).astype(np.float32), 2, "SAME"),
                       name="first")
    last = tf.nn.relu(tf.nn.conv2d(first, rng.standard_normal((3, 3, 5, 6)).astype(np.float32), 1, "SAME"),
                      name="last")
    tf.matmul(tf.reduce_mean(last, axis=[1, 2]), rng.standard_normal((6, 3)).astype(np.float32), name="logits")


CAM_WEIGHTS = {"gradcam": lambda d: d.mean(axis=(1, 2), keepdims=True),  # Grad-CAM: the mean gradient of a channel
           "layercam": lambda d: np.maximum(d, 0)}  # Layer-CAM: each position's own positive gradient


@pytest.mark.parametrize("method", sorted(CAM_WEIGHTS))
@pytest.mark.parametrize("layer", [None, "first"])
def test_grad_cam_is_relu_of_the_gradient_weighted_layer_resized_to_x(tmp_path, layer, method):
    path = graph_file(tmp_path, strided_cnn)
    rows = RNG.uniform(0, 1, (3, 8, 8, 3)).astype(np.float32)
    out = tmp_path / "cam.npy"
    args = ["--layer", layer] if layer else []
    report = json.loads(run_cli("attribute", path, "--method", method, "--input", _saved(tmp_path, rows),
                                "--y", "logits", "--target", "2", *args, "-o", out, "--json").stdout)
    assert report["layer"] == f"{layer or 'last'}:0"
    graph, x, activations, _, slope = score_and_slope(path, f"{layer or 'last'}:0", 2)
    with v1.Session(graph=graph) as session:
        a, d = session.run([activations, slope], {x: rows})
    cam = np.maximum((CAM_WEIGHTS[method](d) * a).sum(axis=-1, keepdims=True), 0)
    with tf.Graph().as_default(), v1.Session() as session:
        expected = session.run(tf.image.resize(cam, [8, 8], method="bilinear"))
    np.testing.assert_allclose(np.load(out), expected, rtol=1e-6, atol=1e-6)


def blurred(images, sigma):
    """Images (N, H, W, C) convolved with a 2-D Gaussian cut at 4 sigma, zeros beyond
    the edges: scipy.ndimage.gaussian_filter(mode="constant") written out."""
    if sigma == 0:
        return images.astype(np.float64)
    radius = int(4 * sigma + 0.5)
    taps = np.exp(-0.5 * np.arange(-radius, radius + 1) ** 2 / sigma ** 2)
    taps /= taps.sum()
    height, width = images.shape[1:3]
    padded = np.pad(images.astype(np.float64), ((0, 0), (radius, radius), (radius, radius), (0, 0)))
    return sum(taps[i] * taps[j] * padded[:, i:i + height, j:j + width]
               for i in range(2 * radius + 1) for j in range(2 * radius + 1))


def test_blur_ig_is_the_blur_path_integral_and_reports_its_own_gap(tmp_path):
    """-sum_i (sigma_{i+1} - sigma_i) (blur(x, sigma_i + h) - blur(x, sigma_i)) / h
    * dy/dx at blur(x, sigma_i), sigma_i = i max_sigma / steps, as PAIR's saliency
    computes Blur IG, with the gradients from tf.gradients; completeness is reported
    against f(x) - f(x blurred by max_sigma), with the map's own sums (no bound on the
    gap: the blur jumps where its kernel's radius grows, so the gap does not vanish
    with more steps)."""
    path = graph_file(tmp_path, strided_cnn)
    rows = np.random.default_rng(8).uniform(0, 1, (3, 8, 8, 3)).astype(np.float32)
    got, report = attribute(tmp_path, path, "blur_ig(max_sigma=4,steps=40)", rows, "--y", "logits", "--target", "2")
    graph, x, _, score, slope = score_and_slope(path, "x:0", 2)
    with v1.Session(graph=graph) as session:
        expected, rounding = np.zeros(rows.shape), np.zeros(rows.shape)
        for i in range(40):
            sigma = i * 4 / 40
            point = blurred(rows, sigma).astype(np.float32)
            rate = (blurred(rows, sigma + 0.01) - point) / 0.01
            gradient = session.run(slope, {x: point})
            expected -= 0.1 * rate * gradient
            # Both blurs are rounded to float32 (after each axis, as scipy rounds):
            # a few ulps of the blurred value each, divided by the 0.01 step.
            rounding += 0.1 * 4 * np.finfo(np.float32).eps * np.maximum(np.abs(point), 1e-3) / 0.01 * np.abs(gradient)
        difference = session.run(score, {x: rows}) - session.run(score, {x: blurred(rows, 4).astype(np.float32)})
    assert np.all(np.abs(got - expected) <= rounding + 1e-5 * np.abs(expected))
    assert [c["output_difference"] for c in report["completeness"]] == pytest.approx(difference, rel=1e-5)
    assert [c["attribution_sum"] for c in report["completeness"]] == pytest.approx(got.sum(axis=(1, 2, 3)), rel=1e-5)


@pytest.mark.parametrize("args, rows, message", [
    (["--baseline", "BASE"], (2, 8, 8, 3), "--baseline: blur_ig's path ends at the row blurred by max_sigma"),
    ([], (2, 4), "blur_ig blurs images, rows of shape (N, H, W, C); these are [2, 4]"),
    (["--tolerance", "0.01"], (2, 8, 8, 3), "--tolerance: blur_ig integrates at x over its own path"),
    (["--method", "blur_ig(grad_step=0)"], (2, 8, 8, 3), "grad_step must be at least 1e-06"),
    (["--method", "blur_ig(max_sigma=0)"], (2, 8, 8, 3), "max_sigma must be at least 0.001"),
])
def test_what_blur_ig_does_not_take_is_refused_in_one_line(tmp_path, args, rows, message):
    path = graph_file(tmp_path, strided_cnn) if len(rows) == 4 else fixture("classifier.pb")
    inputs = _saved(tmp_path, RNG.uniform(0, 1, rows).astype(np.float32))
    args = [_saved_as(tmp_path / "base.npy", np.load(inputs)) if arg == "BASE" else arg for arg in args]
    method = [] if "--method" in args else ["--method", "blur_ig"]
    result = run_cli("attribute", path, *method, *args, "--input", inputs, "--y", "logits", "--target", "0", "-o",
                     tmp_path / "o.npy", expect=2)
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_guided_ig_with_no_room_to_deviate_is_the_straight_paths_left_sum(tmp_path):
    """max_dist=0 holds every feature on the straight path: each step moves all of
    them to alpha = (i + 1) / steps, so Guided IG is sum_i (x - b) / steps * dy/dx at
    b + i / steps (x - b), the gradients from tf.gradients."""
    path = graph_file(tmp_path, strided_cnn)
    rows = RNG.uniform(0, 1, (3, 8, 8, 3)).astype(np.float32)
    got, report = attribute(tmp_path, path, "guided_ig(steps=20,max_dist=0.0)", rows, "--y", "logits", "--target", "2")
    graph, x, _, score, slope = score_and_slope(path, "x:0", 2)
    with v1.Session(graph=graph) as session:
        expected = sum(session.run(slope, {x: (i / 20 * rows).astype(np.float32)}).astype(np.float64)
                       for i in range(20)) * rows / 20
        difference = session.run(score, {x: rows}) - session.run(score, {x: np.zeros_like(rows)})
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6 * np.abs(expected).max())
    assert [c["output_difference"] for c in report["completeness"]] == pytest.approx(difference, rel=1e-5)
    assert [c["attribution_sum"] for c in report["completeness"]] == pytest.approx(got.sum(axis=(1, 2, 3)), rel=1e-5)


def linear_scores():
    """x (N, 6) -> logits = x W: a gradient that is the same everywhere."""
    weights = np.random.default_rng(4).standard_normal((6, 3)).astype(np.float32)
    tf.matmul(v1.placeholder(tf.float32, [None, 6], name="x"), weights, name="logits")
    return weights


def test_guided_ig_on_a_linear_model_is_complete_whatever_its_path_and_zero_at_the_baseline(tmp_path):
    """Where the gradient is W everywhere, any path from b to x gives (x - b) W: the
    path Guided IG picks from the gradients (smallest first, within max_dist of the
    straight path) must still start at b and end at x. A row equal to its baseline
    gets zeros."""
    path = graph_file(tmp_path, linear_scores)
    weights = np.random.default_rng(4).standard_normal((6, 3)).astype(np.float32)
    rows = RNG.normal(size=(4, 6)).astype(np.float32)
    base = RNG.normal(size=(4, 6)).astype(np.float32)
    base[1] = rows[1]
    for method in ("guided_ig(steps=7,fraction=0.3,max_dist=0.1)", "guided_ig(steps=3,max_dist=1.0)"):
        got, _ = attribute(tmp_path, path, method, rows, "--y", "logits", "--target", "1", "--baseline",
                           _saved_as(tmp_path / "base.npy", base))
        np.testing.assert_allclose(got, (rows - base).astype(np.float64) * weights[:, 1], rtol=1e-5, atol=1e-6)
        assert not got[1].any()


@pytest.mark.parametrize("args, message", [
    (["--method", "guided_ig(fraction=1.5)"], "fraction must be at most 1"),
    (["--method", "guided_ig(max_dist=-0.1)"], "max_dist must be at least 0"),
    (["--method", "guided_ig", "--tolerance", "0.01"], "--tolerance: guided_ig integrates at x over its own path"),
    (["--method", "guided_ig", "--layer", "first"], "--layer: guided_ig integrates at x over its own path"),
])
def test_what_guided_ig_does_not_take_is_refused_in_one_line(tmp_path, args, message):
    inputs = _saved(tmp_path, RNG.uniform(0, 1, (2, 8, 8, 3)).astype(np.float32))
    result = run_cli("attribute", graph_file(tmp_path, strided_cnn), *args, "--input", inputs, "--y", "logits",
                     "--target", "0", "-o", tmp_path / "o.npy", expect=2)
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def two_branch_cnn():
    """x -> two convolutions side by side, each pooled, concatenated -> logits: no
    layer is computed from the other, so neither is "the last"."""
    rng = np.random.default_rng(6)
    x = v1.placeholder(tf.float32, [None, 8, 8, 3], name="x")
    pooled = [tf.reduce_mean(tf.nn.relu(tf.nn.conv2d(x, rng.standard_normal((3, 3, 3, 4)).astype(np.float32), 1,
                                                     "SAME"), name=name), axis=[1, 2]) for name in ("left", "right")]
    tf.matmul(tf.concat(pooled, axis=1), rng.standard_normal((8, 3)).astype(np.float32), name="logits")


def test_grad_cam_between_parallel_last_layers_asks_which(tmp_path):
    """Graph order picked one of two branches' layers by how the file was written (a
    Keras export and the same model frozen picked different ones): refused, naming
    both; either, named, runs."""
    path = graph_file(tmp_path, two_branch_cnn)
    rows = _saved(tmp_path, RNG.uniform(0, 1, (2, 8, 8, 3)).astype(np.float32))
    common = ["--input", rows, "--y", "logits", "--target", "1", "-o", tmp_path / "cam.npy"]
    result = run_cli("attribute", path, "--method", "gradcam", *common, expect=2)
    assert result.stderr.strip() == ("graphgrad: error: a class activation map takes one layer, and the path from "
                                     "x:0 to logits has 2 last ones, on branches that reach y apart: left:0, right:0; "
                                     "name one with --layer")
    for layer in ("left", "right"):
        report = json.loads(run_cli("attribute", path, "--method", "gradcam", *common, "--layer", layer,
                                    "--json").stdout)
        assert report["layer"] == f"{layer}:0"


def reshaped_to_an_image():
    """x (N, 16), not an image, reshaped to (N, 4, 4, 1) and convolved -> logits."""
    rng = np.random.default_rng(8)
    x = v1.placeholder(tf.float32, [None, 16], name="x")
    layer = tf.nn.relu(tf.nn.conv2d(tf.reshape(x, [-1, 4, 4, 1]), rng.standard_normal((3, 3, 1, 2)).astype(
        np.float32), 1, "SAME"), name="layer")
    tf.matmul(tf.reduce_mean(layer, axis=[1, 2]), rng.standard_normal((2, 3)).astype(np.float32), name="logits")


@pytest.mark.parametrize("method, how", [("guided_gradcam", "multiplies the guided gradient by"),
                                         ("scorecam", "masks x with")])
def test_the_maps_that_combine_with_x_refuse_an_x_that_is_not_an_image(tmp_path, method, how):
    """Grad-CAM's map keeps the layer's height and width where x is no image; guided
    Grad-CAM and Score-CAM combine it with x, which broadcast against it (a traceback
    on basic-pitch's audio): refused in one line, and gradcam, which it names, runs."""
    path = graph_file(tmp_path, reshaped_to_an_image)
    rows = _saved(tmp_path, RNG.normal(size=(2, 16)).astype(np.float32))
    common = ["--input", rows, "--y", "logits", "--target", "1", "-o", tmp_path / "cam.npy"]
    result = run_cli("attribute", path, "--method", method, *common, expect=2)
    assert result.stderr.strip() == (f"graphgrad: error: {method} {how} a map resized to x, and x (shape "
                                     "(None, 16)) is not an image (N, H, W, C); use gradcam, whose map keeps the "
                                     "layer's height and width")
    run_cli("attribute", path, "--method", "gradcam", *common)
    assert np.load(tmp_path / "cam.npy").shape == (2, 4, 4, 1)


def test_grad_cam_without_a_spatial_layer_is_one_line(tmp_path):
    result = run_cli("attribute", fixture("classifier.pb"), "--method", "gradcam", "--input",
                     fixture("classifier_rows.npy"), "--y", "logits", "--target", "0", "-o", tmp_path / "o.npy",
                     expect=2)
    assert "(Grad-CAM, Score-CAM) needs a 4-D (N, H, W, C) layer" in result.stderr
    assert "name one with --layer" in result.stderr


def test_an_explainer_answers_repeated_calls_from_one_session_as_the_command_does(tmp_path):
    """Loaded and rewritten once: each call gives what `graphgrad attribute` gives, and
    later calls build no new ops (the gradient for each kind of target is kept)."""
    explainer = graphgrad.Explainer(fixture("classifier.pb"), "deeplift", y="logits")
    first, report = explainer.explain(ROWS, target=1)
    ops = len(explainer.run.graph.get_operations())
    again, _ = explainer.explain(ROWS[:2], target=1)
    assert len(explainer.run.graph.get_operations()) == ops
    np.testing.assert_allclose(again, first[:2], rtol=1e-6)
    by_command, _ = attribute_rows(tmp_path, ROWS, "--method", "deeplift", "--y", "logits", "--target", "1")
    np.testing.assert_allclose(first, by_command, rtol=1e-6)
    assert [round(c.attribution_sum, 4) for c in report.completeness] == \
        [round(c.output_difference, 4) for c in report.completeness]
    per_row, _ = explainer.explain(ROWS, target=np.array([1, 0, 2, 1, 1]))
    np.testing.assert_allclose(per_row[0], first[0], rtol=1e-6)
    smooth, report = explainer.explain(ROWS, target=1, noise=graphgrad.Noise(3, 0.0))
    np.testing.assert_allclose(smooth, first, rtol=1e-6)
    assert report.noise.startswith("3 samples")


@pytest.mark.parametrize("window, stride", [(3, 2), (4, 4), (8, 1)])
def test_occlusion_is_the_mean_drop_of_the_windows_over_each_entry(tmp_path, window, stride):
    """Each window of the image (across channels) set to 0.5 in turn; an entry's
    attribution is the mean of y's drops over the windows that cover it."""
    rows = np.load(fixture("image_rows.npy"))[:2]
    got, report = attribute_rows(tmp_path, rows, "--method", f"occlusion(window={window},stride={stride},value=0.5)",
                                 "--y", "logits", "--target", "1", model="image_net.pb")
    assert report["method"] == f"occlusion(window={window},stride={stride},value=0.5)"
    graph = tf.Graph()
    with graph.as_default():
        v1.import_graph_def(v1.GraphDef.FromString(open(fixture("image_net.pb"), "rb").read()), name="")
    starts = sorted(set(range(0, 8 - window + 1, stride)) | {8 - window})
    drops, covered = np.zeros(rows.shape), np.zeros(rows.shape)
    with v1.Session(graph=graph) as session:
        plain = session.run("logits:0", {"x:0": rows})[:, 1]
        for top in starts:
            for left in starts:
                occluded = rows.copy()
                occluded[:, top:top + window, left:left + window, :] = 0.5
                drop = plain - session.run("logits:0", {"x:0": occluded})[:, 1]
                drops[:, top:top + window, left:left + window, :] += drop[:, None, None, None]
                covered[:, top:top + window, left:left + window, :] += 1
    np.testing.assert_allclose(got, drops / covered, rtol=1e-5, atol=1e-6)


BACKGROUND = RNG.normal(size=(4, 5)).astype(np.float32)


def test_deepshap_is_deeplift_averaged_over_the_background_and_complete_against_its_mean(tmp_path):
    rows = RNG.normal(size=(3, 5)).astype(np.float32)
    got, report = attribute_rows(tmp_path, rows, "--method", "deepshap", "--target", "1", "--baseline",
                                 _saved_as(tmp_path / "bg.npy", BACKGROUND), model="activations_net.pb")
    each = [attribute_rows(tmp_path, rows, "--method", "deeplift", "--target", "1", "--baseline",
                           _saved_as(tmp_path / "one.npy", BACKGROUND[index]), model="activations_net.pb")[0]
            for index in range(len(BACKGROUND))]
    np.testing.assert_allclose(got, np.mean(each, axis=0), rtol=1e-5, atol=1e-6)
    for check in report["completeness"]:  # f(x) - the background's mean output
        assert check["attribution_sum"] == pytest.approx(check["output_difference"], rel=1e-5, abs=1e-6)


def test_expected_gradients_are_their_formula_with_the_seeds_draws(tmp_path):
    """The mean over draws of (x - x') dy/dx at x' + a (x - x'), x' a background row
    and a in [0, 1) drawn as the seed says, computed here in TensorFlow."""
    rows = RNG.normal(size=(3, 5)).astype(np.float32)
    args = ["--method", "expected_gradients(samples=16,seed=5)", "--target", "0", "--baseline",
            _saved_as(tmp_path / "bg.npy", BACKGROUND)]
    got, report = attribute_rows(tmp_path, rows, *args, model="activations_net.pb")
    again, _ = attribute_rows(tmp_path, rows, *args, model="activations_net.pb")
    assert got.tobytes() == again.tobytes() and len(report["completeness"]) == 3
    rng = np.random.default_rng(5)
    chosen, alphas = rng.integers(0, 4, (3, 16)), rng.random((3, 16))
    graph = tf.Graph()
    with graph.as_default():
        v1.import_graph_def(v1.GraphDef.FromString(open(fixture("activations_net.pb"), "rb").read()), name="")
        x = graph.get_tensor_by_name("x:0")
        [gradient] = v1.gradients(graph.get_tensor_by_name("logits:0")[..., 0], [x])
        with v1.Session(graph=graph) as session:
            expected = np.zeros(rows.shape)
            for row in range(3):
                references = BACKGROUND[chosen[row]]
                points = (references + alphas[row][:, None] * (rows[row] - references)).astype(np.float32)
                expected[row] = (session.run(gradient, {x: points}) * (rows[row] - references)).mean(axis=0)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def max_pool_cnn():
    """x (N, 8, 8, 2) -> Conv2D -> Relu -> MaxPool 2x2 -> Conv2D -> Relu -> MaxPool 2x2 -> logits."""
    rng = np.random.default_rng(6)
    x = v1.placeholder(tf.float32, [None, 8, 8, 2], name="x")
    h = tf.nn.relu(tf.nn.conv2d(x, rng.standard_normal((3, 3, 2, 4)).astype(np.float32), 1, "SAME"))
    h = tf.nn.max_pool2d(h, 2, 2, "VALID")
    h = tf.nn.relu(tf.nn.conv2d(h, rng.standard_normal((3, 3, 4, 5)).astype(np.float32), 1, "SAME"))
    h = tf.nn.max_pool2d(h, 2, 2, "VALID")
    tf.matmul(tf.reshape(h, [-1, 2 * 2 * 5]), rng.standard_normal((20, 3)).astype(np.float32), name="logits")


def test_deeplift_is_complete_through_max_pooling(tmp_path):
    """The rescale rule over each pool's window (SHAP's): per-row sums equal
    f(x) - f(baseline) to 1e-5, where keeping MaxPool's own gradient missed by 0.6%."""
    path = graph_file(tmp_path, max_pool_cnn)
    rows = RNG.uniform(0, 1, (4, 8, 8, 2)).astype(np.float32)
    baseline = RNG.uniform(0, 1, (1, 8, 8, 2)).astype(np.float32)
    report = json.loads(run_cli("attribute", path, "--method", "deeplift", "--input", _saved(tmp_path, rows),
                                "--baseline", _saved_as(tmp_path / "b.npy", baseline), "--y", "logits", "--target",
                                "2", "-o", tmp_path / "out.npy", "--json").stdout)
    assert report["rules"] == {"MaxPool": "deeplift", "Relu": "deeplift"} and report["uncovered"] == []
    for check in report["completeness"]:
        assert check["attribution_sum"] == pytest.approx(check["output_difference"], rel=1e-5, abs=1e-6)


def test_grad_cam_plus_plus_is_its_formula(tmp_path):
    """Grad-CAM++ (as tf-keras-vis computes it, before its resizing and normalising):
    g = dS/dA, e = exp(S); alpha = e g^2 / (2 e g^2 + e g^3 sum(A)), normalised over
    the positions; w = sum over positions of relu(e g) alpha; ReLU(sum_k w_k A_k)."""
    path = graph_file(tmp_path, strided_cnn)
    rows = RNG.uniform(0, 1, (2, 8, 8, 3)).astype(np.float32)
    out = tmp_path / "cam.npy"
    run_cli("attribute", path, "--method", "gradcam_pp", "--input", _saved(tmp_path, rows), "--y", "logits",
            "--target", "0", "-o", out)
    graph, x, a_t, score_t, g_t = score_and_slope(path, "last:0", 0)
    with v1.Session(graph=graph) as session:
        a, g, score = (v.astype(np.float64) for v in session.run([a_t, g_t, score_t], {x: rows}))
    e = np.exp(score)[:, None, None, None]
    second, third = e * g ** 2, e * g ** 3
    denominator = 2 * second + third * a.sum(axis=(1, 2), keepdims=True)
    alpha = second / np.where(second == 0, denominator + 1, denominator)
    total = alpha.sum(axis=(1, 2), keepdims=True)
    alpha = alpha / np.where(total == 0, 1, total)
    weights = (np.maximum(e * g, 0) * alpha).sum(axis=(1, 2), keepdims=True)
    cam = np.maximum((weights * a).sum(axis=-1, keepdims=True), 0).astype(np.float32)
    with tf.Graph().as_default(), v1.Session() as session:
        expected = session.run(tf.image.resize(cam, [8, 8], method="bilinear"))
    np.testing.assert_allclose(np.load(out), expected, rtol=1e-4, atol=1e-6)


def lrp_shares(x, weights, relevance, alpha, beta):
    """LRP alpha-beta across z = x W, written out in NumPy: R_i = sum_j (alpha
    (x_i w_ij)+ / z+_j - beta (x_i w_ij)- / z-_j) R_j."""
    contributions = x[:, :, None] * weights[None]  # (rows, i, j)
    positive, negative = np.maximum(contributions, 0), np.minimum(contributions, 0)
    z_plus, z_minus = positive.sum(1, keepdims=True), negative.sum(1, keepdims=True)
    return (alpha * positive / (z_plus + 1e-9) - beta * negative / (z_minus - 1e-9)) @ relevance[:, :, None]


@pytest.mark.parametrize("alpha, beta", [(1.0, 0.0), (2.0, 1.0)])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_lrp_alpha_beta_gives_each_input_its_shares_of_the_relevance(alpha, beta, transpose_b):
    """The rule on a MatMul, against its formula: times x, what it passes back is
    each input's relevance; the relevance is z * dy at the output, and is conserved
    where a unit has contributions of both signs (alpha R_j + (-beta) R_j = R_j; a
    unit with positive contributions only passes on alpha R_j, as the rule says)."""
    x = RNG.normal(size=(3, 5)).astype(np.float32)
    x[0, 0] = 0.0  # no contribution, no relevance
    weights, dz = RNG.normal(size=(5, 4)).astype(np.float32), RNG.normal(size=(3, 4)).astype(np.float32)
    graph = tf.Graph()
    with graph.as_default():
        z = tf.linalg.matmul(tf.constant(x), tf.constant(weights.T if transpose_b else weights),
                             transpose_b=transpose_b)
        stage = graphgrad.parse_spec(f"lrp_alpha_beta(alpha={alpha},beta={beta})").stages[0]
        [got, none] = stage.definition.function(tf, z.op, [tf.constant(dz)], **dict(stage.args))
        with v1.Session(graph=graph) as session:
            gradient, output = session.run([got, z])
    relevance = dz * output
    want = lrp_shares(x, weights, relevance, alpha, beta)[:, :, 0]
    assert none is None
    np.testing.assert_allclose(gradient * x, want, rtol=1e-4, atol=1e-6)
    contributions = x[:, :, None] * weights[None]
    kept = alpha * (contributions > 0).any(1) - beta * (contributions < 0).any(1)
    np.testing.assert_allclose((gradient * x).sum(1), (kept * relevance).sum(1), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("method", ["lrp_zplus", "lrp_alpha_beta(alpha=2,beta=1)"])
def test_lrp_alpha_beta_conserves_the_relevance_through_convolutions_and_max_pooling(tmp_path, method):
    """On a ReLU CNN without biases (f(0) = 0), the attributions of each row sum to
    the target's logit: the relevance passes Relu and MaxPool by their own gradients
    and is redistributed, whole, at each Conv2D and MatMul."""
    path = graph_file(tmp_path, max_pool_cnn)
    rows = RNG.normal(size=(4, 8, 8, 2)).astype(np.float32)
    report = json.loads(run_cli("attribute", path, "--method", method, "--input", _saved(tmp_path, rows), "--y",
                                "logits", "--target", "1", "-o", tmp_path / "out.npy", "--json").stdout)
    assert set(report["rules"]) == {"Conv2D", "MatMul"} and report["uncovered"] == []
    for check in report["completeness"]:
        assert check["attribution_sum"] == pytest.approx(check["output_difference"], rel=1e-4, abs=1e-5)
    zplus = np.load(tmp_path / "out.npy")
    assert not np.allclose(zplus, gradient_times_input_of(path, rows, target=1), atol=1e-3)


def test_lrp_alpha_beta_names_the_nonlinearities_it_has_no_rule_for(tmp_path):
    result = run_cli("attribute", fixture("activations_net.pb"), "--method", "lrp_zplus", "--input",
                     _saved(tmp_path, RNG.normal(size=(2, 5)).astype(np.float32)), "--target", "1", "-o",
                     tmp_path / "out.npy", expect=1)
    assert "lrp_zplus has no rule for Sigmoid, Tanh" in result.stderr


def gradient_times_input_of(path, rows, target):
    graph = tf.Graph()
    with graph.as_default():
        graphgrad.import_graph_def(str(path), name="")
        x = graph.get_tensor_by_name("x:0")
        [grad] = v1.gradients(graph.get_tensor_by_name("logits:0")[..., target], [x])
        with v1.Session(graph=graph) as session:
            return session.run(grad, {x: rows}) * rows


def dense_relu_net():
    """x (N, 6) -> MatMul -> Relu -> MatMul -> Relu -> MatMul -> logits (3), no biases."""
    rng = np.random.default_rng(9)
    x = v1.placeholder(tf.float32, [None, 6], name="x")
    h = tf.nn.relu(tf.matmul(x, rng.standard_normal((6, 5)).astype(np.float32)))
    h = tf.nn.relu(tf.matmul(h, rng.standard_normal((5, 4)).astype(np.float32)))
    tf.matmul(h, rng.standard_normal((4, 3)).astype(np.float32), name="logits")


def layer_wise_eps_lrp(weights, rows, target, eps, biases=None):
    """epsilon-LRP as the layer-wise definition (and innvestigate's lrp.epsilon) writes
    it, in NumPy: at each layer z = a W + b, R_i = sum_j a_i w_ij / (z_j + eps sign(z_j))
    R_j, Relu passing R on."""
    biases = biases or [0.0] * len(weights)
    activations = [rows]
    for index, (w, b) in enumerate(zip(weights, biases)):
        z = activations[-1] @ w + b
        activations.append(np.maximum(z, 0) if index < len(weights) - 1 else z)
    relevance = np.zeros_like(activations[-1])
    relevance[:, target] = activations[-1][:, target]
    for a, w, b in zip(reversed(activations[:-1]), reversed(weights), reversed(biases)):
        z = a @ w + b
        relevance = a * ((relevance / (z + eps * np.where(z >= 0, 1.0, -1.0))) @ w.T)
    return relevance


def _biased_layers(rng=np.random.default_rng(31)):
    # small biases: with large ones every unit of a row may be off, its logit all bias
    return [(rng.normal(size=(n, m)), 0.1 * rng.normal(size=m)) for n, m in ((6, 8), (8, 8), (8, 3))]


BIASED = _biased_layers()


def biased_dense_relu_net():
    """x (N, 6) -> two Dense layers of 8 with biases and Relu -> logits (3), as Keras
    writes a Dense layer: MatMul, then BiasAdd."""
    h = v1.placeholder(tf.float32, [None, 6], name="x")
    for index, (w, b) in enumerate(BIASED):
        h = tf.nn.bias_add(tf.matmul(h, w.astype(np.float32)), b.astype(np.float32))
        h = tf.nn.relu(h) if index < len(BIASED) - 1 else tf.identity(h, name="logits")


def biased_z_plus(rows, target):
    """innvestigate's lrp.z_plus in NumPy: a layer's relevance is taken at its biased
    output z = a W + b and passed to a in the shares of a_i w_ij+ over their sum (the
    bias left out of the shares); x's relevance sums to the target's logit."""
    activations = [rows.astype(np.float64)]
    for index, (w, b) in enumerate(BIASED):
        z = activations[-1] @ w + b
        activations.append(np.maximum(z, 0) if index < len(BIASED) - 1 else z)
    relevance = np.zeros_like(activations[-1])
    relevance[:, target] = activations[-1][:, target]
    for a, (w, _) in zip(reversed(activations[:-1]), reversed(BIASED)):
        positive = np.maximum(a, 0) @ np.maximum(w, 0) + np.minimum(a, 0) @ np.minimum(w, 0)
        share = relevance / (positive + 1e-9)
        relevance = np.where(a > 0, a * (share @ np.maximum(w, 0).T), a * (share @ np.minimum(w, 0).T))
    return relevance


def test_lrp_takes_a_layers_relevance_at_its_biased_output_as_innvestigate_does(tmp_path):
    """With biases (a BiasAdd after each MatMul): eps_lrp_layers is innvestigate's
    lrp.epsilon (z = a W + b), and lrp_zplus its lrp.z_plus, whose x relevance sums to
    the target's logit, bias included."""
    path = graph_file(tmp_path, biased_dense_relu_net)
    rows = RNG.normal(size=(5, 6)).astype(np.float32)
    run_cli("attribute", path, "--method", "eps_lrp_layers(eps=0.5)", "--input", _saved(tmp_path, rows), "--y",
            "logits", "--target", "2", "-o", tmp_path / "eps.npy")
    weights, biases = [w for w, _ in BIASED], [b for _, b in BIASED]
    np.testing.assert_allclose(np.load(tmp_path / "eps.npy"),
                               layer_wise_eps_lrp(weights, rows.astype(np.float64), 2, 0.5, biases),
                               rtol=1e-4, atol=1e-5)
    report = json.loads(run_cli("attribute", path, "--method", "lrp_zplus", "--input", _saved(tmp_path, rows), "--y",
                                "logits", "--target", "2", "-o", tmp_path / "zplus.npy", "--json").stdout)
    got = np.load(tmp_path / "zplus.npy")
    np.testing.assert_allclose(got, biased_z_plus(rows, 2), rtol=1e-4, atol=1e-5)
    activations = [rows.astype(np.float64)]
    for index, (w, b) in enumerate(BIASED):
        z = activations[-1] @ w + b
        activations.append(np.maximum(z, 0) if index < len(BIASED) - 1 else z)
    # Conserved from the logit, bias included, wherever each unit holding relevance
    # has an input pushing it up: a unit alive by its bias alone passes nothing on.
    holding = np.eye(3)[[2]].astype(bool).repeat(len(rows), 0)
    conserving = np.ones(len(rows), bool)
    for a, (w, _) in zip(reversed(activations[:-1]), reversed(BIASED)):
        pushes = np.maximum(a, 0) @ np.maximum(w, 0) + np.minimum(a, 0) @ np.minimum(w, 0) > 0
        conserving &= ~(holding & ~pushes).any(1)
        holding = (holding[:, None, :] & pushes[:, None, :] & (a[:, :, None] * w[None] != 0)).any(2)
    assert conserving.sum() >= 3  # the rows check what they are meant to
    np.testing.assert_allclose(got.sum(axis=1)[conserving], activations[-1][conserving, 2], rtol=1e-4)
    assert report["rules"] == {"MatMul": "lrp_alpha_beta(alpha=1.0,beta=0.0)"}


def test_eps_lrp_at_every_layer_is_the_layer_wise_definition(tmp_path):
    """eps_lrp_layers puts eps at each MatMul as well (the layer-wise definition),
    where eps_lrp, DeepExplain's convention, puts it at the nonlinearities only:
    with a large eps the two differ, and the first equals the definition."""
    path = graph_file(tmp_path, dense_relu_net)
    graph_def = tf.compat.v1.GraphDef.FromString(path.read_bytes())
    weights = [tf.make_ndarray(node.attr["value"].tensor) for node in graph_def.node if node.op == "Const"]
    rows = RNG.normal(size=(5, 6)).astype(np.float32)
    run_cli("attribute", path, "--method", "eps_lrp_layers(eps=0.5)", "--input", _saved(tmp_path, rows), "--y",
            "logits", "--target", "2", "-o", tmp_path / "layers.npy")
    run_cli("attribute", path, "--method", "eps_lrp(eps=0.5)", "--input", _saved(tmp_path, rows), "--y",
            "logits", "--target", "2", "-o", tmp_path / "nonlinear.npy")
    layers, nonlinear = np.load(tmp_path / "layers.npy"), np.load(tmp_path / "nonlinear.npy")
    np.testing.assert_allclose(layers, layer_wise_eps_lrp(weights, rows, 2, 0.5), rtol=1e-4, atol=1e-6)
    assert not np.allclose(layers, nonlinear, atol=1e-3)


def test_guided_grad_cam_is_guided_backprop_times_the_grad_cam_map(tmp_path):
    """Selvaraju et al.: guided backpropagation's gradient times Grad-CAM's map
    (computed with the graph's own gradients), the map resized to x and taken over
    each of x's channels."""
    path = graph_file(tmp_path, strided_cnn)
    rows = RNG.uniform(0, 1, (3, 8, 8, 3)).astype(np.float32)
    common = ["--input", _saved(tmp_path, rows), "--y", "logits", "--target", "2"]
    outs = {method: tmp_path / f"{method}.npy" for method in ("guided_gradcam", "gradcam", "guided_backprop")}
    reports = {method: json.loads(run_cli("attribute", path, "--method", method, *common, "-o", out,
                                          "--json").stdout) for method, out in outs.items()}
    guided, cam, backprop = (np.load(outs[method]) for method in ("guided_gradcam", "gradcam", "guided_backprop"))
    assert cam.shape == (3, 8, 8, 1) and guided.shape == rows.shape
    np.testing.assert_allclose(guided, backprop * cam, rtol=1e-6, atol=1e-7)
    assert reports["guided_gradcam"]["layer"] == reports["gradcam"]["layer"] == "last:0"
    assert reports["guided_gradcam"]["rules"] == {"Relu": "guided_relu"}


def test_score_cam_is_its_formula(tmp_path):
    """Score-CAM, written out: each channel of the layer, resized to x and scaled to
    [0, 1], masks x; the target's softmax probability on each masked x weighs its
    channel; ReLU of the weighted sum, resized to x (as Grad-CAM's map is)."""
    path = graph_file(tmp_path, strided_cnn)
    rows = RNG.uniform(0, 1, (2, 8, 8, 3)).astype(np.float32)
    out = tmp_path / "score.npy"
    report = json.loads(run_cli("attribute", path, "--method", "scorecam", "--input", _saved(tmp_path, rows),
                                "--y", "logits", "--target", "1", "-o", out, "--json").stdout)
    assert report["layer"] == "last:0" and report["rules"] == {}
    graph = tf.Graph()
    with graph.as_default():
        v1.import_graph_def(v1.GraphDef.FromString(path.read_bytes()), name="")
        x, layer = graph.get_tensor_by_name("x:0"), graph.get_tensor_by_name("last:0")
        probability = tf.nn.softmax(graph.get_tensor_by_name("logits:0"))[:, 1]
        upsampled = tf.image.resize(layer, [8, 8], method="bilinear")
        with v1.Session(graph=graph) as session:
            activations, maps = session.run([layer, upsampled], {x: rows})
            expected = []
            for row in range(len(rows)):
                low, high = maps[row].min(axis=(0, 1)), maps[row].max(axis=(0, 1))
                masks = np.moveaxis((maps[row] - low) / np.where(high > low, high - low, 1), -1, 0)
                weights = session.run(probability, {x: rows[row][None] * masks[..., None]})
                expected.append(np.maximum((activations[row] * weights).sum(-1, keepdims=True), 0))
            cam = session.run(tf.image.resize(np.asarray(expected), [8, 8], method="bilinear"))
    np.testing.assert_allclose(np.load(out), cam, rtol=1e-5, atol=1e-6)
    assert np.load(out).shape == (2, 8, 8, 1) and np.load(out).max() > 0


def gated_net():
    """x (N, 4) -> sigmoid(x W) * tanh(x V) -> logits (3): a gate times a candidate,
    both computed from x, as in an LSTM's cell."""
    rng = np.random.default_rng(12)
    x = v1.placeholder(tf.float32, [None, 4], name="x")
    gate = tf.sigmoid(tf.matmul(x, rng.standard_normal((4, 5)).astype(np.float32)))
    candidate = tf.tanh(tf.matmul(x, rng.standard_normal((4, 5)).astype(np.float32)))
    tf.matmul(gate * candidate * 2.0, rng.standard_normal((5, 3)).astype(np.float32), name="logits")


def test_deeplift_splits_a_product_of_two_changing_factors_and_stays_complete(tmp_path):
    """SHAP's two-input rule for Mul: each factor's multiplier is the mean of the other's
    input and baseline values; with it, a gate times a candidate is complete (and the
    product by a constant keeps its own gradient)."""
    path = graph_file(tmp_path, gated_net)
    rows, baseline = RNG.normal(size=(4, 4)).astype(np.float32), RNG.normal(size=(1, 4)).astype(np.float32)
    report = json.loads(run_cli("attribute", path, "--method", "deeplift", "--input", _saved(tmp_path, rows),
                                "--baseline", _saved_as(tmp_path / "b.npy", baseline), "--y", "logits", "--target",
                                "0", "-o", tmp_path / "out.npy", "--json").stdout)
    assert report["rules"] == {"Mul": "deeplift", "Sigmoid": "deeplift", "Tanh": "deeplift"}
    assert report["uncovered"] == []
    for check in report["completeness"]:
        assert check["attribution_sum"] == pytest.approx(check["output_difference"], rel=1e-5, abs=1e-6)


LINEAR_SOFTMAX = RNG.normal(size=(4, 3)).astype(np.float32) * 3, RNG.normal(size=3).astype(np.float32)


def linear_softmax(op_type):
    def build():
        x = v1.placeholder(tf.float32, [None, 4], name="x")
        weights, bias = LINEAR_SOFTMAX
        getattr(tf.nn, "softmax" if op_type == "Softmax" else "log_softmax")(tf.matmul(x, weights) + bias,
                                                                               name="probs")
    return build


@pytest.mark.parametrize("op_type", ["Softmax", "LogSoftmax"])
def test_deeplift_on_softmax_is_shaps_split_into_exponentials_and_their_normaliser(tmp_path, op_type):
    """x -> logits z = x W + b -> softmax: each logit's multiplier, written out in NumPy
    as SHAP defines it (each row's max out, the rescale of exp, and the Shapley split
    of e_j / S: e_j gets the mean of 1 / S, S the mean of e_j times -1 / (S S0)), times
    W, times x - baseline; complete."""
    path = graph_file(tmp_path, linear_softmax(op_type))
    rows, baseline = RNG.normal(size=(5, 4)).astype(np.float32), RNG.normal(size=(1, 4)).astype(np.float32)
    report = json.loads(run_cli("attribute", path, "--method", "deeplift", "--input", _saved(tmp_path, rows),
                                "--baseline", _saved_as(tmp_path / "b.npy", baseline), "--y", "probs", "--target",
                                "2", "-o", tmp_path / "out.npy", "--json").stdout)
    assert report["rules"] == {op_type: "deeplift"} and report["uncovered"] == []
    weights, bias = (part.astype(np.float64) for part in LINEAR_SOFTMAX)
    z, z0 = rows.astype(np.float64) @ weights + bias, baseline.astype(np.float64) @ weights + bias
    c, c0 = z - z.max(1, keepdims=True), z0 - z0.max(1, keepdims=True)  # each row's max out
    e, e0 = np.exp(c), np.exp(c0)
    total, total0 = e.sum(1, keepdims=True), e0.sum(1, keepdims=True)
    dy = np.eye(3)[[2]]
    with np.errstate(invalid="ignore"):  # 0 / 0 at each row's max when both rows have it in one place
        exp_rescale = np.where(c == c0, e, (e - e0) / (c - c0))
    if op_type == "Softmax":
        to_sum = -(dy * (e + e0) / 2).sum(1, keepdims=True) / (total * total0)
        of_c = (dy * (1 / total + 1 / total0) / 2 + to_sum) * exp_rescale
    else:
        log_rescale = (np.log(total) - np.log(total0)) / (total - total0)
        of_c = dy - log_rescale * exp_rescale
    multiplier = of_c * (c - c0) / (z - z0)
    expected = (multiplier @ weights.T) * (rows - baseline)
    # SHAP's rescale by (c - c0) / (z - z0) is ill-conditioned where a logit barely
    # moves: float32's z - z0 is off by eps |z| / |z - z0| of itself, and so is the row.
    rounding = 4 * np.finfo(np.float32).eps * np.abs(z).max(1) / np.abs(z - z0).min(1)
    scale = np.abs(expected).sum(1)
    error = np.abs(np.load(tmp_path / "out.npy") - expected).max(1)
    assert np.all(error <= 1e-5 * np.abs(expected).max(1) + rounding * scale + 1e-7)
    for check, row_rounding, row_scale in zip(report["completeness"], rounding, scale):
        gap = abs(check["attribution_sum"] - check["output_difference"])
        assert gap <= 1e-5 * abs(check["output_difference"]) + row_rounding * row_scale + 1e-7


def attention_pooling():
    """x (N, 6) -> scores x A (6 positions) -> softmax weights times values x V -> y:
    a softmax inside the net, multiplied by another tensor computed from x."""
    rng = np.random.default_rng(3)
    x = v1.placeholder(tf.float32, [None, 6], name="x")
    weights = tf.nn.softmax(tf.matmul(x, rng.standard_normal((6, 6)).astype(np.float32) * 2))
    values = tf.tanh(tf.matmul(x, rng.standard_normal((6, 6)).astype(np.float32)))
    tf.reduce_sum(weights * values, axis=1, keepdims=True, name="y")


def test_deeplift_is_complete_through_softmax_attention_weights(tmp_path):
    path = graph_file(tmp_path, attention_pooling)
    rows = RNG.normal(size=(4, 6)).astype(np.float32) * 2
    report = json.loads(run_cli("attribute", path, "--method", "deeplift", "--input", _saved(tmp_path, rows),
                                "--y", "y", "-o", tmp_path / "out.npy", "--json").stdout)
    assert report["rules"] == {"Mul": "deeplift", "Softmax": "deeplift", "Tanh": "deeplift"}
    for check in report["completeness"]:
        assert check["attribution_sum"] == pytest.approx(check["output_difference"], rel=1e-5, abs=1e-6)


def test_eps_lrp_gives_a_gates_relevance_to_its_signal_and_conserves_it(tmp_path):
    """LRP's signal-take-all rule on gate * candidate: the relevance of the product goes
    to the candidate (whose Tanh passes it on, y / x), none to the Sigmoid gate; without
    biases the row's relevance is its logit."""
    path = graph_file(tmp_path, gated_net)
    rows = RNG.normal(size=(4, 4)).astype(np.float32)
    report = json.loads(run_cli("attribute", path, "--method", "eps_lrp(eps=1e-6)", "--input", _saved(tmp_path, rows),
                                "--y", "logits", "--target", "1", "-o", tmp_path / "out.npy", "--json").stdout)
    assert report["rules"] == {"Mul": "signal_take_all", "Sigmoid": "eps_lrp(eps=1e-06)",
                               "Tanh": "eps_lrp(eps=1e-06)"} and report["uncovered"] == []
    rng = np.random.default_rng(12)  # gated_net's weights
    gate_weights, candidate_weights, out_weights = (rng.standard_normal(shape).astype(np.float32)
                                                    for shape in ((4, 5), (4, 5), (5, 3)))
    x = rows.astype(np.float64)
    gate, z = 1 / (1 + np.exp(-x @ gate_weights)), x @ candidate_weights
    relevance = gate * np.tanh(z) * 2 * out_weights[:, 1]  # of each candidate unit, the product's own
    want = x * ((relevance / (z + 1e-6 * np.where(z >= 0, 1, -1))) @ candidate_weights.T)
    got = np.load(tmp_path / "out.npy")
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got.sum(1), (gate * np.tanh(z) * 2) @ out_weights[:, 1], rtol=1e-4)


def unrolled_gru():
    """x (N, 3 steps, 2) -> a GRU of 4 units unrolled by hand as TF1's GRUCell writes it
    (one Sigmoid split into the reset and update gates; h = u * h + (1 - u) * c), no
    biases, from a zero state -> y (N, 2)."""
    rng = np.random.default_rng(8)
    x = v1.placeholder(tf.float32, [None, 3, 2], name="x")
    gate_weights, candidate_weights = (rng.standard_normal((6, n)).astype(np.float32) for n in (8, 4))
    state = tf.zeros_like(tf.matmul(x[:, 0], np.zeros((2, 4), np.float32)))
    for step in range(3):
        reset, update = tf.split(tf.sigmoid(tf.matmul(tf.concat([x[:, step], state], 1), gate_weights)), 2, axis=1)
        candidate = tf.tanh(tf.matmul(tf.concat([x[:, step], reset * state], 1), candidate_weights))
        state = update * state + (1 - update) * candidate
    tf.matmul(state, rng.standard_normal((4, 2)).astype(np.float32), name="y")


def test_eps_lrp_conserves_the_relevance_through_a_grus_gates(tmp_path):
    """Signal-take-all on the reset and update gates (a split Sigmoid, and one minus
    it): without biases and from a zero state, each row's relevance is its output."""
    path = graph_file(tmp_path, unrolled_gru)
    rows = RNG.normal(size=(4, 3, 2)).astype(np.float32)
    report = json.loads(run_cli("attribute", path, "--method", "eps_lrp(eps=1e-7)", "--input", _saved(tmp_path, rows),
                                "--y", "y", "--target", "1", "-o", tmp_path / "out.npy", "--json").stdout)
    assert report["uncovered"] == [] and report["rules"]["Mul"] == "signal_take_all"
    graph = tf.Graph()
    with graph.as_default():
        unrolled_gru()
        with v1.Session(graph=graph) as session:
            outputs = session.run("y:0", {"x:0": rows})[:, 1]
    np.testing.assert_allclose(np.load(tmp_path / "out.npy").sum(axis=(1, 2)), outputs, rtol=1e-4)


def ungated_product():
    rng = np.random.default_rng(5)
    x = v1.placeholder(tf.float32, [None, 4], name="x")
    tf.identity(tf.tanh(tf.matmul(x, rng.standard_normal((4, 3)).astype(np.float32)))
                * tf.tanh(tf.matmul(x, rng.standard_normal((4, 3)).astype(np.float32))), name="y")


@pytest.mark.parametrize("method", ["eps_lrp", "eps_lrp_layers"])
def test_eps_lrp_names_a_product_without_a_gate(tmp_path, method):
    path = graph_file(tmp_path, ungated_product)
    result = run_cli("attribute", path, "--method", method, "--input", _saved(tmp_path, RNG.normal(size=(2, 4))
                                                                               .astype(np.float32)),
                     "--y", "y", "--target", "0", "-o", tmp_path / "out.npy", expect=1)
    assert "has no rule for Mul (of two tensors computed from x, neither a gate) on the path" in result.stderr


def test_eps_lrp_passes_a_softmax_outputs_relevance_to_its_logit(tmp_path):
    path = graph_file(tmp_path, linear_softmax("Softmax"))
    rows = RNG.normal(size=(3, 4)).astype(np.float32)
    report = json.loads(run_cli("attribute", path, "--method", "eps_lrp(eps=0.01)", "--input", _saved(tmp_path, rows),
                                "--y", "probs", "--target", "0", "-o", tmp_path / "out.npy", "--json").stdout)
    assert report["rules"] == {"Softmax": "eps_lrp(eps=0.01)"}
    weights, bias = LINEAR_SOFTMAX
    z = rows.astype(np.float64) @ weights + bias
    probability = np.exp(z[:, :1]) / np.exp(z).sum(1, keepdims=True)
    want = rows * weights[:, 0] * probability / (z[:, :1] + 0.01 * np.where(z[:, :1] >= 0, 1, -1))
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), want, rtol=1e-5, atol=1e-7)


BATCHLESS_KERNEL = RNG.normal(size=(3, 3, 3, 4)).astype(np.float32)
BATCHLESS_DENSE = RNG.normal(size=(4, 3)).astype(np.float32)


def batchless_image_net():
    """x (H, W, 3), one image without a batch axis, as MTCNN takes it: the graph adds
    the batch (ExpandDims), convolves, pools and scores three classes."""
    x = v1.placeholder(tf.float32, [None, None, 3], name="x")
    features = tf.nn.relu(tf.nn.conv2d(tf.expand_dims(x, 0), BATCHLESS_KERNEL, 1, "SAME"), name="features")
    tf.matmul(tf.reduce_mean(features, axis=[1, 2]), BATCHLESS_DENSE, name="logits")


def batchless_reference(image, fetch):
    graph = tf.Graph()
    with graph.as_default():
        batchless_image_net()
        target = graph.get_tensor_by_name("logits:0")[:, 2]
        x = graph.get_tensor_by_name("x:0")
        with v1.Session(graph=graph) as session:
            return session.run(fetch(x, target, graph), {x: image})


def test_an_x_without_a_batch_axis_is_one_example_a_run(tmp_path):
    """A graph that adds its own batch takes its input as one example (the
    attributions have x's shape) or several stacked (each as if alone); integrated
    gradients' steps run one at a time, each example against f(x) - f(0)."""
    path = graph_file(tmp_path, batchless_image_net)
    images = RNG.normal(size=(2, 6, 5, 3)).astype(np.float32)
    report = json.loads(run_cli("attribute", path, "--method", "gradient", "--input", _saved(tmp_path, images[0]),
                                "--y", "logits", "--target", "2", "-o", tmp_path / "one.npy", "--json").stdout)
    assert report["shape"] == [6, 5, 3] and report["batch"] is None
    assert report["notes"] == ["x:0 has no batch axis: ExpandDims (ExpandDims) adds one of size 1: each example runs "
                               "alone"]
    gradient = batchless_reference(images[0], lambda x, target, _: v1.gradients(target, x)[0])
    np.testing.assert_allclose(np.load(tmp_path / "one.npy"), gradient, rtol=1e-5, atol=1e-7)
    report = json.loads(run_cli("attribute", path, "--method", "integrated_gradients(steps=8)", "--input",
                                _saved(tmp_path, images), "--y", "logits", "--target", "2", "-o", tmp_path / "two.npy",
                                "--json").stdout)
    both = np.load(tmp_path / "two.npy")
    assert both.shape == images.shape and len(report["completeness"]) == 2
    for image, attribution, check in zip(images, both, report["completeness"]):
        steps = [batchless_reference(image * (k + 0.5) / 8, lambda x, target, _: v1.gradients(target, x)[0])
                 for k in range(8)]
        np.testing.assert_allclose(attribution, np.mean(steps, axis=0) * image, rtol=1e-4, atol=1e-6)
        assert check["output_difference"] == pytest.approx(
            batchless_reference(image, lambda x, target, _: target)[0] - batchless_reference(
                np.zeros_like(image), lambda x, target, _: target)[0], rel=1e-5)


def test_grad_cam_of_an_x_without_a_batch_axis_has_its_height_and_width(tmp_path):
    path = graph_file(tmp_path, batchless_image_net)
    image = RNG.normal(size=(6, 5, 3)).astype(np.float32)
    run_cli("attribute", path, "--method", "gradcam", "--input", _saved(tmp_path, image), "--y", "logits",
            "--target", "2", "-o", tmp_path / "cam.npy")

    def cam(x, target, graph):
        layer = graph.get_tensor_by_name("features:0")
        weights = tf.reduce_mean(v1.gradients(target, layer)[0], axis=[1, 2], keepdims=True)
        return tf.nn.relu(tf.reduce_sum(weights * layer, axis=-1, keepdims=True))[0]

    got = np.load(tmp_path / "cam.npy")
    assert got.shape == (6, 5, 1)  # the layer keeps x's size: resizing changes nothing
    np.testing.assert_allclose(got, batchless_reference(image, cam), rtol=1e-5, atol=1e-7)


def conditional_cnn():
    """x (N, 8, 8, 1) -> convolution, Relu -> a TF1 conditional (doubled or not) ->
    convolution, Relu -> mean -> logits (2): the branch's tensors have no value in a
    run that does not take it."""
    rng = np.random.default_rng(4)
    x = v1.placeholder(tf.float32, [None, 8, 8, 1], name="x")
    h = tf.nn.relu(tf.nn.conv2d(x, rng.standard_normal((3, 3, 1, 4)).astype(np.float32), 1, "SAME"))
    enabled = tf.compat.v1.control_flow_v2_enabled()
    tf.compat.v1.disable_control_flow_v2()
    try:
        h = v1.cond(v1.placeholder_with_default(False, [], name="double"), lambda: tf.multiply(h, 2.0, name="doubled"),
                    lambda: tf.identity(h, name="kept"))
    finally:
        if enabled:
            tf.compat.v1.enable_control_flow_v2()
    h = tf.nn.relu(tf.nn.conv2d(h, rng.standard_normal((3, 3, 4, 4)).astype(np.float32), 1, "SAME"), name="features")
    tf.matmul(tf.reduce_mean(h, axis=[1, 2]), rng.standard_normal((4, 2)).astype(np.float32), name="logits")


def test_grad_cam_takes_no_layer_inside_a_conditional(tmp_path):
    """The default layer is the last one a run can fetch (after the branches join);
    a --layer inside a branch is refused in one line."""
    path = graph_file(tmp_path, conditional_cnn)
    rows = _saved(tmp_path, RNG.normal(size=(2, 8, 8, 1)).astype(np.float32))
    report = json.loads(run_cli("attribute", path, "--method", "gradcam", "--input", rows, "--y", "logits",
                                "--target", "1", "-o", tmp_path / "cam.npy", "--json").stdout)
    assert report["layer"] == "features:0"
    result = run_cli("attribute", path, "--method", "gradcam", "--input", rows, "--y", "logits", "--target", "1",
                     "--layer", "cond/kept:0", "-o", tmp_path / "cam.npy", expect=2)
    assert "--layer cond/kept:0: a class activation map needs a layer a run can fetch, and cond/kept:0 is inside a " \
           "while loop or a conditional" in result.stderr


@pytest.mark.parametrize("method, target, code, message", [
    ("deeplift", "2", 1, "deeplift runs each example beside its baseline in one batch, and x:0 has no batch axis"),
    ("gradient", "predicted", 2, "--target predicted chooses one class per example, and x:0 has no batch axis"),
    ("gradient", "top:2", 2, "--target top:2 chooses its classes per example, and x:0 has no batch axis"),
    ("integrated_gradients --layer features", "1", 2, "--layer features: integrated gradients at a layer feed it a "
                                                      "batch of points, and x:0 has no batch axis"),
])
def test_what_an_x_without_a_batch_axis_cannot_do_is_one_line(tmp_path, method, target, code, message):
    path = graph_file(tmp_path, batchless_image_net)
    method, *layer = method.split()
    result = run_cli("attribute", path, "--method", method, *layer, "--input",
                     _saved(tmp_path, RNG.normal(size=(4, 4, 3)).astype(np.float32)), "--y", "logits", "--target",
                     target, "-o", tmp_path / "out.npy", expect=code)
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_deeplift_is_complete_on_a_real_frozen_lstm(tmp_path):
    """DL4J's LSTM on MNIST (28 steps unrolled: 84 gate products, Sigmoid and Tanh):
    each row's attributions sum to f(x) - f(0) to 1e-5."""
    source = os.path.join(REALGRAPHS, "dl4j-tf-examples/src/main/resources/tf_graphs/examples/lstm_mnist",
                          "frozen_model.pb")
    if not os.path.exists(source):
        pytest.skip(REALGRAPHS_ABSENT)
    rows = RNG.uniform(0, 1, (3, 28, 28)).astype(np.float32)
    report = json.loads(run_cli("attribute", source, "--method", "deeplift", "--input", _saved(tmp_path, rows),
                                "--x", "input", "--y", "add", "--target", "3", "-o", tmp_path / "out.npy",
                                "--json").stdout)
    assert report["uncovered"] == [] and set(report["rules"]) == {"Mul", "Sigmoid", "Tanh"}
    for check in report["completeness"]:
        assert check["attribution_sum"] == pytest.approx(check["output_difference"], rel=1e-5)


@pytest.mark.slow
def test_every_method_on_a_real_frozen_lstm_runs_or_says_in_one_line_what_it_lacks(tmp_path):
    """DL4J's LSTM on MNIST images: each method runs (eps-LRP through its gates by the
    signal-take-all rule), or is refused before the run, naming the op types it has
    no rule for (LRP alpha-beta: the gate products and activations) or the 4-D layer
    a class activation map needs."""
    source = os.path.join(REALGRAPHS, "dl4j-tf-examples/src/main/resources/tf_graphs/examples/lstm_mnist",
                          "frozen_model.pb")
    if not os.path.exists(source):
        pytest.skip(REALGRAPHS_ABSENT)
    rows = _saved(tmp_path, RNG.uniform(0, 1, (2, 28, 28)).astype(np.float32))
    assert every_method(source, rows, tmp_path / "out.npy", "--x", "input", "--y", "add", "--target", "3") == {
        "gradient", "grad_x_input", "integrated_gradients", "guided_ig", "guided_backprop", "deconvnet", "eps_lrp",
        "eps_lrp_layers", "deeplift", "deepshap", "expected_gradients", "occlusion"}


@pytest.mark.slow
def test_every_method_on_a_real_frozen_image_model_runs_or_says_in_one_line_what_it_lacks(tmp_path):
    """MTCNN's face detector (an image without a batch axis; TF1 loops over its
    scales, conditionals, crops and non-maximum suppression): the gradient methods
    and occlusion run, each example alone; the rule-complete methods name the op
    types they have no rule for, the class activation maps the loops their layers
    are in."""
    source = os.path.join(REALGRAPHS, "tf-mtcnn/mtcnn.pb")
    if not os.path.exists(source):
        pytest.skip(REALGRAPHS_ABSENT)
    image = _saved(tmp_path, np.random.default_rng(0).uniform(0, 255, (96, 96, 3)).astype(np.float32))
    feeds = ["--feed", "min_size=20", "--feed", "thresholds=[0,0,0]", "--feed", "factor=0.709"]  # boxes on noise
    assert every_method(source, image, tmp_path / "out.npy", "--x", "input", "--y", "prob", "--target", "1",
                        *feeds) == {"gradient", "grad_x_input", "integrated_gradients", "blur_ig", "guided_ig", "xrai",
                                    "guided_backprop", "deconvnet", "expected_gradients", "occlusion"}
    assert np.load(tmp_path / "out.npy").shape == (96, 96, 3)
