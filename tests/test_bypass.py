"""graphgrad bypass (BPDA) under TensorFlow: forward values bit for bit, the gradient
of the defence's output carried to its input; and its refusals, without TensorFlow."""

import numpy as np
import pytest

from conftest import fixture, run_cli
from graphgrad import read_model
from graphgrad.edits.surgery import BypassOptions, ResetOptions, bypass_region, reset_model
from graphgrad.errors import SelectionError
from graphgrad.gradients.spec import parse_spec

# Every test here runs on each reading of binary GraphDefs (conftest.reading).
pytestmark = pytest.mark.usefixtures("reading")

RNG = np.random.default_rng(11)
DEFENCES = [  # (fixture, --to, a feed for x)
    ("quantized_classifier.pb", "dequantize:0", lambda: RNG.uniform(0, 1, (5, 4)).astype(np.float32)),
    ("jpeg_classifier.pb", "decoded:0", lambda: RNG.uniform(0, 1, (8, 8, 3)).astype(np.float32)),
]


def bypass(name, source, target, spec="identity"):
    return bypass_region(read_model(fixture(name)), BypassOptions(source, target, parse_spec(spec)))


@pytest.mark.parametrize("name, target, feed", DEFENCES)
def test_bypass_carries_the_gradient_across_the_defence_and_keeps_the_forward_bits(tmp_path, name, target, feed):
    from tf_helpers import gradients, load, tf, v1

    def load_without_graphgrad(path):  # the stop-gradient form needs no runtime
        graph = tf.Graph()
        with graph.as_default():
            v1.import_graph_def(v1.GraphDef.FromString(open(path, "rb").read()), name="")
        return graph

    out = tmp_path / "attackable.pb"
    result = run_cli("bypass", fixture(name), "--from", "x:0", "--to", target, "-o", out)
    assert f"bypassed {target} to x:0" in result.stdout
    value = {"x:0": feed()}
    plain, patched = load(fixture(name)), load_without_graphgrad(out)
    assert gradients(plain, "logits:0", "x:0", value) == [None]  # integers cut the path
    with v1.Session(graph=plain) as session:
        logits, through = session.run(["logits:0", target], value)
        # what the attack wants: d logits / d (defence output), at the same point
        with plain.as_default():
            [wanted] = v1.gradients(plain.get_tensor_by_name("logits:0"), [plain.get_tensor_by_name(target)])
        wanted = session.run(wanted, value)
    with v1.Session(graph=patched) as session:
        patched_logits = session.run("logits:0", value)
    [got] = gradients(patched, "logits:0", "x:0", value)
    assert patched_logits.tobytes() == logits.tobytes()
    np.testing.assert_array_equal(got, wanted)
    assert through.shape == got.shape


def test_a_surrogate_and_a_factor_shape_the_gradient_across(tmp_path):
    from tf_helpers import gradients, load

    out = tmp_path / "attackable.pb"
    run_cli("bypass", fixture("quantized_classifier.pb"), "--from", "x:0", "--to", "dequantize:0",
            "--surrogate", "identity|scale(0.5)", "-o", out)
    value = {"x:0": RNG.uniform(0, 1, (3, 4)).astype(np.float32)}
    plain = load(fixture("quantized_classifier.pb"))
    [wanted] = gradients(plain, "logits:0", "dequantize:0", value)
    [got] = gradients(load(out), "logits:0", "x:0", value)
    np.testing.assert_allclose(got, 0.5 * wanted, rtol=1e-6)


def test_reset_undoes_a_bypass_exactly_and_a_second_bypass_changes_nothing(tmp_path):
    original = read_model(fixture("quantized_classifier.pb"))
    bypassed, [first] = bypass("quantized_classifier.pb", "x:0", "dequantize:0")
    assert first.status == "bypassed" and first.consumers == ("MatMul",)
    again, [second] = bypass_region(bypassed, BypassOptions("x:0", "dequantize:0", parse_spec("identity")))
    assert second.status == "already" and again.message == bypassed.message
    assert reset_model(bypassed, ResetOptions())[0].message == original.message
    out, restored = tmp_path / "b.pb", tmp_path / "r.pb"
    run_cli("bypass", fixture("quantized_classifier.pb"), "--from", "x:0", "--to", "dequantize:0", "-o", out)
    run_cli("reset", out, "-o", restored)
    assert read_model(str(restored)).message == original.message


@pytest.mark.parametrize("source, target, spec, message", [
    ("dequantize:0", "x:0", "identity", "--from dequantize:0 is not an ancestor of --to x:0"),
    ("x:0", "quantize:0", "identity", "--from x:0 is float32 and --to quantize:0 is uint8"),
    ("x:0", "dequantize:0", "scale(2)", "a bypass needs a replacement applied to --from"),
    ("x:0", "dequantize:0", "zero", "a bypass needs a replacement applied to --from"),
    ("x:0", "nowhere:0", "identity", "no tensor 'nowhere:0'"),
    ("x:0", "dequantize:0", "identity|scale(1e40)", "the constant 1e[+]40 of the gradient spec does not fit float32"),
])
def test_bypass_refuses_what_it_cannot_join_in_one_line(source, target, spec, message):
    with pytest.raises(Exception, match=message) as raised:
        bypass("quantized_classifier.pb", source, target, spec)
    assert "\n" not in str(raised.value)


def test_bypass_refuses_shapes_known_to_differ():
    model = read_model(fixture("quantized_classifier.pb"))
    [matmul] = [node for node in model.message.node if node.op == "MatMul" and node.input[0] == "dequantize"]
    dims = matmul.attr["_output_shapes"].list.shape.add().dim
    dims.add(size=-1)
    dims.add(size=6)
    with pytest.raises(SelectionError, match=r"--from x:0 has shape \[-1, 4\] and --to MatMul:0 \[-1, 6\]"):
        bypass_region(model, BypassOptions("x:0", "MatMul:0", parse_spec("identity")))


def test_bypass_in_a_function_body():
    """Tensors of a function body are named as its consumers spell them; the
    bypass is built there, and reset undoes it."""
    from graphgrad.files.protos import DataType, GraphDef
    from graphgrad.graph.model import Model

    float32, int32 = DataType.Value("DT_FLOAT"), DataType.Value("DT_INT32")
    graph_def = GraphDef()
    function = graph_def.library.function.add()
    function.signature.name = "defended"
    function.signature.input_arg.add(name="a", type=float32)
    function.signature.output_arg.add(name="out", type=float32)
    for name, op, inputs, attrs in [
        ("x", "Identity", ["a"], {"T": float32}),
        ("q", "Cast", ["x:output:0"], {"SrcT": float32, "DstT": int32}),
        ("back", "Cast", ["q:y:0"], {"SrcT": int32, "DstT": float32}),
        ("y", "Identity", ["back:y:0"], {"T": float32}),
    ]:
        node = function.node_def.add(name=name, op=op, input=inputs)
        for key, dtype in attrs.items():
            node.attr[key].type = dtype
    function.ret["out"] = "y:output:0"
    graph_def.node.add(name="input", op="Placeholder").attr["dtype"].type = float32
    graph_def.node.add(name="call", op="defended", input=["input"])
    model = Model(graph_def, "graphdef", "binary")
    bypassed, [done] = bypass_region(model, BypassOptions("defended/x:output:0", "defended/back:y:0",
                                                          parse_spec("identity")))
    assert done.status == "bypassed" and done.consumers == ("defended/y",)
    body = bypassed.message.library.function[0]
    assert body.node_def[3].input[0].startswith("back/graphgrad_bypass/output:z:0")
    assert reset_model(bypassed, ResetOptions())[0].message == graph_def


@pytest.mark.parametrize("name", [name for name, _, _ in DEFENCES])
def test_check_suggests_the_bypass_as_a_ready_command_and_it_works(tmp_path, name):
    pytest.importorskip("tensorflow", reason="check runs the graph")
    import json
    import shlex

    report = json.loads(run_cli("check", fixture(name), "--x", "x", "--y", "logits", "--json", expect=1).stdout)
    [fix] = [blocker["fix"] for blocker in report["blockers"] if "graphgrad bypass" in blocker["fix"]]
    command = shlex.split(fix.split(": ", 1)[1])
    # the smallest region: from the float tensor before the rounding and the cast, to the cast back
    assert command[:2] == ["graphgrad", "bypass"] and command[command.index("--from") + 1] == "mul:0"
    out = tmp_path / "attackable.pb"
    run_cli(*command[1:-1], out)  # -o OUT, with OUT named
    fixed = json.loads(run_cli("check", out, "--x", "x", "--y", "logits", "--json").stdout)
    assert fixed["ok"] and [g["status"] for g in fixed["gradients"]] == ["finite"]


def test_bypass_without_a_destination_names_the_ones_it_has():
    result = run_cli("bypass", fixture("quantized_classifier.pb"), "--from", "x:0", "--to", "dequantize:0", expect=2)
    assert "exactly one of -o OUT, --in-place, --dry-run" in result.stderr


def test_a_bypass_to_a_tensor_of_unknown_shape_loads_and_differentiates(tmp_path):
    """--to's shape is not in the file (not even its rank): the surrogate takes y's
    shape at run time, so the graph loads in plain TensorFlow and the gradient
    reaches x."""
    from tf_helpers import gradients, tf, v1

    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 4], name="x")
        quantized = tf.cast(tf.cast(tf.round(x * 255.0), tf.uint8), tf.float32) / 255.0
        shape = v1.placeholder_with_default(tf.constant([-1, 4]), None, name="shape")
        tf.reshape(quantized, shape, name="region_out")
        tf.reduce_sum(graph.get_tensor_by_name("region_out:0") * 2.0, name="y")
    source, out = tmp_path / "defended.pb", tmp_path / "attackable.pb"
    source.write_bytes(graph.as_graph_def().SerializeToString())
    run_cli("bypass", source, "--from", "x", "--to", "region_out", "-o", out)
    patched = tf.Graph()
    with patched.as_default():
        v1.import_graph_def(v1.GraphDef.FromString(out.read_bytes()), name="")
        assert patched.get_tensor_by_name("region_out:0").shape.rank is None
    [got] = gradients(patched, "y:0", "x:0", {"x:0": RNG.uniform(0, 1, (3, 4)).astype(np.float32)})
    np.testing.assert_array_equal(got, np.full((3, 4), 2.0, np.float32))


def _thermometer_defence(tmp_path):
    """x [n, 4, 4, 2] -> a 5-level thermometer [n, 4, 4, 10] (ART's layout) -> logits."""
    from tf_helpers import graph_file, tf, v1

    def build():
        x = v1.placeholder(tf.float32, [None, 4, 4, 2], name="x")
        on = tf.cast(x[..., None] > tf.constant(np.arange(5, dtype=np.float32) / 5), tf.float32)
        encoded = tf.reshape(on, [-1, 4, 4, 10], name="encoded")
        weights = tf.constant(RNG.normal(size=[160, 3]).astype(np.float32))
        tf.matmul(tf.reshape(encoded, [-1, 160]), weights, name="logits")

    return graph_file(tmp_path, build, "thermometer.pb")


def test_a_thermometer_surrogate_carries_the_soft_encodings_gradient_and_keeps_the_forward_bits(tmp_path):
    """The bypass's gradient is that of sigmoid((x - k/levels) / temperature) with each
    channel's levels side by side, bit-equal forward; the same spec as a load-time
    override of the encoding's last op gives the same gradient."""
    from tf_helpers import gradients, load, v1

    model = _thermometer_defence(tmp_path)
    out = tmp_path / "soft.pb"
    run_cli("bypass", model, "--from", "x:0", "--to", "encoded:0", "--surrogate",
            "thermometer(levels=5,temperature=0.1)", "-o", out)
    value = {"x:0": RNG.uniform(0, 1, (3, 4, 4, 2)).astype(np.float32)}
    plain = load(model)
    wanted = _soft_gradient(model, value)
    [got] = gradients(load(out), "logits:0", "x:0", value)
    np.testing.assert_allclose(got, wanted, rtol=1e-5, atol=1e-6)
    with v1.Session(graph=plain) as session, v1.Session(graph=load(out)) as patched:
        assert session.run("logits:0", value).tobytes() == patched.run("logits:0", value).tobytes()


def test_thermometer_as_a_load_time_override_is_the_same_gradient(tmp_path):
    """On an op whose input is x [n, h, w, c] and output [n, h, w, c * levels] (a
    Tile, for one channel), the override gives the soft encoding's gradient too."""
    from tf_helpers import gradients, graph_file, load, tf, v1

    def build():
        x = v1.placeholder(tf.float32, [None, 4, 4, 1], name="x")
        tiled = tf.tile(x, [1, 1, 1, 5], name="encoded")
        tf.reduce_sum(tiled * tf.constant(RNG.normal(size=[4, 4, 5]).astype(np.float32)), [1, 2, 3], name="y")

    model = graph_file(tmp_path, build, "tiled.pb")
    run_cli("rewrite", model, "--node", "encoded=thermometer(levels=5,temperature=0.1)", "-o", tmp_path / "o.pb")
    value = {"x:0": RNG.uniform(0, 1, (2, 4, 4, 1)).astype(np.float32)}
    wanted = _soft_gradient(model, value, "y:0")
    [got] = gradients(load(tmp_path / "o.pb"), "y:0", "x:0", value)
    np.testing.assert_allclose(got, wanted, rtol=1e-5, atol=1e-6)


def _surrogate_graph(tmp_path, build, name="g.pb"):
    from tf_helpers import graph_file

    return graph_file(tmp_path, build, name)


def _soft(x):
    from tf_helpers import tf

    soft = tf.sigmoid((x[..., None] - np.arange(5, dtype=np.float32) / 5) / 0.1)
    return tf.reshape(soft, tf.concat([tf.shape(x)[:-1], [-1]], 0))  # each channel's 5 levels side by side


def _soft_gradient(model, value, y="logits:0"):
    """d y / d x at ``value`` were the model's encoding (its tensor encoded:0) the soft one."""
    from tf_helpers import gradients, load, tf, v1

    [upstream] = gradients(load(model), y, "encoded:0", value)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.constant(value["x:0"])
        [wanted] = v1.gradients(_soft(x), x, grad_ys=tf.constant(upstream))
        with v1.Session() as session:
            return session.run(wanted)


def test_a_surrogate_graph_is_copied_in_and_its_gradient_is_gs(tmp_path):
    """The user's g (a frozen GraphDef: one placeholder, one output of the region's
    shape), written into the model: the gradient is g's, the forward bits the
    defence's, check is ok, and reset restores the file as it was."""
    from tf_helpers import gradients, load, tf, v1

    model = _thermometer_defence(tmp_path)

    def build():
        _soft(v1.placeholder(tf.float32, [None, 4, 4, 2], name="region_input"))

    g = _surrogate_graph(tmp_path, build)
    out = tmp_path / "bpda.pb"
    result = run_cli("bypass", model, "--from", "x:0", "--to", "encoded:0", "--surrogate-graph", g, "-o", out)
    assert "bypassed encoded:0 to x:0" in result.stdout
    value = {"x:0": RNG.uniform(0, 1, (3, 4, 4, 2)).astype(np.float32)}
    wanted = _soft_gradient(model, value)
    [got] = gradients(load(out), "logits:0", "x:0", value)
    np.testing.assert_allclose(got, wanted, rtol=1e-5, atol=1e-6)
    with v1.Session(graph=load(model)) as session, v1.Session(graph=load(out)) as patched:
        assert session.run("logits:0", value).tobytes() == patched.run("logits:0", value).tobytes()
    assert run_cli("check", out, "--x", "x", "--y", "logits").stdout.endswith("ok\n")
    run_cli("reset", out, "-o", tmp_path / "back.pb")
    assert read_model(str(tmp_path / "back.pb")).message == read_model(str(model)).message


def test_a_surrogate_graph_of_the_wrong_shape_is_refused_before_it_runs(tmp_path):
    from tf_helpers import tf, v1

    model = _thermometer_defence(tmp_path)

    def build():  # the identity: [n, 4, 4, 2], where the region gives [n, 4, 4, 10]
        tf.identity(v1.placeholder(tf.float32, [None, 4, 4, 2], name="region_input"), name="same")

    g = _surrogate_graph(tmp_path, build)  # a GraphDef records no shapes: the run finds g's
    run_cli("bypass", model, "--from", "x:0", "--to", "encoded:0", "--surrogate-graph", g, "-o", tmp_path / "bpda.pb")
    refused = run_cli("check", tmp_path / "bpda.pb", "--x", "x", "--y", "logits", expect=1)
    [line] = refused.stderr.strip().splitlines()
    assert "through graph g.pb sha256:" in line and "which gives shape [-1, 4, 4, 2]" in line, line


@pytest.mark.parametrize("build, message", [
    ("two_inputs", "g takes the region's input as its one placeholder, and it has 2 (a, b)"),
    ("two_outputs", "g's output is the one node nothing else reads, and it has 2"),
    ("float64", "--surrogate-graph g.pb takes float64 and --from x:0 is float32"),
])
def test_a_surrogate_graph_bypass_cannot_use_is_refused_in_one_line(tmp_path, build, message):
    from tf_helpers import tf, v1

    def two_inputs():
        tf.add(v1.placeholder(tf.float32, name="a"), v1.placeholder(tf.float32, name="b"))

    def two_outputs():
        x = v1.placeholder(tf.float32, name="x")
        tf.identity(x, name="one"), tf.identity(x, name="other")

    def float64():
        tf.identity(v1.placeholder(tf.float64, name="x"), name="g")

    g = _surrogate_graph(tmp_path, {"two_inputs": two_inputs, "two_outputs": two_outputs, "float64": float64}[build])
    refused = run_cli("bypass", _thermometer_defence(tmp_path), "--from", "x:0", "--to", "encoded:0",
                      "--surrogate-graph", g, "-o", tmp_path / "bpda.pb", expect=1)
    [line] = refused.stderr.strip().splitlines()
    assert message in line


def test_a_python_surrogate_is_traced_into_the_file_and_loads_without_graphgrad(tmp_path):
    """--surrogate-function FILE.py:NAME: the user's g traced once and copied in; the
    gradient is g's in a graph imported by TensorFlow alone."""
    from tf_helpers import gradients, tf, v1

    model = _thermometer_defence(tmp_path)
    module = tmp_path / "mine.py"
    module.write_text("import numpy as np\nimport tensorflow as tf\n\n\ndef soft(x):\n"
                      "    levels = np.arange(5, dtype=np.float32) / 5\n"
                      "    return tf.reshape(tf.sigmoid((x[..., None] - levels) / 0.1), [-1, 4, 4, 10])\n\n\n"
                      "def broken(x):\n    raise RuntimeError('no surrogate here')\n")
    out = tmp_path / "bpda.pb"
    run_cli("bypass", model, "--from", "x:0", "--to", "encoded:0", "--surrogate-function", f"{module}:soft", "-o", out)
    value = {"x:0": RNG.uniform(0, 1, (3, 4, 4, 2)).astype(np.float32)}
    wanted = _soft_gradient(model, value)
    plain = tf.Graph()
    with plain.as_default():
        v1.import_graph_def(v1.GraphDef.FromString(out.read_bytes()), name="")
    [got] = gradients(plain, "logits:0", "x:0", value)
    np.testing.assert_allclose(got, wanted, rtol=1e-5, atol=1e-6)
    refused = run_cli("bypass", model, "--from", "x:0", "--to", "encoded:0", "--surrogate-function",
                      f"{module}:broken", "-o", tmp_path / "no.pb", expect=1)
    assert refused.stderr.strip().splitlines() == [
        f"graphgrad: error: --surrogate-function {module}:broken: calling broken on a float32 tensor of shape "
        "[None, 4, 4, 2] raised RuntimeError: no surrogate here"]
    assert not (tmp_path / "no.pb").exists()
