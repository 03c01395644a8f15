"""Layers inside a SavedModel's functions: a Keras 3 export's signature is a call into
the model's function, whose layers a run could not fetch. Class activation maps and
integrated gradients at a layer now take them (the path computed again with its
calls inlined): each equal to the same model frozen, and Grad-CAM to its definition
computed with a GradientTape on the Keras model."""

import json
import warnings

import numpy as np
import pytest

from conftest import run_cli
from tf_helpers import tf

import graphgrad

keras = pytest.importorskip("keras", reason="needs Keras (comes with TensorFlow)")
if int(keras.__version__.split(".")[0]) < 3:
    pytest.skip("a Keras 3 model.export is what these tests read; this TensorFlow comes with Keras "
                f"{keras.__version__}", allow_module_level=True)

LAST = "net_1/last_conv_1/Relu"  # the last convolution's activations, as the function's body names them


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A small Keras CNN (named, so its nodes' names do not depend on the models made
    before it), exported with ``model.export`` and frozen from that export with
    TensorFlow's convert_variables_to_constants_v2; three random rows."""
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    folder = tmp_path_factory.mktemp("keras3_cnn")
    with warnings.catch_warnings():  # Keras's own
        warnings.simplefilter("ignore")
        keras.utils.set_random_seed(5)
        model = keras.Sequential([keras.Input((12, 12, 3)),
                                  keras.layers.Conv2D(6, 3, activation="relu", name="first_conv"),
                                  keras.layers.Conv2D(5, 3, activation="relu", name="last_conv"),
                                  keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(4)], name="net")
        model.export(str(folder / "exported"), verbose=False)
    loaded = tf.saved_model.load(str(folder / "exported"))  # kept: the signature's variables live as long as it
    frozen = convert_variables_to_constants_v2(loaded.signatures["serving_default"])
    (folder / "frozen.pb").write_bytes(frozen.graph.as_graph_def().SerializeToString())
    rows = np.random.default_rng(0).uniform(0, 1, (3, 12, 12, 3)).astype(np.float32)
    np.save(folder / "rows.npy", rows)
    return folder, model, rows


def attributed(folder, model_file, name, *args):
    out = folder / f"{name}.npy"
    report = json.loads(run_cli("attribute", folder / model_file, "--input", folder / "rows.npy", "--target", "1",
                                "-o", out, "--json", *args).stdout)
    return np.load(out), report


@pytest.mark.parametrize("method", ["gradcam", "gradcam_pp", "layercam", "scorecam"])
def test_a_class_activation_map_of_a_keras_export_is_the_frozen_models(exported, method):
    folder, _, _ = exported
    got, report = attributed(folder, "exported", f"export_{method}", "--method", method)
    expected, frozen_report = attributed(folder, "frozen.pb", f"frozen_{method}", "--method", method)
    assert report["layer"] == f"StatefulPartitionedCall_1/inlined/StatefulPartitionedCall/inlined/{LAST}:0"
    assert frozen_report["layer"] == f"StatefulPartitionedCall/{LAST}:0"
    assert np.abs(expected).max() > 0
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())


def test_grad_cam_of_a_keras_export_is_its_definition_on_the_keras_model(exported):
    """ReLU(sum_k mean(dy/dA_k) A_k) at the last convolution, from a GradientTape on
    the Keras model, resized bilinearly to x's height and width."""
    folder, model, rows = exported
    got, _ = attributed(folder, "exported", "export_gradcam", "--method", "gradcam")
    inner = keras.Model(model.inputs, [model.get_layer("last_conv").output, model.outputs[0]])
    with tf.GradientTape() as tape:
        activations, logits = inner(tf.constant(rows))
        score = logits[:, 1]
    slope = tape.gradient(score, activations)
    cam = tf.nn.relu(tf.reduce_sum(tf.reduce_mean(slope, axis=[1, 2], keepdims=True) * activations, -1, keepdims=True))
    expected = tf.image.resize(cam, [12, 12], method="bilinear").numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())


def test_a_layer_inside_a_call_is_named_as_its_function_names_it(exported):
    """--layer takes a name inside the called function alone (one call holds it), or
    as the report shows it; a name no call holds is refused with the close names on
    the path, as the report would show them."""
    folder, _, _ = exported
    first = f"StatefulPartitionedCall_1/inlined/StatefulPartitionedCall/inlined/{LAST.replace('last', 'first')}"
    short, report = attributed(folder, "exported", "short", "--method", "gradcam", "--layer",
                               LAST.replace("last", "first"))
    full, full_report = attributed(folder, "exported", "full", "--method", "gradcam", "--layer", first)
    assert report["layer"] == full_report["layer"] == first + ":0"
    assert np.array_equal(short, full)
    default, _ = attributed(folder, "exported", "default", "--method", "gradcam")
    assert not np.allclose(short, default)  # the layer named, not the last one
    result = run_cli("attribute", folder / "exported", "--input", folder / "rows.npy", "--method", "gradcam",
                     "--layer", "net_1/lst_conv_1/Relu", "-o", folder / "none.npy", expect=2)
    assert "no tensor 'net_1/lst_conv_1/Relu' on the path, its calls inlined; close ones on the path: " \
        f"StatefulPartitionedCall_1/inlined/StatefulPartitionedCall/inlined/{LAST}:0" in result.stderr
    assert "graphgrad_inlined" not in result.stderr  # the copy's scope, which no report shows


def test_integrated_gradients_at_a_layer_inside_a_call_are_the_frozen_models(exported):
    folder, _, _ = exported
    layer = LAST.replace("last", "first")
    got, report = attributed(folder, "exported", "export_ig", "--method", "integrated_gradients(steps=16)",
                             "--layer", layer)
    expected, frozen_report = attributed(folder, "frozen.pb", "frozen_ig", "--method", "integrated_gradients(steps=16)",
                                         "--layer", f"StatefulPartitionedCall/{layer}")
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6 * np.abs(expected).max())
    # completeness against y with the layer at its baseline's values, as on the frozen model
    for check, frozen in zip(report["completeness"], frozen_report["completeness"], strict=True):
        assert check["output_difference"] == pytest.approx(frozen["output_difference"], rel=1e-5)
        assert check["attribution_sum"] == pytest.approx(frozen["attribution_sum"], rel=1e-5)


def test_the_explainer_takes_a_layer_inside_a_call(exported):
    folder, _, rows = exported
    with graphgrad.Explainer(str(folder / "exported"), "gradcam") as explainer:
        got, report = explainer.explain(rows, target=1)
    assert report.layer.endswith(f"{LAST}:0")
    expected, _ = attributed(folder, "frozen.pb", "frozen_gradcam", "--method", "gradcam")
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())
