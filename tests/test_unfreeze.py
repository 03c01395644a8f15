"""graphgrad unfreeze and freeze (run with TensorFlow): a frozen graph's weights made
variables of a TF1 training checkpoint that loads and trains in a fresh graph, its
overrides kept; folded back, the same graph."""

import os

import numpy as np
import pytest

from conftest import REALGRAPHS, fixture, run_cli
from tf_helpers import tf, v1

from graphgrad import iter_nodes, read_model

ROUND_TRIPS = ["dense_net.pb", "binary_net.pb", "image_net.pb", "quantized_classifier.pb", "grl_net.pb"]
REAL = ["dl4j-tf-examples/src/main/resources/tf_graphs/examples/lstm_mnist/frozen_model.pb",
        "tf-mtcnn/mtcnn.pb"]


def unfreeze(tmp_path, source, *args):
    out = tmp_path / "trainable"
    run_cli("unfreeze", source, "-o", out, *args)
    return out


def restored(folder):
    """A fresh graph and session with the checkpoint restored, as a TF1 user loads it."""
    import graphgrad

    graph = tf.Graph()
    with graph.as_default():
        saver = v1.train.import_meta_graph(str(folder / "model.meta"))
        graphgrad.register_gradients(graph)  # the overrides the graph carries, as any loader of it must
        session = v1.Session(graph=graph)
        saver.restore(session, str(folder / "model"))
    return graph, session


@pytest.mark.parametrize("name", ROUND_TRIPS)
def test_unfreeze_then_freeze_gives_the_frozen_graph_back(tmp_path, name):
    folder = unfreeze(tmp_path, fixture(name))
    assert sorted(os.listdir(folder)) == ["checkpoint", "model.data-00000-of-00001", "model.index", "model.meta"]
    run_cli("freeze", folder, "-o", tmp_path / "again.pb")
    assert run_cli("diff", fixture(name), tmp_path / "again.pb").stdout.strip().endswith("no differences")


@pytest.mark.slow
@pytest.mark.parametrize("relative", REAL)
def test_real_frozen_graphs_round_trip_and_compute_what_they_computed(tmp_path, relative):
    source = os.path.join(REALGRAPHS, relative)
    if not os.path.exists(source):
        pytest.skip(f"real graph files not present at {REALGRAPHS}")
    folder = unfreeze(tmp_path, source)
    run_cli("freeze", folder, "-o", tmp_path / "again.pb")
    assert run_cli("diff", source, tmp_path / "again.pb").stdout.strip().endswith("no differences")


def test_the_checkpoint_restores_the_values_and_computes_the_frozen_outputs_bit_for_bit(tmp_path):
    folder = unfreeze(tmp_path, fixture("image_net.pb"))
    rows = np.load(fixture("image_rows.npy"))
    frozen = tf.Graph()
    with frozen.as_default():
        v1.import_graph_def(v1.GraphDef.FromString(open(fixture("image_net.pb"), "rb").read()), name="")
        with v1.Session(graph=frozen) as session:
            expected = session.run("logits:0", {"x:0": rows})
    graph, session = restored(folder)
    with session:
        assert {v.op.name for v in graph.get_collection(v1.GraphKeys.TRAINABLE_VARIABLES)} == \
            {"kernel/graphgrad_variable", "w/graphgrad_variable"}
        assert session.run("logits:0", {"x:0": rows}).tobytes() == expected.tobytes()


def sign_weights_after_training(folder, steps=3):
    """The values of the weights that feed a Sign, before and after Adam on the logits' sum."""
    graph, session = restored(folder)
    with graph.as_default(), session:
        weights = graph.get_tensor_by_name("dense1/weights/graphgrad_variable:0")
        loss = tf.reduce_sum(graph.get_tensor_by_name("dense2/logits:0") ** 2)
        step = v1.train.AdamOptimizer(0.1).minimize(loss)
        session.run([v.initializer for v in graph.get_collection(v1.GraphKeys.GLOBAL_VARIABLES)
                     if "Adam" in v.op.name or "beta" in v.op.name])
        before = session.run(weights)
        rows = np.random.default_rng(0).uniform(-0.5, 0.5, (16, 4)).astype(np.float32)
        for _ in range(steps):
            session.run(step, {"x:0": rows})
        return before, session.run(weights)


def test_straight_through_training_moves_the_binarized_weights_and_without_it_nothing_moves(tmp_path):
    """The weights feed Signs: TensorFlow's zero gradient leaves them where they are;
    rewritten with ste first, Adam moves them."""
    rewritten = tmp_path / "ste.pb"
    run_cli("rewrite", fixture("binary_net.pb"), "--op", "Sign=ste(clip=4)", "-o", rewritten)
    ste_folder = tmp_path / "ste"
    run_cli("unfreeze", rewritten, "-o", ste_folder)
    plain_folder = tmp_path / "plain"
    run_cli("unfreeze", fixture("binary_net.pb"), "-o", plain_folder)
    before, after = sign_weights_after_training(ste_folder)
    assert not np.allclose(before, after)
    before, after = sign_weights_after_training(plain_folder)
    np.testing.assert_array_equal(before, after)
    overrides = {ref.override for ref in iter_nodes(read_model(str(ste_folder / "model.meta"))) if ref.override}
    assert overrides == {"graphgrad/ste(clip=4.0)"}


def test_list_shows_the_variables_and_writes_nothing(tmp_path):
    result = run_cli("unfreeze", fixture("dense_net.pb"), "--list")
    assert "4 variable(s), 51 parameter(s)" in result.stdout and "l1_dense/kernel  float32  4x6" in result.stdout
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("args, message", [
    (["--const", "l1_dense/kernl"], "--const 'l1_dense/kernl' names no node; close ones: l1_dense/kernel"),
    (["--const", "Const"], "Const holds integers or other non-floats"),
    (["--min-size", "1000"], "no constant is chosen"),
])
def test_bad_selections_are_one_line_and_write_nothing(tmp_path, args, message):
    result = run_cli("unfreeze", fixture("dense_net.pb"), "-o", tmp_path / "out", *args, expect=1)
    assert message in result.stderr and not (tmp_path / "out").exists()


def test_an_output_folder_with_files_needs_force(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    result = run_cli("unfreeze", fixture("dense_net.pb"), "-o", out, expect=2)
    assert "holds files; to replace them, add --force" in result.stderr and (out / "keep.txt").exists()
    run_cli("unfreeze", fixture("dense_net.pb"), "-o", out, "--force")
    assert not (out / "keep.txt").exists() and (out / "model.meta").exists()


def test_a_truncated_checkpoint_is_one_line_and_nothing_is_written(tmp_path):
    folder = unfreeze(tmp_path, fixture("dense_net.pb"))
    shard = folder / "model.data-00000-of-00001"
    shard.write_bytes(shard.read_bytes()[:10])
    result = run_cli("freeze", folder, "-o", tmp_path / "out.pb", expect=1)
    assert "cannot restore" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out.pb").exists()


def test_after_training_and_a_resave_freeze_differs_from_the_input_in_the_weights_values_only(tmp_path):
    """Adam's slots, the gradients and a second Saver (TensorFlow's export spells every
    attribute's default too) are left out: only the trained constants' values differ."""
    rewritten = tmp_path / "ste.pb"
    run_cli("rewrite", fixture("binary_net.pb"), "--op", "Sign=ste(clip=4)", "-o", rewritten)
    folder = unfreeze(tmp_path, rewritten)
    graph, session = restored(folder)
    with graph.as_default(), session:
        loss = tf.reduce_sum(graph.get_tensor_by_name("dense2/logits:0") ** 2)
        step = v1.train.AdamOptimizer(0.1).minimize(loss)
        session.run([v.initializer for v in graph.get_collection(v1.GraphKeys.GLOBAL_VARIABLES)
                     if "Adam" in v.op.name or "beta" in v.op.name])
        session.run(step, {"x:0": np.random.default_rng(1).uniform(-1, 1, (8, 4)).astype(np.float32)})
        v1.train.Saver().save(session, str(folder / "model"))  # the meta graph exported again, by TensorFlow
    run_cli("freeze", folder, "-o", tmp_path / "trained.pb")
    report = run_cli("diff", rewritten, tmp_path / "trained.pb", expect=1).stdout
    changed = [line for line in report.splitlines()[2:] if line.startswith(("~", "+", "-", "!"))]
    assert sorted(changed) == ["~ dense1/weights (Const)", "~ dense2/weights (Const)"]
    details = [line.strip() for line in report.splitlines()[2:] if not line.startswith("~")]
    assert len(details) == 2 and all(line.startswith("attr value: tensor") for line in details)


def test_a_graph_whose_weights_are_variables_already_says_so(tmp_path):
    result = run_cli("unfreeze", fixture("model.meta"), "-o", tmp_path / "out", expect=1)
    assert "its weights are variables already" in result.stderr and not (tmp_path / "out").exists()


def test_freeze_of_a_graph_file_says_what_it_takes(tmp_path):
    result = run_cli("freeze", fixture("binary_net.pb"), "-o", tmp_path / "out.pb", expect=2)
    assert "is a graph, not a checkpoint" in result.stderr and not (tmp_path / "out.pb").exists()
