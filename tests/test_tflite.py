"""TensorFlow Lite models read as the TensorFlow graph graphgrad rebuilds from them
(graphgrad/files/tflite_graph.py): outputs equal to TensorFlow Lite's interpreter
running the .tflite, gradients equal to the SavedModel's it was converted from,
and every command taking the .tflite; what is not rebuilt refused by name."""

import json
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
    for suffix, settings in (("float", {}), ("float16", {"supported_types": [tf.float16]}), ("int8", None)):
        converter = tf.lite.TFLiteConverter.from_saved_model(f"{folder}/{name}_saved")
        if settings is None:
            shape = model.inputs[0].shape[1:]
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
            converter.representative_dataset = lambda: (
                [np.random.default_rng(i).normal(size=(1, *shape)).astype(np.float32)] for i in range(8))
        elif settings:
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
            converter.target_spec.supported_types = settings["supported_types"]
        open(f"{folder}/{name}_{suffix}.tflite", "wb").write(converter.convert())
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
    for name, shape in MODELS.items():
        np.save(folder / f"{name}_rows.npy", np.random.default_rng(1).normal(size=(3, *shape)).astype(np.float32))
    return folder


def interpreted(path, rows):
    """What TensorFlow Lite's interpreter computes of ``rows`` (LiteRT's, where it is installed)."""
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        Interpreter = tf.lite.Interpreter
    interpreter = Interpreter(model_path=str(path))
    given, wanted = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    interpreter.resize_tensor_input(given["index"], list(rows.shape))
    interpreter.allocate_tensors()
    interpreter.set_tensor(given["index"], rows)
    interpreter.invoke()
    return interpreter.get_tensor(wanted["index"])


def rebuilt(path, rows, gradient=False):
    """The rebuilt graph's y of ``rows`` (or d sum(y[:, 0]) / dx), read as every command reads the .tflite."""
    from graphgrad.files.reading import read_model
    from graphgrad.files.tflite_graph import rebuilt_ends

    graph_def = read_model(str(path)).message
    [x_name], [y_name] = rebuilt_ends(graph_def)  # the .tflite's ends as ops lists them, less ":0"
    graph = tf.Graph()
    with graph.as_default():
        v1.import_graph_def(v1.GraphDef.FromString(graph_def.SerializeToString()), name="")
        x, y = graph.get_tensor_by_name(f"{x_name}:0"), graph.get_tensor_by_name(f"{y_name}:0")
        fetched = v1.gradients(y[:, 0], [x])[0] if gradient else y
        with v1.Session(graph=graph) as session:
            return session.run(fetched, {x: rows})


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
    """An int8 model (integer arithmetic, not rebuilt yet) and an operator graphgrad
    does not rebuild: one line each, before anything runs, and ops says why."""
    result = run_cli("check", converted / "cnn_int8.tflite", expect=1)
    assert "quantised (integer) tensor(s)" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "not rebuilt: " in run_cli("ops", converted / "cnn_int8.tflite").stdout
    cumulative = tmp_path / "cumsum.tflite"
    module = tf.Module()
    module.f = tf.function(lambda x: tf.math.cumsum(x, axis=1), input_signature=[tf.TensorSpec([None, 4])])
    cumulative.write_bytes(tf.lite.TFLiteConverter.from_concrete_functions(
        [module.f.get_concrete_function()], module).convert())
    assert "no such file" in run_cli("convert", tmp_path / "absent.tflite", "-o", tmp_path / "a.pb", expect=2).stderr
    result = run_cli("convert", cumulative, "-o", tmp_path / "c.pb", expect=1)
    assert "does not rebuild the TensorFlow Lite operator(s) CUMSUM" in result.stderr
    assert not (tmp_path / "c.pb").exists()
