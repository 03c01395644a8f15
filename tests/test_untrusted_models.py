"""Untrusted models under check and attribute (run with TensorFlow): what loading
runs (initializers, restore ops, a SavedModel's init op) is scanned for effects
outside the graph before any of it runs. Every hostile model writes, if it ever
runs, into a file the test made in its own folder; the test asserts that file
never changed."""

import json

import numpy as np
import pytest

from conftest import run_cli
from tf_helpers import graph_file, tf, v1


def victim(tmp_path):
    path = tmp_path / "victim.txt"
    path.write_text("untouched")
    return path


def untouched(path) -> bool:
    return path.read_text() == "untouched"


def write_file(path):
    return tf.io.write_file(str(path), "written", name="evil_write")


def meta_with(tmp_path, build, checkpoint=False):
    """A .meta of the graph ``build`` makes (with a checkpoint beside it if asked)."""
    graph, saver = tf.Graph(), None
    with graph.as_default():
        build()
        if checkpoint:
            saver = v1.train.Saver()
            with v1.Session() as session:
                session.run([variable.initializer for variable in v1.global_variables()])
                saver.save(session, str(tmp_path / "model.ckpt"))
        meta = v1.train.export_meta_graph(graph=graph, saver_def=saver.as_saver_def() if saver else None)
    path = tmp_path / ("model.ckpt.meta" if checkpoint else "model.meta")
    path.write_bytes(meta.SerializeToString())
    return path


def model_y_of_x():
    x = v1.placeholder(tf.float32, [3], name="x")
    w = v1.get_variable("w", initializer=tf.constant([1.0, 2.0, 3.0]))
    tf.reduce_sum(x * w, name="y")


def test_an_initializer_that_writes_a_file_is_refused_before_it_runs(tmp_path):
    target = victim(tmp_path)

    def build():
        model_y_of_x()
        write_file(target)

    path = meta_with(tmp_path, build)
    meta = v1.MetaGraphDef.FromString(path.read_bytes())  # the variable's initializer is now the write
    from tensorflow.core.framework.variable_pb2 import VariableDef

    variable = VariableDef.FromString(meta.collection_def["variables"].bytes_list.value[0])
    variable.initializer_name = "evil_write"
    meta.collection_def["variables"].bytes_list.value[0] = variable.SerializeToString()
    path.write_bytes(meta.SerializeToString())
    result = run_cli("check", path, "--x", "x", "--y", "y", expect=1)
    assert ("loading it would run 1 op(s) not known to compute only on tensors in memory, of type(s) WriteFile "
            "(evil_write (WriteFile))") in result.stderr
    assert untouched(target)
    run_cli("check", path, "--x", "x", "--y", "y", "--allow-effects", expect=1)  # the initializer runs: w unset
    assert not untouched(target)


def test_an_initial_value_waiting_on_a_write_is_refused(tmp_path):
    target = victim(tmp_path)

    def build():
        x = v1.placeholder(tf.float32, [3], name="x")
        with tf.control_dependencies([write_file(target)]):
            initial = tf.constant([1.0, 2.0, 3.0]) * 1.0
        w = v1.get_variable("w", initializer=initial)
        tf.reduce_sum(x * w, name="y")

    result = run_cli("check", meta_with(tmp_path, build), "--x", "x", "--y", "y", expect=1)
    assert "evil_write (WriteFile)" in result.stderr and untouched(target)


def test_a_restore_op_that_writes_a_file_is_refused(tmp_path):
    target = victim(tmp_path)

    def build():
        model_y_of_x()
        write_file(target)

    path = meta_with(tmp_path, build, checkpoint=True)
    meta = v1.MetaGraphDef.FromString(path.read_bytes())
    meta.saver_def.restore_op_name = "evil_write"
    path.write_bytes(meta.SerializeToString())
    result = run_cli("check", path, "--x", "x", "--y", "y", expect=1)
    assert "evil_write (WriteFile)" in result.stderr and untouched(target)


def test_the_checkpoint_of_a_meta_is_restored_as_the_saver_reads_it(tmp_path):
    report = json.loads(run_cli("check", meta_with(tmp_path, model_y_of_x, checkpoint=True), "--x", "x", "--y", "y",
                                "--json").stdout)
    assert report["variables"].startswith("restored from") and report["gradients"][0]["status"] == "finite"


@pytest.mark.parametrize("command", ["check", "attribute"])
def test_a_tf1_saved_models_main_op_that_writes_a_file_is_refused(tmp_path, command):
    target = victim(tmp_path)
    export = tmp_path / "exported"
    graph = tf.Graph()
    with graph.as_default(), v1.Session() as session:
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        y = tf.identity(x * 2.0, name="y")
        builder = v1.saved_model.Builder(str(export))
        signature = v1.saved_model.predict_signature_def({"x": x}, {"y": y})
        builder.add_meta_graph_and_variables(session, ["serve"], {"serving_default": signature},
                                             main_op=tf.group(write_file(target)))
        builder.save()
    rows = tmp_path / "rows.npy"
    np.save(rows, np.ones((2, 3), np.float32))
    args = ["check", export] if command == "check" else [
        "attribute", export, "--method", "gradient", "--input", rows, "-o", tmp_path / "out.npy"]
    result = run_cli(*args, expect=1)
    assert "evil_write (WriteFile)" in result.stderr and "--allow-effects" in result.stderr
    assert untouched(target) and not (tmp_path / "out.npy").exists()


# -- a bare GraphDef's variables ---------------------------------------------------------

def graph_def_with_variables(tmp_path, initializer=True):
    """A GraphDef (as_graph_def, not frozen): y = sum(x * w), w a variable initialised
    to zeros; a checkpoint holds w = [1, 2, 3]."""
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [3], name="x")
        w = v1.get_variable("w", initializer=tf.zeros([3]), use_resource=False)
        tf.reduce_sum(x * w, name="y")
        with v1.Session() as session:
            session.run(w.assign([1.0, 2.0, 3.0]))
            v1.train.Saver().save(session, str(tmp_path / "trained.ckpt"))
        graph_def = graph.as_graph_def()
    if not initializer:
        kept = [node for node in graph_def.node if node.name != "w/Assign"]
        del graph_def.node[:]
        graph_def.node.extend(kept)
    path = tmp_path / "graph.pb"
    path.write_bytes(graph_def.SerializeToString())
    return path


def test_a_graph_defs_variables_are_restored_from_the_checkpoint_named(tmp_path):
    path = graph_def_with_variables(tmp_path)
    report = json.loads(run_cli("check", path, "--x", "x", "--y", "y", "--checkpoint", tmp_path / "trained.ckpt",
                                "--json").stdout)
    assert report["variables"] == f"restored from {tmp_path / 'trained.ckpt'}"
    assert report["gradients"][0]["norm"] == pytest.approx(np.sqrt(14), rel=1e-6)  # |w| as trained


def test_without_a_checkpoint_a_graph_defs_variables_get_their_initial_values(tmp_path):
    report = json.loads(run_cli("check", graph_def_with_variables(tmp_path), "--x", "x", "--y", "y", "--json",
                                expect=1).stdout)
    assert report["variables"] == "initialised by their initializers (no checkpoint)"
    assert report["gradients"][0]["status"] == "zero"  # w = 0 as initialised


def test_variables_without_values_are_named_with_the_fix_not_a_shape_hint(tmp_path):
    result = run_cli("check", graph_def_with_variables(tmp_path, initializer=False), "--x", "x", "--y", "y", expect=1)
    assert "the graph's variables have no values" in result.stdout and "--checkpoint PREFIX" in result.stdout
    assert "--shape" not in result.stdout


def test_a_checkpoint_for_a_graph_without_variables_is_one_line(tmp_path):
    graph_def_with_variables(tmp_path)  # writes trained.ckpt
    frozen = tmp_path / "frozen.pb"
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [3], name="x")
        tf.reduce_sum(x * 2.0, name="y")
    frozen.write_bytes(graph.as_graph_def().SerializeToString())
    result = run_cli("check", frozen, "--checkpoint", tmp_path / "trained.ckpt", expect=1)
    assert "has no variables to restore from" in result.stderr


def test_a_checkpoint_that_lacks_a_variable_names_it(tmp_path):
    path = graph_def_with_variables(tmp_path)
    graph = tf.Graph()
    with graph.as_default():
        other = v1.get_variable("other", initializer=tf.zeros([3]))
        with v1.Session() as session:
            session.run(other.initializer)
            v1.train.Saver().save(session, str(tmp_path / "other.ckpt"))
    result = run_cli("check", path, "--checkpoint", tmp_path / "other.ckpt", expect=1)
    assert "holds no value for 1 of the graph's variables (w)" in result.stderr


# -- reading files is an effect too ------------------------------------------------------

def secret(tmp_path):
    path = tmp_path / "secret.txt"
    path.write_text("7.5 the-secret-bytes")
    return path


def reads_through_a_number(path):
    x = v1.placeholder(tf.float32, [3], name="x")
    number = tf.strings.to_number(tf.io.read_file(str(path), name="read"))
    tf.multiply(x, number, name="y")


def reads_in_an_assert(path):
    x = v1.placeholder(tf.float32, [3], name="x")
    with tf.control_dependencies([tf.debugging.Assert(False, [tf.io.read_file(str(path), name="read")])]):
        tf.identity(x * 2.0, name="y")


def reads_a_text_dataset(path):
    x = v1.placeholder(tf.float32, [3], name="x")
    lines = tf.data.TextLineDataset(str(path))
    length = lines.reduce(tf.constant(0.0), lambda total, line: total + tf.cast(tf.strings.length(line), tf.float32))
    tf.multiply(x, length, name="y")


def maps_a_file(path):
    x = v1.placeholder(tf.float32, [3], name="x")
    mapped = tf.raw_ops.ImmutableConst(dtype=tf.float32, shape=[3], memory_region_name=str(path))
    tf.multiply(x, mapped, name="y")


@pytest.mark.parametrize("build", [reads_through_a_number, reads_in_an_assert, reads_a_text_dataset, maps_a_file])
@pytest.mark.parametrize("command", ["check", "attribute"])
def test_a_graph_that_reads_files_is_refused_and_nothing_of_the_file_is_printed(tmp_path, build, command):
    path = graph_file(tmp_path, lambda: build(secret(tmp_path)))
    rows = tmp_path / "rows.npy"
    np.save(rows, np.ones((3,), np.float32))
    args = ["check", path, "--x", "x", "--y", "y"] if command == "check" else [
        "attribute", path, "--method", "gradient", "--input", rows, "--x", "x", "--y", "y", "-o", tmp_path / "o.npy"]
    result = run_cli(*args, expect=1)
    assert "not known to compute only on tensors in memory" in result.stderr and "--allow-effects" in result.stderr
    assert "the-secret-bytes" not in result.stdout + result.stderr


def test_with_allow_effects_tensorflows_errors_quote_no_values(tmp_path):
    for build in (reads_through_a_number, reads_in_an_assert):
        path = graph_file(tmp_path, lambda: build(secret(tmp_path)))
        result = run_cli("check", path, "--x", "x", "--y", "y", "--allow-effects", expect=1)
        assert "the-secret-bytes" not in result.stdout + result.stderr
        assert "values not shown" in result.stdout


def test_a_saved_models_own_vocabulary_asset_is_read_as_part_of_loading_it(tmp_path):
    vocabulary = tmp_path / "vocab.txt"
    vocabulary.write_text("a\nb\nc\n")
    export = tmp_path / "exported"
    graph = tf.Graph()
    with graph.as_default(), v1.Session() as session:
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        asset = tf.constant(str(vocabulary), name="vocabulary_path")
        v1.add_to_collection(v1.GraphKeys.ASSET_FILEPATHS, asset)
        table = tf.lookup.StaticHashTable(tf.lookup.TextFileInitializer(
            asset, tf.string, tf.lookup.TextFileIndex.WHOLE_LINE, tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER), -1)
        scale = tf.cast(table.lookup(tf.constant("c")), tf.float32)
        y = tf.identity(x * scale, name="y")
        builder = v1.saved_model.Builder(str(export))
        builder.add_meta_graph_and_variables(
            session, ["serve"], {"serving_default": v1.saved_model.predict_signature_def({"x": x}, {"y": y})},
            assets_collection=v1.get_collection(v1.GraphKeys.ASSET_FILEPATHS), main_op=v1.tables_initializer())
        builder.save()
    report = json.loads(run_cli("check", export, "--json").stdout)
    assert report["gradients"][0]["norm"] == pytest.approx(2 * np.sqrt(3))  # x * 2, 2 the line of "c"


def test_a_library_whose_functions_call_themselves_is_refused_before_tensorflow_sees_it(tmp_path):
    """f -> g -> f: TensorFlow's importer recurses until the process dies (SIGSEGV)."""
    graph = tf.Graph()
    with graph.as_default():
        # without autograph: in one full run its cache of converted functions handed back the test
        # function itself in inner's place
        @tf.function(autograph=False)
        def inner(t):
            return t * 2.0

        x = v1.placeholder(tf.float32, [3], name="x")
        tf.identity(inner(x), name="y")
    graph_def = graph.as_graph_def()
    [function] = graph_def.library.function
    copy = graph_def.library.function.add()
    copy.CopyFrom(function)
    copy.signature.name = "g_loop"
    for body, callee in ((function, "g_loop"), (copy, function.signature.name)):
        call = body.node_def.add()
        call.name, call.op = "again", "PartitionedCall"
        call.attr["f"].func.name = callee
    path = tmp_path / "recursive.pb"
    path.write_bytes(graph_def.SerializeToString())
    result = run_cli("check", path, "--x", "x", "--y", "y", expect=1)
    assert "its functions call themselves" in result.stderr and "g_loop" in result.stderr


# -- every run ends on time ---------------------------------------------------------------

def run_command(*args, timeout=120):
    """The real command in a process of its own (as a user runs it: the job then runs
    in a child that the deadline ends), and how long it took."""
    import subprocess
    import sys
    import time

    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "graphgrad", *map(str, args)], capture_output=True, text=True,
                            timeout=timeout)
    return result, time.monotonic() - started


@pytest.mark.slow
def test_a_blocking_initializer_is_stopped_at_the_deadline(tmp_path):
    def build():
        model_y_of_x()
        queue = tf.queue.FIFOQueue(2, [tf.float32], shapes=[[]], name="empty_queue")
        queue.dequeue(name="waits_forever")

    path = meta_with(tmp_path, build)
    meta = v1.MetaGraphDef.FromString(path.read_bytes())
    from tensorflow.core.framework.variable_pb2 import VariableDef

    variable = VariableDef.FromString(meta.collection_def["variables"].bytes_list.value[0])
    variable.initializer_name = "waits_forever"
    meta.collection_def["variables"].bytes_list.value[0] = variable.SerializeToString()
    path.write_bytes(meta.SerializeToString())
    refused = run_cli("check", path, "--x", "x", "--y", "y", expect=1)  # a queue is not on the allowlist
    assert "waits_forever (QueueDequeueV2)" in refused.stderr and "--allow-effects" in refused.stderr
    result, took = run_command("check", path, "--x", "x", "--y", "y", "--timeout", "8", "--allow-effects")
    assert result.returncode == 1 and "took over 8 s, loading the model included, and was stopped" in result.stderr
    assert took < 60


def test_a_staging_area_nothing_fills_is_refused_at_once(tmp_path):
    def build():
        x = v1.placeholder(tf.float32, [3], name="x")
        from tensorflow.python.ops.data_flow_ops import StagingArea

        area = StagingArea([tf.float32], shapes=[[3]])
        tf.multiply(x, area.get()[0] if isinstance(area.get(), (list, tuple)) else area.get(), name="y")

    result = run_cli("check", graph_file(tmp_path, build), "--x", "x", "--y", "y", expect=2)
    assert "the run would wait on an input pipeline" in result.stderr


def test_a_checkpoint_shard_that_is_a_fifo_is_refused_before_the_restore(tmp_path):
    import os

    path = meta_with(tmp_path, model_y_of_x, checkpoint=True)
    [shard] = tmp_path.glob("model.ckpt.data-*")
    shard.unlink()
    os.mkfifo(shard)
    result = run_cli("check", path, "--x", "x", "--y", "y", expect=1)
    assert f"checkpoint file {shard} is a FIFO" in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("signal_name, message", [("SIGSEGV", "a crash inside TensorFlow's native code"),
                                                  ("SIGKILL", "the system ended it, most likely for want of memory")])
def test_a_child_that_dies_is_one_line_with_its_signal(signal_name, message):
    import subprocess
    import sys

    script = ("import os, signal\nfrom graphgrad.jobs.deadline import run_until\n"
              f"run_until(30, lambda: os.kill(os.getpid(), signal.{signal_name}), what='check of m.pb')\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert f"check of m.pb: the process running TensorFlow died of {signal_name}; {message}" in result.stderr
