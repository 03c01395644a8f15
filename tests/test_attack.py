"""graphgrad attack: L-infinity PGD on a graph file's own gradients; a masked gradient
said as such, BPDA through a bypassed graph, EOT on a randomised defence. The
defences are the digits CNN (trained on scikit-learn's digits) behind bit-depth
reduction, JPEG-like quantisation and random resizing and padding
(fixtures/make_fixtures.py digits)."""

import json

import numpy as np
import pytest

from conftest import fixture, run_cli
from tf_helpers import tf  # noqa: F401  (skips without TensorFlow)

IMAGES, LABELS = fixture("digits_test_images.npy"), fixture("digits_test_labels.npy")


def _attack(model, *args, y="classifier/logits", expect=0):
    result = run_cli("attack", model, "--y", y, "--input", IMAGES, "--labels", LABELS, "--steps", "40", "--json",
                     *args, expect=expect)
    return json.loads(result.stdout)


def test_without_bypass_the_bit_depth_defence_masks_the_gradient_and_the_attack_says_where(tmp_path):
    masked = _attack(fixture("digits_bit_depth.pb"), "--eps", "0.3", expect=3)  # 3: not an evaluation
    assert masked["valid"] is False and masked["clean_accuracy"] >= 0.95 and masked["attacked_accuracy"] >= 0.9
    [blocker] = masked["blockers"]
    assert blocker.startswith("defence/Round (Round)") and "fix: graphgrad rewrite" in blocker
    text = run_cli("attack", fixture("digits_bit_depth.pb"), "--y", "classifier/logits", "--input", IMAGES,
                   "--labels", LABELS, "--eps", "0.3", "--steps", "2", expect=3).stdout
    assert "the gradient is blocked, so the attack could not move" in text and "graphgrad bypass" in text


def test_with_bypass_bpda_breaks_the_bit_depth_and_jpeg_defences(tmp_path):
    for defence, output in [("digits_bit_depth.pb", "defence/squeezed:0"), ("digits_jpeg.pb", "defence/decoded:0")]:
        bypassed = tmp_path / f"bpda_{defence}"
        run_cli("bypass", fixture(defence), "--from", "x:0", "--to", output, "-o", bypassed)
        report = _attack(bypassed, "--eps", "0.3", "-o", tmp_path / "adversarial.npy")
        assert report["clean_accuracy"] >= 0.95 and report["attacked_accuracy"] < 0.1 and not report["blockers"]
        adversarial = np.load(tmp_path / "adversarial.npy")
        assert np.abs(adversarial - np.load(IMAGES)).max() <= 0.3 + 1e-6


def test_eot_breaks_the_randomised_defence():
    report = _attack(fixture("digits_resize_pad.pb"), "--eps", "0.3", "--eot", "10")
    assert report["attacked_accuracy"] < 0.2 and report["gradient_runs"] == 400


@pytest.mark.parametrize("labels, extra, words", [
    (np.zeros(3, np.int64), [], "--labels holds int64 of shape [3]: give one integer class index per image"),
    (np.full(100, 0.5), [], "--labels holds float64"),
    (np.full(100, 12), [], "--labels holds classes 12 to 12; y has 10 (0 to 9)"),
    (None, ["--eps", "-1"], "--eps -1.0: give the L-infinity radius"),
    (None, ["--eps", "0.1", "--x", "classifier/x"], "classifier/logits does not depend on classifier/x"),
    (None, ["--eps", "0.1", "--y", "classifier/probs"], "classifier/probs is a Softmax of them: give --y "
                                                        "classifier/logits"),
])
def test_bad_input_is_one_line(tmp_path, labels, extra, words):
    path = LABELS
    if labels is not None:
        path = tmp_path / "labels.npy"
        np.save(path, labels)
    result = run_cli("attack", fixture("digits_bit_depth.pb"), "--y", "classifier/logits", "--input", IMAGES,
                     "--labels", path, *(extra or ["--eps", "0.1"]), expect=None)
    assert result.exit_code in (1, 2) and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert words in result.stderr and "Traceback" not in result.stderr
