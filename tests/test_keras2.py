"""Keras 2 (tf_keras) SavedModels: its load_model rebuilds layers from their Python
config, so the overrides in the saved functions cannot survive it. `rewrite` says
so in a note; the routes that keep them are tested here."""

import shutil

import numpy as np
import pytest

from conftest import fixture
from tf_helpers import assert_close, run_cli, tf

import graphgrad
from graphgrad.jobs.api import KERAS2_LOAD_NOTE


def test_rewrite_of_a_keras2_saved_model_says_load_model_drops_the_overrides(tmp_path):
    plain, keras2 = tmp_path / "plain", tmp_path / "keras2"
    for folder in (plain, keras2):
        shutil.copytree(fixture("tf2_saved_model"), folder)
    (keras2 / "keras_metadata.pb").write_bytes(b"")
    said = run_cli("rewrite", keras2, "--op", "Sign=ste", "-o", tmp_path / "out2").output
    assert " ".join(KERAS2_LOAD_NOTE.split()) in " ".join(said.split())
    assert (tmp_path / "out2" / "keras_metadata.pb").is_file()
    assert "keras_metadata" not in run_cli("rewrite", plain, "--op", "Sign=ste", "-o", tmp_path / "out1").output


def keras2():
    """Keras 2: tf.keras itself up to TensorFlow 2.15, tf_keras beside Keras 3 after."""
    import keras

    if int(keras.__version__.split(".")[0]) < 3:
        return tf.keras
    return pytest.importorskip("tf_keras", reason="needs Keras 2: pip install tf_keras (.ci/run installs it)")


@pytest.fixture(scope="module")
def keras2_model(tmp_path_factory):
    tf_keras = keras2()
    folder = tmp_path_factory.mktemp("keras2")
    tf_keras.utils.set_random_seed(3)
    model = tf_keras.Sequential([tf_keras.layers.Dense(3, activation="relu", input_shape=(2,)),
                                 tf_keras.layers.Dense(1)])
    model.save(folder / "model", save_format="tf")
    kernel1, _, kernel2, _ = (w.numpy() for w in model.weights)
    run_cli("rewrite", folder / "model", "--op", "Relu=identity", "-o", folder / "patched")
    return tf_keras, folder / "patched", kernel1 @ kernel2  # dy/dx with every Relu an identity


def _gradient(call, x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = call(x)
    return tape.gradient(y, x).numpy()


def test_keras2_load_model_drops_the_overrides_as_the_note_says(keras2_model):
    tf_keras, patched, _ = keras2_model
    x = tf.constant([[1.0, -5.0]])
    rebuilt = tf_keras.models.load_model(patched, compile=False)
    with tf.GradientTape() as tape:
        tape.watch(x)
        hidden = rebuilt.layers[0](x)
    relu_mask = (hidden.numpy() > 0).astype(np.float32)  # the layers' own Relu gradient
    kernel1, _, kernel2, _ = (w.numpy() for w in rebuilt.weights)
    assert_close(_gradient(rebuilt, x), ((kernel1 * relu_mask) @ kernel2).T)


def test_keras2_saved_model_keeps_the_overrides_through_tf_saved_model_load(keras2_model):
    _, patched, identity_gradient = keras2_model
    graphgrad.register_gradients(str(patched))
    loaded = tf.saved_model.load(str(patched))
    assert_close(_gradient(loaded, tf.constant([[1.0, -5.0]])), identity_gradient.T)


def test_keras2_loaded_model_overridden_live(keras2_model):
    tf_keras, patched, identity_gradient = keras2_model
    model = tf_keras.models.load_model(patched, compile=False)
    call = tf.function(model).get_concrete_function(tf.TensorSpec([None, 2]))
    graphgrad.override(call, {"Relu": "identity"})
    assert_close(_gradient(call, tf.constant([[1.0, -5.0]])), identity_gradient.T)


def test_keras3_tfsm_layer_keeps_the_overrides_once_registered(tmp_path):
    keras = pytest.importorskip("keras", reason="needs Keras 3")
    if not hasattr(keras.layers, "TFSMLayer"):
        pytest.skip(f"Keras {keras.__version__} has no TFSMLayer (Keras 3 does)")
    run_cli("rewrite", fixture("tf2_saved_model"), "--op", "Sign=ste", "-o", tmp_path / "patched")
    graphgrad.register_gradients(str(tmp_path / "patched"))
    layer = keras.layers.TFSMLayer(str(tmp_path / "patched"), call_endpoint="serving_default")
    x = tf.constant([[0.5, -2.0, 0.3]])
    with tf.GradientTape() as tape:
        tape.watch(x)
        (y,) = layer(x).values()
    assert_close(tape.gradient(y, x).numpy(), [[2.0, 0.0, 2.0]])  # as docs/python-api.md's tf.saved_model.load
