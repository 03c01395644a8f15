"""Model files that hold no TensorFlow graph, written by Keras and TensorFlow
themselves: graphgrad says what each one is and where the graph is."""

import warnings

import pytest

from tf_helpers import run_cli, tf


@pytest.fixture(scope="module")
def other_formats(tmp_path_factory):
    keras = pytest.importorskip("keras", reason="needs Keras (comes with TensorFlow)")
    folder = tmp_path_factory.mktemp("formats")
    with warnings.catch_warnings():  # Keras's own (legacy .h5, NumPy 2 copies)
        warnings.simplefilter("ignore")
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
        model.save(folder / "model.h5")
        model.save(folder / "model.keras")
        (folder / "model.tflite").write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())
    tf.train.Checkpoint(v=tf.Variable(1.0)).write(str(folder / "ckpt"))
    return folder


WHAT_EACH_IS = {
    "model.h5": "it is an HDF5 file, such as a Keras .h5 model (layers and weights, no graph). To fix this",
    "model.keras": "it is a zip archive, such as a Keras 3 .keras model (layers and weights, no graph). To fix",
    "model.tflite": "it is a TensorFlow Lite model, which has no gradients to override. To fix this",
    "ckpt.index": "it is a checkpoint's variable index (no graph). To fix this, name the .meta file",
    "ckpt.data-00000-of-00001": "it is a checkpoint's variable values (no graph). To fix this",
}


@pytest.mark.parametrize("name, what", WHAT_EACH_IS.items(), ids=list(WHAT_EACH_IS))
def test_a_file_of_another_format_is_named(other_formats, name, what):
    result = run_cli("ops", other_formats / name, expect=1)
    assert f"{other_formats / name} is not a TensorFlow graph file" in result.stderr and what in result.stderr
