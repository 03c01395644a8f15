import threading

import numpy as np
import pytest

from conftest import fixture
from tf_helpers import assert_close, gradients, rewrite_and_load, run_cli, tf, v1

import graphgrad
from graphgrad import SelectionError, UnresolvedGradientsError
from graphgrad.tf.runtime import is_registered


def test_registration_is_idempotent(tmp_path):
    out = tmp_path / "o.pb"
    run_cli("rewrite", fixture("binary_net.pb"), "--op", "Sign=ste(clip=1.75)", "-o", out)
    first = graphgrad.register_gradients(str(out))
    second = graphgrad.register_gradients(str(out))
    assert first.names == second.names == ("graphgrad/ste(clip=1.75)",)
    assert second.registered == ()
    assert is_registered("graphgrad/ste(clip=1.75)")


def test_registration_is_safe_from_several_threads():
    graph_def = graphgrad.read_model(fixture("binary_net.pb")).message
    graphgrad.rewrite_model(
        graphgrad.Model(graph_def, "graphdef", "binary"),
        graphgrad.RewriteOptions(rules=(graphgrad.parse_rule("op", "Sign=scale(7.25)"),)),
        inplace=True,
    )
    results, errors = [], []

    def register():
        try:
            results.append(graphgrad.register_gradients(graph_def))
        except Exception as error:  # noqa: BLE001 - any failure fails the test
            errors.append(error)

    threads = [threading.Thread(target=register) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sum(len(r.registered) for r in results) == 1


def test_beside_the_users_own_quantize_grad(tmp_path):
    if not is_registered("QuantizeGrad"):
        @tf.RegisterGradient("QuantizeGrad")
        def _users_own(op, grad):
            return grad * 100.0

    graph = rewrite_and_load(tmp_path, fixture("acceptance", "sign_sum.pb"), "--op", "Sign=QuantizeGrad")
    graphgrad.register_gradients(graph)
    assert_close(gradients(graph, "y:0", "x:0", {"x:0": [0.5, -2.0, 0.0]})[0], [2.0, 0.0, 2.0])


def test_dangling_custom_gradient_is_explained_then_repaired(tmp_path):
    graph = tf.Graph()
    with graph.as_default():
        v1.train.import_meta_graph(fixture("custom_gradient.meta"))
    with pytest.raises(UnresolvedGradientsError) as error:
        graphgrad.register_gradients(graph)
    message = str(error.value)
    assert "'CustomGradient-" in message and "on IdentityN" in message
    assert "graphgrad rewrite MODEL --node 'IdentityN=identity' --force" in message

    repaired = tmp_path / "repaired.meta"
    run_cli("rewrite", fixture("custom_gradient.meta"), "--repair-dangling", "identity", "-o", repaired)
    graph = tf.Graph()
    with graph.as_default():
        v1.train.import_meta_graph(str(repaired))
    graphgrad.register_gradients(graph)
    assert_close(gradients(graph, "loss:0", "x:0", {"x:0": [1.0, 2.0]})[0], [3.0, 3.0])


def test_misspelt_tf_name_and_missing_user_module(tmp_path):
    out = tmp_path / "o.pb"
    run_cli("rewrite", fixture("binary_net.pb"), "--node", "dense1/Sign=tf:Identiy",
            "--node", "dense2/logits=tf:Identity", "-o", out)
    model = graphgrad.read_model(str(out))
    for ref in graphgrad.iter_nodes(model):
        if ref.name == "binarize_input/Sign":
            ref.set_override("graphgrad/never_imported_gradient")
    with pytest.raises(UnresolvedGradientsError) as error:
        graphgrad.register_gradients(model)
    message = str(error.value)
    assert message.startswith("2 gradient override name(s) cannot be resolved")
    assert "'Identiy' on dense1/Sign: no gradient is registered under this name" in message
    assert "'graphgrad/never_imported_gradient' on binarize_input/Sign" in message
    assert "import the module that declares this gradient" in message
    assert "'Identity'" not in message, "tf:Identity resolves: TensorFlow has that gradient"


def test_user_gradient_in_a_loading_process(tmp_path):
    @graphgrad.gradient("halve_runtime")
    def halve(op, grad):
        """dy / 2"""
        return grad * 0.5

    graph = rewrite_and_load(tmp_path, fixture("acceptance", "identity.pb"), "--op", "Identity=halve_runtime|scale(3)")
    assert_close(gradients(graph, "out:0", "x:0", {"x:0": [3.0]})[0], [1.5])


def test_function_bodies_get_their_gradients(tmp_path):
    graph = rewrite_and_load(tmp_path, fixture("functions.pb"), "--op", "Sign=ste")
    x = [0.5, -2.0, 0.0]
    assert_close(gradients(graph, "Identity:0", "x:0", {"x:0": x, "flag:0": True})[0], [2.0, 0.0, 2.0])
    assert_close(gradients(graph, "Identity:0", "x:0", {"x:0": x, "flag:0": False})[0], [1.0, 0.0, 1.0])


def test_tf1_saved_model_loader(tmp_path):
    out = tmp_path / "sm"
    run_cli("rewrite", fixture("saved_model"), "--op", "Sign=ste", "-o", out)
    graph = tf.Graph()
    with v1.Session(graph=graph) as session:
        v1.saved_model.loader.load(session, ["serve"], str(out))
        registration = graphgrad.register_gradients(graph)
        assert "graphgrad/ste(clip=1.0)" in registration.names
        grad = v1.gradients(graph.get_tensor_by_name("y:0"), graph.get_tensor_by_name("x:0"))[0]
        assert_close(session.run(grad, {"x:0": [0.5, -2.0, 0.0]}), [3.0, 0.0, 3.0])


def test_tf2_saved_model_load_and_gradient_tape(tmp_path):
    """A TF2 SavedModel: the Sign is in a tf.function's body, and tf.saved_model.load
    differentiates the function with the override."""
    out = tmp_path / "sm"
    rewritten = run_cli("rewrite", fixture("tf2_saved_model"), "--op", "Sign=ste", "-o", out)
    assert "meta_graph 0 [serve]: __inference___call___" in rewritten.output
    x = tf.constant([[0.5, -0.3, 2.0]])
    graphgrad.register_gradients(str(out))
    for path, expected in ((fixture("tf2_saved_model"), [[0.0, 0.0, 0.0]]), (str(out), [[2.0, 2.0, 0.0]])):
        loaded = tf.saved_model.load(path)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = loaded(x)
        assert float(y) == 2.0
        assert_close(tape.gradient(y, x).numpy(), expected)


def test_tf1_loader_of_a_tf2_saved_model_routes_calls_through_python(tmp_path):
    """Graph mode differentiates PartitionedCall with SymbolicGradient (C++), which
    ignores the override in the function; register_gradients(graph) routes the call
    through graphgrad's `call` gradient, nested calls included."""
    out = tmp_path / "sm"
    run_cli("rewrite", fixture("tf2_saved_model"), "--op", "Sign=ste", "-o", out)
    for path, routed, expected in ((fixture("tf2_saved_model"), (), [[0.0, 0.0, 0.0]]),
                                   (str(out), ("PartitionedCall",), [[2.0, 2.0, 0.0]])):
        named = graphgrad.summarize(graphgrad.read_model(path)).unrouted_calls  # what ops and rewrite say
        assert tuple(name.removeprefix("meta_graph 0 [serve]: ") for name in named if "/" not in name) == routed
        graph = tf.Graph()
        with v1.Session(graph=graph) as session:
            v1.saved_model.loader.load(session, ["serve"], path)
            assert graphgrad.register_gradients(graph).calls == routed
            assert graphgrad.register_gradients(graph).calls == (), "routing happens once"
            x, y = graph.get_tensor_by_name("serving_default_x:0"), graph.get_tensor_by_name("PartitionedCall:0")
            assert_close(session.run(tf.gradients(y, x)[0], {x: [[0.5, -0.3, 2.0]]}), expected)


def test_a_call_inside_a_branch_function(tmp_path):
    """call_in_branch: If -> branch function -> PartitionedCall -> Sign. TensorFlow
    builds a branch's graph from the library when it differentiates the If:
    graphgrad.import_graph_def marks the call before the graph is built, and
    register_gradients on a built graph adds a routed copy of the branch and points
    the If at it."""
    out = tmp_path / "out.pb"
    run_cli("rewrite", fixture("call_in_branch.pb"), "--op", "Sign=ste", "-o", out)
    x_value = [0.5, -0.3, 2.0]

    def gradient(graph, p):
        with graph.as_default():
            grad = tf.gradients(graph.get_tensor_by_name("y:0"), graph.get_tensor_by_name("x:0"))[0]
        with v1.Session(graph=graph) as session:
            return session.run(grad, {"x:0": x_value, "p:0": p})

    graph = tf.Graph()
    with graph.as_default():
        graphgrad.import_graph_def(str(out), name="")
    assert_close(gradient(graph, True), [2.0, 2.0, 0.0])  # ste(clip=1) * 2
    assert_close(gradient(graph, False), [3.0, 3.0, 3.0])
    graph = tf.Graph()
    with graph.as_default():
        v1.import_graph_def(v1.GraphDef.FromString(out.read_bytes()), name="")
    registration = graphgrad.register_gradients(graph)
    assert registration.unrouted == () and registration.calls == ()  # no call op at the top level
    [cond] = [op for op in graph.get_operations() if op.type == "StatelessIf"]
    assert cond.get_attr("then_branch").name.endswith("_graphgrad_routed")
    assert graphgrad.register_gradients(graph).unrouted == (), "routing happens once"
    assert_close(gradient(graph, True), [2.0, 2.0, 0.0])
    with graph.as_default():
        y = graph.get_tensor_by_name("y:0")
        with v1.Session() as session:  # the copy computes what the branch did
            assert_close(session.run(y, {"x:0": x_value, "p:0": True}), [2.0, -2.0, 2.0])


@pytest.mark.parametrize("load", ["graphgrad.import_graph_def", "a TF loader, then register_gradients"])
def test_a_call_inside_a_loop_body(tmp_path, load):
    """call_in_loop: two rounds of y = 2 sign(y) y in a While whose body calls the
    Sign's function. With ste: dy/dx = 2 (y [|y| <= 1] + sign y) per round."""
    out = tmp_path / "out.pb"
    run_cli("rewrite", fixture("call_in_loop.pb"), "--op", "Sign=ste", "-o", out)
    graph = tf.Graph()
    with graph.as_default():
        if load == "graphgrad.import_graph_def":
            graphgrad.import_graph_def(str(out), name="")
        else:
            v1.import_graph_def(v1.GraphDef.FromString(out.read_bytes()), name="")
            assert graphgrad.register_gradients(graph).unrouted == ()
        grad = tf.gradients(graph.get_tensor_by_name("y:0"), graph.get_tensor_by_name("x:0"))[0]
    with v1.Session(graph=graph) as session:
        values = session.run([graph.get_tensor_by_name("y:0"), grad], {"x:0": [0.5, -0.3, 2.0]})
    assert_close(values[0], [2.0, 1.2, 8.0])  # 4 |x|
    assert_close(values[1], [3.0 * 4.0, -2.6 * 3.2, 2.0 * 2.0])


def test_a_finalized_graph_cannot_take_routed_copies(tmp_path):
    out = tmp_path / "out.pb"
    run_cli("rewrite", fixture("call_in_branch.pb"), "--op", "Sign=ste", "-o", out)
    graph = tf.Graph()
    with graph.as_default():
        v1.import_graph_def(v1.GraphDef.FromString(out.read_bytes()), name="")
    graph.finalize()
    with pytest.warns(graphgrad.UnroutedCallsWarning, match="before the graph is finalized"):
        [call] = graphgrad.register_gradients(graph).unrouted
    assert call.startswith("cond_true_") and call.endswith("/cond/PartitionedCall")
    fixed = tmp_path / "fixed.pb"  # the warning's fix for any loader: the call gradient in the file
    run_cli("rewrite", out, "--node", f"{call}=call", "--force", "-o", fixed)
    graph = tf.Graph()
    with graph.as_default():
        v1.import_graph_def(v1.GraphDef.FromString(fixed.read_bytes()), name="")
        grad = tf.gradients(graph.get_tensor_by_name("y:0"), graph.get_tensor_by_name("x:0"))[0]
    graph.finalize()
    assert graphgrad.register_gradients(graph).unrouted == ()
    with v1.Session(graph=graph) as session:
        assert_close(session.run(grad, {"x:0": [0.5, -0.3, 2.0], "p:0": True}), [2.0, 2.0, 0.0])


def test_a_call_with_an_override_of_its_own_is_left_alone(tmp_path):
    """A name the user registered on the call op itself wins over routing."""
    out = tmp_path / "sm"
    run_cli("rewrite", fixture("tf2_saved_model"), "--op", "Sign=ste", "-o", out)
    run_cli("rewrite", out, "--node", "PartitionedCall=tf:Identity", "--force", "--in-place")
    graph = tf.Graph()
    with v1.Session(graph=graph) as session:
        v1.saved_model.loader.load(session, ["serve"], str(out))
        assert graphgrad.register_gradients(graph).calls == ()
        assert graph.get_operation_by_name("PartitionedCall").get_attr("_gradient_op_type") == b"Identity"


def test_a_routed_call_that_reads_a_variable(tmp_path):
    """A StatefulPartitionedCall with the variable's handle as an input: x gets the
    override's gradient, and the variable its own, through the handle."""
    out = tmp_path / "sm"
    run_cli("rewrite", fixture("tf2_saved_model_variable"), "--op", "Sign=ste", "-o", out)
    graph = tf.Graph()
    with v1.Session(graph=graph) as session:
        v1.saved_model.loader.load(session, ["serve"], str(out))
        x = graph.get_tensor_by_name("serving_default_x:0")
        [call] = [op for op in x.consumers() if op.type == "StatefulPartitionedCall"]
        assert graphgrad.register_gradients(graph).calls == (call.name,)
        y, handle = call.outputs[0], call.inputs[1]
        values = session.run([y, *tf.gradients(y, [x, handle])], {x: [0.5, -0.3, 2.0]})
    assert_close(values[0], -1.5)  # 1.5 - 2.0 - 1.0
    assert_close(values[1], [1.5, 2.0, 0.0])  # w where |x| <= 1
    assert_close(values[2], [1.0, -1.0, 1.0])  # sign(x)


def test_call_is_written_under_its_canonical_name():
    from graphgrad.gradients.calls import CALL_GRADIENT

    assert graphgrad.attr_value_for(graphgrad.parse_spec("call")) == CALL_GRADIENT


def test_override_a_live_graph():
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [3])
        y = tf.reduce_sum(2.0 * tf.sign(x))
        stacked = tf.stack([x, x])
    report = graphgrad.override(graph, {"Sign": "ste"})
    assert [c.op_type for c in report.changes] == ["Sign"]
    assert_close(gradients(graph, y, x, {x: [0.5, -2.0, 0.0]})[0], [2.0, 0.0, 2.0])
    with pytest.raises(SelectionError, match="the graph has op type Pack"):
        graphgrad.override(graph, {"stack": "select"})
    graphgrad.override(graph, {"Pack": "select(1)"})
    grad_ys = np.array([[3.0, 4.0, 5.0], [6.0, 8.0, 9.0]], np.float32)
    assert_close(gradients(graph, stacked, x, {x: [1.0, 2.0, 3.0]}, grad_ys)[0], [6.0, 8.0, 9.0])
    with pytest.raises(SelectionError, match="add --force"):
        graphgrad.override(graph, {"Sign": "identity"})


def _sign_function():
    @tf.function
    def doubled_sign(x):
        return 2.0 * tf.sign(x)

    return doubled_sign, doubled_sign.get_concrete_function(tf.TensorSpec([3]))


def _tape_gradient(function, x, persistent=False):
    with tf.GradientTape(persistent=persistent) as tape:
        tape.watch(x)
        y = function(x)
    return tape.gradient(y, x).numpy()


def test_override_a_traced_function_after_its_gradient_was_taken():
    # TensorFlow caches a traced function's backward function on the first
    # gradient; an override written afterwards used to be ignored without a word
    x = tf.constant([0.5, -2.0, 3.0])
    traced, concrete = _sign_function()
    assert_close(_tape_gradient(concrete, x), [0.0, 0.0, 0.0])
    assert_close(_tape_gradient(concrete, x, persistent=True), [0.0, 0.0, 0.0])
    graph_mode = tf.function(lambda x: tf.gradients(concrete(x), x)[0])
    assert_close(graph_mode(x).numpy(), [0.0, 0.0, 0.0])
    graphgrad.override(concrete, {"Sign": "identity"})
    assert_close(_tape_gradient(concrete, x), [2.0, 2.0, 2.0])
    assert_close(_tape_gradient(traced, x), [2.0, 2.0, 2.0])
    assert_close(_tape_gradient(concrete, x, persistent=True), [2.0, 2.0, 2.0])
    fresh_graph_mode = tf.function(lambda x: tf.gradients(concrete(x), x)[0])
    assert_close(fresh_graph_mode(x).numpy(), [2.0, 2.0, 2.0])


def test_override_a_traced_functions_graph_and_refuse_a_tf_function():
    x = tf.constant([0.5, -2.0, 3.0])
    traced, concrete = _sign_function()
    graphgrad.override(concrete.graph, {"Sign": "ste"})
    assert_close(_tape_gradient(concrete, x), [2.0, 0.0, 0.0])
    with pytest.raises(graphgrad.GraphgradError, match=r"pass f.get_concrete_function\(...\)"):
        graphgrad.override(traced, {"Sign": "ste"})


def test_override_inside_a_function_while_it_is_traced():
    @tf.function
    def overridden(x):
        y = 2.0 * tf.sign(x)
        graphgrad.override(tf.compat.v1.get_default_graph(), {"Sign": "identity"})
        return y

    assert_close(_tape_gradient(overridden, tf.constant([0.5, -2.0, 3.0])), [2.0, 2.0, 2.0])


def test_import_graph_def_accepts_paths_and_messages():
    graph_def = graphgrad.read_model(fixture("binary_net.pb")).message
    tf_graph_def = tf.compat.v1.GraphDef.FromString(graph_def.SerializeToString())
    for source in (fixture("binary_net.pb"), graph_def, tf_graph_def):
        graph = tf.Graph()
        with graph.as_default():
            graphgrad.import_graph_def(source, name="")
        assert graph.get_operation_by_name("dense1/Sign").type == "Sign"


def test_transform_on_an_op_without_gradient_gives_none(tmp_path):
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [2])
        y = tf.round(x)
    graphgrad.override(graph, {"Round": "scale(2)"})
    assert gradients(graph, y, x, {x: [0.4, 1.6]}) == [None]
    graphgrad.override(graph, {"Round": "identity|scale(2)"}, force=True)
    assert_close(gradients(graph, y, x, {x: [0.4, 1.6]})[0], [2.0, 2.0])


def test_register_accepts_tensorflow_meta_graph_messages(tmp_path):
    out = tmp_path / "o.meta"
    run_cli("rewrite", fixture("model.meta"), "--op", "Round=triangle", "-o", out)
    meta = v1.MetaGraphDef.FromString(out.read_bytes())
    assert graphgrad.register_gradients(meta).names == ("graphgrad/triangle",)


def test_import_graph_def_clears_cluster_devices_and_keeps_local_ones():
    """scalable-agent's learner names /job:learner devices: imported as written, its
    runs fail here; its gradients run once those are cleared."""
    graph = tf.Graph()
    with graph.as_default():
        with tf.device("/job:learner/task:0/device:CPU:0"):
            x = v1.placeholder(tf.float32, [2], name="x")
            tf.multiply(x, 3.0, name="y")
        with tf.device("/device:CPU:0"):
            tf.identity(x, name="local")
    graph_def = graph.as_graph_def()
    imported = tf.Graph()
    with imported.as_default():
        graphgrad.import_graph_def(graph_def, name="")
    assert imported.get_operation_by_name("y").device == ""
    assert imported.get_operation_by_name("local").device == "/device:CPU:0"
    assert_close(gradients(imported, "y:0", "x:0", {"x:0": [1.0, 2.0]})[0], [3.0, 3.0])
