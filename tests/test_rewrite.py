import pytest

from conftest import fixture
from graphgrad import (
    RewriteOptions,
    SelectionError,
    iter_nodes,
    parse_rule,
    read_model,
    rewrite_model,
    serialize,
)
from graphgrad.graph.model import override_of
from graphgrad.names import ATTR

# Every test here runs on each reading of binary GraphDefs (conftest.reading).
pytestmark = pytest.mark.usefixtures("reading")


def options(*rules, **kwargs):
    parsed = tuple(parse_rule(kind, text) for kind, text in rules)
    return RewriteOptions(rules=parsed, **kwargs)


def overrides(model, functions=True):
    return {ref.name: ref.override for ref in iter_nodes(model, functions) if ref.override}


def strip_overrides(model):
    copy = model.copy()
    for ref in iter_nodes(copy):
        ref.set_override(None)
    return copy


def test_op_rule_sets_only_selected_nodes():
    model = read_model(fixture("binary_net.pb"))
    result, report = rewrite_model(model, options(("op", "Sign=ste")))
    assert overrides(result) == {
        "binarize_input/Sign": "graphgrad/ste(clip=1.0)",
        "dense1/binarize_weights/Sign": "graphgrad/ste(clip=1.0)",
        "dense1/Sign": "graphgrad/ste(clip=1.0)",
        "dense2/binarize_weights/Sign": "graphgrad/ste(clip=1.0)",
    }
    assert report.by_op_type == {"Sign": 4}
    assert overrides(model) == {}, "the input message must stay as it was"
    # Nothing but the override attribute changed.
    assert strip_overrides(result).message == model.message


def test_rewrite_is_idempotent_and_deterministic():
    model = read_model(fixture("binary_net.pb"))
    rules = options(("op", "Sign=QuantizeGrad"), ("node", "dense2/logits=tf:Identity"))
    first, _ = rewrite_model(model, rules)
    second, report = rewrite_model(first, rules)
    assert not report.changed and len(report.unchanged) == 5
    assert serialize(second) == serialize(first)
    assert serialize(rewrite_model(model, rules)[0]) == serialize(first)


def test_node_globs_match_and_exclude():
    model = read_model(fixture("binary_net.pb"))
    result, _ = rewrite_model(model, options(("node", "dense*/*Sign=triangle"), exclude=("*binarize*",)))
    assert overrides(result) == {"dense1/Sign": "graphgrad/triangle"}
    with pytest.raises(SelectionError, match="rules disagree on 1 node"):
        rewrite_model(model, options(("node", "dense1/Sign=triangle"), ("op", "Sign=ste")))
    only, _ = rewrite_model(model, options(("op", "Sign=ste"), match=("dense2/*",)))
    assert list(overrides(only)) == ["dense2/binarize_weights/Sign"]


def test_rules_for_the_same_spec_do_not_conflict():
    model = read_model(fixture("binary_net.pb"))
    result, _ = rewrite_model(model, options(("op", "Sign=ste"), ("node", "dense1/Sign=QuantizeGrad")))
    assert len(overrides(result)) == 4


def test_function_bodies_are_reached_unless_told_otherwise():
    model = read_model(fixture("functions.pb"))
    result, _ = rewrite_model(model, options(("op", "Sign=ste")))
    assert sorted(overrides(result)) == ["cond_false_40/cond/Sign", "cond_true_39/cond/Sign"]
    with pytest.raises(SelectionError, match="no node has op type 'Sign'"):
        rewrite_model(model, options(("op", "Sign=ste"), functions=False))


def test_existing_overrides_need_force():
    model = read_model(fixture("custom_gradient.meta"))
    with pytest.raises(SelectionError, match=r"IdentityN \(IdentityN\) has 'CustomGradient-\d+'.*--force"):
        rewrite_model(model, options(("op", "IdentityN=identity")))
    result, report = rewrite_model(model, options(("op", "IdentityN=identity"), force=True))
    assert overrides(result) == {"IdentityN": "graphgrad/identity"}
    assert report.changes[0].old.startswith("CustomGradient-")


@pytest.mark.parametrize(
    "rule, hint",
    [
        ("sign=ste",
         "no node has op type 'sign' (sign is a Python API name that creates op type Sign, and this graph has none)"),
        ("stack=ste", "stack is a Python API name; the graph has op type Pack"),
        ("tf.stack=ste", "the graph has op type Pack"),
        ("py_func=identity", "the graph has op type PyFunc"),
        ("concat=select", "the graph has op type ConcatV2"),
        ("add=reverse", "the graph has op type AddV2"),
        ("relu=guided_relu", "op types are case-sensitive: did you mean Relu?"),
        ("Rond=ste", "did you mean Round?"),
        ("Conv2D=ste", "no node has op type 'Conv2D'"),
    ],
)
def test_near_misses_are_errors_with_hints(rule, hint):
    model = read_model(fixture("ops_mix.pb"))
    with pytest.raises(SelectionError) as error:
        rewrite_model(model, options(("op", rule)))
    assert hint in str(error.value)


def test_an_op_type_that_is_also_an_api_name_gets_no_api_hint():
    """`Identity` is what tf.identity creates: saying so would only repeat the key."""
    from graphgrad.edits.select import suggest_op_types

    assert suggest_op_types("Identity", ["Const", "IdentityN"]) == "did you mean IdentityN?"
    assert suggest_op_types("Sign", ["Const"]) == ""
    assert "Python API name" in suggest_op_types("sign", ["Const"])


def test_glob_that_selects_nothing_suggests_a_fix():
    model = read_model(fixture("binary_net.pb"))
    with pytest.raises(SelectionError, match=r"4 name\(s\) end in /Sign.*try '\*/Sign'"):
        rewrite_model(model, options(("node", "Sign=ste")))
    with pytest.raises(SelectionError, match="close names: dense1/Sign"):
        rewrite_model(model, options(("node", "dense1/Sgn=ste")))


def test_allow_missing_turns_misses_into_notes():
    model = read_model(fixture("binary_net.pb"))
    result, report = rewrite_model(model, options(("op", "Round=ste"), ("op", "Sign=ste"), allow_missing=True))
    assert len(report.changes) == 4
    assert len(report.notes) == 1 and "no node has op type 'Round'" in report.notes[0]


def test_rule_syntax_errors():
    with pytest.raises(SelectionError, match="expected KEY=GRADIENT"):
        parse_rule("op", "Sign")
    with pytest.raises(SelectionError, match="expected KEY=GRADIENT"):
        parse_rule("op", "=ste")


def test_saved_model_rewrites_every_meta_graph():
    model = read_model(fixture("saved_model"))
    result, report = rewrite_model(model, options(("op", "Sign=approx_sign")))
    assert [c.graph for c in report.changes] == ["meta_graph 0 [serve]"]
    assert [ref.node.attr[ATTR].s for ref in iter_nodes(result) if override_of(ref.node)] == [b"graphgrad/approx_sign"]


def test_an_op_no_gradient_passes_through_gets_a_note(tmp_path):
    from conftest import run_cli
    from graphgrad.files.protos import GraphDef

    graph_def = GraphDef()
    graph_def.node.add(name="files", op="TensorSliceDataset")
    graph_def.node.add(name="mapped", op="MapDataset", input=["files"])
    path = tmp_path / "pipeline.pb"
    path.write_bytes(graph_def.SerializeToString())
    result = run_cli("rewrite", path, "--op", "MapDataset=identity", "--dry-run")
    assert "MapDataset: no gradient passes through this op type" in result.stdout
    assert "no gradient passes" not in run_cli("rewrite", fixture("binary_net.pb"), "--op", "Sign=ste",
                                               "--dry-run").stdout
