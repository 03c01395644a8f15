"""Real graph files written by other projects (../shared/realgraphs, see its SOURCES.md)."""

import glob
import os

import pytest

from conftest import REALGRAPHS, REALGRAPHS_ABSENT, run_cli
from graphgrad import (
    ModelReadError,
    RewriteOptions,
    iter_nodes,
    parse_rule,
    read_model,
    rewrite_model,
    serialize,
    summarize,
    write_model,
)

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not os.path.isdir(REALGRAPHS), reason=REALGRAPHS_ABSENT
)]

# Broken on purpose (SOURCES.md): malformed text, and a template with $0 placeholders.
BROKEN = {
    "tensorflow-testdata/tensorflow/compiler/mlir/tensorflow/tests/graphdef2mlir/graph-malformed.pbtxt":
        "not a TensorFlow graph file",
    "tensorflow-testdata/tensorflow/core/data/service/testdata/repeated_dataset.pbtxt":
        "not a valid text GraphDef: 52:20",
}
NOT_GRAPHS = {"fingerprint.pb"}


def graph_files():
    if not os.path.isdir(REALGRAPHS):
        return []
    found = []
    for path in sorted(glob.glob(os.path.join(REALGRAPHS, "**", "*"), recursive=True)):
        relative = os.path.relpath(path, REALGRAPHS)
        if path.endswith((".pb", ".pbtxt", ".meta")) and os.path.basename(path) not in NOT_GRAPHS:
            if relative not in BROKEN:
                found.append(relative)
    return found


@pytest.mark.parametrize("relative", graph_files())
def test_round_trip_ops_and_rewrite(relative, tmp_path):
    path = os.path.join(REALGRAPHS, relative)
    model = read_model(path)

    # Lossless: written back unchanged, in the same kind and encoding.
    out = tmp_path / ("out" if model.kind == "savedmodel" else os.path.basename(path))
    write_model(model, str(out))
    again = read_model(str(out))
    assert again.message == model.message
    assert (again.kind, again.encoding) == (model.kind, model.encoding)

    summary = summarize(model)
    assert summary.nodes_top + summary.nodes_functions == sum(1 for _ in iter_nodes(model))
    run_cli("ops", path, "--json")

    # Rewrite the most common op type: exactly those nodes change, nothing else.
    op_type = summary.op_types[0].op_type
    rules = RewriteOptions(rules=(parse_rule("op", f"{op_type}=identity|scale(0.5)"),), force=True)
    result, report = rewrite_model(model, rules)
    selected = [ref for ref in iter_nodes(model) if ref.op_type == op_type]
    assert len(report.changes) + len(report.unchanged) == len(selected)
    before = {(r.graph, r.name): r.override for r in iter_nodes(model)}
    after = {(r.graph, r.name): r.override for r in iter_nodes(result)}
    for key, value in after.items():
        if value != before[key]:
            assert value == "graphgrad/identity|scale(factor=0.5)"
    for ref in iter_nodes(result):
        ref.set_override(before[(ref.graph, ref.name)])
    assert result.message == model.message
    assert serialize(rewrite_model(result, rules)[0]) == serialize(rewrite_model(result, rules)[0])


@pytest.mark.parametrize("relative, message", sorted(BROKEN.items()))
def test_broken_files_give_clean_errors(relative, message):
    path = os.path.join(REALGRAPHS, relative)
    with pytest.raises(ModelReadError) as error:
        read_model(path)
    assert message in str(error.value)
    result = run_cli("ops", path, expect=1)
    assert message in result.stderr and "Traceback" not in result.stderr


def test_known_oddities_are_recognised():
    faster_rcnn = read_model(os.path.join(REALGRAPHS, "tf-faster-rcnn-vgg16", "graph.pb"))
    assert (faster_rcnn.kind, faster_rcnn.encoding) == ("graphdef", "text")
    meta = read_model(os.path.join(
        REALGRAPHS, "tensorflow-testdata/tensorflow/python/framework/testdata/metrics_export_meta_graph.pb"))
    assert (meta.kind, meta.encoding) == ("metagraph", "text")
    ssd = summarize(read_model(os.path.join(REALGRAPHS, "robotTracking-ssd/tensorflow/config.pbtxt")))
    assert {"PriorBox", "DetectionOutput"} <= {c.op_type for c in ssd.op_types}


def test_saved_model_directory_rewrite_loads_in_tensorflow(tmp_path):
    tf = pytest.importorskip("tensorflow", reason="needs TensorFlow")
    source = os.path.join(
        REALGRAPHS, "tf-serving-testdata/tensorflow_serving/servables/tensorflow/testdata/"
        "saved_model_half_plus_two_cpu/00000123")
    out = tmp_path / "patched"
    run_cli("rewrite", source, "--op", "Mul=reverse", "-o", out)
    assert sorted(os.listdir(out)) == ["assets", "saved_model.pb", "variables"]
    import graphgrad

    graph = tf.Graph()
    with tf.compat.v1.Session(graph=graph) as session:
        tf.compat.v1.saved_model.loader.load(session, ["serve"], str(out))
        graphgrad.register_gradients(graph)
        muls = [op for op in graph.get_operations() if op.type == "Mul"]
        assert muls and all(op.get_attr("_gradient_op_type") == b"graphgrad/reverse(strength=1.0)" for op in muls)


def test_check_of_tf_servings_half_plus_two_feeds_x_not_its_tf_example(tmp_path):
    """Its x is parsed from a serialized tf.Example: --x x:0 is fed, the parser is not run."""
    import json

    pytest.importorskip("tensorflow", reason="needs TensorFlow")
    source = os.path.join(
        REALGRAPHS, "tf-serving-testdata/tensorflow_serving/servables/tensorflow/testdata/"
        "saved_model_half_plus_two_cpu/00000123")
    report = json.loads(run_cli("check", source, "--x", "x:0", "--y", "y:0", "--json").stdout)
    assert report["feeds"] == {"x:0": "random float32 [1, 1]"}
    assert report["gradients"][0]["status"] == "finite" and report["gradients"][0]["norm"] == pytest.approx(0.5)


def test_ops_names_the_inputs_and_outputs_of_a_frozen_model():
    """MTCNN's frozen graph: its four feeds (image and detection settings) and three results."""
    summary = summarize(read_model(os.path.join(REALGRAPHS, "tf-mtcnn/mtcnn.pb")))
    assert [end.node for end in summary.inputs] == ["input", "min_size", "thresholds", "factor"]
    assert [(end.node, end.op_type) for end in summary.outputs] == [
        ("prob", "Identity"), ("landmarks", "Identity"), ("box", "Identity"),
    ]


def test_check_differentiates_a_frozen_graph_with_tf1_while_loops():
    """MTCNN's frozen graph: TensorFlow alone cannot differentiate its TF1 loops (the
    loop contexts were lost when it was frozen; it fails with an AttributeError);
    graphgrad rebuilds them, so check computes the gradient (zero here: random
    pixels hold no face, so there is no box, and check says so)."""
    import json

    pytest.importorskip("tensorflow", reason="needs TensorFlow")
    source = os.path.join(REALGRAPHS, "tf-mtcnn/mtcnn.pb")
    report = json.loads(run_cli("check", source, "--x", "input", "--y", "box", "--json", expect=1).stdout)
    [gradient] = report["gradients"]
    assert gradient["status"] == "zero" and not gradient["error"]
    assert gradient["why"].startswith("y has no entries for this input (shape [0, 4])")


def test_check_catches_a_classifier_differentiated_through_its_whole_softmax():
    """DL4J's LSTM on MNIST ends in a Softmax named output: d sum(output)/d input is
    zero, and check says so, with the fix; one class (--target) has a gradient."""
    import json

    pytest.importorskip("tensorflow", reason="needs TensorFlow")
    source = os.path.join(REALGRAPHS, "dl4j-tf-examples/src/main/resources/tf_graphs/examples/lstm_mnist",
                          "frozen_model.pb")
    whole = json.loads(run_cli("check", source, "--x", "input", "--y", "output", "--json", expect=1).stdout)
    assert whole["summed_softmax"] == {"softmax": "output", "logits": "add:0"}
    assert [g["norm"] < 1e-9 for g in whole["gradients"]] == [True]
    one_class = json.loads(run_cli("check", source, "--x", "input", "--y", "output", "--target", "7", "--json",
                                   expect=0).stdout)
    assert [(g["status"], g["norm"] > 1e-3) for g in one_class["gradients"]] == [("finite", True)]


def test_fast_paths_agree_with_a_full_parse_on_real_graphs():
    """Every real binary GraphDef: rewrite, summary, reset and diff on the fast readings
    equal a full parse's, and a second rewrite gives the same bytes."""
    from dataclasses import replace

    from conftest import fast_rewrite, fast_summary, stored_reading, written
    from graphgrad.files.reading import parse_model_bytes
    from graphgrad.edits.surgery import ResetOptions, reset_in, reset_model
    from graphgrad.edits.diff import diff_models, diff_readings
    from graphgrad.readings import Needs
    from graphgrad.readings.errors import NotApplicable

    used = []
    for relative in graph_files():
        path = os.path.join(REALGRAPHS, relative)
        if os.path.isdir(path):
            continue
        model = read_model(path)
        if model.kind != "graphdef" or model.encoding != "binary":
            continue
        data = open(path, "rb").read()
        full_summary = summarize(model)
        op_type = full_summary.op_types[0].op_type
        rules = RewriteOptions(rules=(parse_rule("op", f"{op_type}=identity"),), force=True)
        try:
            stored_summary = fast_summary(data)
            output, report = fast_rewrite(data, rules)
        except NotApplicable:
            continue
        assert stored_summary == summarize(replace(model, path=stored_summary.path)), relative
        full, full_report = rewrite_model(model, rules)
        assert parse_model_bytes(output)[0] == full.message, relative
        assert report == full_report, relative
        with stored_reading(data) as before, stored_reading(output) as after:
            assert diff_readings(before, after) == diff_models(model, full), relative
        again, again_report = fast_rewrite(output, rules)
        assert again == output and not again_report.changes, relative
        with stored_reading(output, Needs(edits=True)) as opened:
            reset = reset_in(opened.scopes(), ResetOptions())
            restored = written(opened)
        full_restored, full_reset = reset_model(full, ResetOptions())
        assert parse_model_bytes(restored)[0] == full_restored.message, relative
        assert reset == full_reset, relative
        used.append(relative)
    assert len(used) > 10, "too few real graphs took the fast path"


@pytest.mark.parametrize("args, factor", [
    (["insert", "--at", "encode/dense_1/Sigmoid:0", "--grad", "reverse", "--embed"], -1.0),
    (["rewrite", "--op", "Sigmoid=identity|scale(2)", "--embed"], None),
])
def test_embed_on_a_real_frozen_autoencoder(tmp_path, args, factor):
    """tf2onnx's ae0: forward unchanged bit for bit, and the gradient as the embedded spec says."""
    np = pytest.importorskip("numpy")
    tf = pytest.importorskip("tensorflow", reason="needs TensorFlow")
    source = os.path.join(REALGRAPHS, "tf2onnx-tests/tests/models/ae0/frozen.pb")
    out = tmp_path / "embedded.pb"
    run_cli(args[0], source, *args[1:], "-o", out)
    feed = np.random.default_rng(3).uniform(0, 1, (4, 784)).astype(np.float32)
    # Grappler fuses MatMul + BiasAdd + Sigmoid where nothing else reads the BiasAdd;
    # a surrogate reads it, so the two graphs would run different sigmoid kernels,
    # which round differently. The graphs themselves compute the same bits:
    from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2

    unfused = config_pb2.ConfigProto()
    unfused.graph_options.rewrite_options.remapping = rewriter_config_pb2.RewriterConfig.OFF

    def forward_and_gradient(path):
        graph_def = tf.compat.v1.GraphDef.FromString(open(path, "rb").read())
        graph = tf.Graph()
        with graph.as_default():
            tf.compat.v1.import_graph_def(graph_def, name="")  # no graphgrad: the surrogate is in the graph
            x, y = graph.get_tensor_by_name("X:0"), graph.get_tensor_by_name("output:0")
            [grad] = tf.compat.v1.gradients(tf.reduce_sum(y), [x])
            with tf.compat.v1.Session(graph=graph, config=unfused) as session:
                return session.run([y, grad], {x: feed})

    (y, grad), (y_embedded, grad_embedded) = forward_and_gradient(source), forward_and_gradient(out)
    assert y.tobytes() == y_embedded.tobytes()
    if factor is not None:  # one edge reversed: everything upstream of it flips
        np.testing.assert_allclose(grad_embedded, factor * grad, rtol=1e-5, atol=1e-7)
    else:  # every sigmoid passes 2 * upstream instead of s(1 - s) * upstream
        assert not np.allclose(grad_embedded, grad) and np.isfinite(grad_embedded).all()


def test_check_on_a_real_estimator_training_checkpoint(tmp_path):
    """A TF1 Estimator's training checkpoint (queue-fed input pipeline, weights
    beside it): check names the queue's output to feed, restores the weights, and
    the gradient of one class's probability is usable."""
    pytest.importorskip("tensorflow", reason="needs TensorFlow")
    import json

    import numpy as np

    meta = os.path.join(REALGRAPHS, "UniqueMNISTsolutions", "model.ckpt-20000.meta")
    result = run_cli("check", meta, "--y", "softmax_tensor", "--target", "0", expect=2)
    assert "--x random_shuffle_queue_DequeueMany:1" in result.stderr
    images = tmp_path / "images.npy"
    np.save(images, np.random.default_rng(0).random((100, 784)).astype(np.float32))
    report = json.loads(run_cli("check", meta, "--y", "softmax_tensor", "--target", "0",
                                "--x", "random_shuffle_queue_DequeueMany:1",
                                "--feed", f"random_shuffle_queue_DequeueMany:1={images}", "--json").stdout)
    assert report["variables"] == f"restored from {meta.removesuffix('.meta')}"
    assert report["gradients"][0]["status"] == "finite"


def test_check_on_a_real_learner_written_for_a_cluster():
    """IMPALA's learner: devices for /job:learner, TF1 loops, 251 candidate outputs."""
    pytest.importorskip("tensorflow", reason="needs TensorFlow")
    meta = os.path.join(REALGRAPHS, "scalable-agent", "model.ckpt-90912640.meta")
    result = run_cli("check", meta, expect=2)
    assert "has 251 floating-point outputs" in result.stderr and "(+246 more)" in result.stderr
    assert "Cannot assign a device" not in result.stderr


def test_deeplift_runs_a_real_estimator_graph_whose_batch_is_fixed(tmp_path):
    """UniqueMNIST's Estimator reshapes its queue's rows to a fixed batch of 100:
    inputs and baselines (200 rows) no longer fed at once, but 50 beside 50."""
    import json

    import numpy as np

    pytest.importorskip("tensorflow", reason="needs TensorFlow")
    rows = tmp_path / "rows.npy"
    np.save(rows, np.random.default_rng(0).uniform(0, 1, (100, 28, 28, 1)).astype(np.float32))
    source = os.path.join(REALGRAPHS, "UniqueMNISTsolutions/model.ckpt-20000.meta")
    report = json.loads(run_cli("attribute", source, "--method", "deeplift", "--x", "Reshape:0", "--y",
                                "dense/BiasAdd", "--target", "3", "--input", rows, "-o", tmp_path / "out.npy",
                                "--json").stdout)
    assert report["batch"] == 100 and report["shape"] == [100, 28, 28, 1]
    assert np.load(tmp_path / "out.npy").shape == (100, 28, 28, 1)
