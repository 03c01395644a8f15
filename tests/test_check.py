"""graphgrad check and ops --grad-status (need TensorFlow)."""

import json
import shlex
import warnings

import numpy as np
import pytest

from conftest import fixture, run_cli
from tf_helpers import gradients, tf, v1

import graphgrad


def save(tmp_path, graph, name="g.pb"):
    path = tmp_path / name
    path.write_bytes(graph.as_graph_def().SerializeToString())
    return path


def check_json(*args, expect):
    return json.loads(run_cli("check", *args, "--json", expect=expect).stdout)


def test_sign_blocks_until_rewritten(tmp_path):
    report = check_json(fixture("binary_net.pb"), "--x", "x", "--y", "dense2/logits", expect=1)
    assert [g["status"] for g in report["gradients"]] == ["zero"]
    assert [(b["node"], b["reason"]) for b in report["blockers"]] == [
        ("binarize_input/Sign", "TensorFlow's gradient is zero everywhere"),
        ("dense1/Sign", "TensorFlow's gradient is zero everywhere"),
    ]
    fix = f"graphgrad rewrite {fixture('binary_net.pb')} --node 'binarize_input/Sign=ste' -o OUT"
    assert report["blockers"][0]["fix"] == fix

    patched = tmp_path / "patched.pb"
    run_cli("rewrite", fixture("binary_net.pb"), "--op", "Sign=identity", "-o", patched)
    text = run_cli("check", patched, "--x", "x", "--y", "dense2/logits", "--batch", "4").stdout
    assert "x  yes        finite" in text and "without overrides" in text
    report = check_json(patched, "--x", "x", "--y", "dense2/logits", expect=0)
    assert report["ok"] and report["blockers"] == []
    assert [g["status"] for g in report["without_overrides"]] == ["zero"]
    idle = [node for node, _ in report["idle_overrides"]]
    assert idle == ["dense1/binarize_weights/Sign", "dense2/binarize_weights/Sign"]


def test_embedded_surrogates_are_listed_not_blamed(tmp_path):
    embedded = tmp_path / "embedded.pb"
    run_cli("rewrite", fixture("binary_net.pb"), "--op", "Sign=ste", "--embed", "-o", embedded)
    for seed, status in ((1, "finite"), (0, "zero")):  # ste passes nothing where every |input| > 1
        report = check_json(embedded, "--x", "x", "--y", "dense2/logits", "--seed", seed,
                            expect=0 if status == "finite" else 1)
        assert [g["status"] for g in report["gradients"]] == [status]
        assert report["blockers"] == []  # not the Signs, not the surrogates' StopGradients
        assert report["embedded"] == [["binarize_input/Sign", "ste(clip=1.0)"], ["dense1/Sign", "ste(clip=1.0)"]]
    text = run_cli("check", embedded, "--x", "x", "--y", "dense2/logits", "--seed", 0, expect=1).stdout
    assert "embedded gradients on the path (--embed):\n  binarize_input/Sign: ste(clip=1.0)\n" in text


@pytest.mark.parametrize("ends", [["--x", "x", "--y", "dense1/Sign"], ["--x", "binarize_input/Sign:0",
                                                                      "--y", "dense2/logits"]])
def test_an_x_or_y_that_names_an_embedded_nodes_own_output_agrees_with_the_override(tmp_path, ends):
    """NODE:0 still names the raw op after --embed; its consumers read the surrogate.
    check takes x or y there, says so, and gets what the override route gets."""
    embedded, overridden = tmp_path / "embedded.pb", tmp_path / "overridden.pb"
    run_cli("rewrite", fixture("binary_net.pb"), "--op", "Sign=ste(clip=4)", "--embed", "-o", embedded)
    run_cli("rewrite", fixture("binary_net.pb"), "--op", "Sign=ste(clip=4)", "-o", overridden)
    via_embed = check_json(embedded, *ends, "--batch", "3", expect=0)
    via_override = check_json(overridden, *ends, "--batch", "3", expect=0)
    assert via_embed["gradients"][0]["norm"] == pytest.approx(via_override["gradients"][0]["norm"], rel=1e-6)
    assert via_embed["gradients"][0]["norm"] > 0
    assert any("has a gradient written into the graph" in note for note in via_embed["notes"])


def test_a_transform_embedded_on_a_sign_still_shows_the_sign_as_the_blocker(tmp_path):
    # reverse alone scales the Sign's own gradient, which stays zero: the Sign is the blocker
    first, inserted = tmp_path / "first.pb", tmp_path / "inserted.pb"
    run_cli("rewrite", fixture("binary_net.pb"), "--node", "binarize_input/Sign=ste", "-o", first)
    run_cli("insert", first, "--at", "dense1/Sign:0", "--grad", "reverse", "--embed", "-o", inserted)
    report = check_json(inserted, "--x", "x", "--y", "dense2/logits", "--seed", 1, expect=1)
    assert [b["node"] for b in report["blockers"]] == ["dense1/Sign"]
    assert report["embedded"] == [["dense1/Sign", "reverse(strength=1.0)"]]


def renamed_functions_copy(tmp_path, suffix):
    """functions.pb with function names of its own: TensorFlow keeps the gradient
    functions of If branches process-wide by branch name, so graphs that other
    tests differentiate under the same names would share them."""
    import graphgrad

    model = graphgrad.read_model(fixture("functions.pb"))
    graphgrad.rename_functions(model, suffix)
    path = tmp_path / f"functions{suffix}.pb"
    graphgrad.write_model(model, str(path))
    return path


def test_blockers_inside_if_branches_are_named_as_rules_select_them(tmp_path):
    source = renamed_functions_copy(tmp_path, "_b")
    report = check_json(source, "--x", "x", "--y", "Identity", "--feed", "flag=true", expect=1)
    assert [(b["node"], b["reason"]) for b in report["blockers"]] == [
        ("cond_true_39_b/cond/Sign", "TensorFlow's gradient is zero everywhere (in function cond_true_39_b)"),
        ("cond_false_40_b/cond/Sign", "TensorFlow's gradient is zero everywhere (in function cond_false_40_b)"),
    ]
    # the fix as given (not TensorFlow's cond_true_39_rewritten copy): it selects the node and helps
    fixed = tmp_path / "fixed.pb"
    command = report["blockers"][0]["fix"].replace("OUT", str(fixed)).replace("'", "").split()
    assert command[:2] == ["graphgrad", "rewrite"]
    run_cli(*command[1:])
    fixed_report = check_json(fixed, "--x", "x", "--y", "Identity", "--feed", "flag=true", expect=0)
    assert [g["status"] for g in fixed_report["gradients"]] == ["finite"]
    assert [b["node"] for b in fixed_report["blockers"]] == ["cond_false_40_b/cond/Sign"]


def test_an_edited_branch_is_compared_without_its_overrides(tmp_path):
    # the plain graph's If branches keep their names in the reset model; loaded after the
    # patched one in the same process, TensorFlow's cond_v2 gradient functions would clash
    inserted = tmp_path / "inserted.pb"
    run_cli("insert", renamed_functions_copy(tmp_path, "_i"), "--at", "cond_true_39_i/cond/Sign:y:0",
            "--grad", "identity", "-o", inserted)
    report = check_json(inserted, "--x", "x", "--y", "Identity", "--feed", "flag=true", expect=1)
    assert [g["status"] for g in report["without_overrides"]] == ["zero"]
    assert report["without_overrides"][0]["error"] is None


def test_savedmodel_compared_without_its_overrides(tmp_path):
    patched = tmp_path / "patched"
    run_cli("rewrite", fixture("saved_model"), "--op", "Sign=identity", "-o", patched)
    report = check_json(patched, "--x", "x", "--y", "y", "--feed", "x=[0.5, -2.0]", expect=0)
    assert report["tags"] == "serve"
    assert [(g["status"], round(g["norm"], 4)) for g in report["gradients"]] == [("finite", round(3 * 2**0.5, 4))]
    # the reset graph in memory, not the file on disk (which carries the overrides)
    assert [g["status"] for g in report["without_overrides"]] == ["zero"]


def test_a_savedmodel_with_several_metagraphs_needs_a_tag():
    model = fixture("saved_model_two_tags")
    report = check_json(model, "--x", "x", "--y", "loss", "--tag", "train", expect=1)
    assert report["tags"] == "train" and [g["status"] for g in report["gradients"]] == ["zero"]
    assert [b["node"] for b in report["blockers"]] == ["Sign"]
    text = run_cli("check", model, "--x", "x", "--y", "y", "--tag", " serve ", expect=1).stdout
    assert text.startswith(f"{model} [serve]: d y / d x\n")
    for args, message in [
        ((), "holds 2 MetaGraphDefs (tag sets: serve; train). To fix this, choose one with --tag, e.g. --tag serve"),
        (("--tag", "serve"), "no tensor 'loss' in the graph"),  # loss is in the train graph only
        (("--tag", "eval"), "has the tag set 'eval'; its tag sets: serve; train"),
    ]:
        assert message in run_cli("check", model, "--x", "x", "--y", "loss", *args, expect=2).stderr
    wrong_kind = run_cli("check", fixture("binary_net.pb"), "--x", "x", "--y", "dense2/logits", "--tag", "serve",
                         expect=2)
    assert "--tag chooses a MetaGraphDef of a SavedModel; " in wrong_kind.stderr


def test_round_and_pyfunc_give_none():
    refused = run_cli("check", fixture("ops_mix.pb"), "--x", "x", "--y", "out", expect=1)
    assert ("its path holds 1 op(s) not known to compute only on tensors in memory, of type(s) PyFunc "
            "(py_identity (PyFunc)); to run it anyway, add --allow-effects") in refused.stderr
    report = check_json(fixture("ops_mix.pb"), "--x", "x", "--y", "out", "--allow-effects", expect=1)
    assert report["gradients"][0]["status"] == "none"
    reasons = {b["node"]: b["reason"] for b in report["blockers"]}
    assert reasons == {
        "round": "TensorFlow's gradient is None", "py_identity": "PyFunc has no gradient unless overridden",
    }


def test_dangling_override_is_named():
    report = check_json(fixture("custom_gradient.meta"), "--x", "x", "--y", "loss", expect=1)
    assert report["gradients"][0]["status"] == "error"
    [blocker] = report["blockers"]
    assert blocker["node"] == "IdentityN" and "cannot be resolved (left by tf.custom_gradient)" in blocker["reason"]
    assert blocker["fix"].endswith("--node 'IdentityN=identity' --force -o OUT")


def test_integer_edges_and_stop_gradient(tmp_path):
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None], name="x")
        quantized = tf.cast(tf.cast(x * 4.0, tf.int32, name="to_int"), tf.float32)
        tf.reduce_sum(quantized, name="via_int")
        tf.reduce_sum(tf.stop_gradient(x, name="stop") * 2.0, name="via_stop")
    path = save(tmp_path, graph)
    report = check_json(path, "--x", "x", "--y", "via_int", expect=1)
    assert report["gradients"][0]["status"] == "none"
    [blocker] = report["blockers"]
    assert blocker["node"] == "to_int" and "turns floats into int32" in blocker["reason"]
    report = check_json(path, "--x", "x", "--y", "via_stop", expect=1)
    assert [(b["node"], b["reason"]) for b in report["blockers"]] == [("stop", "StopGradient stops the gradient")]
    fixed = tmp_path / "fixed.pb"
    run_cli("rewrite", path, "--node", "stop=identity", "-o", fixed)
    assert check_json(fixed, "--x", "x", "--y", "via_stop", expect=0)["gradients"][0]["status"] == "finite"


def test_feeds_nan_and_disconnected(tmp_path):
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [2], name="x")
        other = v1.placeholder(tf.float32, [2], name="other")
        tf.reduce_sum(tf.sqrt(x), name="root")
        tf.reduce_sum(other * 2.0, name="unrelated")
    path = save(tmp_path, graph)
    np.save(tmp_path / "x.npy", np.array([0.0, 4.0], np.float32))
    report = check_json(path, "--x", "x", "--y", "root", "--feed", f"x={tmp_path / 'x.npy'}", expect=1)
    assert report["gradients"][0]["status"] == "nan" and report["feeds"] == {"x:0": "given"}
    report = check_json(path, "--x", "x", "--y", "root", "--feed", "x=[1.0, 4.0]", expect=0)
    assert abs(report["gradients"][0]["norm"] - np.hypot(0.5, 0.25)) < 1e-6
    report = check_json(path, "--x", "x", "--y", "unrelated", expect=1)
    assert report["gradients"][0] == {"x": "x", "connected": False, "status": "none", "norm": None, "error": None,
                                      "why": None}


def test_usage_errors_exit_2(tmp_path):
    result = run_cli("check", fixture("binary_net.pb"), "--x", "xx", "--y", "dense2/logits", expect=2)
    assert "no tensor 'xx' in the graph; close ones: x:0" in result.stderr
    result = run_cli("check", fixture("binary_net.pb"), "--x", "x", "--y", "dense2/logits", "--feed", "x=oops",
                     expect=2)
    assert "expected a number, a JSON list or a .npy file" in result.stderr


def test_a_tf2_saved_model_blocker_inside_its_functions_and_the_fix(tmp_path):
    """A TF2 SavedModel loaded by TF1's loader: its Sign sits in a function that the
    signature's PartitionedCall calls through another. TF's graph mode differentiates
    calls in C++, which ignores overrides; check routes them through graphgrad's `call`."""
    model = fixture("tf2_saved_model")
    args = ("--x", "serving_default_x", "--y", "PartitionedCall")
    report = check_json(model, *args, expect=1)
    assert report["gradients"][0]["status"] == "zero"
    [blocker] = report["blockers"]
    assert blocker["node"].startswith("__inference___call___") and blocker["node"].endswith("/Sign")
    fixed = tmp_path / "fixed"
    run_cli(*shlex.split(blocker["fix"].replace("OUT", str(fixed)))[1:])
    report = check_json(fixed, *args, "--feed", "serving_default_x=[[0.5, -0.3, 2.0]]", expect=0)
    assert [(g["status"], g["norm"]) for g in report["gradients"]] == [("finite", np.sqrt(8))]  # 2 * (1, 1, 0)
    assert [g["status"] for g in report["without_overrides"]] == ["zero"]
    assert report["idle_overrides"] == [] and report["blockers"] == []
    assert report["routed_calls"][0] == "PartitionedCall"  # then the call in the signature wrapper's body
    assert report["routed_calls"][1].endswith("/PartitionedCall") and len(report["routed_calls"]) == 2


def test_a_call_inside_a_branch_function_is_routed(tmp_path):
    """If -> branch function -> PartitionedCall -> Sign: check marks the call before
    it builds the graph, where TensorFlow will build the branch's graph from."""
    out = tmp_path / "out.pb"
    run_cli("rewrite", fixture("call_in_branch.pb"), "--op", "Sign=ste", "-o", out)
    report = check_json(out, "--x", "x", "--y", "y", "--feed", "p=true", "--feed", "x=[0.5, -0.3, 2.0]", expect=0)
    assert [(g["status"], g["norm"]) for g in report["gradients"]] == [("finite", np.sqrt(8))]  # 2 * (1, 1, 0)
    [call] = report["routed_calls"]
    assert call.startswith("cond_true_") and call.endswith("/cond/PartitionedCall")


def test_a_y_that_is_not_floating_point_is_a_usage_error_naming_the_signatures():
    result = run_cli("check", fixture("tf2_saved_model"), "--x", "serving_default_x", "--y", "StatefulPartitionedCall",
                     expect=2)
    assert "--y StatefulPartitionedCall is string: check differentiates a floating-point tensor. " \
        "Its signatures: serving_default: x = serving_default_x:0, output_0 = PartitionedCall:0" in result.output


def test_an_op_without_outputs_is_named_as_such():
    result = run_cli("check", fixture("model.meta"), "--x", "x", "--y", "save/restore_all", expect=2)
    assert "save/restore_all is a NoOp op, which has no output tensor to differentiate" in result.output


def test_a_model_tensorflow_cannot_load_is_one_line(tmp_path):
    import shutil

    broken = tmp_path / "no_variables"
    shutil.copytree(fixture("saved_model"), broken, ignore=shutil.ignore_patterns("variables"))
    result = run_cli("check", broken, "--x", "x", "--y", "y", expect=1)
    assert f"graphgrad: error: TensorFlow cannot load {broken}" in result.output
    assert "not a valid checkpoint" in result.output and "Traceback" not in result.output


def test_ops_grad_status():
    result = run_cli("ops", fixture("ops_mix.pb"), "--grad-status", "--json")
    status = json.loads(result.stdout)["files"][0]["grad_status"]
    assert status["Round"] == "None" and status["PyFunc"] == "None"
    assert status["Relu"] == "registered" and status["Placeholder"] == "missing"
    text = run_cli("ops", fixture("binary_net.pb"), "--grad-status").stdout
    assert "Sign             4             -  zero" in text


def test_overrides_in_function_bodies_are_compared_too(tmp_path):
    patched = tmp_path / "functions_ste.pb"
    run_cli("rewrite", fixture("functions.pb"), "--op", "Sign=ste", "-o", patched)
    report = check_json(patched, "--x", "x", "--y", "Identity", "--feed", "flag=true",
                        "--feed", "x=[0.5, -2.0, 0.0]", expect=0)
    assert abs(report["gradients"][0]["norm"] - np.sqrt(8.0)) < 1e-6
    assert [g["status"] for g in report["without_overrides"]] == ["zero"]


def classifier_weights():
    """The constants of fixtures/classifier.pb: probs = softmax(relu(x @ w1) @ w2)."""
    graph_def = v1.GraphDef.FromString(open(fixture("classifier.pb"), "rb").read())
    return {node.name: tf.make_ndarray(node.attr["value"].tensor) for node in graph_def.node if node.op == "Const"}


def softmax_entry_gradient(x, target, relu_gradient=lambda hidden, upstream: upstream * (hidden > 0)):
    """d probs[..., target] / dx for the classifier, by hand: softmax' = p_t (e_t - p)."""
    weights = classifier_weights()
    hidden = x @ weights["w1"]
    logits = np.maximum(hidden, 0) @ weights["w2"]
    probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    upstream = probs[:, target:target + 1] * (np.eye(3)[target] - probs)
    return relu_gradient(hidden, upstream @ weights["w2"].T) @ weights["w1"].T


FEED = [[0.5, -1.0, 2.0, 0.3], [-0.7, 0.2, 0.1, 1.5]]


def test_a_softmax_differentiated_whole_is_not_ok(tmp_path):
    """tf.gradients sums y: a softmax's entries sum to 1, so the gradient is rounding
    noise (1e-8 to 1e-7 in float32), which would pass for a usable one."""
    report = check_json(fixture("classifier.pb"), "--x", "x", "--y", "probs", "--feed", f"x={FEED}", expect=1)
    [gradient] = report["gradients"]
    assert gradient["norm"] < 1e-6
    assert report["summed_softmax"] == {"softmax": "probs", "logits": "logits:0"}
    text = run_cli("check", fixture("classifier.pb"), "--x", "x", "--y", "probs", expect=1).stdout
    assert "y is the softmax probs: its entries sum to 1" in text
    assert "fix: choose one class, --target INDEX, or differentiate the logits, --y logits" in text


def test_target_differentiates_one_class():
    for target in range(3):
        report = check_json(fixture("classifier.pb"), "--x", "x", "--y", "probs", "--target", target,
                            "--feed", f"x={FEED}", expect=0)
        [gradient] = report["gradients"]
        expected = np.linalg.norm(softmax_entry_gradient(np.array(FEED), target))
        assert (gradient["status"], report["target"], report["summed_softmax"]) == ("finite", target, None)
        assert np.isclose(gradient["norm"], expected, rtol=1e-5)
    text = run_cli("check", fixture("classifier.pb"), "--x", "x", "--y", "probs", "--target", "1").stdout
    assert text.startswith(f"{fixture('classifier.pb')}: d probs[..., 1] / d x")
    too_far = run_cli("check", fixture("classifier.pb"), "--x", "x", "--y", "probs", "--target", "3", expect=2)
    assert "--target 3: probs:0 has 3 entries on its last axis (0 to 2)" in too_far.stderr


def test_target_applies_with_and_without_overrides(tmp_path):
    """Guided backprop on the classifier: one class's saliency, against plain backprop."""
    patched = tmp_path / "guided.pb"
    run_cli("rewrite", fixture("classifier.pb"), "--op", "Relu=guided_relu", "-o", patched)
    report = check_json(patched, "--x", "x", "--y", "probs", "--target", 0, "--feed", f"x={FEED}", expect=0)
    x = np.array(FEED)
    guided = softmax_entry_gradient(x, 0, lambda hidden, upstream: upstream * (hidden > 0) * (upstream > 0))
    assert np.isclose(report["gradients"][0]["norm"], np.linalg.norm(guided), rtol=1e-5)
    assert np.isclose(report["without_overrides"][0]["norm"], np.linalg.norm(softmax_entry_gradient(x, 0)), rtol=1e-5)
    assert not np.isclose(np.linalg.norm(guided), np.linalg.norm(softmax_entry_gradient(x, 0)))


def test_an_override_on_the_softmax_is_not_the_trap(tmp_path):
    """With its own gradient, the softmax's sum may well have a gradient."""
    patched = tmp_path / "identity.pb"
    run_cli("rewrite", fixture("classifier.pb"), "--op", "Softmax=identity", "-o", patched)
    report = check_json(patched, "--x", "x", "--y", "probs", "--feed", f"x={FEED}", expect=0)
    assert report["summed_softmax"] is None and report["gradients"][0]["status"] == "finite"


def test_without_x_and_y_the_models_inputs_and_only_output():
    """As ops lists them: the classifier's placeholder, and its one output (a softmax, caught)."""
    report = check_json(fixture("classifier.pb"), "--feed", f"x={FEED}", expect=1)
    assert (report["y"], [g["x"] for g in report["gradients"]]) == ("probs", ["x"])
    assert report["summed_softmax"] == {"softmax": "probs", "logits": "logits:0"}
    report = check_json(fixture("classifier.pb"), "--target", "2", "--feed", f"x={FEED}", expect=0)
    assert np.isclose(report["gradients"][0]["norm"], np.linalg.norm(softmax_entry_gradient(np.array(FEED), 2)),
                      rtol=1e-5)


def test_without_y_a_saved_model_uses_its_signature(tmp_path):
    patched = tmp_path / "patched"
    run_cli("rewrite", fixture("saved_model"), "--op", "Sign=identity", "-o", patched)
    report = check_json(patched, "--feed", "x=[0.5, -2.0]", expect=0)
    assert (report["y"], [g["x"] for g in report["gradients"]]) == ("y", ["x"])
    assert [(g["status"], round(g["norm"], 4)) for g in report["gradients"]] == [("finite", round(3 * 2**0.5, 4))]


def test_without_y_several_outputs_are_listed(tmp_path):
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [2], name="x")
        tf.identity(x * 2, name="double")
        tf.identity(x * 3, name="triple")
    result = run_cli("check", save(tmp_path, graph), expect=2)
    assert "name the tensor to differentiate with --y; the model has 2 floating-point outputs: double, triple" \
        in result.stderr


def test_a_keras_export_checks_its_serving_default_as_tf2_loads_it(tmp_path):
    """Keras 3's export has two signatures (serve, serving_default) on two call ops:
    without --y, check takes serving_default's output, and its guided-backprop
    gradient is the one tf.saved_model.load + GradientTape compute."""
    keras = pytest.importorskip("keras", reason="needs Keras (comes with TensorFlow)")
    import graphgrad
    from graphgrad.graph.model import signatures_of

    exported, guided = tmp_path / "exported", tmp_path / "guided"
    with warnings.catch_warnings():  # Keras's own
        warnings.simplefilter("ignore")
        keras.utils.set_random_seed(3)
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(3)])
        quiet = {"verbose": False} if int(keras.__version__.split(".")[0]) >= 3 else {}  # Keras 2 has no verbose
        model.export(str(exported), **quiet)
    run_cli("rewrite", exported, "--op", "Relu=guided_relu", "-o", guided)
    meta = graphgrad.read_model(str(guided)).message.meta_graphs[0]
    [(serving_input, serving_output)] = [(inputs[0][1], outputs[0][1]) for key, inputs, outputs
                                         in signatures_of(meta) if key == "serving_default"]

    report = check_json(guided, "--target", "0", "--feed", f"{serving_input}={FEED}", expect=0)
    assert report["y"] == serving_output.removesuffix(":0")
    assert [g["x"] for g in report["gradients"]] == [serving_input.removesuffix(":0")]
    graphgrad.register_gradients(str(guided))
    loaded = tf.saved_model.load(str(guided))
    x = tf.constant(FEED, dtype=tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = loaded.serve(x)[:, 0]
    [gradient] = report["gradients"]
    assert np.isclose(gradient["norm"], np.linalg.norm(tape.gradient(y, x).numpy()), rtol=1e-5)
    assert not np.isclose(gradient["norm"], report["without_overrides"][0]["norm"])


def test_without_x_only_floating_point_placeholders_in_graph_order(tmp_path):
    graph = tf.Graph()
    with graph.as_default():
        second = v1.placeholder(tf.float32, [2], name="b_second")
        flag = v1.placeholder(tf.bool, [], name="flag")
        first = v1.placeholder(tf.float32, [2], name="a_first")
        v1.placeholder(tf.float32, [2], name="unused")
        tf.identity(tf.where(flag, second * 2.0, first * 3.0), name="y")
    report = check_json(save(tmp_path, graph), "--feed", "flag=true", expect=1)
    assert [(g["x"], g["status"]) for g in report["gradients"]] == [("b_second", "finite"), ("a_first", "zero")]


def test_check_refuses_ops_that_act_outside_the_graph(tmp_path):
    written = tmp_path / "written.txt"
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [3], name="x")
        with tf.control_dependencies([tf.io.write_file(str(written), "hi")]):
            tf.identity(x * 2.0, name="y")
    path = tmp_path / "effect.pb"
    path.write_bytes(graph.as_graph_def().SerializeToString())
    result = run_cli("check", path, "--y", "y", expect=1)
    assert ("1 op(s) not known to compute only on tensors in memory, of type(s) WriteFile (WriteFile (WriteFile)); "
            "to run it anyway, add --allow-effects") in result.stderr
    assert not written.exists()
    run_cli("check", path, "--y", "y", "--allow-effects")
    assert written.read_text() == "hi"


@pytest.mark.parametrize("shape, args", [([40000, 40000], ()), ([None, 8], ("--batch", "1000000000000"))])
def test_check_says_when_a_random_feed_is_too_large(tmp_path, shape, args):
    graph = tf.Graph()
    with graph.as_default():
        tf.identity(v1.placeholder(tf.float32, shape, name="x") * 2.0, name="y")
    path = tmp_path / "big.pb"
    path.write_bytes(graph.as_graph_def().SerializeToString())
    result = run_cli("check", path, "--y", "y", *args, expect=2)
    assert "would take" in result.stderr and "GiB; feed it yourself (--feed x=FILE.npy)" in result.stderr


def test_check_says_when_a_json_feed_nests_too_deeply():
    result = run_cli("check", fixture("binary_net.pb"), "--feed", "x=" + "[" * 30000 + "]" * 30000, expect=2)
    assert "nested too deeply; give a .npy file" in result.stderr


def test_check_json_usage_error_is_one_document():
    result = run_cli("check", fixture("binary_net.pb"), "--y", "nosuch", "--json", expect=2)
    document = json.loads(result.stdout)
    assert document["exit_code"] == 2 and "nosuch" in document["error"]


@pytest.mark.slow
def test_check_hides_tensorflows_log_lines_unless_verbose(capfd):
    """What TensorFlow's C++ side writes to file descriptor 2 is hidden, and shown with
    -v (written here by hand: TensorFlow's own start-up lines come and go by machine)."""
    import os
    import subprocess
    import sys

    from graphgrad.cli.render import native_stderr_shown

    command = [sys.executable, "-m", "graphgrad", "check", fixture("binary_net.pb")]
    env = {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    quiet = subprocess.run(command, capture_output=True, text=True, env=env)
    assert quiet.returncode == 1 and quiet.stderr == "" and "not ok" in quiet.stdout
    for shown in (False, True):
        with native_stderr_shown(shown):
            os.write(2, b"I0000 native log line\n")
        assert ("I0000 native log line" in capfd.readouterr().err) == shown


def test_tensorflows_reason_is_shown_not_its_header():
    from graphgrad.tf.loading import tensorflow_says

    class Failure(Exception):
        message = ("Graph execution error:\n\nDetected at node 'steps' defined at (most recent call last):\n"
                   "  File \"train.py\", line 3, in <module>\nNode: 'steps'\nCannot assign a device for operation "
                   "steps: was explicitly assigned to /job:learner/task:0/device:CPU:*\n\t [[steps]]")

    said = tensorflow_says(Failure())
    assert said.startswith("Node: 'steps'; Cannot assign a device for operation steps") and "File" not in said


def test_devices_written_for_a_cluster_are_cleared(tmp_path):
    graph = tf.Graph()
    with graph.as_default(), tf.device("/job:learner/task:0/device:CPU:0"):
        x = v1.placeholder(tf.float32, [3], name="x")
        tf.identity(x * 2.0, name="y")
    path = tmp_path / "learner.pb"
    path.write_bytes(graph.as_graph_def().SerializeToString())
    report = check_json(path, "--y", "y", expect=0)
    assert report["gradients"][0]["status"] == "finite"


def test_many_outputs_are_named_in_a_few_with_the_count(tmp_path):
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [3], name="x")
        for index in range(12):
            tf.identity(x * float(index), name=f"out{index}")
    path = tmp_path / "many.pb"
    path.write_bytes(graph.as_graph_def().SerializeToString())
    result = run_cli("check", path, expect=2)
    assert "has 12 floating-point outputs" in result.stderr and "(+7 more)" in result.stderr
    assert f"to list them all: graphgrad ops {path} --json" in result.stderr


def rnn_reference(x):
    """dy/dx of the tf1_rnn.meta fixture, by central differences in float64."""
    w = np.array([[0.5, -0.2], [0.1, 0.3], [-0.4, 0.2]])

    def forward(x):
        h, total = np.zeros((2, 2)), 0.0
        for t in range(5):
            h = np.tanh(x[t] @ w + h)
            total += h.sum()
        return total

    gradient, step = np.zeros_like(x), 1e-6
    for index in np.ndindex(x.shape):
        shifted = np.zeros_like(x)
        shifted[index] = step
        gradient[index] = (forward(x + shifted) - forward(x - shifted)) / (2 * step)
    return gradient


def test_check_differentiates_a_tf1_recurrent_net(tmp_path):
    x = np.random.default_rng(3).standard_normal((5, 2, 3))
    np.save(tmp_path / "x.npy", x.astype(np.float32))
    report = check_json(fixture("tf1_rnn.meta"), "--y", "y", "--feed", f"x={tmp_path / 'x.npy'}", expect=0)
    assert report["gradients"][0]["status"] == "finite"
    np.testing.assert_allclose(report["gradients"][0]["norm"], np.linalg.norm(rnn_reference(x)), rtol=1e-4)
    assert tf.compat.v1.control_flow_v2_enabled()  # the process's setting, restored


def test_import_graph_def_of_a_tf1_recurrent_net_is_differentiable():
    x = np.random.default_rng(4).standard_normal((5, 2, 3))
    graph = tf.Graph()
    with graph.as_default(), pytest.warns(UserWarning, match="control flow v2 off"):
        graphgrad.import_graph_def(fixture("tf1_rnn.meta"), name="")
    [gradient] = gradients(graph, "y:0", "x:0", {"x:0": x.astype(np.float32)})
    np.testing.assert_allclose(gradient, rnn_reference(x), rtol=1e-4, atol=1e-5)


def placeholder_with_default_graph(tmp_path):
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder_with_default(tf.constant([1.0, 2.0, 3.0]), [3], name="x")
        training = v1.placeholder_with_default(True, [], name="training")
        tf.identity(tf.where(training, x * 2.0, x * 3.0), name="y")
    return save(tmp_path, graph)


def test_an_x_with_a_default_is_fed_and_other_defaults_are_named(tmp_path):
    path = placeholder_with_default_graph(tmp_path)
    report = check_json(path, "--x", "x", "--y", "y", expect=0)
    assert report["feeds"] == {"x:0": "random float32 [3]"} and report["defaults"] == ["training"]
    assert report["gradients"][0]["norm"] == pytest.approx(2 * np.sqrt(3), rel=1e-6)
    assert "inputs left at their defaults" in run_cli("check", path, "--x", "x", "--y", "y").stdout
    report = check_json(path, "--x", "x", "--y", "y", "--feed", "training=false", expect=0)
    assert report["defaults"] == [] and report["gradients"][0]["norm"] == pytest.approx(3 * np.sqrt(3), rel=1e-6)


def test_a_computed_x_is_fed_and_the_pipeline_before_it_neither_run_nor_fed(tmp_path):
    """TF Serving's half_plus_two shape: y = 0.5 x + 2, x parsed from a serialized
    tf.Example. --x x:0 feeds x itself; tf_example, which only computes x, is not fed."""
    graph = tf.Graph()
    with graph.as_default():
        serialized = v1.placeholder(tf.string, [None], name="tf_example")
        parsed = v1.parse_example(serialized, {"x": tf.io.FixedLenFeature([1], tf.float32)})
        x = tf.identity(parsed["x"], name="x")
        tf.add(0.5 * x, 2.0, name="y")
    report = check_json(save(tmp_path, graph), "--x", "x:0", "--y", "y:0", expect=0)
    assert report["feeds"] == {"x:0": "random float32 [1, 1]"}
    assert report["gradients"][0]["norm"] == pytest.approx(0.5)


def test_batch_normalisations_stop_gradient_is_told_by_structure_not_by_name(tmp_path):
    """tf.nn.moments' StopGradient is on purpose in any scope (the second one is
    moments_1, a named one stats); a StopGradient that merely sits in a scope called
    moments is a blocker."""
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [4, 3], name="x")
        normalised = x
        for name in (None, None, "stats"):
            mean, variance = tf.nn.moments(normalised, axes=[0], name=name)
            normalised = (normalised - mean) / tf.sqrt(variance + 1e-3)
        with tf.name_scope("moments_2"):
            stopped = tf.stop_gradient(x)
        tf.identity(normalised[0] + stopped[0], name="y")
    report = check_json(save(tmp_path, graph), "--x", "x", "--y", "y", expect=0)
    assert report["intended_stops"] == ["moments/StopGradient", "moments_1/StopGradient", "stats/StopGradient"]
    assert [blocker["node"] for blocker in report["blockers"]] == ["moments_2/StopGradient"]


def test_ops_that_read_only_the_shape_are_right_to_give_none_and_get_no_fix(tmp_path):
    """y = concat([2x, zeros_like(x)]): ZerosLike's None gradient is right; the
    identity that check used to propose would add dy to x's gradient (norm 7.35, not 4.90)."""
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None], name="x")  # of a known shape, zeros_like would be a Const
        ones = tf.raw_ops.OnesLike(x=x, name="ones_like")  # the op itself: TensorFlow 2.13's ones_like is a Fill
        tf.concat([2.0 * x, tf.raw_ops.ZerosLike(x=x, name="zeros_like"), ones * tf.cast(tf.size(x), tf.float32)], 0,
                  name="y")
    path = save(tmp_path, graph)
    report = check_json(path, "--x", "x", "--y", "y", "--shape", "x=6", expect=0)
    assert report["blockers"] == [] and sorted(report["shape_only"]) == ["ones_like", "zeros_like"]
    assert report["gradients"][0]["norm"] == pytest.approx(2 * np.sqrt(6), rel=1e-6)
    text = run_cli("check", path, "--x", "x", "--y", "y", "--shape", "x=6").stdout
    assert "read only the shape of their input" in text and "fix:" not in text


def test_long_lists_are_capped_with_the_count(tmp_path):
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [3], name="x")
        tf.add_n([tf.round(x * float(index)) for index in range(30)], name="y")
    path = save(tmp_path, graph)
    text = run_cli("check", path, "--x", "x", "--y", "y", expect=1).stdout
    assert text.count("    fix: ") == 20 and "(+10 more; --json lists them all)" in text
    assert max(len(line) for line in text.splitlines()) < 300
    assert len(check_json(path, "--x", "x", "--y", "y", expect=1)["blockers"]) == 30


def checkpointed_model(tmp_path):
    """A .meta beside its checkpoint: y = sum(x * w), w saved as [1, 2, 3] (initializer: zeros)."""
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [3], name="x")
        w = v1.get_variable("w", initializer=tf.zeros([3]))
        tf.reduce_sum(x * w, name="y")
        saver = v1.train.Saver()
        with v1.Session() as session:
            session.run(w.assign([1.0, 2.0, 3.0]))
            saver.save(session, str(tmp_path / "model.ckpt"))
    return tmp_path / "model.ckpt.meta"


def test_check_restores_the_checkpoint_beside_a_meta(tmp_path):
    meta = checkpointed_model(tmp_path)
    report = check_json(meta, "--x", "x", "--y", "y", expect=0)
    assert report["variables"] == f"restored from {tmp_path / 'model.ckpt'}"
    assert report["gradients"][0]["norm"] == pytest.approx(np.sqrt(14), rel=1e-6)  # |w|


def test_check_without_a_checkpoint_says_the_variables_were_initialised(tmp_path):
    meta = checkpointed_model(tmp_path)
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "model.meta").write_bytes(meta.read_bytes())
    report = check_json(alone / "model.meta", "--x", "x", "--y", "y", expect=1)  # w = 0
    assert report["variables"].startswith("initialised") and report["gradients"][0]["status"] == "zero"
    report = check_json(alone / "model.meta", "--x", "x", "--y", "y", "--checkpoint", tmp_path / "model.ckpt",
                        expect=0)
    assert report["gradients"][0]["norm"] == pytest.approx(np.sqrt(14), rel=1e-6)


def queue_fed_graph(tmp_path):
    graph = tf.Graph()
    with graph.as_default():
        queue = v1.FIFOQueue(10, [tf.float32], shapes=[[3]])
        features = queue.dequeue(name="dequeue")
        tf.reduce_sum(features * 2.0, name="y")
    return save(tmp_path, graph)


def test_a_queue_nothing_fills_is_named_not_waited_on(tmp_path):
    path = queue_fed_graph(tmp_path)
    result = run_cli("check", path, "--y", "y", expect=2)
    assert "reads its input from an input pipeline" in result.stderr and "--x dequeue:0" in result.stderr
    result = run_cli("check", path, "--y", "y", "--x", "dequeue:0", "--feed", "dequeue:0=[1, 2, 3]")
    assert "finite" in result.stdout


def test_a_run_past_the_timeout_is_stopped(tmp_path):
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [3], name="x")
        _, total = tf.while_loop(lambda i, t: i < 10**9, lambda i, t: (i + 1, t + x), (0, tf.zeros([3])))
        tf.identity(total, name="y")
    report = check_json(save(tmp_path, graph), "--x", "x", "--y", "y", "--timeout", "0.5", expect=1)
    assert "took over 0.5 s and was stopped" in report["gradients"][0]["error"]


def image_model(tmp_path, flatten_to=None):
    """A convolution (VALID: at least 3x3) over an input of unknown size; with
    ``flatten_to``, a dense layer that needs exactly that many features."""
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, None, None, 3], name="x")
        h = tf.nn.conv2d(x, tf.ones([3, 3, 3, 2]), strides=1, padding="VALID")
        if flatten_to:
            h = tf.matmul(tf.reshape(h, [-1, flatten_to]), tf.ones([flatten_to, 1]))
        tf.reduce_sum(h, name="y")
    return save(tmp_path, graph)


def test_an_image_input_of_unknown_size_gets_an_image_sized_feed(tmp_path):
    report = check_json(image_model(tmp_path), "--y", "y", expect=0)
    assert report["feeds"] == {"x:0": "random float32 [1, 224, 224, 3]"}


def test_shape_sets_a_feed_and_a_wrong_guess_says_how_to_give_one(tmp_path):
    path = image_model(tmp_path, flatten_to=5 * 5 * 2)  # a 7x7 image: 5x5 after the convolution
    report = check_json(path, "--y", "y", expect=1)
    assert "unknown dimensions were guessed: x as [1, 224, 224, 3]" in report["gradients"][0]["error"]
    assert "--shape x=1,D1,D2,3, each Dn the size the model takes there" in report["gradients"][0]["error"]
    report = check_json(path, "--y", "y", "--shape", "x=1,7,7,3", expect=0)
    assert report["feeds"] == {"x:0": "random float32 [1, 7, 7, 3]"}
    assert "--shape 'x=1,a'" in run_cli("check", path, "--shape", "x=1,a", expect=2).stderr


def test_stale_output_shapes_do_not_stop_check(tmp_path, monkeypatch):
    real = v1.train.import_meta_graph

    def refusing(meta_graph_def, **kwargs):  # what TF 2.21 says of old checkpoints' hints
        if any("_output_shapes" in node.attr for node in meta_graph_def.graph_def.node):
            raise ValueError("Node 'x' has an _output_shapes attribute inconsistent with the GraphDef for output #0")
        return real(meta_graph_def, **kwargs)

    monkeypatch.setattr(v1.train, "import_meta_graph", refusing)
    meta = graphgrad.read_model(fixture("model.meta")).message
    meta.graph_def.node[0].attr["_output_shapes"].list.shape.add()
    path = tmp_path / "stale.meta"
    path.write_bytes(meta.SerializeToString())
    result = run_cli("check", path, expect=1)  # model.meta: a Sign, no gradient without an override
    assert "TensorFlow cannot load" not in result.stderr and "not ok: some x gets no usable gradient" in result.stdout


@pytest.mark.parametrize("args, message", [
    (["check", fixture("binary_net.pb"), "--x", "nosuch"], "--x nosuch: no tensor 'nosuch' in the graph"),
    (["check", fixture("binary_net.pb"), "--y", "dense2/logitz"], "close ones: dense2/logits:0"),
    (["check", fixture("binary_net.pb"), "--feed", "xx=1"], "--feed xx: no tensor 'xx' in the graph; close ones: x:0"),
    (["check", fixture("binary_net.pb"), "--feed", "x=[[1,2]]"], "--feed x has shape [1, 2], and x takes [None, 4]"),
    (["attribute", fixture("classifier.pb"), "--method", "gradient", "--input", fixture("classifier_rows.npy"),
      "--x", "xs", "-o", "OUT.npy"], "--x xs: no tensor 'xs' in the graph; close ones: x:0"),
    (["attribute", fixture("classifier.pb"), "--method", "gradient", "--input", fixture("classifier_rows.npy"),
      "-o", "/no/such/folder/out.npy"], "-o /no/such/folder/out.npy: no directory /no/such/folder"),
])
def test_usage_errors_are_found_before_tensorflow_is_imported(tmp_path, args, message):
    """A typo costs a read of the file, not TensorFlow's start-up (8-21 s on a loaded
    machine): run where importing TensorFlow fails, in the command's process or the
    child it runs TensorFlow in, the usage error still comes, and comes first."""
    args = [str(tmp_path / "out.npy") if arg == "OUT.npy" else str(arg) for arg in args]
    result = without_tensorflow(tmp_path, args)
    assert message in result.stderr and "needs TensorFlow" not in result.stderr
    assert result.returncode == 2


def without_tensorflow(tmp_path, args):
    """The real command in a process where ``import tensorflow`` fails."""
    import os
    import subprocess
    import sys

    fake = tmp_path / "no_tensorflow" / "tensorflow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('TensorFlow was imported')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(fake.parent)] + sys.path))
    return subprocess.run([sys.executable, "-m", "graphgrad", *args], capture_output=True, text=True, env=env)


def test_an_empty_y_is_named_as_such(tmp_path):
    """A detector that finds nothing on random input: y has no entries, so its
    gradient is zero for want of anything to differentiate, and check says so."""
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 4], name="x")
        scores = tf.reduce_sum(x * 2.0, axis=1)
        tf.identity(tf.boolean_mask(scores, scores > 1e9), name="y")
    path = save(tmp_path, graph)
    report = check_json(path, "--x", "x", "--y", "y", expect=1)
    assert report["gradients"][0]["status"] == "zero"
    assert report["gradients"][0]["why"].startswith("y has no entries for this input (shape [0])")
    assert "y has no entries for this input" in run_cli("check", path, "--x", "x", "--y", "y", expect=1).stdout


@pytest.mark.slow
def test_ops_grad_status_hides_what_tensorflow_writes_to_stderr():
    """Whatever TensorFlow's C++ side writes while it answers (here, a line written to
    file descriptor 2 in its place) is hidden, as check hides it; --debug shows it."""
    import subprocess
    import sys

    script = ("import os, sys\nimport graphgrad.tf.blockers as blockers\nreal = blockers.gradient_status\n"
              "def noisy(types):\n    os.write(2, b'I0000 cpu_feature_guard\\n')\n    return real(types)\n"
              "blockers.gradient_status = noisy\nfrom graphgrad.cli import main\nmain(sys.argv[1:])\n")
    for extra, shown in (([], False), (["--debug"], True)):
        result = subprocess.run([sys.executable, "-c", script, "ops", fixture("binary_net.pb"), "--grad-status",
                                 *extra], capture_output=True, text=True)
        assert result.returncode == 0 and "Sign" in result.stdout
        assert ("cpu_feature_guard" in result.stderr) == shown


def test_input_rows_of_the_wrong_shape_are_refused_before_tensorflow(tmp_path):
    rows = tmp_path / "rows.npy"
    np.save(rows, np.ones((2, 7), np.float32))
    result = without_tensorflow(tmp_path, ["attribute", fixture("classifier.pb"), "--method", "gradient", "--x", "x",
                                           "--input", str(rows), "--target", "0", "-o", str(tmp_path / "o.npy")])
    assert "--input has shape [2, 7], and x takes [None, 4]" in result.stderr and result.returncode == 2
