"""Untrusted models under check and attribute (run with TensorFlow): what loading
runs (initializers, restore ops, a SavedModel's init op) is scanned for effects
outside the graph before any of it runs. Every hostile model writes, if it ever
runs, into a file the test made in its own folder; the test asserts that file
never changed."""

import json

import numpy as np
import pytest

from conftest import run_cli
from tf_helpers import tf, v1


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
    assert "loading it would run 1 op(s) that act outside the graph (evil_write (WriteFile))" in result.stderr
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
