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
