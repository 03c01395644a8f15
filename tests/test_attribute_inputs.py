"""What attribute and the Explainer take: bad rows, targets, noise and timeouts are
one line naming what the caller gave (the command's option, or the Python
argument), never a traceback; one explainer serves many threads (needs TensorFlow)."""

import json
import threading

import numpy as np
import pytest

from conftest import fixture, run_cli
from tf_helpers import tf  # noqa: F401  (skips without TensorFlow)

import graphgrad
from graphgrad.errors import GraphgradError, UsageError

ROWS = np.load(fixture("classifier_rows.npy"))


@pytest.fixture(scope="module")
def explainer():
    return graphgrad.Explainer(fixture("classifier.pb"), "gradient", y="logits")


def _saved(tmp_path, name, array):
    path = tmp_path / name
    np.save(path, array)
    return path


@pytest.mark.parametrize("rows, words", [
    (np.zeros((0, 4), np.float32), "--input has no rows (shape [0, 4]): give at least one"),
    (np.array([[1, np.nan, 0, 0]], np.float32), "--input holds NaN or infinity (first at index [0, 1])"),
    (np.array([[1, 0, np.inf, 0]], np.float32), "--input holds NaN or infinity (first at index [0, 2])"),
    (np.ones((2, 5), np.float32), "--input has shape [2, 5], and x takes [None, 4]"),
], ids=["no rows", "nan", "inf", "shape"])
def test_bad_rows_are_one_line_and_write_nothing(tmp_path, rows, words):
    # no --target and y a softmax: a misshapen input is still said as such, not as the softmax trap
    result = run_cli("attribute", fixture("classifier.pb"), "--method", "gradient",
                     "--input", _saved(tmp_path, "rows.npy", rows), "-o", tmp_path / "out.npy", expect=2)
    assert words in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out.npy").exists()


def test_a_baseline_with_nan_is_refused(tmp_path):
    result = run_cli("attribute", fixture("classifier.pb"), "--method", "integrated_gradients", "--input",
                     fixture("classifier_rows.npy"), "--y", "logits", "--target", "0", "--baseline",
                     _saved(tmp_path, "base.npy", np.full(4, np.nan, np.float32)), "-o", tmp_path / "o.npy", expect=2)
    assert "--baseline holds NaN or infinity" in result.stderr


@pytest.mark.parametrize("call, words", [
    (lambda e: e.explain(np.zeros((0, 4)), target=0), "inputs has no rows"),
    (lambda e: e.explain(np.ones((2, 5)), target=0), "inputs has shape [2, 5]"),
    (lambda e: e.explain([["a", "b", "c", "d"]], target=0), "inputs is not an array of numbers"),
    (lambda e: e.explain(ROWS, target=np.array([0, 1])), "target holds shape [2]: give one class index per row of "
                                                         "inputs (3)"),
    (lambda e: e.explain(ROWS, target=np.array([0, 1, 7])), "target holds indices 0 to 7; y has 3 classes"),
    (lambda e: e.explain(ROWS, target=0, noise="lots"), "noise='lots': give graphgrad.Noise(samples, sigma)"),
    (lambda e: e.explain(ROWS, target=0, noise=(-5, 0.1)), "Noise(samples=-5)"),
    (lambda e: e.explain(ROWS, target=0, noise=(5, float("nan"))), "Noise(sigma=nan)"),
    (lambda e: e.explain(ROWS, target=0, timeout=0), "timeout=0: give a number of seconds above 0"),
], ids=["no rows", "shape", "not numbers", "targets' length", "targets' range", "noise", "samples", "sigma",
        "timeout"])
def test_the_explainers_errors_name_its_arguments(explainer, call, words):
    with pytest.raises(GraphgradError) as raised:
        call(explainer)
    assert words in str(raised.value) and "--" not in str(raised.value)


def test_noise_is_checked_where_it_is_made():
    for samples, sigma in [(-5, float("nan")), (0, 0.1), (2.5, 0.1), (5, -1.0), (5, float("inf"))]:
        with pytest.raises(UsageError):
            graphgrad.Noise(samples=samples, sigma=sigma)
    with pytest.raises(UsageError, match="aggregate='median'"):
        graphgrad.Noise(5, 0.1, aggregate="median")


def test_noise_as_a_pair_is_the_same_as_a_noise(explainer):
    as_pair, _ = explainer.explain(ROWS, target=1, noise=(20, 0.1))
    as_noise, _ = explainer.explain(ROWS, target=1, noise=graphgrad.Noise(samples=20, sigma=0.1))
    np.testing.assert_array_equal(as_pair, as_noise)


def test_a_timeout_per_call_stops_that_call_only(tmp_path):
    slow = graphgrad.Explainer(fixture("classifier.pb"), "integrated_gradients(steps=100000000)", y="logits")
    with pytest.raises(GraphgradError, match="the runs took over 0.5 s"):
        slow.explain(ROWS, target=0, timeout=0.5)


def test_sixteen_threads_with_different_targets_get_what_one_thread_gets():
    explainer = graphgrad.Explainer(fixture("classifier.pb"), "grad_x_input", y="logits")
    targets = [0, 1, 2, None, np.array([0, 1, 2]), "predicted"] * 3
    results, failures = [None] * 16, []

    def call(index):
        try:
            results[index] = explainer.explain(ROWS, target=targets[index] if targets[index] is not None else 2)[0]
        except BaseException as failure:  # SystemError from TensorFlow's graph, before the lock
            failures.append(failure)

    threads = [threading.Thread(target=call, args=(index,)) for index in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    alone = graphgrad.Explainer(fixture("classifier.pb"), "grad_x_input", y="logits")
    for index in range(16):
        target = targets[index] if targets[index] is not None else 2
        np.testing.assert_array_equal(results[index], alone.explain(ROWS, target=target)[0])


def test_a_heat_map_is_written_in_the_format_its_name_asks_for(tmp_path):
    pytest.importorskip("PIL", reason="--image needs Pillow: pip install 'graphgrad[image]'")
    common = ["attribute", fixture("image_net.pb"), "--method", "gradient", "--input", fixture("image_rows.npy"),
              "--target", "0", "-o", tmp_path / "a.npy"]
    for name, magic in [("map.jpg", b"\xff\xd8\xff"), ("map.JPEG", b"\xff\xd8\xff"), ("map.png", b"\x89PNG")]:
        run_cli(*common, "--image", tmp_path / name)
        assert (tmp_path / name).read_bytes().startswith(magic)
    result = run_cli(*common, "--image", tmp_path / "map.gif", expect=2)
    assert "--image" in result.stderr and "graphgrad writes .png or .jpg there" in result.stderr
    assert not (tmp_path / "map.gif").exists()


def test_a_tolerance_refines_integrated_gradients_until_every_rows_gap_is_under_it(tmp_path):
    source = _saved(tmp_path, "rows.npy", np.random.default_rng(5).normal(size=(3, 5)).astype(np.float32))
    common = ["attribute", fixture("erf_net.pb"), "--input", source, "-o", tmp_path / "o.npy", "--json"]
    plain = json.loads(run_cli(*common, "--method", "integrated_gradients(steps=2)").stdout)
    assert max(row["gap"] for row in plain["completeness"]) > 1e-3  # two midpoint steps: off
    refined = json.loads(run_cli(*common, "--method", "integrated_gradients(steps=2)", "--tolerance", "0.001").stdout)
    gaps = [row["gap"] for row in refined["completeness"]]
    assert refined["refinement"]["met"] and max(gaps) <= 1e-3
    evaluations = [row["steps"] for row in refined["completeness"]]
    assert all(n > 3 for n in evaluations)  # refined from two segments (3 points)
    assert refined["refinement"]["evaluations"] == sum(evaluations)
    attributions = np.load(tmp_path / "o.npy")
    for row, check in zip(attributions, refined["completeness"]):
        assert abs(row.sum() - check["attribution_sum"]) < 1e-5
    budget = json.loads(run_cli(*common, "--method", "integrated_gradients(steps=2)", "--tolerance", "1e-9",
                                "--max-steps", "8").stdout)
    assert not budget["refinement"]["met"] and {row["steps"] for row in budget["completeness"]} <= {7, 8}
    text = run_cli(*common[:-1], "--method", "integrated_gradients(steps=2)", "--tolerance", "1e-9",
                   "--max-steps", "8").stdout
    # what ran, the rows named, and a tolerance under 0.005% not shown as 0.00%
    assert ("row(s) 0, 1, 2 spent their budget of --max-steps 8 gradient evaluations with a gap over 1e-07%" in text
            and "gradient evaluations in all" in text)


@pytest.mark.parametrize("extra, words", [
    (["--method", "gradient", "--target", "0", "--tolerance", "0.01"],
     "--tolerance refines a path integral's steps; gradient is gradient-rule"),
    (["--method", "integrated_gradients", "--target", "0", "--tolerance", "0.01", "--noise", "5,0.1"],
     "noise and a tolerance"),
    (["--method", "occlusion", "--target", "0", "--noise", "5,0.1"], "noise: occlusion is not smoothed"),
])
def test_options_a_method_does_not_take_are_refused(tmp_path, extra, words):
    result = run_cli("attribute", fixture("classifier.pb"), "--input", fixture("classifier_rows.npy"), "--y", "logits",
                     "-o", tmp_path / "o.npy", *extra, expect=2)
    assert words in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_the_bundled_digits_classifier_reads_its_digits_and_its_evidence_lies_on_their_strokes(tmp_path):
    """fixtures/digits_cnn.pb (trained on scikit-learn's digits by fixtures/make_fixtures.py)
    predicts its four held-out images as 0, 1, 2 and 3, and integrated gradients put most of
    each one's positive evidence on the digit's strokes (the bright pixels)."""
    rows = np.load(fixture("digits_rows.npy"))
    explainer = graphgrad.Explainer(fixture("digits_cnn.pb"), "integrated_gradients", y="logits")
    attributions, report = explainer.explain(rows, target="predicted")
    assert report.targets == [0, 1, 2, 3]
    strokes = rows > 0.3
    for row in range(4):
        positive = np.maximum(attributions[row], 0)
        assert positive[strokes[row]].sum() > 0.7 * positive.sum()


def test_what_the_python_api_is_given_is_checked_in_one_line_naming_its_arguments(tmp_path):
    """A newcomer's mistakes with the Explainer (issue 49.1, 49.3): each one line,
    naming the Python argument, never a CLI flag."""
    model = fixture("classifier.pb")
    rows = np.load(fixture("classifier_rows.npy"))
    cases = [
        (lambda: graphgrad.Explainer(model, None), "method=None"),
        (lambda: graphgrad.Explainer(rows, "gradient"), "model is a ndarray"),
        (lambda: graphgrad.Explainer(model, "gradient", y="logits", targte=1), "did you mean target?"),
        (lambda: graphgrad.Explainer(model, "gradient", y="logits", tolerance=2), "below 1"),
        (lambda: graphgrad.Explainer(model, "integrated_gradients", y="logits", max_steps=64), "tolerance=..."),
        (lambda: graphgrad.Explainer(model, "integrated_gradients", y="logits", max_steps=1024), "tolerance=..."),
        (lambda: graphgrad.Explainer(model, "gradient", y="logitz"), "y='logitz': no"),
        (lambda: graphgrad.Explainer(model, "gradient", x="xx", y="logits"), "x='xx': no"),
        (lambda: graphgrad.Explainer(model, "gradient", y="logits", feeds={"nothing": 1}), "feeds='nothing': no"),
    ]
    explainer = graphgrad.Explainer(model, "gradient", y="logits")
    cases += [
        (lambda: explainer.explain(rows, target="foo"), "target 'foo'"),
        (lambda: explainer.explain(rows, target=-1), "target -1: give a class index from 0"),
        (lambda: explainer.explain(rows, target=0, baseline=np.zeros(rows.shape[1:])), "takes no baseline"),
        (lambda: explainer.explain(rows, target=99), "target=99: logits:0 has 3 entries"),
    ]
    for call, said in cases:
        with pytest.raises(GraphgradError) as raised:
            call()
        message = str(raised.value)
        assert said in message and "\n" not in message and "--" not in message, message
    explainer.close()


def test_a_baseline_of_another_shape_is_refused_not_broadcast(tmp_path):
    rows = tmp_path / "rows.npy"
    np.save(rows, np.random.default_rng(0).uniform(0, 1, [2, 8, 8, 1]).astype(np.float32))
    np.save(tmp_path / "wide.npy", np.zeros([2, 8, 8, 3], np.float32))
    np.save(tmp_path / "one.npy", np.zeros([8, 1], np.float32))  # broadcasts over a row, and is not one
    for baseline in ("wide.npy", "one.npy"):
        result = run_cli("attribute", fixture("digits_cnn.pb"), "--method", "integrated_gradients(steps=4)",
                         "--input", rows, "--y", "logits", "--target", "1", "--baseline", tmp_path / baseline,
                         "-o", tmp_path / "a.npy", expect=2)
        assert "--baseline has shape" in result.stderr and "of one row [8, 8, 1]" in result.stderr


def test_max_steps_without_a_tolerance_and_a_tolerance_of_one_are_refused(tmp_path):
    rows = tmp_path / "rows.npy"
    np.save(rows, np.load(fixture("digits_rows.npy")))
    common = ["attribute", fixture("digits_cnn.pb"), "--method", "integrated_gradients", "--input", rows, "--y",
              "logits", "--target", "1", "-o", tmp_path / "a.npy"]
    assert "add --tolerance" in run_cli(*common, "--max-steps", "64", expect=2).stderr
    assert "add --tolerance" in run_cli(*common, "--max-steps", "1024", expect=2).stderr  # the default's value, given
    assert "--tolerance" in run_cli(*common, "--tolerance", "2", expect=2).stderr
    # the trapezoid rule needs the path's two ends: a budget of one could not be spent as given
    assert "--max-steps" in run_cli(*common, "--tolerance", "0.01", "--max-steps", "1", expect=2).stderr
    with pytest.raises(UsageError, match="at least 2"):
        graphgrad.AttributeOptions(graphgrad.methods.registry.parse_method("integrated_gradients"), tolerance=0.01,
                                   max_steps=1)


def test_a_refinement_stopped_by_the_deadline_says_the_refinement_took_the_time(tmp_path):
    """issue 51.1: the timeout that ends a long refinement says so, with what to change."""
    rows = tmp_path / "rows.npy"
    np.save(rows, np.load(fixture("digits_rows.npy")))
    result = run_cli("attribute", fixture("digits_cnn.pb"), "--method", "integrated_gradients", "--input", rows,
                     "--y", "logits", "--target", "1", "--tolerance", "1e-9", "--max-steps", "1000000",
                     "--timeout", "2", "-o", tmp_path / "a.npy", expect=1)
    [line] = result.stderr.strip().splitlines()
    assert "took over 2 s" in line and "to the tolerance 1e-09, each up to 1000000 gradient evaluations" in line


def test_an_explainer_answers_after_its_first_timeout_has_passed(tmp_path):
    """Each call has its own deadline: a warm explainer (Score-CAM's resize
    included) still answers once the time given at its making has passed."""
    import time

    rows = np.load(fixture("digits_rows.npy"))
    with graphgrad.Explainer(fixture("digits_cnn.pb"), "scorecam", y="logits", timeout=1.0) as explainer:
        time.sleep(1.2)
        maps, _ = explainer.explain(rows, target=1, timeout=60)
    assert maps.shape[0] == len(rows) and np.isfinite(maps).all()


def test_refining_to_a_tolerance_spends_its_gradients_where_the_error_is_on_the_digits_cnn(tmp_path):
    """The bundled digits CNN's 100 test images at --tolerance 0.001: every gap met,
    with far fewer gradients than doubling every row's steps everywhere (35,150 for
    the same bound when the refinement did that)."""
    report = json.loads(run_cli("attribute", fixture("digits_cnn.pb"), "--method", "integrated_gradients", "--input",
                                fixture("digits_test_images.npy"), "--target", "predicted", "--tolerance", "0.001",
                                "--max-steps", "4096", "-o", tmp_path / "o.npy", "--json").stdout)
    assert report["refinement"]["met"] and max(row["gap"] for row in report["completeness"]) <= 1e-3
    assert report["refinement"]["evaluations"] < 12_000, report["refinement"]
    assert all(row["error"] >= 0 for row in report["completeness"])


def calibrated_mobilenet(size: int):
    """Keras' MobileNetV2 at size x size (random weights, 10 logits) frozen with a free
    batch, each batch normalisation given its input's mean and variance on random
    images, as training would (random kernels otherwise shrink the activations to
    nothing): ``(GraphDef, the logits' node name)``."""
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    keras = tf.keras
    keras.utils.set_random_seed(5)
    model = keras.applications.MobileNetV2(input_shape=(size, size, 3), weights=None, classes=10,
                                           classifier_activation=None)
    images = np.random.default_rng(5).uniform(-1, 1, (16, size, size, 3)).astype(np.float32)
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            inputs = keras.Model(model.input, layer.input).predict(images, verbose=0)
            gamma, beta, _, _ = layer.get_weights()
            layer.set_weights([gamma, beta, inputs.mean(axis=(0, 1, 2)), inputs.var(axis=(0, 1, 2))])
    function = tf.function(lambda x: model(x, training=False)).get_concrete_function(
        tf.TensorSpec([None, size, size, 3], tf.float32, name="x"))
    frozen = convert_variables_to_constants_v2(function).graph.as_graph_def()
    return frozen, [node.name for node in frozen.node if node.op == "Identity"][-1]


@pytest.mark.slow
def test_a_tolerance_of_one_percent_is_met_on_mobilenet_rows_nobody_tuned_for(tmp_path):
    """A 64 x 64 MobileNetV2 and three kinds of row: noise, a smooth image, an
    upscaled digit (where doubling whole segments stopped at 4,095 evaluations with
    a gap of 20% on the smooth one): each row's gap under 1% within its 4,096."""
    frozen, logits = calibrated_mobilenet(64)
    model = tmp_path / "mobilenet.pb"
    model.write_bytes(frozen.SerializeToString())
    noise = np.random.default_rng(11).uniform(-1, 1, (64, 64, 3))
    across, down = np.meshgrid(np.linspace(-1, 1, 64), np.linspace(-1, 1, 64))
    smooth = np.stack([np.sin(3 * across), np.cos(2 * down), across * down], axis=-1)
    digit = np.kron(np.load(fixture("digits_test_images.npy"))[7, :, :, 0], np.ones((8, 8)))
    digit = np.repeat((digit / max(digit.max(), 1e-9) * 2 - 1)[..., None], 3, axis=-1)
    rows = _saved(tmp_path, "rows.npy", np.stack([noise, smooth, digit]).astype(np.float32))
    report = json.loads(run_cli("attribute", model, "--method", "integrated_gradients", "--x", "x", "--y", logits,
                                "--target", "predicted", "--input", rows, "--tolerance", "0.01", "--max-steps",
                                "4096", "--timeout", "1200", "-o", tmp_path / "ig.npy", "--json").stdout)
    assert report["refinement"]["met"], report["completeness"]
    for row in report["completeness"]:
        assert row["gap"] <= 0.01 and row["steps"] <= 4096, row
