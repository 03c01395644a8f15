"""XRAI: integrated gradients ranked by image regions, as PAIR's saliency 0.2.1
computes it (against its own XRAI, downloaded, on a CNN built here), and what the
map promises on any model: each pixel holds the attribution density of the pixels
its region added."""

import json
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from conftest import run_cli
from tf_helpers import graph_file, tf, v1

import graphgrad
from graphgrad.methods.batching import Batching
from graphgrad.methods.xrai import xrai_maps

SIZE = 32


def small_cnn():
    """x (N, 32, 32, 3) -> two ReLU convolutions, a max pool, a mean, 4 logits (random weights)."""
    rng = np.random.default_rng(1)
    x = v1.placeholder(tf.float32, [None, SIZE, SIZE, 3], name="x")
    h = tf.nn.relu(tf.nn.conv2d(x, rng.normal(0, 0.3, (3, 3, 3, 8)).astype(np.float32), 1, "SAME"))
    h = tf.nn.max_pool2d(h, 2, 2, "VALID")
    h = tf.nn.relu(tf.nn.conv2d(h, rng.normal(0, 0.3, (3, 3, 8, 8)).astype(np.float32), 1, "SAME"))
    tf.identity(tf.matmul(tf.reduce_mean(h, axis=[1, 2]), rng.normal(0, 0.5, (8, 4)).astype(np.float32)),
                name="logits")


def images(count=3):
    """Images with edges to segment: stripes, and a disc of another size in each."""
    yy, xx = np.mgrid[0:SIZE, 0:SIZE]
    rows = np.stack([np.stack([np.sin(xx / (3 + i)), np.cos(yy / (4 + i)),
                               1.0 * ((xx - 16) ** 2 + (yy - 16) ** 2 < (6 + 2 * i) ** 2)], -1) for i in range(count)])
    return (rows + np.random.default_rng(2).normal(0, 0.05, rows.shape)).astype(np.float32)


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    folder = tmp_path_factory.mktemp("xrai")
    path = graph_file(folder, small_cnn, "cnn.pb")
    np.save(folder / "rows.npy", images())
    return folder, path


def xrai(folder, path, *args):
    out = folder / "xrai.npy"
    report = json.loads(run_cli("attribute", path, "--method", "xrai", "--input", folder / "rows.npy", "--y", "logits",
                                "--target", "1", "-o", out, "--json", *args).stdout)
    return np.load(out), report


@pytest.mark.network
def test_xrai_is_saliency_xrai_on_the_same_cnn(cnn, tmp_path):
    """saliency 0.2.1's XRAI().GetMask of each image (its defaults: two baselines,
    100 steps, the full algorithm), its gradients from the same graph."""
    folder, path = cnn
    download = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(tmp_path),
                               "saliency==0.2.1"], capture_output=True, text=True)
    wheels = list(tmp_path.glob("saliency-*.whl"))
    if download.returncode or not wheels:
        pytest.skip(f"pip download saliency==0.2.1 failed (no package registry here?): {download.stderr[-200:]}")
    with zipfile.ZipFile(wheels[0]) as archive:
        archive.extractall(tmp_path / "saliency")
    sys.path.insert(0, str(tmp_path / "saliency"))
    try:
        import saliency.core as saliency
    finally:
        sys.path.remove(str(tmp_path / "saliency"))
    got, report = xrai(folder, path)
    graph = tf.Graph()
    with graph.as_default():
        v1.import_graph_def(v1.GraphDef.FromString(open(path, "rb").read()), name="")
        x = graph.get_tensor_by_name("x:0")
        [gradient] = v1.gradients(graph.get_tensor_by_name("logits:0")[:, 1], [x])
        with v1.Session(graph=graph) as session:
            def call_model(batch, call_model_args=None, expected_keys=None):
                return {saliency.INPUT_OUTPUT_GRADIENTS: session.run(gradient, {x: batch})}

            expected = np.stack([saliency.XRAI().GetMask(row, call_model, batch_size=20)
                                 for row in np.load(folder / "rows.npy")])
    assert got.shape == (3, SIZE, SIZE, 1) and report["completeness"] == []
    assert all(len(np.unique(row)) > 3 for row in expected)  # regions ranked, not one value
    np.testing.assert_allclose(got[..., 0], expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())


def test_each_pixel_holds_the_density_of_the_pixels_its_region_added(cnn):
    """The map's value at a pixel is the mean, over the pixels sharing that value
    (the new pixels of one region), of integrated gradients averaged over the two
    baselines and taken at each pixel's largest channel; denser regions first."""
    folder, path = cnn
    got, _ = xrai(folder, path, "--method", "xrai(steps=8)")
    rows = np.load(folder / "rows.npy")
    with graphgrad.Explainer(path, "gradient", y="logits") as explainer:
        def integrated(baseline):
            alphas = np.linspace(0, 1, 8)
            total = sum(explainer.explain(baseline + alpha * (rows - baseline), target=1)[0] for alpha in alphas)
            return total / 8 * (rows - baseline)

        extremes = [np.broadcast_to(reduce(rows, axis=(1, 2, 3), keepdims=True), rows.shape) for reduce in (np.min,
                                                                                                             np.max)]
        attribution = np.mean([integrated(each) for each in extremes], axis=0).max(axis=-1)
    for row in range(len(rows)):
        values = np.unique(got[row, ..., 0])
        assert len(values) > 3
        for value in values:
            region = got[row, ..., 0] == value
            assert np.isclose(attribution[row][region].mean(), value, rtol=1e-4, atol=1e-7)


def test_a_linear_models_map_ranks_its_densest_region_first():
    """f = sum(w x) with w large on the image's left half: integrated gradients are
    exactly w (x - baseline); the densest region lies on the left, so the map's top
    value does, and the right half holds the lowest."""
    weights = np.zeros((1, 40, 40, 3), np.float32)
    weights[:, :, :20] = 1.0
    row = np.ones((1, 40, 40, 3), np.float32)
    row[:, 10:30, 10:30] = 0.2  # an edge to segment along

    def gradient_at(points, origin):
        return np.broadcast_to(weights, points.shape)

    got = xrai_maps(row, np.zeros_like(row), 4, 1.0, Batching(8, False, ""), gradient_at, np.zeros(1, int))[0, ..., 0]
    assert got[:, :20].max() == got.max() > got[:, 20:].min() == got.min()


@pytest.mark.parametrize("args, said", [
    (("--layer", "Relu"), "--layer: xrai integrates at x over its own path"),
    (("--tolerance", "0.01"), "--tolerance: xrai integrates at x over its own path"),
    (("--noise", "4,0.1"), "xrai is not smoothed (its map ranks regions, which noise would move)"),
])
def test_what_xrai_does_not_take_is_refused_in_one_line(cnn, args, said):
    folder, path = cnn
    result = run_cli("attribute", path, "--method", "xrai", "--input", folder / "rows.npy", "--y", "logits",
                     "--target", "1", "-o", folder / "refused.npy", *args, expect=2)
    assert said in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_xrai_refuses_rows_that_are_not_images_and_says_what_to_install(tmp_path, cnn, monkeypatch):
    rows = tmp_path / "flat.npy"
    np.save(rows, np.ones((2, 5), np.float32))
    path = graph_file(tmp_path, lambda: tf.identity(tf.reduce_sum(v1.placeholder(tf.float32, [None, 5], name="x")
                                                                  ** 2, axis=1, keepdims=True), name="y"))
    result = run_cli("attribute", path, "--method", "xrai", "--input", rows, "--y", "y", "-o", tmp_path / "a.npy",
                     expect=2)
    assert "xrai ranks regions of images, rows of shape (N, H, W, C); these are [2, 5]" in result.stderr
    folder, cnn_path = cnn
    monkeypatch.setitem(sys.modules, "skimage", None)  # as if scikit-image were not installed
    result = run_cli("attribute", cnn_path, "--method", "xrai(steps=2)", "--input", folder / "rows.npy", "--y",
                     "logits", "--target", "1", "-o", tmp_path / "b.npy", expect=1)
    assert "pip install 'graphgrad[xrai]'" in result.stderr and not (tmp_path / "b.npy").exists()
