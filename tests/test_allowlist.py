"""The allowlist: a graph whose path or loading runs an op not known to compute on
tensors in memory is refused by every command that runs graphs, in one line,
before anything runs. Each hostile graph below is one of a class of TensorFlow ops
that a list of known bad ops missed: a dataset cache that writes files where the
graph chose, a record reader and a candidate sampler that read a secret file, a
dataset that lists a folder, a proto encoder that reads a descriptor file, the
data service that connects to an address, and an Abort that ends the process with
exit 0. Each test asserts the refusal names the op, that no file appeared, that
no byte of the secret reached any output, and that nothing connected to a
listener the test holds open."""

import os
import socket

import numpy as np
import pytest

from conftest import run_cli
from tf_helpers import tf, v1

from graphgrad.tf.allowed_ops import ALLOWED
from graphgrad.tf.effects import unsafe_ops_in

SECRET = "graphgrad-secret-4f1c"


@pytest.fixture
def secret(tmp_path):
    path = tmp_path / "secret.txt"
    path.write_text(SECRET + "\nsecond line\n")
    return path


@pytest.fixture
def listener():
    """A local TCP listener; yields its port and a function that counts the connections it got."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    server.setblocking(False)
    accepted = []

    def count() -> int:
        while True:
            try:
                connection, _ = server.accept()
            except BlockingIOError:
                return len(accepted)
            accepted.append(connection)
            connection.close()

    yield server.getsockname()[1], count
    server.close()


def _as_float(value):
    """A float32 [3] tensor computed from ``value`` (any dtype), so y depends on it."""
    if value.dtype == tf.string:
        value = tf.cast(tf.strings.length(value), tf.float32)
    flat = tf.reshape(tf.cast(value, tf.float32), [-1])
    return tf.zeros([3]) + 0.0 * tf.reduce_sum(flat)


def _cache(tmp_path, secret, port):
    (tmp_path / "cache").mkdir(exist_ok=True)
    dataset = tf.data.Dataset.from_tensors(tf.constant([1.0, 2.0, 3.0])).cache(str(tmp_path / "cache" / "written"))
    return tf.data.experimental.get_single_element(dataset)


def _record_input(tmp_path, secret, port):
    from tensorflow.python.ops import data_flow_ops

    records = data_flow_ops.RecordInput(file_pattern=str(secret), batch_size=1, buffer_size=1, parallelism=1)
    return records.get_yield_op()


def _sampler(tmp_path, secret, port):
    sampled, _, _ = tf.random.fixed_unigram_candidate_sampler(
        tf.constant([[0]], tf.int64), 1, 1, True, 2, vocab_file=str(secret))
    return sampled


def _matching_files(tmp_path, secret, port):
    dataset = tf.raw_ops.ExperimentalMatchingFilesDataset(patterns=tf.constant([str(tmp_path / "*")]))
    return tf.raw_ops.DatasetCardinality(input_dataset=dataset)


def _encode_proto(tmp_path, secret, port):
    return tf.raw_ops.EncodeProto(sizes=tf.constant([[1]]), values=[tf.constant([[1.0]])], field_names=["value"],
                                  message_type="graphgrad.Hostile", descriptor_source=str(secret))


def _data_service(tmp_path, secret, port):
    dataset = tf.data.experimental.service.from_dataset_id(
        "parallel_epochs", f"grpc://127.0.0.1:{port}", dataset_id="1",
        element_spec=tf.TensorSpec([3], tf.float32))
    return tf.data.experimental.get_single_element(dataset.take(1))


def _abort(tmp_path, secret, port):
    with tf.control_dependencies([tf.raw_ops.Abort(error_msg="", exit_without_error=True)]):
        return tf.constant([1.0, 2.0, 3.0])


HOSTILE = {  # name: (builder, the op type the refusal names)
    "dataset cache writes files": (_cache, "CacheDataset"),
    "RecordInput reads a file": (_record_input, "RecordInput"),
    "a sampler reads a vocabulary file": (_sampler, "FixedUnigramCandidateSampler"),
    "a dataset lists a folder": (_matching_files, "ExperimentalMatchingFilesDataset"),
    "EncodeProto reads a descriptor file": (_encode_proto, "EncodeProto"),
    "the data service connects": (_data_service, "DataServiceDataset"),
    "Abort ends the process with 0": (_abort, "Abort"),
}


def _hostile_graph(tmp_path, build, secret, port):
    """A frozen GraphDef: logits = x * (1 + 0 * hostile), x of shape [None, 3]."""
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        tf.multiply(x, 1.0 + _as_float(build(tmp_path, secret, port)), name="logits")
    path = tmp_path / "hostile.pb"
    path.write_bytes(graph.as_graph_def().SerializeToString())
    return path


def _commands(tmp_path, model):
    np.save(tmp_path / "rows.npy", np.ones([2, 3], np.float32) * 0.5)
    np.save(tmp_path / "labels.npy", np.array([0, 1]))
    common = ["--x", "x", "--y", "logits"]
    return {
        "check": ["check", model, *common, "--feed", "x=[[0.5,0.5,0.5]]"],
        "attribute": ["attribute", model, "--method", "gradient", "--input", tmp_path / "rows.npy", "--target", "0",
                      "-o", tmp_path / "map.npy", *common],
        "attack": ["attack", model, "--input", tmp_path / "rows.npy", "--labels", tmp_path / "labels.npy",
                   "--eps", "0.1", "--steps", "2", "-o", tmp_path / "adversarial.npy", *common],
    }


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_graph_is_refused_by_every_command_that_runs_graphs(tmp_path, secret, listener, case):
    build, op_type = HOSTILE[case]
    port, connections = listener
    model = _hostile_graph(tmp_path, build, secret, port)
    for command, args in _commands(tmp_path, model).items():
        before = sorted(os.listdir(tmp_path))
        result = run_cli(*args, expect=1)
        [line] = result.stderr.strip().splitlines()
        assert op_type in line and "not known to compute only on tensors in memory" in line, (command, line)
        assert "--allow-effects" in line
        assert sorted(os.listdir(tmp_path)) == before, command  # no cache, no map, no adversarial images
        assert SECRET not in result.stdout + result.stderr
        assert connections() == 0


def test_the_allowlist_lets_a_hostile_op_run_only_when_told(tmp_path, secret, listener):
    """--allow-effects is the one way past the gate: the dataset cache then writes its file."""
    port, _ = listener
    model = _hostile_graph(tmp_path, _cache, secret, port)
    run_cli("check", model, "--x", "x", "--y", "logits", "--feed", "x=[[0.5,0.5,0.5]]", "--allow-effects")
    assert any(name.startswith("written") for name in os.listdir(tmp_path / "cache"))


def _registered_ops() -> set:
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session

    buffer = pywrap_tf_session.TF_GetAllOpList()
    return {op.name for op in op_def_pb2.OpList.FromString(pywrap_tf_session.TF_GetBuffer(buffer)).op}


# Words in the names of ops that reach outside memory: none may be on the allowlist.
OUTSIDE = ("File", "Dataset", "Reader", "Save", "Restore", "Summary", "Print", "PyFunc", "Queue", "Iterator",
           "Abort", "Send", "Recv", "Sampler", "Proto", "RecordInput", "Stage", "Collective", "Rpc", "TPU",
           "Infeed", "Outfeed", "Barrier", "Checkpoint", "Debug", "ImmutableConst", "Socket", "Service")


def test_every_op_tensorflow_registers_is_allowed_or_refused():
    """Walks TensorFlow's op registry: an op type is on the list or refused by the
    gate, so a new TensorFlow cannot slip one past; no allowed op's name says it
    reaches outside memory."""
    from tensorflow.core.framework.node_def_pb2 import NodeDef

    registered = _registered_ops()
    refused = {node.split("(")[1].rstrip(")") for node in
               unsafe_ops_in([NodeDef(name=op, op=op) for op in sorted(registered)], {})}
    assert refused == registered - ALLOWED
    assert len(refused) > 1000  # most of what TensorFlow has is refused: the list is short
    # reviewed: they format file names as strings and open nothing; XLA's scheduling barrier
    reviewed = {"ShardedFilename", "ShardedFilespec", "XlaOptimizationBarrier"}
    suspicious = sorted(op for op in ALLOWED - reviewed if any(word in op for word in OUTSIDE))
    assert suspicious == [], suspicious
    assert unsafe_ops_in([NodeDef(name="n", op="NoSuchOpAnywhere")], {}) == ["n (NoSuchOpAnywhere)"]


def test_the_allowlist_is_what_its_script_makes_from_this_tensorflow():
    import importlib.util

    from graphgrad.tf import allowed_ops

    if tf.__version__ != allowed_ops.TENSORFLOW_VERSION:
        pytest.skip(f"the list was made from TensorFlow {allowed_ops.TENSORFLOW_VERSION}; this is {tf.__version__}")
    script = os.path.join(os.path.dirname(os.path.dirname(__file__)), "scripts", "make_allowed_ops.py")
    spec = importlib.util.spec_from_file_location("make_allowed_ops", script)
    maker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(maker)
    with open(allowed_ops.__file__) as stored:
        assert maker.module_text(tf) == stored.read()


def test_a_body_that_runs_an_unlisted_op_is_refused_through_its_call():
    """A call's body is gated, and the functions a node names in its attributes (a
    While's body) too."""
    from tensorflow.core.framework.node_def_pb2 import NodeDef

    call = NodeDef(name="call", op="inner")
    loop = NodeDef(name="loop", op="While")
    loop.attr["body"].func.name = "body"
    bodies = {"inner": [NodeDef(name="read", op="ReadFile")], "body": [NodeDef(name="wait", op="QueueDequeueV2")]}
    assert unsafe_ops_in([call, loop], bodies) == ["inner/read (ReadFile)", "body/wait (QueueDequeueV2)"]


# -- what a red team found past the first gate: functions run that no node names ----


def _written(tmp_path) -> str:
    return str(tmp_path / "written.txt")


def _symbolic_gradient_of_a_function_with_a_gradient_def(tmp_path, secret):
    """A SymbolicGradient of F, whose GradientDef (library.gradient) is G: TensorFlow
    runs G, which no attribute names; G writes a file and reads the secret into y."""
    from tensorflow.core.framework import attr_value_pb2
    from tensorflow.python.framework import function

    width = len(SECRET) + 1
    graph = tf.Graph()
    with graph.as_default():
        @function.Defun(tf.float32, tf.float32, func_name="G")
        def gradient(x, dy):
            write = tf.io.write_file(_written(tmp_path), "written")
            read = tf.cast(tf.io.decode_raw(tf.io.read_file(str(secret)), tf.uint8)[:width], tf.float32)
            with tf.control_dependencies([write]):
                return tf.identity(dy * read)

        @function.Defun(tf.float32, func_name="F", grad_func=gradient)
        def forward(x):
            return x * 2.0

        x = v1.placeholder(tf.float32, [None, width], name="x")
        forward(x)
        value = attr_value_pb2.AttrValue
        attrs = {"f": value(func=attr_value_pb2.NameAttrList(name="F")),
                 "Tin": value(list=value.ListValue(type=[1, 1])), "Tout": value(list=value.ListValue(type=[1]))}
        symbolic = graph.create_op("SymbolicGradient", [x, tf.ones_like(x)], [tf.float32], attrs=attrs, name="sg")
        tf.reduce_sum(tf.stop_gradient(symbolic.outputs[0]) * x, axis=1, keepdims=True, name="logits")
    path = tmp_path / "symbolic.pb"
    path.write_bytes(graph.as_graph_def().SerializeToString())
    return path, width


def _function_named_in_a_function_reference(tmp_path, secret):
    """Outer's body calls its attribute g; the top-level call binds g to Evil inside
    the NameAttrList of its f: Evil runs, named by no attribute of its own."""
    from tensorflow.core.framework import attr_value_pb2
    from tensorflow.python.framework import function

    graph = tf.Graph()
    with graph.as_default():
        @function.Defun(tf.float32, func_name="Evil")
        def evil(x):
            with tf.control_dependencies([tf.io.write_file(_written(tmp_path), "written")]):
                return tf.identity(x)

        x = v1.placeholder(tf.float32, [None, 3], name="x")
        evil.add_to_graph(graph)
        tf.identity(x * 2.0, name="logits")
    graph_def = graph.as_graph_def()
    value = attr_value_pb2.AttrValue
    floats = value(list=value.ListValue(type=[1]))
    outer = graph_def.library.function.add()
    outer.signature.name = "Outer"
    outer.signature.input_arg.add(name="x", type=1)
    outer.signature.output_arg.add(name="out", type=1)
    outer.signature.attr.add(name="g", type="func")
    inner = outer.node_def.add(name="call", op="PartitionedCall", input=["x"])
    inner.attr["Tin"].CopyFrom(floats)
    inner.attr["Tout"].CopyFrom(floats)
    inner.attr["f"].CopyFrom(value(placeholder="g"))
    outer.ret["out"] = "call:output:0"
    call = graph_def.node.add(name="outer_call", op="PartitionedCall", input=["x"])
    call.attr["Tin"].CopyFrom(floats)
    call.attr["Tout"].CopyFrom(floats)
    call.attr["f"].CopyFrom(value(func=attr_value_pb2.NameAttrList(
        name="Outer", attr={"g": value(func=attr_value_pb2.NameAttrList(name="Evil"))})))
    stopped = graph_def.node.add(name="stopped", op="StopGradient", input=["outer_call"])
    stopped.attr["T"].type = 1
    [product] = [node for node in graph_def.node if node.op == "Mul"]
    product.input[1] = "stopped"
    path = tmp_path / "nested.pb"
    path.write_bytes(graph_def.SerializeToString())
    return path, 3


@pytest.mark.parametrize("build", [_symbolic_gradient_of_a_function_with_a_gradient_def,
                                   _function_named_in_a_function_reference])
def test_functions_that_no_node_names_are_gated_too(tmp_path, secret, build):
    model, width = build(tmp_path, secret)
    np.save(tmp_path / "rows.npy", np.ones([1, width], np.float32))
    result = run_cli("attribute", model, "--method", "gradient", "--input", tmp_path / "rows.npy", "--x", "x",
                     "--y", "logits", "--target", "0", "-o", tmp_path / "map.npy", expect=1)
    assert "WriteFile" in result.stderr and "--allow-effects" in result.stderr
    assert not os.path.exists(_written(tmp_path)) and not (tmp_path / "map.npy").exists()
    assert "not known to compute only on tensors in memory" in run_cli(
        "check", model, "--x", "x", "--y", "logits", expect=1).stderr
    assert not os.path.exists(_written(tmp_path))


def test_a_restore_op_that_calls_a_function_has_its_body_gated(tmp_path):
    """A .meta whose saver_def names, as its restore op, a call that takes the
    checkpoint's file name first: not the restore because of its place, its body is
    scanned, and its WriteFile refused."""
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        weights = v1.get_variable("v", initializer=tf.ones([3]), use_resource=True)
        tf.identity(x * weights, name="y")
        saver = v1.train.Saver([weights])

        @tf.function(autograph=False)
        def evil(filename):
            tf.io.write_file(_written(tmp_path), tf.strings.join(["restore got ", filename]))
            return filename

        call = evil(graph.get_tensor_by_name(saver.saver_def.filename_tensor_name)).op
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            saver.save(session, str(tmp_path / "model.ckpt"), write_meta_graph=False)
        meta = v1.train.export_meta_graph(saver_def=saver.saver_def)
    meta.saver_def.restore_op_name = call.name
    (tmp_path / "model.ckpt.meta").write_bytes(meta.SerializeToString())
    result = run_cli("check", tmp_path / "model.ckpt.meta", "--x", "x", "--y", "y", expect=1)
    assert "WriteFile" in result.stderr and "restore" in result.stderr
    assert not os.path.exists(_written(tmp_path))


def test_a_saved_custom_gradient_that_writes_a_file_is_refused(tmp_path):
    """A TF2 SavedModel's tf.custom_gradient, saved in registered_gradients, which
    differentiating runs though no node names it."""
    written = _written(tmp_path)

    @tf.custom_gradient
    def doubled(x):
        def gradient(dy):
            tf.io.write_file(written, "written")
            return dy * 3.0
        return x * 2.0, gradient

    class Module(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
        def __call__(self, x):
            return {"y": doubled(x)}

    module = Module()
    tf.saved_model.save(module, str(tmp_path / "saved"), signatures=module.__call__,
                        options=tf.saved_model.SaveOptions(experimental_custom_gradients=True))
    result = run_cli("check", tmp_path / "saved", "--x", "x", "--y", "y", expect=1)
    assert "WriteFile" in result.stderr and "--allow-effects" in result.stderr
    assert not os.path.exists(written)


def test_the_other_implementations_of_a_called_function_are_gated(tmp_path):
    """The call names A, pure; B implements the same api_implements for the CPU and
    writes a file: grappler's implementation selector swaps B in at run time (as it
    picks Keras' cuDNN LSTM on a GPU), so B is gated though nothing names it."""
    written = _written(tmp_path)
    graph = tf.Graph()
    with graph.as_default():
        spec = [tf.TensorSpec([None, 1], tf.float32)]

        @tf.function(input_signature=spec, autograph=False,
                     experimental_attributes={"api_implements": "doubled", "api_preferred_device": "GPU"})
        def named(x):
            return x * 2.0

        @tf.function(input_signature=spec, autograph=False,
                     experimental_attributes={"api_implements": "doubled", "api_preferred_device": "CPU"})
        def swapped_in(x):
            with tf.control_dependencies([tf.io.write_file(written, "written")]):
                return x * 2.0

        x = v1.placeholder(tf.float32, [None, 1], name="x")
        with tf.device("/device:CPU:0"):
            doubled = named(x)
        tf.identity(doubled, name="y")
        swapped_in.get_concrete_function().add_to_graph(graph)
    model = tmp_path / "implements.pb"
    model.write_bytes(graph.as_graph_def().SerializeToString())
    result = run_cli("check", model, "--x", "x", "--y", "y", expect=1)
    assert "WriteFile" in result.stderr and "--allow-effects" in result.stderr
    assert not os.path.exists(written)
