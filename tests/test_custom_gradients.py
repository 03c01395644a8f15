"""TensorFlow's own custom gradients: kept when saved, repaired by tf.custom_gradient's
convention, guided backpropagation for the whole Relu family (run with TensorFlow)."""

import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import fixture, run_cli
from tf_helpers import assert_close, gradients, load, tf, v1

import graphgrad
from graphgrad.errors import SelectionError

SAVED = fixture("saved_custom_gradient")  # forward 3x, gradient clip(3 dy, -0.1, 0.1), saved by TF's defaults
SAVED_X, SAVED_Y = "serving_default_x:0", "PartitionedCall:0"


def tf1_gradient(graph, y, x, value):
    return gradients(graph, y, x, {x: value})[0]


# -- 1. gradients saved with a SavedModel ---------------------------------------------


def test_ops_calls_a_saved_custom_gradient_saved_not_dangling():
    result = run_cli("ops", SAVED)
    assert "DANGLING" not in result.stdout and "--repair-dangling" not in result.stdout
    (override,) = json.loads(run_cli("ops", SAVED, "--json").stdout)["files"][0]["overrides"]
    assert override["status"] == "saved" and "__inference_internal_grad_fn_" in override["detail"]


def test_repair_dangling_leaves_a_saved_gradient_alone(tmp_path):
    out = tmp_path / "repaired"
    result = run_cli("rewrite", SAVED, "--repair-dangling", "identity", "-o", out)
    assert "changed 0 node(s)" in result.stdout and "left 1 node(s) alone" in result.stdout
    obj = tf.saved_model.load(str(out))
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = obj(x)
    assert_close(tape.gradient(y, x), [0.1, 0.1])  # the user's gradient, not the repair's [3, 3]


def test_force_over_a_saved_gradient_says_what_it_replaces(tmp_path):
    result = run_cli("rewrite", SAVED, "--node", "*/IdentityN=identity", "--force", "-o", tmp_path / "forced")
    assert "replaced 'CustomGradient-" in result.stdout and "saved with the model as function" in result.stdout


def test_import_graph_def_calls_the_saved_gradient():
    graph = tf.Graph()
    with graph.as_default():
        graphgrad.import_graph_def(SAVED, name="")
    assert_close(tf1_gradient(graph, SAVED_Y, SAVED_X, [1.0, 2.0]), [0.1, 0.1])


def test_a_tf1_loader_after_register_gradients_on_the_file():
    graphgrad.register_gradients(SAVED)
    graph = tf.Graph()
    with graph.as_default(), v1.Session(graph=graph) as session:
        v1.saved_model.load(session, ["serve"], SAVED)
        graphgrad.register_gradients(graph)  # routes the call into the function holding the override
    assert_close(tf1_gradient(graph, SAVED_Y, SAVED_X, [1.0, 2.0]), [0.1, 0.1])


# -- 2. repairs follow tf.custom_gradient's IdentityN(results..., args...) -------------

STE_X = np.array([0.5, -0.5, 2.0], np.float32)
STE_EXPECTED = [2.0, 2.0, 0.0]  # y = 2 * sign(x) repaired with ste: 2 * 1{|x| <= 1}


@pytest.mark.parametrize("source", ["ste_sign.meta", "ste_sign_frozen.pb"])
def test_repair_with_ste_sends_dy_to_the_argument(tmp_path, source):
    out = tmp_path / source
    run_cli("rewrite", fixture(source), "--repair-dangling", "ste", "-o", out)
    graph = load(out)
    assert_close(tf1_gradient(graph, "y:0", "x:0", STE_X), STE_EXPECTED)


def test_repair_in_a_tf2_function_body(tmp_path):
    out = tmp_path / "repaired"
    run_cli("rewrite", fixture("ste_sign_unsaved"), "--repair-dangling", "ste", "-o", out)
    graphgrad.register_gradients(str(out))
    obj = tf.saved_model.load(str(out))
    x = tf.constant(STE_X)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = obj(x)
    assert_close(tape.gradient(y, x), STE_EXPECTED)


IDENTITY_FORWARD = [("one", 1), ("two", 2), ("ten", 10)]  # fixtures/identity_forward.pb: x{i} has i + 1 entries


@pytest.mark.parametrize("spec, expected", [("identity", 2.0), ("ste", 2.0), ("ste(clip=0.5)", 0.0)])
def test_a_repaired_identity_forward_gives_each_argument_its_own_result(tmp_path, spec, expected):
    """IdentityN(a0..an, a0..an): each result is its own argument, so splits after
    the first also pass the ancestor test; the outputs read and the pairing decide."""
    out = tmp_path / "repaired.pb"
    run_cli("rewrite", fixture("identity_forward.pb"), "--repair-dangling", spec, "-o", out)
    graph = load(out)
    xs = [f"{group}/x{index}:0" for group, count in IDENTITY_FORWARD for index in range(count)]
    rng = np.random.default_rng(0)
    feed = {x: rng.uniform(0.6, 0.9, int(x.split("/x")[1][:-2]) + 1).astype(np.float32) for x in xs}  # |x| > 0.5
    for x, gradient in zip(xs, gradients(graph, "y:0", xs, feed)):
        assert_close(gradient, np.full(feed[x].shape, expected))


def test_the_split_of_an_identity_forward_is_found_from_the_graph():
    from graphgrad.gradients.common import custom_gradient_results

    graph = tf.Graph()
    with graph.as_default():  # plain TensorFlow: the dangling names are not looked up
        v1.import_graph_def(v1.GraphDef.FromString(open(fixture("identity_forward.pb"), "rb").read()), name="")
    assert [custom_gradient_results(graph.get_operation_by_name(f"{group}/IdentityN"))
            for group, _ in IDENTITY_FORWARD] == [1, 2, 10]


def test_a_split_the_graph_cannot_tell_is_refused_with_the_reason():
    """Two results of one shape, only the first read, the forward the identity but
    for a doubling: 1 result of 3 arguments, or 2 of 2, fit alike."""
    from graphgrad.gradients.common import custom_gradient_results

    graph = tf.Graph()
    with graph.as_default():
        a, b = v1.placeholder(tf.float32, [3], name="a"), v1.placeholder(tf.float32, [3], name="b")
        op = tf.identity_n([a * 2.0, b * 2.0, a, b])[0].op  # a plain IdentityN can look like this too
        tf.identity(op.outputs[0])
        with pytest.raises(ValueError, match="results cannot be told from its arguments"):
            custom_gradient_results(op)


def test_identity_on_a_custom_gradient_node_and_on_identity_n():
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [3], name="x")
        w = v1.placeholder(tf.float32, [3], name="w")
        a, b = tf.identity_n([x * 2.0, w * 3.0])  # unrelated tensors: a plain IdentityN
        graphgrad.override(graph, {"IdentityN": "identity"})
        feed = {x: STE_X, w: STE_X}
        assert_close(gradients(graph, a + b, [x, w], feed)[0], [2, 2, 2])
        assert_close(gradients(graph, a + b, [x, w], feed)[1], [3, 3, 3])


def test_embed_on_a_custom_gradient_node_uses_its_argument(tmp_path):
    out = tmp_path / "embedded.pb"
    run_cli("rewrite", fixture("ste_sign_frozen.pb"), "--node", "IdentityN=ste", "--force", "--embed", "-o", out)
    graph = tf.Graph()
    with graph.as_default():
        v1.import_graph_def(v1.GraphDef.FromString(out.read_bytes()), name="")  # plain TensorFlow: no runtime
    assert_close(tf1_gradient(graph, "y:0", "x:0", STE_X), STE_EXPECTED)


# -- 3. guided backpropagation on the Relu family --------------------------------------

RELU_X = np.array([-1.0, 3.0, 7.0], np.float32)


@pytest.mark.parametrize("build, expected", [
    (tf.nn.relu, [0, 1, 1]),
    (tf.nn.relu6, [0, 1, 0]),
    (lambda t: tf.nn.leaky_relu(t, alpha=0.2), [0.2, 1, 1]),
    (tf.nn.elu, [np.exp(-1), 1, 1]),
])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_guided_relu_is_the_ops_own_gradient_of_relu_dy(build, expected, sign):
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [3])
        y = build(x)
        graphgrad.override(graph, {y.op.type: "guided_relu"})
        grad = gradients(graph, y, x, {x: RELU_X}, grad_ys=np.full(3, sign, np.float32))[0]
    assert_close(grad, expected if sign > 0 else [0, 0, 0])


def test_guided_relu_on_another_op_type_is_refused_with_the_reason():
    graph = tf.Graph()
    with graph.as_default():
        tf.sigmoid(v1.placeholder(tf.float32, [3]))
        with pytest.raises(SelectionError, match="guided_relu is meant for op types Relu, Relu6"):
            graphgrad.override(graph, {"Sigmoid": "guided_relu"})


def test_rewrite_refuses_guided_relu_on_sign():
    result = run_cli("rewrite", fixture("binary_net.pb"), "--op", "Sign=guided_relu", "--dry-run", expect=1)
    assert "guided_relu is meant for op types" in result.stderr and "not Sign" in result.stderr


# -- 4. larq's sign: sign(sign(x) + 0.1) -----------------------------------------------

LARQ_X = np.array([0.5, -0.5, 2.0], np.float32)


def test_rewrite_warns_of_larqs_shifted_sign_and_the_fix_works(tmp_path):
    out = tmp_path / "larq.pb"
    result = run_cli("rewrite", fixture("larq_sign.pb"), "--op", "Sign=ste", "-o", out)
    assert "outer_sign reads shift = Sign(...) + c (larq's sign" in result.stdout
    assert_close(tf1_gradient(load(out), "y:0", "x:0", LARQ_X), [0, 2, 0])  # the outer ste sees 1.1 where x > 0
    run_cli("rewrite", out, "--node", "outer_sign=identity", "--force", "--in-place")
    assert_close(tf1_gradient(load(out), "y:0", "x:0", LARQ_X), [2, 2, 0])
    result = run_cli("check", out, "--feed", "x=[0.5,-0.5,2]")
    assert "larq's sign" not in result.stdout


def test_check_warns_of_larqs_shifted_sign(tmp_path):
    out = tmp_path / "larq.pbtxt"
    run_cli("rewrite", fixture("larq_sign.pb"), "--op", "Sign=ste", "--output-encoding", "text", "-o", out)
    result = run_cli("check", out, "--feed", "x=[0.5,-0.5,2]")
    assert "note: outer_sign reads shift = Sign(...) + c" in result.stdout


def test_identity_on_the_outer_sign_gives_no_warning(tmp_path):
    result = run_cli("rewrite", fixture("larq_sign.pb"), "--node", "outer_sign=identity", "--node", "inner_sign=ste",
                     "--dry-run")
    assert "larq's sign" not in result.stdout


# -- 6, 7. loader traps of TF1 MetaGraphDefs -------------------------------------------


def test_a_tf1_while_loop_from_a_meta_graph_is_differentiable():
    graph = tf.Graph()
    with graph.as_default():
        graphgrad.import_graph_def(fixture("tf1_loop.meta"), name="")
    assert_close(tf1_gradient(graph, "y:0", "x:0", [2.0, -1.0]), [12.0, 3.0])  # d x^3 / dx


def test_import_graph_def_returns_elements_of_a_meta_graph_with_loops():
    graph = tf.Graph()
    with graph.as_default():
        (y,) = graphgrad.import_graph_def(fixture("tf1_loop.meta"), name="net", return_elements=["y:0"])
    assert y.name == "net/y:0"


def test_stale_output_shapes_are_dropped_with_a_warning(monkeypatch):
    real = v1.import_graph_def

    def refusing(graph_def, **kwargs):  # what TF 2.21 says of old checkpoints' hints
        if any("_output_shapes" in node.attr for node in graph_def.node):
            raise ValueError("Node 'x' has an _output_shapes attribute inconsistent with the GraphDef for output #0")
        return real(graph_def, **kwargs)

    monkeypatch.setattr(v1, "import_graph_def", refusing)
    graph_def = graphgrad.read_model(fixture("binary_net.pb")).message
    graph_def.node[0].attr["_output_shapes"].list.shape.add()
    graph = tf.Graph()
    with graph.as_default(), pytest.warns(UserWarning, match="refused the graph's _output_shapes hints as stale"):
        graphgrad.import_graph_def(graph_def, name="")
    assert graph.get_operations()


def test_a_real_tf1_learner_with_loops_imports_for_gradients():
    import os

    from conftest import REALGRAPHS, REALGRAPHS_ABSENT

    path = os.path.join(REALGRAPHS, "scalable-agent", "model.ckpt-90912640.meta")
    if not os.path.exists(path):
        pytest.skip(REALGRAPHS_ABSENT)
    graph = tf.Graph()
    with graph.as_default():
        graphgrad.import_graph_def(path, name="")
        ops = graph.get_operations()
        exits = [op.outputs[0] for op in ops if op.type == "Exit" and op.outputs[0].dtype.is_floating]
        enters = [op.inputs[0] for op in ops if op.type == "Enter" and op.inputs[0].dtype.is_floating]
        grads = v1.gradients(exits[0], enters)  # plain tf.import_graph_def: no attribute "outer_context"
    assert len(grads) == len(enters)


# -- 5. re-saving a patched TF2 SavedModel ---------------------------------------------

FRESH_PROCESS = """
import sys, tensorflow as tf, graphgrad
graphgrad.register_gradients(sys.argv[1])
obj = tf.saved_model.load(sys.argv[1])
x = tf.constant([[0.5, -2.0, 0.3]])
with tf.GradientTape() as tape:
    tape.watch(x)
    y = obj(x)
print(tape.gradient(y, x).numpy().tolist())
"""


@pytest.mark.slow  # a fresh process imports TensorFlow
def test_graphgrad_save_keeps_the_overrides_for_a_fresh_process(tmp_path):
    import subprocess
    import sys

    patched, resaved = tmp_path / "patched", tmp_path / "resaved"
    run_cli("rewrite", fixture("tf2_saved_model"), "--op", "Sign=ste", "-o", patched)
    graphgrad.register_gradients(str(patched))
    obj = tf.saved_model.load(str(patched))
    with pytest.raises(ValueError, match="Error when tracing gradients"):
        tf.saved_model.save(obj, str(tmp_path / "default"))  # TensorFlow's own call, as the issue found it
    graphgrad.save(obj, str(resaved))
    overrides = graphgrad.summarize(graphgrad.read_model(str(resaved))).overrides
    assert "graphgrad/ste(clip=1.0)" in {override.value for override in overrides}
    result = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(resaved)], capture_output=True, text=True,
                            check=True)
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [[2.0, 0.0, 2.0]]  # 2 * ste: |x| <= 1


def test_loading_a_patched_model_drops_tensorflows_unsaved_gradient_warning(tmp_path, caplog):
    patched = tmp_path / "patched"
    run_cli("rewrite", fixture("tf2_saved_model"), "--op", "Sign=ste", "-o", patched)
    graphgrad.register_gradients(str(patched))
    with caplog.at_level("WARNING"):
        tf.saved_model.load(str(patched))
    assert "unsaved custom gradients" not in caplog.text


def test_embed_inside_a_tf1_loop_is_refused_with_the_alternative():
    result = run_cli("rewrite", fixture("tf1_loop.meta"), "--op", "Mul=ste", "--embed", "--dry-run", expect=1)
    assert "while/mul (Mul) is inside a TF1 while loop" in result.stderr and "without --embed" in result.stderr
    result = run_cli("insert", fixture("tf1_loop.meta"), "--at", "while/mul:0", "--grad", "ste", "--embed",
                     "--dry-run", expect=1)
    assert "inside a TF1 while loop" in result.stderr


def test_an_override_inside_a_tf1_loop_applies_at_every_round(tmp_path):
    out = tmp_path / "scaled.meta"
    run_cli("rewrite", fixture("tf1_loop.meta"), "--op", "Mul=scale(2)", "-o", out)
    graph = tf.Graph()
    with graph.as_default():
        graphgrad.import_graph_def(str(out), name="")
    # h_k = h_{k-1} * x from h_0 = 1, each Mul's gradient doubled: 2 (h + x dh) per round
    assert_close(tf1_gradient(graph, "y:0", "x:0", [2.0, -1.0]), [56.0, 14.0])


def test_on_a_huge_graph_the_fast_path_says_it_did_not_look_for_larqs_sign(tmp_path):
    from graphgrad.files.protos import GraphDef
    from graphgrad.readings.stored import SIGN_TRAP_NODE_LIMIT

    graph_def = GraphDef()
    graph_def.node.add(name="x", op="Placeholder")
    for index in range(SIGN_TRAP_NODE_LIMIT // 2 + 1):
        graph_def.node.add(name=f"s{index}", op="Sign", input=["x"])
        graph_def.node.add(name=f"a{index}", op="AddV2", input=[f"s{index}", "x"])
    path = tmp_path / "huge.pb"
    path.write_bytes(graph_def.SerializeToString())
    result = run_cli("rewrite", path, "--op", "Sign=ste", "--dry-run")
    assert "larq-style Signs of Sign(x) + c were not looked for" in result.stdout


def test_embed_on_a_custom_gradient_whose_split_the_graph_cannot_tell_is_refused(tmp_path):
    """IdentityN(2a, 3b, a, b) with only its first output read: one result of three
    arguments, or two of two, fit alike; --embed refuses rather than guess which
    input the gradient goes to (input 1, as it used to take, would be 3b)."""
    graph = tf.Graph()
    with graph.as_default():
        a, b = v1.placeholder(tf.float32, [3], name="a"), v1.placeholder(tf.float32, [3], name="b")

        @tf.custom_gradient
        def pair(u, v):
            return (u * 2.0, v * 3.0), lambda du, dv: (du, dv)

        first, _ = pair(a, b)
        tf.identity(first, name="y")
    path = tmp_path / "pair.pb"
    path.write_bytes(graph.as_graph_def().SerializeToString())
    result = run_cli("rewrite", path, "--op", "IdentityN=ste", "--force", "--embed", "-o", tmp_path / "out.pb",
                     expect=1)
    assert "its results cannot be told from its arguments (2 splits of its 4 inputs" in result.stderr
    assert not (tmp_path / "out.pb").exists()


TRIPLED_RELU_NET = """
import sys
import numpy as np
import tensorflow as tf

rng = np.random.default_rng(3)


@tf.custom_gradient
def tripled_relu(x):
    def gradient(dy):
        return dy * 3.0 * tf.cast(x > 0, dy.dtype)
    return tf.nn.relu(x), gradient


class Net(tf.Module):
    def __init__(self):
        self.kernel = tf.Variable(rng.normal(0, 0.5, (3, 3, 3, 4)).astype(np.float32))
        self.weights = tf.Variable(rng.normal(0, 0.5, (4, 2)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([None, 6, 6, 3], tf.float32)])
    def __call__(self, x):
        return tf.matmul(tf.reduce_mean(tripled_relu(tf.nn.conv2d(x, self.kernel, 1, "SAME")), [1, 2]), self.weights)


net = Net()
tf.saved_model.save(net, sys.argv[1], options=tf.saved_model.SaveOptions(experimental_custom_gradients=True))
x = tf.constant(rng.uniform(-1, 1, (2, 6, 6, 3)).astype(np.float32))
with tf.GradientTape() as tape:  # identity at the custom gradient's IdentityN: dy straight to its argument
    tape.watch(x)
    score = tf.matmul(tf.reduce_mean(tf.nn.conv2d(x, net.kernel, 1, "SAME"), [1, 2]), net.weights)[:, 1]
np.save(sys.argv[2], x.numpy())
np.save(sys.argv[3], tape.gradient(score, x).numpy())
"""


def test_a_saved_custom_gradient_that_captures_its_input_is_refused_with_a_fix_that_works(tmp_path):
    """A tf.custom_gradient whose gradient reads the forward's x is saved as a function
    taking x beside dy, which tf.saved_model.load binds and a graph loaded in graph
    mode cannot: refused in one line (was a traceback), and the rewrite it names runs:
    with identity, tf.custom_gradient's IdentityN sends dy to its argument (the
    convolution), as a tape on the net without the ReLU computes it. Saved in a
    process of its own: in this one the live Python gradient would be found."""
    exported, rows, expected = tmp_path / "exported", tmp_path / "rows.npy", tmp_path / "tape.npy"
    subprocess.run([sys.executable, "-c", TRIPLED_RELU_NET, exported, rows, expected], check=True,
                   capture_output=True)
    result = run_cli("attribute", exported, "--method", "gradient", "--input", rows, "--target", "1", "-o",
                     tmp_path / "o.npy", expect=1)
    [line] = result.stderr.strip().splitlines()
    assert "captured from the forward pass" in line and "run the model with tf.saved_model.load" in line
    fix = line.split("(graphgrad rewrite MODEL ")[1].split(" -o OUT)")[0]
    assert fix == "--node '*/IdentityN=SPEC' --force"
    run_cli("rewrite", exported, "--node", "*/IdentityN=identity", "--force", "-o", tmp_path / "fixed")
    run_cli("attribute", tmp_path / "fixed", "--method", "gradient", "--input", rows, "--target", "1", "-o",
            tmp_path / "o.npy")
    np.testing.assert_allclose(np.load(tmp_path / "o.npy"), np.load(expected), rtol=1e-5, atol=1e-6)
