"""Model files that hold no TensorFlow graph, written by Keras and TensorFlow
themselves: graphgrad says what each one is and where the graph is."""

import os
import subprocess
import sys
import warnings

import pytest

from tf_helpers import run_cli, tf

# TensorFlow's TFLite converter runs in a process of its own: on TensorFlow 2.16 (with Keras 3.15) it aborts the
# whole process (LLVM ERROR), which must not take the test run down with it.
_CONVERT = """
import sys, keras, tensorflow as tf
model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
open(sys.argv[1], "wb").write(tf.lite.TFLiteConverter.from_keras_model(model).convert())
"""


@pytest.fixture(scope="module")
def other_formats(tmp_path_factory):
    keras = pytest.importorskip("keras", reason="needs Keras (comes with TensorFlow)")
    folder = tmp_path_factory.mktemp("formats")
    with warnings.catch_warnings():  # Keras's own (legacy .h5, NumPy 2 copies)
        warnings.simplefilter("ignore")
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
        model.save(folder / "model.h5")
        model.save(folder / "model.keras")
    converted = subprocess.run([sys.executable, "-c", _CONVERT, str(folder / "model.tflite")], capture_output=True,
                               text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), timeout=300)
    if converted.returncode:
        (folder / "tflite.failed").write_text(f"TensorFlow {tf.__version__}'s TFLite converter failed (exit "
                                              f"{converted.returncode}): {converted.stderr.strip()[-300:]}")
    tf.train.Checkpoint(v=tf.Variable(1.0)).write(str(folder / "ckpt"))
    return folder


WHAT_EACH_IS = {
    "model.h5": "it is an HDF5 file, such as a Keras .h5 model (layers and weights, no graph). To fix this",
    "model.keras": "it is a zip archive, such as a Keras 3 .keras model (layers and weights, no graph). To fix",
    "ckpt.index": "it is a checkpoint's variable index (no graph). To fix this, name the .meta file",
    "ckpt.data-00000-of-00001": "it is a checkpoint's variable values (no graph). To fix this",
}


@pytest.mark.parametrize("name, what", WHAT_EACH_IS.items(), ids=list(WHAT_EACH_IS))
def test_a_file_of_another_format_is_named(other_formats, name, what):
    # a TensorFlow Lite model is read as the graph rebuilt from it (tests/test_tflite.py)
    result = run_cli("ops", other_formats / name, expect=1)
    assert f"{other_formats / name} is not a TensorFlow graph file" in result.output and what in result.output


def test_ops_reads_a_tensorflow_lite_model_without_tensorflow(other_formats, tmp_path):
    """Its ends, signature, op types and quantisation, read by the tflite package's
    schema in a process that never imports TensorFlow; a damaged file is one line."""
    import json

    if (other_formats / "tflite.failed").exists():
        pytest.skip((other_formats / "tflite.failed").read_text())
    code = ("import sys, json; from graphgrad.cli import main; from click.testing import CliRunner; "
            f"r = CliRunner().invoke(main, ['ops', {str(other_formats / 'model.tflite')!r}, '--json']); "
            "assert 'tensorflow' not in sys.modules, 'tensorflow imported'; print(r.output)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    [summary] = json.loads(done.stdout)["files"]
    assert summary["kind"] == "tflite" and summary["op_types"] == {"FULLY_CONNECTED": 1}
    assert [(end["dtype"], end["shape"]) for end in summary["inputs"]] == [("float32", [-1, 3])]
    [(key, inputs, outputs)] = summary["signatures"]
    assert key == "serving_default" and len(inputs) == len(outputs) == 1
    text = run_cli("ops", other_formats / "model.tflite").stdout
    assert "(TensorFlow Lite, schema version 3): 1 subgraph(s), 1 operators" in text
    assert "rebuilt as a TensorFlow graph of" in text and "a TensorFlow Lite model carries none" in text
    damaged = tmp_path / "damaged.tflite"
    damaged.write_bytes((other_formats / "model.tflite").read_bytes()[:40])
    [line] = run_cli("ops", damaged, expect=1).stderr.strip().splitlines()
    assert "starts as a TensorFlow Lite model but its flatbuffer does not read" in line


def test_docs_list_every_tensorflow_lite_operator_the_rebuild_knows():
    """docs/tflite.md's list of operators rebuilt is the rebuild's own table."""
    import re

    from graphgrad.files.tflite_operators import REBUILDS

    page = open(os.path.join(os.path.dirname(__file__), "..", "docs", "tflite.md")).read()
    listed = page.split("Operators rebuilt (`graphgrad/files/tflite_operators.py`):")[1].split("; fused")[0]
    assert set(re.findall(r"[A-Z][A-Z0-9_]+", listed)) == set(REBUILDS)
