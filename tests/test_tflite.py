"""TensorFlow Lite models read as the TensorFlow graph graphgrad rebuilds from them
(graphgrad/files/tflite_graph.py): outputs equal to TensorFlow Lite's interpreter
running the .tflite, gradients equal to the SavedModel's it was converted from,
and every command taking the .tflite; what is not rebuilt refused by name."""

import json
import re
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import fixture, run_cli
from tf_helpers import tf, v1

keras = pytest.importorskip("keras", reason="needs Keras (comes with TensorFlow)")

# The converter runs in a process of its own (on TensorFlow 2.16 it aborts the process: LLVM ERROR); it writes
# each model's SavedModel, its .tflite in float, with float16 weights, and int8, and a Keras model's rows.
_CONVERT = r"""
import sys, numpy as np, tensorflow as tf, keras
folder = sys.argv[1]
L = keras.layers
keras.utils.set_random_seed(0)
models = {
    "mlp": keras.Sequential([keras.Input((7,)), L.Dense(12, activation="sigmoid"), L.Dense(5, activation="tanh"),
                             L.Dense(3)]),
    "cnn": keras.Sequential([keras.Input((16, 16, 3)), L.Conv2D(6, 3, activation="relu"), L.MaxPooling2D(),
                             L.Conv2D(8, 3, padding="same", activation="relu6"),
                             L.DepthwiseConv2D(3, padding="same", depth_multiplier=2), L.AveragePooling2D(2),
                             L.Flatten(), L.Dense(10, activation="leaky_relu"), L.Dense(4)]),
    "mobilenet": keras.applications.MobileNetV2(input_shape=(32, 32, 3), weights=None, classes=5, alpha=0.35,
                                                classifier_activation=None),
}
import inspect
for name, model in models.items():
    quiet = {"verbose": False} if "verbose" in inspect.signature(model.export).parameters else {}  # Keras 3's
    model.export(f"{folder}/{name}_saved", **quiet)
    shape = model.inputs[0].shape[1:]
    for suffix in ("float", "float16", "int8", "int8io", "dynamic"):
        converter = tf.lite.TFLiteConverter.from_saved_model(f"{folder}/{name}_saved")
        if suffix != "float":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if suffix == "float16":
            converter.target_spec.supported_types = [tf.float16]
        if suffix.startswith("int8"):  # full-integer, its scales from a representative dataset
            converter.representative_dataset = lambda: (
                [np.random.default_rng(i).normal(size=(1, *shape)).astype(np.float32)] for i in range(8))
        if suffix == "int8io":  # and int8 inputs and outputs
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            converter.inference_input_type = converter.inference_output_type = tf.int8
        open(f"{folder}/{name}_{suffix}.tflite", "wb").write(converter.convert())

# Operators the Keras models above do not make: GATHER, CONCATENATION, PADV2, a clip (fused RELU_N1_TO_1 or
# MINIMUM/MAXIMUM), a matrix product on a 3-D input whose RESHAPE leaves two sizes open, and a second signature.
class Operators(tf.Module):
    def __init__(self):
        self.weights = tf.constant(np.random.default_rng(2).normal(size=(6, 4)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([None, None, 6])])
    def serve(self, x):
        picked = tf.gather(x, [0, 2], axis=1)
        padded = tf.pad(x[:, :2], [[0, 0], [1, 0], [0, 0]], constant_values=0.5)
        joined = tf.concat([picked, padded], axis=1)
        return tf.clip_by_value(tf.tensordot(joined, self.weights, 1), -1.0, 1.0)

    @tf.function(input_signature=[tf.TensorSpec([None, None, 6])])
    def other(self, x):
        return -x


# Full-integer models of what the simulation says it cannot follow, or must say more of: a uint8 softmax classifier,
# a bilinear upsampling (fixed-point interpolation), 16x8 quantisation (int16 activations).
extras = {"classifier": keras.Sequential([keras.Input((6,)), L.Dense(8, activation="relu"),
                                          L.Dense(4, activation="softmax")]),
          "upsampling": keras.Sequential([keras.Input((4, 4, 2)), L.Conv2D(3, 1),
                                          L.UpSampling2D(interpolation="bilinear")])}
for name, model in extras.items():
    model.export(f"{folder}/{name}_saved", **quiet)
for name, suffix, shape in (("classifier", "uint8io", (6,)), ("upsampling", "int8", (4, 4, 2)),
                            ("classifier", "int16", (6,))):
    converter = tf.lite.TFLiteConverter.from_saved_model(f"{folder}/{name}_saved")
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: (
        [np.random.default_rng(i).normal(size=(1, *shape)).astype(np.float32)] for i in range(8))
    if suffix == "uint8io":
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = converter.inference_output_type = tf.uint8
    if suffix == "int16":
        sixteen = tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8
        converter.target_spec.supported_ops = [sixteen]
    open(f"{folder}/{name}_{suffix}.tflite", "wb").write(converter.convert())

module = Operators()
tf.saved_model.save(module, f"{folder}/operators_saved", signatures={
    "serving_default": module.serve.get_concrete_function(), "other": module.other.get_concrete_function()})
converter = tf.lite.TFLiteConverter.from_saved_model(f"{folder}/operators_saved", signature_keys=[
    "other", "serving_default"])
open(f"{folder}/operators_float.tflite", "wb").write(converter.convert())
"""
MODELS = {"mlp": (7,), "cnn": (16, 16, 3), "mobilenet": (32, 32, 3)}


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tflite")
    done = subprocess.run([sys.executable, "-c", _CONVERT, str(folder)], capture_output=True, text=True,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), timeout=600)
    if done.returncode:
        pytest.skip(f"TensorFlow {tf.__version__}'s TFLite converter failed (exit {done.returncode}): "
                    f"{done.stderr.strip()[-300:]}")
    for name, shape in {**MODELS, "operators": (5, 6)}.items():
        np.save(folder / f"{name}_rows.npy", np.random.default_rng(1).normal(size=(3, *shape)).astype(np.float32))
    return folder


def interpreted(path, rows):
    """What TensorFlow Lite's interpreter computes of ``rows`` (LiteRT's, where it is installed)."""
    return interpreted_all(path, [rows])[0]


def interpreted_all(path, feeds):
    """Every output the interpreter computes of ``feeds`` (one array per input; integer
    inputs fed their values cast to the input's type), in the model's order."""
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        Interpreter = tf.lite.Interpreter
    interpreter = Interpreter(model_path=str(path))
    for given, rows in zip(interpreter.get_input_details(), feeds, strict=True):
        interpreter.resize_tensor_input(given["index"], list(rows.shape))
    interpreter.allocate_tensors()
    for given, rows in zip(interpreter.get_input_details(), feeds, strict=True):
        interpreter.set_tensor(given["index"], rows.astype(given["dtype"]))
    interpreter.invoke()
    return [interpreter.get_tensor(wanted["index"]) for wanted in interpreter.get_output_details()]


def rebuilt(path, rows, gradient=False):
    """The rebuilt graph's y of ``rows`` (or d sum(y[:, 0]) / dx), read as every command reads the .tflite."""
    return rebuilt_all(path, [rows], gradient)[0]


def rebuilt_all(path, feeds, gradient=False):
    """The rebuilt graph's outputs of ``feeds`` (or d sum(y[:, 0]) / dx of its one
    output, through graphgrad's overrides), read as every command reads the .tflite."""
    import graphgrad
    from graphgrad.files.reading import read_model
    from graphgrad.files.tflite_graph import rebuilt_ends

    graph_def = read_model(str(path)).message
    x_names, y_names = rebuilt_ends(graph_def)  # the .tflite's ends as ops lists them, less ":0"
    graph = tf.Graph()
    with graph.as_default():
        v1.import_graph_def(v1.GraphDef.FromString(graph_def.SerializeToString()), name="")
        graphgrad.register_gradients(graph)
        xs = [graph.get_tensor_by_name(f"{name}:0") for name in x_names]
        ys = [graph.get_tensor_by_name(f"{name}:0") for name in y_names]
        fetched = v1.gradients(ys[0][:, 0], xs) if gradient else ys
        with v1.Session(graph=graph) as session:
            return session.run(fetched, dict(zip(xs, [np.asarray(rows, np.float32) for rows in feeds], strict=True)))


@pytest.mark.parametrize("precision", ["float", "float16"])
@pytest.mark.parametrize("name", MODELS)
def test_the_rebuilt_graph_computes_what_the_interpreter_computes(converted, name, precision):
    path, rows = converted / f"{name}_{precision}.tflite", np.load(converted / f"{name}_rows.npy")
    expected = interpreted(path, rows)
    np.testing.assert_allclose(rebuilt(path, rows), expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())


@pytest.mark.parametrize("name", MODELS)
def test_the_rebuilt_graphs_gradient_is_the_saved_models(converted, name):
    """d y[:, 0] / dx of the float .tflite, rebuilt, against a GradientTape on the
    SavedModel it was converted from."""
    rows = np.load(converted / f"{name}_rows.npy")
    loaded = tf.saved_model.load(str(converted / f"{name}_saved"))
    x = tf.constant(rows)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = loaded.serve(x)[:, 0]
    expected = tape.gradient(y, x).numpy()
    got = rebuilt(converted / f"{name}_float.tflite", rows, gradient=True)
    assert np.abs(expected).max() > 0
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())


def test_operators_the_keras_models_do_not_make_are_rebuilt_with_their_gradient(converted):
    """GATHER, CONCATENATION, PADV2, a clip and a product on a 3-D input of two open
    sizes (which the Reshape must compute), from the signature the model serves
    (serving_default, not its first): outputs and gradients as the SavedModel's."""
    rows = np.load(converted / "operators_rows.npy")
    path = converted / "operators_float.tflite"
    np.testing.assert_allclose(rebuilt(path, rows), interpreted_signature(path, rows), rtol=1e-5, atol=1e-6)
    loaded = tf.saved_model.load(str(converted / "operators_saved"))
    x = tf.constant(rows)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = loaded.serve(x)
        first = y[:, 0]
    np.testing.assert_allclose(rebuilt(path, rows), y.numpy(), rtol=1e-5, atol=1e-6)
    expected = tape.gradient(first, x).numpy()
    assert np.abs(expected).max() > 0
    np.testing.assert_allclose(rebuilt(path, rows, gradient=True), expected, rtol=1e-5, atol=1e-6)


def interpreted_signature(path, rows, key="serving_default"):
    interpreter = tf.lite.Interpreter(model_path=str(path))
    [output] = interpreter.get_signature_runner(key)(x=rows).values()
    return output


def _quantised_rows(path, rows):
    """``rows`` as an int8-input model takes them: quantised to its input's steps."""
    interpreter = tf.lite.Interpreter(model_path=str(path))
    scale, zero_point = interpreter.get_input_details()[0]["quantization"]
    return np.clip(np.round(rows / scale) + zero_point, -128, 127).astype(np.int8)


@pytest.mark.parametrize("name", MODELS)
def test_an_int8_models_rebuild_computes_what_the_interpreter_computes(converted, name):
    """Full-integer models, simulated in float: with float inputs and outputs, and with
    int8 ones (fed and given as their integers): measured bit for bit on all three."""
    rows = np.load(converted / f"{name}_rows.npy")
    path = converted / f"{name}_int8.tflite"
    expected = interpreted(path, rows)
    np.testing.assert_allclose(rebuilt(path, rows), expected, rtol=0, atol=1e-6 * np.abs(expected).max())
    path = converted / f"{name}_int8io.tflite"
    integers = _quantised_rows(path, rows)
    expected = interpreted(path, integers)
    got = rebuilt(path, integers.astype(np.float32))
    assert np.abs(got - expected).max() <= 1  # the promise: within one step
    assert np.mean(got == expected) >= 0.99  # measured: every one


def _straight_through_by_hand(graph_def):
    """The rebuilt graph with quantisation's straight-through estimator written in plain
    TensorFlow: each Round(a) as a + StopGradient(Round(a) - a), each tie-breaking
    Sign behind a StopGradient."""
    from graphgrad.names import ATTR

    edited = v1.GraphDef()
    for node in v1.GraphDef.FromString(graph_def.SerializeToString()).node:
        if ATTR in node.attr and node.op == "Sign":
            sign = edited.node.add(name=node.name + "/by_hand", op="Sign", input=node.input)
            sign.attr["T"].CopyFrom(node.attr["T"])
            node.op, node.input[:] = "StopGradient", [sign.name]
        elif ATTR in node.attr and node.op == "Round":
            [given] = node.input
            rounded = edited.node.add(name=node.name + "/by_hand", op="Round", input=[given])
            difference = edited.node.add(name=node.name + "/by_hand_difference", op="Sub", input=[rounded.name, given])
            stopped = edited.node.add(name=node.name + "/by_hand_stopped", op="StopGradient", input=[difference.name])
            for made in (rounded, difference, stopped):
                made.attr["T"].CopyFrom(node.attr["T"])
            node.op, node.input[:] = "AddV2", [given, stopped.name]
        if ATTR in node.attr:
            del node.attr[ATTR]
        edited.node.add().CopyFrom(node)
    return edited


@pytest.mark.parametrize("name", ["mlp", "cnn"])  # (the untrained MobileNetV2's int8 logits are one step: no slope)
def test_an_int8_models_gradient_is_the_straight_through_estimators(converted, name):
    """dy/dx through the rebuilt int8 graph, by graphgrad's overrides, against the same
    graph with the estimator written by hand; nonzero."""
    from graphgrad.files.reading import read_model
    from graphgrad.files.tflite_graph import rebuilt_ends

    rows = np.load(converted / f"{name}_rows.npy")
    path = converted / f"{name}_int8.tflite"
    got = rebuilt(path, rows, gradient=True)
    graph_def = read_model(str(path)).message
    [x_name], [y_name] = rebuilt_ends(graph_def)
    graph = tf.Graph()
    with graph.as_default():
        v1.import_graph_def(_straight_through_by_hand(graph_def), name="")
        x, y = graph.get_tensor_by_name(f"{x_name}:0"), graph.get_tensor_by_name(f"{y_name}:0")
        with v1.Session(graph=graph) as session:
            expected = session.run(v1.gradients(y[:, 0], [x])[0], {x: rows})
    assert np.abs(expected).max() > 0
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7 * np.abs(expected).max())


def test_check_and_ops_on_an_int8_model_show_the_estimator(converted):
    """The gradient reaches x through the estimator and through nothing else (none
    without the overrides); ops lists the overrides the rebuild wrote."""
    path = converted / "cnn_int8io.tflite"
    checked = run_cli("check", path).stdout
    assert checked.endswith("\nok\n") and "blockers" not in checked
    assert re.search(r"yes\s+finite\s+[0-9.e+-]+\s+none", checked)
    listed = run_cli("ops", path).stdout
    assert "Round graphgrad/identity x" in listed and "straight-through estimator" in listed


def test_convert_to_a_folder_writes_a_savedmodel_with_the_models_signature(converted, tmp_path):
    """A SavedModel of the rebuilt graph that TensorFlow loads, its serving_default
    the .tflite's own signature (its names for the ends), computing what the
    interpreter computes; graphgrad reads it as any SavedModel."""
    path, rows = converted / "cnn_float.tflite", np.load(converted / "cnn_rows.npy")
    run_cli("convert", path, "-o", tmp_path / "saved")
    served = tf.saved_model.load(str(tmp_path / "saved")).signatures["serving_default"]
    [key] = served.structured_input_signature[1]
    signature = tf.lite.Interpreter(model_path=str(path)).get_signature_list()["serving_default"]
    assert [key] == signature["inputs"] and list(served.structured_outputs) == signature["outputs"]
    got = served(**{key: tf.constant(rows)})["output_0"].numpy()
    expected = interpreted(path, rows)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())
    assert run_cli("check", tmp_path / "saved", "--target", "0").stdout.endswith("\nok\n")
    refused = run_cli("convert", path, "-o", tmp_path / "rebuilt.txt", expect=2)
    assert "a SavedModel (a folder)" in refused.stderr and not (tmp_path / "rebuilt.txt").exists()


def test_verify_prints_each_outputs_largest_difference_from_the_interpreter(converted, tmp_path):
    """check --verify (and ops --verify) runs the rebuilt graph and the interpreter on
    check's feeds: 0 on the int8 model (bit for bit), under 1e-5 of the output on
    float16 weights; refused in one line on a graph that is not a .tflite."""
    [verified] = json.loads(run_cli("check", converted / "cnn_int8io.tflite", "--verify", "--batch", "4",
                                    "--json").stdout)["verified"]
    assert verified["output"] == "StatefulPartitionedCall_1" and verified["largest"] == 0
    printed = run_cli("check", converted / "cnn_float16.tflite", "--verify").stdout
    found = re.search(r"StatefulPartitionedCall_1 differs by at most \S+ \((\S+) of its largest magnitude\)", printed)
    assert found and float(found.group(1)) < 1e-5
    [listed] = json.loads(run_cli("ops", converted / "cnn_int8io.tflite", "--verify", "--json").stdout)["files"]
    assert [(found["output"], found["largest"]) for found in listed["verified"]] == [("StatefulPartitionedCall_1", 0)]
    run_cli("convert", converted / "cnn_float.tflite", "-o", tmp_path / "cnn.pb")
    for command in ("check", "ops"):
        refused = run_cli(command, tmp_path / "cnn.pb", "--verify", expect=2)
        assert "is not a .tflite" in refused.stderr


def test_attack_on_an_int8_model_is_rescored_on_the_interpreter(converted, tmp_path):
    """The adversarial images the attack writes, judged by the interpreter running the
    .tflite: the figures attack reports are the ones the interpreter gives them."""
    path = converted / "cnn_int8.tflite"
    images = np.random.default_rng(5).uniform(0, 1, size=(12, 16, 16, 3)).astype(np.float32)
    labels = interpreted(path, images).argmax(-1)
    np.save(tmp_path / "images.npy", images)
    np.save(tmp_path / "labels.npy", labels)
    report = json.loads(run_cli("attack", path, "--input", tmp_path / "images.npy", "--labels", tmp_path / "labels.npy",
                                "--eps", "0.05", "--steps", "10", "-o", tmp_path / "adversarial.npy", "--json",
                                expect=None).stdout)
    adversarial = np.load(tmp_path / "adversarial.npy")
    assert report["interpreter"]["clean"] == 1.0
    assert report["interpreter"]["attacked"] == np.mean(interpreted(path, adversarial).argmax(-1) == labels)
    assert report["interpreter"]["attacked"] < 1.0


def test_check_on_a_uint8_softmax_says_to_choose_a_class_and_its_fixes_work(converted):
    """The sum of a quantised softmax has no gradient, as a float one's: check says so
    (not a masked region to bypass), feeds the values the input's quantisation takes,
    and each fix it prints makes the check pass."""
    path = converted / "classifier_uint8io.tflite"
    result = run_cli("check", path, expect=1)
    assert "its entries sum to 1" in result.stdout and "bypass" not in result.stdout
    assert "in [0, 255] (the values its quantisation takes)" in result.stdout
    logits = re.search(r"differentiate the logits, --y (\S+)", result.stdout).group(1)
    assert run_cli("check", path, "--y", logits).stdout.endswith("\nok\n")
    assert run_cli("check", path, "--target", "2").stdout.endswith("\nok\n")


@pytest.mark.parametrize("name, said", [
    ("upsampling_int8", "RESIZE_BILINEAR"), ("classifier_int16", "int16 (16x8 quantisation)")])
def test_integer_arithmetic_the_simulation_does_not_follow_is_refused_by_name(converted, name, said):
    result = run_cli("check", converted / f"{name}.tflite", expect=1)
    assert said in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_attack_on_a_softmax_output_asks_for_the_logits_and_the_fix_is_rescored(converted, tmp_path):
    """The probabilities a .tflite gives (behind its quantisation and Identity) are
    refused as the attack's logits, naming them; attacked there, as told, the
    interpreter judges by the model's own output's largest entry."""
    path = converted / "classifier_uint8io.tflite"
    images = np.random.default_rng(4).integers(0, 256, size=(10, 6)).astype(np.float32)
    labels = interpreted(path, images).argmax(-1)
    np.save(tmp_path / "images.npy", images)
    np.save(tmp_path / "labels.npy", labels)
    given = ["attack", path, "--input", tmp_path / "images.npy", "--labels", tmp_path / "labels.npy", "--eps", "40",
             "--steps", "10", "--range", "0,255"]
    refused = run_cli(*given, expect=2)
    logits = re.search(r"passes on the softmax \S+: give --y (\S+)", refused.stderr).group(1)
    report = json.loads(run_cli(*given, "--y", logits, "-o", tmp_path / "adversarial.npy", "--json",
                                expect=None).stdout)
    adversarial = np.load(tmp_path / "adversarial.npy")
    assert report["interpreter"]["output"] == "StatefulPartitionedCall_1" and report["interpreter"]["clean"] == 1.0
    assert report["interpreter"]["attacked"] == np.mean(interpreted(path, adversarial).argmax(-1) == labels)


def test_every_command_reads_a_tflite_as_its_rebuilt_graph(converted, tmp_path):
    """convert, check, attribute, show and rewrite (written as a frozen GraphDef, whose
    override then applies); a .tflite is never written into."""
    path = converted / "cnn_float.tflite"
    listing = json.loads(run_cli("convert", path, "-o", tmp_path / "cnn.pb", "--json").stdout)
    [summary] = json.loads(run_cli("ops", path, "--json").stdout)["files"]
    assert [name + ":0" for name in listing["inputs"]] == [end["name"] for end in summary["inputs"]]
    assert [name + ":0" for name in listing["outputs"]] == [end["name"] for end in summary["outputs"]]
    assert run_cli("check", path, "--target", "1").stdout.endswith("\nok\n")
    rows = converted / "cnn_rows.npy"
    run_cli("attribute", path, "--method", "gradient", "--input", rows, "--target", "0", "-o", tmp_path / "g.npy")
    np.testing.assert_allclose(np.load(tmp_path / "g.npy"), rebuilt(path, np.load(rows), gradient=True), rtol=1e-6)
    run_cli("show", path, "-o", tmp_path / "path.dot")
    assert "Conv2D" in (tmp_path / "path.dot").read_text()
    run_cli("rewrite", path, "--op", "Relu=identity", "-o", tmp_path / "rewritten.pb")
    [rewritten] = json.loads(run_cli("ops", tmp_path / "rewritten.pb", "--json").stdout)["files"]
    assert {override["value"] for override in rewritten["overrides"]} == {"graphgrad/identity"}
    refused = run_cli("rewrite", path, "--op", "Relu=identity", "--in-place", expect=1)
    assert "cannot carry gradients" in refused.stderr and "-o OUT.pb" in refused.stderr
    assert run_cli("diff", tmp_path / "cnn.pb", path).stdout.strip().endswith("no differences")


def test_a_float16_fixtures_rebuild_needs_no_tensorflow_and_is_listed_by_ops():
    [summary] = json.loads(run_cli("ops", fixture("digits_float16.tflite"), "--json").stdout)["files"]
    assert summary["rebuilt"].startswith("rebuilt as a TensorFlow graph of 14 nodes (x: serving_default_keras_tensor")


def test_what_is_not_rebuilt_is_refused_by_name(converted, tmp_path):
    """A dynamic-range model (integer weights, activations quantised as it runs, not
    simulated) and an operator graphgrad does not rebuild: one line each, before
    anything runs, and ops says why."""
    result = run_cli("check", converted / "cnn_dynamic.tflite", expect=1)
    assert "dynamic-range quantisation" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "not rebuilt: " in run_cli("ops", converted / "cnn_dynamic.tflite").stdout
    cumulative = tmp_path / "cumsum.tflite"
    module = tf.Module()
    module.f = tf.function(lambda x: tf.math.cumsum(x, axis=1), input_signature=[tf.TensorSpec([None, 4])])
    cumulative.write_bytes(tf.lite.TFLiteConverter.from_concrete_functions(
        [module.f.get_concrete_function()], module).convert())
    assert "no such file" in run_cli("convert", tmp_path / "absent.tflite", "-o", tmp_path / "a.pb", expect=2).stderr
    result = run_cli("convert", cumulative, "-o", tmp_path / "c.pb", expect=1)
    assert "does not rebuild the TensorFlow Lite operator(s) CUMSUM" in result.stderr
    assert not (tmp_path / "c.pb").exists()


def test_the_estimators_rewritten_as_the_docs_say(tmp_path):
    """docs/tflite.md: rewrite turns a Round's estimator off with zero (the input's
    rounding off, no gradient reaches x), and ste(clip=2), clipping at 2 steps,
    leaves none on the fixture; check says both."""
    for rule, name in (("serving_default_keras_tensor/Round=zero", "off.pb"), ("*/Round=ste(clip=2)", "ste.pb")):
        run_cli("rewrite", fixture("digits_int8.tflite"), "--node", rule, "--force", "-o", tmp_path / name)
        assert run_cli("check", tmp_path / name, expect=1).stdout.endswith("not ok: some x gets no usable gradient\n")
    assert run_cli("check", fixture("digits_int8.tflite")).stdout.endswith("\nok\n")
