"""What x decides, no attribution rule sums: a branch whose predicate, a loop whose
condition, or a float cast from comparisons of x; nor a division by x. The methods that promise
completeness refuse each by name, in every form a user holds (a SavedModel; frozen,
its control flow lowered to TF1 ops or kept), where they had run and claimed
completeness with gaps up to 4,500 (found by a red team). And what is not decided
by x still runs: a branch picked by a constant, one output of a call that comes
from x beside one that does not."""

import json

import numpy as np
import pytest

from conftest import run_cli
from tf_helpers import exported, tf

import graphgrad

WIDTH = 4
W = np.random.default_rng(0).normal(0, 0.7, (WIDTH, WIDTH)).astype(np.float32)


def forms(folder, name, function, module=None):
    """``function`` of x (N, 4) saved as a SavedModel (of ``module``, which holds its
    variables), and frozen with its control flow lowered and kept
    (convert_variables_to_constants_v2); their paths."""
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    module = module or tf.Module()
    module.f = tf.function(function, input_signature=[tf.TensorSpec([None, WIDTH], tf.float32)])
    saved = folder / f"{name}_saved"
    tf.saved_model.save(module, str(saved), signatures=module.f.get_concrete_function())
    loaded = tf.saved_model.load(str(saved))
    paths = [saved]
    for suffix, lower in (("lowered", True), ("kept", False)):
        frozen = convert_variables_to_constants_v2(loaded.signatures["serving_default"], lower_control_flow=lower)
        paths.append(folder / f"{name}_{suffix}.pb")
        paths[-1].write_bytes(frozen.graph.as_graph_def().SerializeToString())
    return paths


def attribute(folder, path, method="deeplift", expect=0):
    rows = folder / "rows.npy"
    np.save(rows, np.random.default_rng(1).normal(size=(3, WIDTH)).astype(np.float32))
    np.save(folder / "base.npy", np.full((3, WIDTH), -0.7, np.float32))
    args = ("--baseline", folder / "base.npy") if method == "deeplift" else ()
    return run_cli("attribute", path, "--method", method, "--input", rows, "--target", "0", "-o",
                   folder / "out.npy", "--json", *args, expect=expect)


def trip_count_from_x(x):
    """The loop runs until s, which adds up a (x times 1.5 a step), passes 5."""
    def body(i, a, s):
        return i + 1, a * 1.5, s + tf.reduce_sum(a)
    return tf.while_loop(lambda i, a, s: s < 5.0, body, (0, x, 0.0), maximum_iterations=20)[1]


DECIDED = {
    "branch": (lambda x: tf.cond(tf.reduce_sum(x) > 0.0, lambda: x * 2.0, lambda: -x),
               ("If (its branch chosen from x)", "Switch (a branch or a loop's number of steps chosen from x)")),
    "trip_count": (trip_count_from_x, ("While (its number of steps chosen from x)",
                                       "Switch (a branch or a loop's number of steps chosen from x)")),
    "step": (lambda x: tf.cast(x > 0.0, tf.float32) * x @ W,
             ("Cast (a float of integers or comparisons computed from x: a step)",)),
    "division": (lambda x: 3.0 / (x @ W * x @ W + 5.0), ("RealDiv (by a tensor computed from x)",)),
}


@pytest.mark.parametrize("name", DECIDED)
def test_what_x_decides_is_refused_in_every_form(tmp_path, name):
    function, said = DECIDED[name]
    for path in forms(tmp_path, name, function):
        result = attribute(tmp_path, path, expect=1)
        assert "deeplift has no rule for" in result.stderr and any(each in result.stderr for each in said), (
            path, result.stderr)
        assert "eps_lrp(eps=0.0001) has no rule for" in attribute(tmp_path, path, "eps_lrp", expect=1).stderr


def test_a_branch_a_constant_picks_runs_and_is_complete(tmp_path):
    """tf.switch_case on a constant index, as a SavedModel (a StatelessCase): nothing
    is decided by x, so DeepLIFT runs and is complete; frozen, TensorFlow has no
    gradient for the lowered case's _SwitchN, which is said in one line."""
    saved, lowered, _ = forms(tmp_path, "case", lambda x: tf.switch_case(tf.constant(1), [lambda: x, lambda: x @ W]))
    report = json.loads(attribute(tmp_path, saved).stdout)
    assert report["uncovered"] == []
    for row in report["completeness"]:
        assert abs(row["attribution_sum"] - row["output_difference"]) <= 1e-5 * max(1, abs(row["output_difference"]))
    result = attribute(tmp_path, lowered, expect=1)
    assert "TensorFlow cannot differentiate the path" in result.stderr and "_SwitchN" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_one_output_of_a_call_from_x_and_one_not_are_told_apart(tmp_path):
    """A function returning (tanh(x), a constant), multiplied inside a loop: the
    product is of one tensor from x, which eps-LRP's rules take (it was refused as a
    product of two tensors computed from x)."""
    @tf.function
    def two_outputs(v):
        return tf.tanh(v), tf.constant(2.0, shape=[WIDTH])

    def looped(x):
        def body(i, v):
            p, q = two_outputs(v)
            return i + 1, p * q
        return tf.while_loop(lambda i, v: i < 2, body, (0, x))[1]

    for path in forms(tmp_path, "two_outputs", looped):
        report = json.loads(attribute(tmp_path, path, "eps_lrp").stdout)
        assert report["uncovered"] == [], path


def test_the_processs_own_functions_keep_their_definitions_after_a_gradient(tmp_path):
    """A user's tf.function differentiates a frozen loop model eagerly; graphgrad then
    attributes the same model (its gradient copies the loop's functions under the
    same names); the user's function, traced again, still runs with its own."""
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    keras = pytest.importorskip("keras")
    model = keras.Sequential([keras.Input((3, 2)), keras.layers.LSTM(3), keras.layers.Dense(2)])
    exported(model, tmp_path / "lstm")
    loaded = tf.saved_model.load(str(tmp_path / "lstm"))
    frozen = convert_variables_to_constants_v2(loaded.signatures["serving_default"], lower_control_flow=False)
    graph_def = frozen.graph.as_graph_def()
    (tmp_path / "lstm.pb").write_bytes(graph_def.SerializeToString())
    wrapped = tf.compat.v1.wrap_function(lambda: tf.graph_util.import_graph_def(graph_def, name=""), [])
    x_name = [op for op in wrapped.graph.get_operations() if op.type == "Placeholder"][0].outputs[0]
    function = wrapped.prune(x_name, wrapped.graph.get_tensor_by_name(frozen.outputs[0].name))

    @tf.function
    def gradient(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = function(x)
        return tape.gradient(y, x)

    rows = np.random.default_rng(2).normal(size=(4, 3, 2)).astype(np.float32)
    before = gradient(tf.constant(rows)).numpy()
    for method in ("deeplift", "eps_lrp"):
        with graphgrad.Explainer(str(tmp_path / "lstm.pb"), method) as explainer:
            explainer.explain(rows, target=1)
    np.testing.assert_array_equal(gradient(tf.constant(rows)).numpy(), before)
    np.testing.assert_allclose(gradient(tf.constant(rows[:2])).numpy(), before[:2], rtol=1e-5)  # traced again


def test_a_weights_nonlinearity_inside_a_loop_is_differentiated_as_itself(tmp_path):
    """v * sigmoid(w) in a loop body, w a weight of shape [1]: while_v2 differentiates
    the weight's sigmoid too, where DeepLIFT's rule has no baseline half to compare
    (it crashed splitting one entry in two); its own gradient is taken there, which
    never reaches x, and the attributions are complete."""
    module = tf.Module()
    module.w = tf.Variable(np.array([0.3], np.float32))

    def looped(x):
        return tf.while_loop(lambda i, v: i < 2, lambda i, v: (i + 1, v * tf.sigmoid(module.w)), (0, x))[1] @ W

    for path in forms(tmp_path, "weight_in_loop", looped, module):
        report = json.loads(attribute(tmp_path, path).stdout)
        for row in report["completeness"]:
            assert abs(row["attribution_sum"] - row["output_difference"]) <= 1e-5 * max(
                1, abs(row["output_difference"])), path


def test_a_kept_loop_takes_gradients_of_several_targets_after_runs(tmp_path):
    """A Keras LSTM frozen with its While kept: each kind of target builds its
    gradient after the explainer ran the graph, and while_v2 adds outputs to the
    forward While then, which the session that ran it could not see ("invalid
    output"): one class, one class a row, and the top two each run, and agree."""
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    keras = pytest.importorskip("keras")
    keras.utils.set_random_seed(4)
    model = keras.Sequential([keras.Input((3, 2)), keras.layers.LSTM(4), keras.layers.Dense(3)])
    exported(model, tmp_path / "lstm")
    loaded = tf.saved_model.load(str(tmp_path / "lstm"))
    frozen = convert_variables_to_constants_v2(loaded.signatures["serving_default"], lower_control_flow=False)
    (tmp_path / "kept.pb").write_bytes(frozen.graph.as_graph_def().SerializeToString())
    rows = np.random.default_rng(3).normal(size=(3, 3, 2)).astype(np.float32)
    with graphgrad.Explainer(str(tmp_path / "kept.pb"), "deeplift") as explainer:
        one, _ = explainer.explain(rows, target=1)
        per_row, _ = explainer.explain(rows, target=np.array([1, 1, 1]))
        ranked, report = explainer.explain(rows, target="top:2")
    np.testing.assert_allclose(per_row, one, rtol=1e-6)
    for row, classes in enumerate(report.targets):
        if 1 in list(classes):
            np.testing.assert_allclose(ranked[row, list(classes).index(1)], one[row], rtol=1e-6)
