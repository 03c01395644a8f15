"""graphgrad unfreeze and freeze (run with TensorFlow): a frozen graph's weights made
variables of a TF1 training checkpoint that loads and trains in a fresh graph, its
overrides kept; folded back, the same graph."""

import os

import numpy as np
import pytest

from conftest import REALGRAPHS, REALGRAPHS_ABSENT, dead_pid, fixture, run_cli
from digits_data import digits_npz
from tf_helpers import tf, v1

from graphgrad import iter_nodes, read_model

ROUND_TRIPS = ["dense_net.pb", "binary_net.pb", "binary_net.pbtxt", "image_net.pb", "quantized_classifier.pb",
               "grl_net.pb"]
REAL = ["dl4j-tf-examples/src/main/resources/tf_graphs/examples/lstm_mnist/frozen_model.pb",
        "tf-mtcnn/mtcnn.pb", "tf2onnx-tests/tests/models/ae0/frozen.pb"]


def unfreeze(tmp_path, source, *args):
    os.makedirs(tmp_path, exist_ok=True)
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
        pytest.skip(REALGRAPHS_ABSENT)
    folder = unfreeze(tmp_path, source)
    run_cli("freeze", folder, "-o", tmp_path / "again.pb")
    assert run_cli("diff", source, tmp_path / "again.pb").stdout.strip().endswith("no differences")


@pytest.mark.slow
def test_a_real_image_model_restored_in_a_process_of_its_own_computes_what_it_computed_bit_for_bit(tmp_path):
    """MTCNN's frozen face detector (19 convolutions, TF1 loops over the image's
    scales), unfrozen, restored in a fresh process: every box, landmark and
    probability equals the frozen graph's, bit for bit (thresholds at zero, so that
    random pixels give boxes: 167 here)."""
    import subprocess
    import sys

    import graphgrad

    source = os.path.join(REALGRAPHS, "tf-mtcnn/mtcnn.pb")
    if not os.path.exists(source):
        pytest.skip(REALGRAPHS_ABSENT)
    feeds = {"input:0": np.random.default_rng(0).uniform(0, 255, (96, 96, 3)).astype(np.float32),
             "min_size:0": np.float32(20.0), "thresholds:0": np.zeros(3, np.float32), "factor:0": np.float32(0.709)}
    fetches = ["prob:0", "box:0", "landmarks:0"]
    graph = tf.Graph()
    with graph.as_default(), pytest.warns(UserWarning, match="TF1 while loops"):
        graphgrad.import_graph_def(source, name="")
    with v1.Session(graph=graph) as session:
        frozen = session.run(fetches, feeds)
    folder = unfreeze(tmp_path, source)
    np.savez(tmp_path / "feeds.npz", **feeds)
    script = os.path.join(os.path.dirname(__file__), "forward_checkpoint.py")
    result = subprocess.run([sys.executable, script, str(folder), str(tmp_path / "feeds.npz"),
                             str(tmp_path / "out.npz"), *fetches], capture_output=True, text=True,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-2000:]
    restored_outputs = np.load(tmp_path / "out.npz")
    assert len(frozen[0]) == 167
    for index, value in enumerate(frozen):
        np.testing.assert_array_equal(restored_outputs[f"arr_{index}"], value)


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


def one_descent_step(folder, learning_rate=0.1):
    """How one step of gradient descent on the logits' squared sum moves the feature
    weights (w1) and the head's (w2) of an unfrozen grl_net, and the gradient of the
    loss with respect to each (as tf.gradients routes it: through any override)."""
    graph, session = restored(folder)
    with graph.as_default(), session:
        weights = [graph.get_tensor_by_name(f"{name}/graphgrad_variable:0") for name in ("w1", "w2")]
        loss = tf.reduce_sum(graph.get_tensor_by_name("logits:0") ** 2)
        gradients = tf.gradients(loss, weights)
        step = v1.train.GradientDescentOptimizer(learning_rate).minimize(loss)
        rows = {"x:0": np.random.default_rng(0).uniform(-1, 1, (16, 3)).astype(np.float32)}
        before, routed = session.run(weights), session.run(gradients, rows)
        session.run(step, rows)
        after = session.run(weights)
    return [b - a for a, b in zip(before, after)], routed


def test_gradient_reversal_moves_the_features_up_the_heads_loss_and_the_head_down(tmp_path):
    """insert --grad reverse(1.0) between a frozen feature extractor and its head, then
    unfreeze: one descent step moves the head's weights down the loss's gradient, as
    without the reversal, and the features' weights up it, by the same amount."""
    plain_moves, plain_gradients = one_descent_step(unfreeze(tmp_path / "plain", fixture("grl_net.pb")))
    reversed_net = tmp_path / "grl.pb"
    run_cli("insert", fixture("grl_net.pb"), "--at", "feat:0", "--grad", "reverse(1.0)", "-o", reversed_net)
    moves, gradients = one_descent_step(unfreeze(tmp_path / "reversed", reversed_net))
    np.testing.assert_allclose(gradients[0], -plain_gradients[0], rtol=1e-5)  # the features': reversed
    np.testing.assert_allclose(gradients[1], plain_gradients[1], rtol=1e-5)  # the head's: as it was
    np.testing.assert_allclose(moves[0], 0.1 * plain_gradients[0], rtol=1e-4, atol=1e-7)  # up the loss
    np.testing.assert_allclose(moves[1], -0.1 * plain_gradients[1], rtol=1e-4, atol=1e-7)  # down it
    assert np.abs(plain_gradients[0]).max() > 0.1  # and the features' gradient is no zero


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    """scikit-learn's 8x8 digits (1,797 images, from the data file its wheel ships),
    split 1,437 / 360, pixels / 16, as an .npz for tests/train_digits.py."""
    try:
        return digits_npz(tmp_path_factory.mktemp("sklearn"))
    except RuntimeError as failure:
        pytest.skip(str(failure))


def trained_digits(folder, digits) -> dict:
    import json
    import subprocess
    import sys

    script = os.path.join(os.path.dirname(__file__), "train_digits.py")
    result = subprocess.run([sys.executable, script, str(folder), str(digits)], capture_output=True, text=True,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.network  # scikit-learn's wheel, for its digits
def test_a_frozen_binarized_mlp_learns_the_digits_with_ste_and_not_without(tmp_path, digits):
    """Issue 30's acceptance: the frozen net at its random initialisation, rewritten
    with ste on every Sign (its weights' and its hidden activations'), unfrozen, then
    300 steps of TF1 Adam in a process of its own: test accuracy from chance to over
    85% (96% here). Without the rewrite, TensorFlow's zero gradient for Sign leaves
    every weight that feeds a Sign where it was (and the accuracy at chance)."""
    run_cli("rewrite", fixture("binarized_digits.pb"), "--op", "Sign=ste", "-o", tmp_path / "ste.pb")
    ste = trained_digits(unfreeze(tmp_path / "with", tmp_path / "ste.pb"), digits)
    plain = trained_digits(unfreeze(tmp_path / "without", fixture("binarized_digits.pb")), digits)
    assert ste["before"] < 0.2 and ste["after"] >= 0.85, ste
    assert all(ste["moved"].values()), ste
    assert plain["before"] == ste["before"] and plain["after"] < 0.2, plain
    assert not any(plain["moved"].values()), plain


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


def test_a_constant_whose_content_disagrees_with_its_shape_is_one_line(tmp_path):
    from graphgrad.files.protos import GraphDef

    graph = GraphDef.FromString(open(fixture("classifier.pb"), "rb").read())
    for node in graph.node:
        if node.name == "w1":  # 4x6 float32: 96 bytes, cut to 20
            node.attr["value"].tensor.tensor_content = node.attr["value"].tensor.tensor_content[:20]
    (tmp_path / "damaged.pb").write_bytes(graph.SerializeToString())
    result = run_cli("unfreeze", tmp_path / "damaged.pb", "-o", tmp_path / "out", expect=1)
    assert ("constant w1: its shape 4x6 holds 24 float32 entries (96 bytes), and its value has 20 bytes: the file "
            "is damaged (leave it out: --exclude 'w1')") in result.stderr
    assert not (tmp_path / "out").exists()
    run_cli("unfreeze", tmp_path / "damaged.pb", "-o", tmp_path / "out", "--exclude", "w1")


def test_a_killed_unfreezes_staging_folder_is_removed_by_the_next_run(tmp_path):
    left = tmp_path / f".out.{dead_pid()}.k1ll3d00.graphgrad-tmp"  # as a killed run leaves it
    left.mkdir()
    (left / "model.index").write_bytes(b"half")
    run_cli("unfreeze", fixture("dense_net.pb"), "-o", tmp_path / "out")
    assert sorted(os.listdir(tmp_path)) == ["out"]


def scalar_chain(count: int):
    """x + c0 + c1 + ... + c(count - 1), each c a float scalar constant 0.5 + i / count."""
    from graphgrad.files.protos import DataType, GraphDef

    graph = GraphDef()
    node = graph.node.add(name="x", op="Placeholder")
    node.attr["dtype"].type = DataType.Value("DT_FLOAT")
    previous = "x"
    for index in range(count):
        constant = graph.node.add(name=f"c{index}", op="Const")
        constant.attr["dtype"].type = DataType.Value("DT_FLOAT")
        constant.attr["value"].tensor.dtype = DataType.Value("DT_FLOAT")
        constant.attr["value"].tensor.float_val.append(0.5 + index / count)
        add = graph.node.add(name=f"add{index}", op="AddV2", input=[previous, constant.name])
        add.attr["T"].type = DataType.Value("DT_FLOAT")
        previous = add.name
    return graph


@pytest.mark.slow
def test_thousands_of_small_constants_unfreeze_in_one_pass_and_restore(tmp_path):
    """3,000 scalar weights: one run per weight took minutes (quadratic); now seconds."""
    import subprocess
    import sys

    source = tmp_path / "constants.pb"
    source.write_bytes(scalar_chain(3000).SerializeToString())
    subprocess.run([sys.executable, "-m", "graphgrad", "unfreeze", str(source), "--min-size", "1", "-o",
                    str(tmp_path / "out")], check=True, capture_output=True, timeout=120)
    reader = tf.train.load_checkpoint(str(tmp_path / "out" / "model"))
    assert reader.get_tensor("c2999/graphgrad_variable") == np.float32(0.5 + 2999 / 3000)
    assert len(reader.get_variable_to_shape_map()) == 3000


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
    made_by = v1.GraphDef.FromString(open(fixture("binary_net.pb"), "rb").read()).versions.producer
    resaved = [] if made_by == tf.version.GRAPH_DEF_VERSION else ["! fields other than nodes differ: versions"]
    assert sorted(changed) == resaved + ["~ dense1/weights (Const)", "~ dense2/weights (Const)"]
    details = [line.strip() for line in report.splitlines()[2:] if not line.startswith(("~", "!"))]
    assert len(details) == 2 and all(line.startswith("attr value: tensor") for line in details)


def test_a_meta_graph_whose_weights_were_folded_into_constants_unfreezes(tmp_path):
    from graphgrad.files.protos import GraphDef, MetaGraphDef

    meta = MetaGraphDef()
    meta.graph_def.CopyFrom(GraphDef.FromString(open(fixture("binary_net.pb"), "rb").read()))
    meta.meta_info_def.tags.append("serve")
    (tmp_path / "folded.meta").write_bytes(meta.SerializeToString())
    folder = unfreeze(tmp_path, tmp_path / "folded.meta")
    run_cli("freeze", folder, "-o", tmp_path / "again.pb")
    assert run_cli("diff", fixture("binary_net.pb"), tmp_path / "again.pb").stdout.strip().endswith("no differences")


def test_a_graph_whose_weights_are_variables_already_says_so(tmp_path):
    result = run_cli("unfreeze", fixture("model.meta"), "-o", tmp_path / "out", expect=1)
    assert "its weights are variables already" in result.stderr and not (tmp_path / "out").exists()


def test_freeze_of_a_graph_file_says_what_it_takes(tmp_path):
    result = run_cli("freeze", fixture("binary_net.pb"), "-o", tmp_path / "out.pb", expect=2)
    assert "is a graph, not a checkpoint" in result.stderr and not (tmp_path / "out.pb").exists()


def test_a_folder_unfreeze_wrote_is_pointed_to_its_graph_and_to_freeze(tmp_path):
    """unfreeze (or ops, check) of the folder unfreeze wrote: not "not a SavedModel"
    alone, but the .meta inside it and graphgrad freeze (issue 49.2)."""
    out = tmp_path / "trainable"
    run_cli("unfreeze", fixture("binary_net.pb"), "-o", out, "--min-size", "1")
    result = run_cli("unfreeze", out, "-o", tmp_path / "again", expect=1)
    assert "training checkpoint's folder (model.meta)" in result.stderr
    assert f"graphgrad freeze {out} -o OUT.pb" in result.stderr


def test_quantisation_aware_kernels_become_variables_and_integer_weights_are_named(tmp_path):
    """issue 49.1: a quantisation-aware net's kernel behind FakeQuantWithMinMaxVars
    becomes a variable (the fake quantisation's gradient is straight-through), and
    a quantised net's integer weight behind Dequantize, which no float variable can
    hold, is named with why, in the list and in --json, instead of left out silently."""
    import json

    from tf_helpers import graph_file, tf, v1

    def build():
        x = v1.placeholder(tf.float32, [None, 4], name="x")
        kernel = tf.constant(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), name="dense/kernel")
        quantised = tf.quantization.fake_quant_with_min_max_vars(kernel, -1.0, 1.0, name="dense/fake_quant")
        hidden = tf.matmul(x, quantised, name="dense/MatMul")
        codes = tf.constant(np.arange(6, dtype=np.int8).reshape(3, 2), dtype=tf.qint8, name="head/codes")
        weights = tf.quantization.dequantize(codes, -1.0, 1.0, name="head/dequantize")
        tf.matmul(hidden, weights, name="logits")

    model = graph_file(tmp_path, build, "qat.pb")
    listing = json.loads(run_cli("unfreeze", model, "--list", "--json").stdout)
    assert [weight["name"] for weight in listing["variables"]] == ["dense/kernel"]
    [kept] = listing["kept"]
    assert kept["name"] == "head/codes" and "behind Dequantize head/dequantize" in kept["why"]
    text = run_cli("unfreeze", model, "--list").stdout
    assert "kept as a constant: head/codes: 6 quantised (integer) entries" in text


@pytest.mark.slow
def test_a_real_quantisation_aware_graphs_fake_quantised_kernel_trains_through_its_straight_through_gradient(
        tmp_path):
    """TensorFlow Lite's converter test graph (an SSD box predictor whose 1x1 kernel
    goes through FakeQuantWithMinMaxVarsPerChannel): unfreeze makes the kernel and
    the biases variables (47,802 entries; the kernel was left a constant before),
    and the gradient to the kernel variable is the frozen graph's to its constant:
    fake quantisation's own straight-through gradient, not zero."""
    source = os.path.join(REALGRAPHS, "tensorflow-testdata/tensorflow/compiler/mlir/lite/tests/end2end/"
                                      "fake_quant_without_identity.pbtxt")
    if not os.path.exists(source):
        pytest.skip(REALGRAPHS_ABSENT)
    import json

    listing = json.loads(run_cli("unfreeze", source, "--list", "--json").stdout)
    assert [weight["name"] for weight in listing["variables"]] == ["BoxPredictor_4/ClassPredictor/weights",
                                                                  "BoxPredictor_4/ClassPredictor/biases"]
    assert sum(np.prod(weight["shape"]) for weight in listing["variables"]) == 47_802
    rows = np.random.default_rng(0).normal(size=(1, 1, 1, 256)).astype(np.float32)  # its batch is fixed to 1
    frozen = tf.Graph()
    with frozen.as_default():
        from google.protobuf import text_format

        v1.import_graph_def(text_format.Parse(open(source).read(), v1.GraphDef()), name="")
        kernel = frozen.get_tensor_by_name("BoxPredictor_4/ClassPredictor/weights:0")
        [expected] = v1.gradients(tf.reduce_sum(frozen.get_tensor_by_name("output:0") ** 2), [kernel])
        with v1.Session(graph=frozen) as session:
            expected = session.run(expected, {"input:0": rows})
    graph, session = restored(unfreeze(tmp_path, source))
    with graph.as_default():
        [variable] = [v for v in graph.get_collection(v1.GraphKeys.TRAINABLE_VARIABLES)
                      if v.op.name == "BoxPredictor_4/ClassPredictor/weights/graphgrad_variable"]
        [gradient] = v1.gradients(tf.reduce_sum(graph.get_tensor_by_name("output:0") ** 2), [variable])
        got = session.run(gradient, {"input:0": rows})
    assert np.abs(expected).max() > 0
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6 * np.abs(expected).max())
