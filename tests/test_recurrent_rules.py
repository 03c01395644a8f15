"""The rule-based methods through TF2 control flow: Keras 3's recurrent layers run
a `While` over TensorLists (inside the model's function calls when exported;
lowered to a TF1 loop over the same lists, or kept as a `While`, when frozen).
DeepLIFT's and LRP's rules apply inside the loop's body at every step, so the
attributions equal those of the same model unrolled by Keras (no loop: the
rules at each step's own ops), DeepLIFT's complete to 1e-4; the coverage that
refuses an op without a rule looks only at what a body computes from x."""

import json
import warnings

import numpy as np
import pytest

from conftest import run_cli
from tf_helpers import tf

import graphgrad

keras = pytest.importorskip("keras", reason="needs Keras (comes with TensorFlow)")
if int(keras.__version__.split(".")[0]) < 3:
    pytest.skip("Keras 3's recurrent layers (a While over TensorLists) are what these tests read; this TensorFlow "
                f"comes with Keras {keras.__version__}", allow_module_level=True)

STEPS, FEATURES = 6, 3
LAYERS = {
    "lstm": lambda unroll: [keras.layers.LSTM(5, unroll=unroll)],
    "gru": lambda unroll: [keras.layers.GRU(4, unroll=unroll)],
    "stacked_bidirectional": lambda unroll: [
        keras.layers.Bidirectional(keras.layers.LSTM(4, return_sequences=True, unroll=unroll)),
        keras.layers.GRU(3, reset_after=False, unroll=unroll)],
}
FORMS = ("export", "frozen.pb", "frozen_while.pb")


def _write(model, folder, name):
    """``model`` exported, and frozen from that export with TensorFlow's
    convert_variables_to_constants_v2: its loops lowered to TF1 ones (the default)
    and kept as While ops."""
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    model.export(str(folder / f"{name}_export"), verbose=False)
    loaded = tf.saved_model.load(str(folder / f"{name}_export"))  # kept: the signature's variables live as long
    for suffix, lower in (("frozen.pb", True), ("frozen_while.pb", False)):
        frozen = convert_variables_to_constants_v2(loaded.signatures["serving_default"], lower_control_flow=lower)
        (folder / f"{name}_{suffix}").write_bytes(frozen.graph.as_graph_def().SerializeToString())


@pytest.fixture(scope="module")
def recurrent(tmp_path_factory):
    """Each of :data:`LAYERS` with random weights (large enough that the gates
    saturate somewhere), and the same model unrolled; rows whose baseline is zeros."""
    folder = tmp_path_factory.mktemp("keras3_recurrent")
    rng = np.random.default_rng(11)
    with warnings.catch_warnings():  # Keras's own
        warnings.simplefilter("ignore")
        for name, layers in LAYERS.items():
            keras.utils.set_random_seed(2)
            models = [keras.Sequential([keras.Input((STEPS, FEATURES)), *layers(unroll), keras.layers.Dense(3)],
                                       name=name) for unroll in (False, True)]
            models[0].set_weights([rng.normal(0, 0.8, w.shape).astype(np.float32) for w in models[0].get_weights()])
            models[1].set_weights(models[0].get_weights())
            _write(models[0], folder, name)
            _write(models[1], folder, f"{name}_unrolled")
    np.save(folder / "rows.npy", rng.normal(0, 1.5, (5, STEPS, FEATURES)).astype(np.float32))
    return folder


def attributed(folder, model_file, method, *args):
    out = folder / f"{model_file}.{method}.npy"
    report = json.loads(run_cli("attribute", folder / model_file, "--method", method, "--input", folder / "rows.npy",
                                "--target", "1", "-o", out, "--json", *args).stdout)
    return np.load(out), report


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("name", LAYERS)
def test_deeplift_through_a_keras_3_recurrent_loop_is_complete_and_the_unrolled_models(recurrent, name, form):
    got, report = attributed(recurrent, f"{name}_{form}", "deeplift")
    unrolled, unrolled_report = attributed(recurrent, f"{name}_unrolled_frozen.pb", "deeplift")
    assert report["uncovered"] == [] and set(report["rules"]) == {"Mul", "Sigmoid", "Tanh"}
    assert "While" not in json.dumps(unrolled_report) and np.abs(unrolled).max() > 0.05
    for row in report["completeness"]:
        assert abs(row["attribution_sum"] - row["output_difference"]) <= 1e-4 * max(1.0, abs(row["output_difference"]))
    np.testing.assert_allclose(got, unrolled, rtol=1e-5, atol=1e-5 * np.abs(unrolled).max())


@pytest.mark.parametrize("form", ["export", "frozen_while.pb"])
@pytest.mark.parametrize("method", ["eps_lrp", "guided_backprop", "deepshap"])
def test_the_other_rules_through_a_keras_3_loop_are_the_unrolled_models(recurrent, method, form):
    """eps-LRP takes the gates' products by its signal-take-all rule inside the
    body; guided backprop and DeepSHAP (DeepLIFT against each background row) are
    the unrolled model's as well."""
    args = ("--baseline", recurrent / "rows.npy") if method == "deepshap" else ()
    got, report = attributed(recurrent, f"stacked_bidirectional_{form}", method, *args)
    expected, _ = attributed(recurrent, "stacked_bidirectional_unrolled_frozen.pb", method, *args)
    if method == "eps_lrp":
        assert report["uncovered"] == [] and report["rules"]["Mul"] == "signal_take_all"
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())


class Recurrence(tf.Module):
    """A loop of tf.while_loop over x's steps, exported: ``body(h, x_t)`` gives the
    next state; the weights are variables the body reads."""

    def __init__(self, body):
        super().__init__()
        rng = np.random.default_rng(4)
        self.w = tf.Variable(rng.normal(0, 0.5, (FEATURES, 4)).astype(np.float32))
        self.u = tf.Variable(rng.normal(0, 0.5, (4, 4)).astype(np.float32))
        self.body = body

    @tf.function(input_signature=[tf.TensorSpec([None, STEPS, FEATURES], tf.float32)])
    def __call__(self, x):
        h0 = tf.zeros([tf.shape(x)[0], 4])
        steps = tf.reduce_max(tf.fill([tf.shape(x)[0]], STEPS))  # an integer Max, as Keras computes the length
        _, h = tf.while_loop(lambda t, h: t < steps,
                             lambda t, h: (t + 1, self.body(self, h, tf.gather(x, t, axis=1))), (0, h0))
        return {"y": tf.reduce_sum(h, axis=1, keepdims=True) * tf.constant([[1.0, 2.0]])}


def _exported(tmp_path, body):
    module = Recurrence(body)
    tf.saved_model.save(module, str(tmp_path / "loop"))
    np.save(tmp_path / "rows.npy", np.random.default_rng(6).normal(size=(3, STEPS, FEATURES)).astype(np.float32))
    return tmp_path


def _attribute(folder, method, expect=0):
    return run_cli("attribute", folder / "loop", "--method", method, "--input", folder / "rows.npy", "--target", "0",
                   "-o", folder / "out.npy", "--json", expect=expect)


def test_an_op_a_loop_runs_on_its_weights_alone_needs_no_rule(tmp_path):
    """exp(U) and the loop's integer counter and Max compute nothing from x: DeepLIFT
    runs (complete), where the same Exp on the state is refused by name."""
    folder = _exported(tmp_path, lambda m, h, x_t: tf.tanh(x_t @ m.w + h @ tf.exp(m.u)))
    report = json.loads(_attribute(folder, "deeplift").stdout)
    assert report["uncovered"] == [] and set(report["rules"]) == {"Tanh", "Mul"}  # Mul: y = sum(h) * [1, 2]
    for row in report["completeness"]:
        assert abs(row["attribution_sum"] - row["output_difference"]) <= 1e-4 * max(1.0, abs(row["output_difference"]))
    refused = _exported(tmp_path / "on_x", lambda m, h, x_t: tf.tanh(x_t @ m.w + tf.exp(h) @ m.u))
    assert "deeplift has no rule for Exp on the path" in _attribute(refused, "deeplift", expect=1).stderr


def test_a_product_of_two_values_from_x_inside_a_loop_needs_its_rule(tmp_path):
    """h * tanh(x_t W) in the body, neither factor a gate: eps-LRP's signal-take-all
    rule does not take it (refused, naming it), DeepLIFT's product rule does."""
    folder = _exported(tmp_path, lambda m, h, x_t: (h + 1.0) * tf.tanh(x_t @ m.w))
    result = _attribute(folder, "eps_lrp", expect=1)
    assert "has no rule for Mul (of two tensors computed from x, neither a gate) on the path" in result.stderr
    report = json.loads(_attribute(folder, "deeplift").stdout)
    assert report["uncovered"] == [] and report["rules"]["Mul"] == "deeplift"
    for row in report["completeness"]:
        assert abs(row["attribution_sum"] - row["output_difference"]) <= 1e-4 * max(1.0, abs(row["output_difference"]))


def test_one_process_takes_gradients_of_one_loop_model_by_several_methods(recurrent):
    """A TF2 loop's gradient copies its functions under names from the file
    (``<body>_rewritten``), which TensorFlow registers process-wide: two explainers
    of the same model with other rules made copies of other definitions under one
    name, which TensorFlow refused ("a duplicate function ... definitions differ")."""
    rows = np.load(recurrent / "rows.npy")
    got = {}
    for method in ("eps_lrp", "deeplift", "eps_lrp"):
        with graphgrad.Explainer(str(recurrent / "lstm_export"), method) as explainer:
            got.setdefault(method, []).append(explainer.explain(rows, target=1)[0])
    with graphgrad.Explainer(str(recurrent / "lstm_unrolled_frozen.pb"), "eps_lrp") as explainer:
        expected = explainer.explain(rows, target=1)[0]
    np.testing.assert_array_equal(got["eps_lrp"][0], got["eps_lrp"][1])
    np.testing.assert_allclose(got["eps_lrp"][0], expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())
    assert not np.allclose(got["deeplift"][0], expected)  # the other method's rules, not the first's
