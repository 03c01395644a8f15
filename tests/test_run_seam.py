"""What every command that runs a graph promises: a deadline that holds in the
process a user runs (loading --input with numpy has started BLAS threads by then),
the same --feed everywhere, any number of rows through a graph of a fixed batch,
freeze's restore behind the same gate, and the files a model names kept in its
own folder."""

import os
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import run_cli
from tf_helpers import graph_file, tf, v1


def run_command(*args, timeout=180):
    """The real command in a process of its own, as a user runs it, and how long it took."""
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "graphgrad", *map(str, args)], capture_output=True, text=True,
                            timeout=timeout)
    return result, time.monotonic() - started


def _endless_loop():
    x = v1.placeholder(tf.float32, [None, 3], name="x")
    forever = tf.while_loop(lambda i: i >= 0, lambda i: i + 1, [tf.constant(0)])  # never false
    tf.multiply(x, 1.0 + 0.0 * tf.cast(forever, tf.float32), name="logits")


def _rows(tmp_path, rows=2):
    np.save(tmp_path / "rows.npy", np.full([rows, 3], 0.5, np.float32))
    np.save(tmp_path / "labels.npy", np.zeros([rows], np.int64))
    return tmp_path / "rows.npy", tmp_path / "labels.npy"


@pytest.mark.slow
@pytest.mark.parametrize("command", ["attribute", "attack"])
def test_the_deadline_ends_an_endless_loop_in_the_command_a_user_runs(tmp_path, command):
    model = graph_file(tmp_path, _endless_loop)
    rows, labels = _rows(tmp_path)
    args = (["attribute", model, "--method", "gradient", "--input", rows, "--target", "0", "-o", tmp_path / "a.npy"]
            if command == "attribute" else
            ["attack", model, "--input", rows, "--labels", labels, "--eps", "0.1", "--steps", "2"])
    result, took = run_command(*args, "--x", "x", "--y", "logits", "--timeout", "30")
    assert result.returncode == 1 and took < 60, (took, result.stderr)
    [line] = result.stderr.strip().splitlines()
    assert "took over 30 s" in line and "--timeout" in line
    assert not (tmp_path / "a.npy").exists()


@pytest.mark.slow
def test_the_deadline_ends_a_blocking_initializer_in_attribute(tmp_path):
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        queue = tf.queue.FIFOQueue(2, [tf.float32], shapes=[[3]], name="empty_queue")
        w = v1.get_variable("w", initializer=queue.dequeue(name="waits_forever"))
        tf.multiply(x, w, name="logits")
        meta = v1.train.export_meta_graph(graph=graph)
    model = tmp_path / "model.meta"
    model.write_bytes(meta.SerializeToString())
    rows, _ = _rows(tmp_path)
    refused = run_cli("attribute", model, "--method", "gradient", "--input", rows, "--target", "0",
                      "-o", tmp_path / "a.npy", "--x", "x", "--y", "logits", expect=1)
    assert "QueueDequeueV2" in refused.stderr  # a queue is not on the allowlist
    result, took = run_command("attribute", model, "--method", "gradient", "--input", rows, "--target", "0",
                               "-o", tmp_path / "a.npy", "--x", "x", "--y", "logits", "--timeout", "30",
                               "--allow-effects")
    assert result.returncode == 1 and took < 60 and "took over 30 s" in result.stderr


def _dropout_logits():
    x = v1.placeholder(tf.float32, [None, 3], name="x")
    keep = v1.placeholder(tf.float32, [], name="keep_prob")
    w = tf.constant([[1.0, -1.0], [2.0, 0.5], [-1.0, 1.0]])
    tf.matmul(v1.nn.dropout(x, rate=1.0 - keep), w, name="logits")


def test_attack_feeds_a_second_placeholder_as_check_and_attribute_do(tmp_path):
    model = graph_file(tmp_path, _dropout_logits)
    rows, labels = _rows(tmp_path, 4)
    unfed = run_cli("attack", model, "--input", rows, "--labels", labels, "--eps", "0.1", "--x", "x",
                    "--y", "logits", expect=2)
    assert "keep_prob" in unfed.stderr and "--feed keep_prob=VALUE" in unfed.stderr  # the fix it gives...
    result = run_cli("attack", model, "--input", rows, "--labels", labels, "--eps", "0.2", "--steps", "5",
                     "--x", "x", "--y", "logits", "--feed", "keep_prob=1.0", "--json")  # ... works
    import json

    report = json.loads(result.stdout)
    assert report["clean_accuracy"] == 1.0 and report["attacked_accuracy"] < 1.0
    attributed = run_cli("attribute", model, "--method", "gradient", "--input", rows, "--target", "0",
                         "-o", tmp_path / "a.npy", "--x", "x", "--y", "logits", "--feed", "keep_prob=1.0")
    assert attributed.exit_code == 0
    np.testing.assert_allclose(np.load(tmp_path / "a.npy"), np.tile([[1.0, 2.0, -1.0]], (4, 1)))


def _batch_of_one_cnn():
    """A small CNN whose input is [1, 8, 8, 3], as frozen classifiers often are."""
    x = v1.placeholder(tf.float32, [1, 8, 8, 3], name="x")
    kernel = tf.constant(np.random.default_rng(0).normal(size=[3, 3, 3, 4]).astype(np.float32))
    hidden = tf.nn.relu(tf.nn.conv2d(x, kernel, 1, "SAME"))
    flat = tf.reshape(tf.reduce_mean(hidden, [1, 2]), [-1, 4])
    tf.matmul(flat, tf.constant(np.eye(4, 3, dtype=np.float32)), name="logits")


def test_sixteen_rows_run_through_a_graph_of_batch_one(tmp_path):
    """Rows run one at a time: each method's map of 16 rows equals its 16 maps of one row."""
    model = graph_file(tmp_path, _batch_of_one_cnn)
    images = np.random.default_rng(1).uniform(0, 1, [16, 8, 8, 3]).astype(np.float32)
    np.save(tmp_path / "images.npy", images)
    np.save(tmp_path / "one.npy", images[5:6])
    from conftest import every_method
    from graphgrad.methods.registry import CATALOGUE

    ran = every_method(model, tmp_path / "images.npy", tmp_path / "every.npy", "--x", "x", "--y", "logits",
                       "--target", "1")
    assert ran == {method.split("(")[0] for method in CATALOGUE.signatures()}  # every method, DeepLIFT included
    for method in ("gradient", "integrated_gradients(steps=8)", "guided_backprop", "eps_lrp", "gradcam", "deeplift"):
        run_cli("attribute", model, "--method", method, "--input", tmp_path / "images.npy", "--target", "1",
                "-o", tmp_path / "all.npy", "--x", "x", "--y", "logits")
        run_cli("attribute", model, "--method", method, "--input", tmp_path / "one.npy", "--target", "1",
                "-o", tmp_path / "single.npy", "--x", "x", "--y", "logits")
        every = np.load(tmp_path / "all.npy")
        assert every.shape[0] == 16, method
        np.testing.assert_allclose(every[5:6], np.load(tmp_path / "single.npy"), rtol=1e-5, atol=1e-6,
                                   err_msg=method)
    np.save(tmp_path / "labels.npy", np.argmax(images.mean(axis=(1, 2)) @ np.eye(3, 3), axis=1))
    run_cli("attack", model, "--input", tmp_path / "images.npy", "--labels", tmp_path / "labels.npy",
            "--eps", "0.1", "--steps", "3", "--x", "x", "--y", "logits", "-o", tmp_path / "adv.npy")
    assert np.load(tmp_path / "adv.npy").shape == images.shape


def test_what_the_arrays_alone_decide_is_refused_before_tensorflow_loads(tmp_path):
    """Labels, range and eps refused in one line, in the attack's own process
    before TensorFlow is imported: a model file that is not one is never read."""
    model = tmp_path / "not-read.pb"
    model.write_bytes(b"")
    images = tmp_path / "images.npy"
    np.save(images, np.full([4, 3], 0.5, np.float32))
    cases = {
        "one integer class index per image": np.zeros([3], np.int64),
        "classes are indices from 0": np.array([0, -1, 0, 0]),
    }
    for said, labels in cases.items():
        np.save(tmp_path / "labels.npy", labels)
        result = run_cli("attack", model, "--input", images, "--labels", tmp_path / "labels.npy", "--eps", "0.1",
                         expect=2)
        assert said in result.stderr
    np.save(tmp_path / "labels.npy", np.zeros([4], np.int64))
    np.save(tmp_path / "bright.npy", np.full([4, 3], 200.0, np.float32))
    outside = run_cli("attack", model, "--input", tmp_path / "bright.npy", "--labels", tmp_path / "labels.npy",
                      "--eps", "0.1", expect=2)
    assert "outside --range 0,1" in outside.stderr and "--range 0,255" in outside.stderr
    spans = run_cli("attack", model, "--input", images, "--labels", tmp_path / "labels.npy", "--eps", "2", expect=2)
    assert "spans the whole --range" in spans.stderr
    np.save(tmp_path / "none.npy", np.zeros([0, 3], np.float32))
    np.save(tmp_path / "no_labels.npy", np.zeros([0], np.int64))
    empty = run_cli("attack", model, "--input", tmp_path / "none.npy", "--labels", tmp_path / "no_labels.npy",
                    "--eps", "0.1", expect=2)
    assert "has no images" in empty.stderr


def _training_folder(tmp_path, name="trained"):
    folder = tmp_path / name
    folder.mkdir()
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        w = v1.get_variable("w", initializer=tf.constant([1.0, 2.0, 3.0]))
        tf.multiply(x, w, name="y")
        saver = v1.train.Saver()
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            saver.save(session, str(folder / "model"))
    return folder


def test_freeze_runs_no_hostile_restore_op(tmp_path):
    """A .meta whose restore op is a WriteFile: freeze refuses it, and writes nothing."""
    folder = _training_folder(tmp_path)
    meta = v1.MetaGraphDef.FromString((folder / "model.meta").read_bytes())
    graph = tf.Graph()
    with graph.as_default():
        v1.train.import_meta_graph(meta)
        tf.io.write_file(str(tmp_path / "written.txt"), "written", name="evil_restore")
        hostile = v1.train.export_meta_graph(graph=graph, saver_def=meta.saver_def)
    hostile.saver_def.restore_op_name = "evil_restore"
    (folder / "model.meta").write_bytes(hostile.SerializeToString())
    result = run_cli("freeze", folder, "-o", tmp_path / "frozen.pb", expect=1)
    assert "evil_restore (WriteFile)" in result.stderr and "--allow-effects" in result.stderr
    assert not (tmp_path / "written.txt").exists() and not (tmp_path / "frozen.pb").exists()


def test_freeze_takes_a_moved_folder_from_its_own_files(tmp_path):
    """The checkpoint file keeps the absolute path it was written with; a folder
    moved elsewhere is frozen from its own files, not refused as missing."""
    folder = _training_folder(tmp_path)
    moved = tmp_path / "moved"
    folder.rename(moved)
    run_cli("freeze", moved, "-o", tmp_path / "frozen.pb", "--outputs", "y")
    assert (tmp_path / "frozen.pb").stat().st_size > 0


def test_freeze_refuses_a_checkpoint_file_that_leads_outside_its_folder(tmp_path):
    other = _training_folder(tmp_path, "another")
    folder = tmp_path / "folder"
    folder.mkdir()
    for name in os.listdir(other):
        if name.startswith("model.meta"):
            (folder / name).write_bytes((other / name).read_bytes())
    (folder / "checkpoint").write_text('model_checkpoint_path: "../another/model"\n')
    result = run_cli("freeze", folder, "-o", tmp_path / "frozen.pb", expect=1)
    assert "outside the folder" in result.stderr and not (tmp_path / "frozen.pb").exists()


def test_a_checkpoint_shard_linked_outside_the_model_is_refused(tmp_path):
    folder = _training_folder(tmp_path)
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"graphgrad-secret-shard")
    [shard] = [name for name in os.listdir(folder) if ".data-" in name]
    (folder / shard).unlink()
    (folder / shard).symlink_to(secret)
    result = run_cli("check", folder / "model.meta", "--x", "x", "--y", "y", expect=1)
    assert "points outside" in result.stderr and "graphgrad-secret" not in result.stderr


def test_a_saved_model_asset_that_climbs_out_of_assets_is_refused(tmp_path):
    """A TF1 SavedModel whose vocabulary asset is named ../../secret.txt: check
    would print the secret's first line in TensorFlow's error; it is refused first."""
    secret = tmp_path / "secret.txt"
    secret.write_text("graphgrad-secret-asset\n")
    export = tmp_path / "export"
    graph = tf.Graph()
    with graph.as_default():
        vocabulary = tmp_path / "vocab.txt"
        vocabulary.write_text("a\nb\n")
        asset = tf.constant(str(vocabulary), name="asset_path")
        v1.add_to_collection(v1.GraphKeys.ASSET_FILEPATHS, asset)
        table = tf.lookup.StaticHashTable(tf.lookup.TextFileInitializer(
            asset, tf.string, tf.lookup.TextFileIndex.WHOLE_LINE, tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER), -1)
        x = v1.placeholder(tf.float32, [None], name="x")
        tf.multiply(x, tf.cast(table.lookup(tf.constant("b")), tf.float32), name="y")
        builder = v1.saved_model.Builder(str(export))
        with v1.Session() as session:
            builder.add_meta_graph_and_variables(session, ["serve"], assets_collection=v1.get_collection(
                v1.GraphKeys.ASSET_FILEPATHS), main_op=v1.tables_initializer())
        builder.save()
    run_cli("check", export, "--x", "x", "--y", "y")  # its own asset: runs
    from graphgrad.files import protos

    saved = protos.SavedModel.FromString((export / "saved_model.pb").read_bytes())
    meta = saved.meta_graphs[0]
    from tensorboard.compat.proto.meta_graph_pb2 import AssetFileDef

    for packed in meta.collection_def["saved_model_assets"].any_list.value:  # where TF1's builder writes them
        asset_def = AssetFileDef.FromString(packed.value)
        asset_def.filename = "../../secret.txt"
        packed.value = asset_def.SerializeToString()
    (export / "saved_model.pb").write_bytes(saved.SerializeToString())
    result = run_cli("check", export, "--x", "x", "--y", "y", expect=1)
    assert "outside the SavedModel's assets/ folder" in result.stderr
    assert "graphgrad-secret" not in result.stdout + result.stderr


@pytest.mark.slow
def test_sixteen_rows_through_every_method_and_attack_on_a_batch_one_mobilenet(tmp_path):
    """Keras' MobileNetV2 (random weights, 32x32, a tenth of its width) frozen with
    an input of [1, 32, 32, 3], as frozen classifiers are shipped: 16 rows through
    every attribution method and the attack. Its residual adds were traced for a
    batch of 1 (BiasAdd of a squeezed [1, C]): the graph runs one row at a time, and
    DeepLIFT and DeepSHAP run the baselines through a twin of the graph."""
    from conftest import every_method
    from graphgrad.methods.registry import CATALOGUE
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    tf.keras.utils.set_random_seed(0)
    network = tf.keras.applications.MobileNetV2(input_shape=(32, 32, 3), alpha=0.35, weights=None, classes=5,
                                                classifier_activation=None)
    function = tf.function(lambda x: network(x, training=False)).get_concrete_function(
        tf.TensorSpec([1, 32, 32, 3], tf.float32, name="x"))
    frozen = convert_variables_to_constants_v2(function).graph.as_graph_def()
    model = tmp_path / "mobilenet.pb"
    model.write_bytes(frozen.SerializeToString())
    y = [node.name for node in frozen.node if node.op == "Identity"][-1]
    images = np.random.default_rng(2).uniform(0, 1, [16, 32, 32, 3]).astype(np.float32)
    np.save(tmp_path / "images.npy", images)
    ran = every_method(model, tmp_path / "images.npy", tmp_path / "map.npy", "--x", "x", "--y", y, "--target", "1")
    # z+ and alpha-beta have no rule for Relu6 (said in one line, as every_method checks); nothing else is refused
    assert ran == {method.split("(")[0] for method in CATALOGUE.signatures()} - {"lrp_zplus", "lrp_alpha_beta"}
    np.save(tmp_path / "labels.npy", np.arange(16) % 5)
    run_cli("attack", model, "--input", tmp_path / "images.npy", "--labels", tmp_path / "labels.npy", "--eps", "0.05",
            "--steps", "3", "--x", "x", "--y", y, "-o", tmp_path / "adversarial.npy", expect=None)
    assert np.load(tmp_path / "adversarial.npy").shape == images.shape
