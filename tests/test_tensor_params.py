"""Tensor parameters: a spec's number read from a scalar of the graph at every step
(reverse(strength=@grl_lambda)), checked when written, read by the loading process."""

import numpy as np
import pytest

from conftest import fixture, run_cli
from graphgrad import SelectionError, SpecError, parse_spec, read_model
from graphgrad.edits.surgery import InsertOptions, insert_gradient
from graphgrad.gradients.spec import TensorRef

FEED = {"x:0": np.random.default_rng(3).normal(size=(4, 3)).astype(np.float32)}


def test_the_canonical_name_keeps_the_reference():
    spec = parse_spec("identity|reverse(@grl_lambda)|clip_value(lo=@bounds/lo:1, hi=1)")
    assert spec.canonical == "identity|reverse(strength=@grl_lambda)|clip_value(lo=@bounds/lo:1,hi=1.0)"
    assert parse_spec(spec.canonical) == spec
    assert spec.tensor_refs == [TensorRef("grl_lambda"), TensorRef("bounds/lo", 1)]
    assert spec.attr_value == "graphgrad/" + spec.canonical


@pytest.mark.parametrize("text, message", [
    ("noise(0.1, seed=@step)", "seed is a whole number, fixed when written"),
    ("reverse(strength=@)", "unexpected"),
])
def test_tensor_references_only_where_a_float_goes(text, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(text)


@pytest.mark.parametrize("spec, message", [
    ("reverse(strength=@nowhere)", "no tensor nowhere:0 for @nowhere; a tensor parameter names a floating-point"),
    ("reverse(strength=@w1)", r"w1:0 has shape \[3, 4\]; @w1 must name a scalar"),
])
def test_writing_checks_the_tensor_in_one_line(spec, message):
    model = read_model(fixture("grl_net.pb"))
    with pytest.raises(SelectionError, match=message) as raised:
        insert_gradient(model, InsertOptions("feat:0", parse_spec(spec)))
    assert "\n" not in str(raised.value)
    result = run_cli("rewrite", fixture("grl_net.pb"), "--op", f"Relu={spec}", "-o", "/dev/null/x", expect=1)
    assert message.split(";")[0].replace("\\", "") in result.stderr.replace("\\", "")


def test_embed_refuses_a_tensor_parameter():
    with pytest.raises(SpecError, match="reads @grl_lambda at run time"):
        insert_gradient(read_model(fixture("grl_net.pb")),
                        InsertOptions("feat:0", parse_spec("reverse(@grl_lambda)"), embed=True))


@pytest.mark.parametrize("fed, factor", [(0.3, -0.3), (None, -0.7)])  # fed nothing: its default
def test_a_gradient_reversal_layer_reads_its_strength_at_every_step(tmp_path, fed, factor):
    from tf_helpers import gradients, load

    out = tmp_path / "grl.pb"
    run_cli("insert", fixture("grl_net.pb"), "--at", "feat:0", "--grad", "reverse(strength=@grl_lambda)", "-o", out)
    feed = dict(FEED, **({"grl_lambda:0": np.float32(fed)} if fed is not None else {}))
    [plain] = gradients(load(fixture("grl_net.pb")), "logits:0", "x:0", FEED)
    [reversed_] = gradients(load(out), "logits:0", "x:0", feed)
    np.testing.assert_allclose(reversed_, factor * plain, rtol=1e-6, atol=1e-7)


def test_under_an_import_prefix_the_tensor_is_found_in_the_node_s_scope(tmp_path):
    from tf_helpers import tf, v1

    import graphgrad

    out = tmp_path / "grl.pb"
    run_cli("insert", fixture("grl_net.pb"), "--at", "feat:0", "--grad", "reverse(strength=@grl_lambda)", "-o", out)
    graph = tf.Graph()
    with graph.as_default():
        graphgrad.import_graph_def(str(out), name="net")
        [grad] = v1.gradients(graph.get_tensor_by_name("net/logits:0"), [graph.get_tensor_by_name("net/x:0")])
        plain_graph = tf.Graph()
        with plain_graph.as_default():
            graphgrad.import_graph_def(fixture("grl_net.pb"), name="net")
            [plain] = v1.gradients(plain_graph.get_tensor_by_name("net/logits:0"),
                                   [plain_graph.get_tensor_by_name("net/x:0")])
            with v1.Session(graph=plain_graph) as session:
                plain = session.run(plain, {"net/x:0": FEED["x:0"]})
        with v1.Session(graph=graph) as session:
            value = session.run(grad, {"net/x:0": FEED["x:0"], "net/grl_lambda:0": np.float32(0.25)})
    np.testing.assert_allclose(value, -0.25 * plain, rtol=1e-6, atol=1e-7)
