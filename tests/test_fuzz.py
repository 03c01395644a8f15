"""Random and mutated input to the reader and the spec parser: a clean error or a
valid result, never a crash or a hang."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import fixture
from graphs import mutated
from graphgrad import GraphgradError, SpecError, parse_spec
from graphgrad.files.reading import parse_model_bytes

FIXTURES = [open(fixture(name), "rb").read() for name in ("binary_net.pb", "binary_net.pbtxt", "model.meta")]
FIXTURES.append(open(fixture("saved_model", "saved_model.pb"), "rb").read())
SETTINGS = settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow])


def read(data):
    try:
        message, kind, encoding = parse_model_bytes(data)
    except GraphgradError:
        return
    assert kind in ("graphdef", "metagraph", "savedmodel") and encoding in ("binary", "text")
    message.SerializeToString()


@SETTINGS
@given(st.binary(max_size=4096))
def test_random_bytes(data):
    read(data)


@SETTINGS
@given(st.sampled_from(FIXTURES), st.data())
def test_mutated_model_files(original, data):
    read(mutated(original, data))


def check_spec(text):
    try:
        spec = parse_spec(text)
    except SpecError:
        return
    assert parse_spec(spec.canonical) == spec, "a canonical spec parses to itself"


@SETTINGS
@given(st.text(max_size=200))
def test_random_spec_text(text):
    check_spec(text)


TOKENS = ["ste", "identity", "scale", "clip_value", "noise", "select", "QuantizeGrad", "tf:", "(", ")", ",", "=",
          "|", "clip", "factor", "lo", "hi", "seed", "None", "1", "-0.5", "1e3", "2.", " ", "__import__", "'", "\\"]


@SETTINGS
@given(st.lists(st.sampled_from(TOKENS), max_size=30))
def test_grammar_shaped_specs(tokens):
    check_spec("".join(tokens))


@pytest.mark.parametrize("data", [b"node {" * 200000, b"\x0a\x80\x80\x04" * 5000 + b"\x12\x00"])
def test_deeply_nested_input_is_a_clean_error(data):
    with pytest.raises(GraphgradError):
        parse_model_bytes(data)


NAME_TEXT = st.text(alphabet="ab/_1", min_size=1, max_size=6)
GLOB_TEXT = st.text(alphabet="ab/_1*?[]!", min_size=1, max_size=6)


@settings(max_examples=300, deadline=None)
@given(names=st.lists(NAME_TEXT, min_size=1, max_size=12, unique=True),
       globs=st.lists(GLOB_TEXT, min_size=1, max_size=6),
       op_rules=st.lists(st.sampled_from(["Sign", "Add"]), max_size=2))
def test_indexed_glob_rules_select_what_trying_every_rule_selects(names, globs, op_rules):
    """The rules' index (glob starts, op types) against every rule tried on every node."""
    from types import SimpleNamespace

    from graphgrad.edits.select import Rule, select_nodes
    from graphgrad.errors import SelectionError

    nodes = [SimpleNamespace(name=name, op_type="Sign" if index % 2 else "Add", override=None)
             for index, name in enumerate(names)]
    rules = [Rule("node", glob, parse_spec("ste")) for glob in globs]
    rules += [Rule("op", op_type, parse_spec("identity"), exclude=("a*",)) for op_type in op_rules]
    expected = []
    for node in nodes:
        selecting = [rule for rule in rules if rule.selects(node)]
        if selecting:
            expected.append((node.name, selecting[0].pattern))
    try:
        selection = select_nodes(nodes, rules, allow_missing=True)
    except SelectionError:  # rules that disagree on a node: a choice trying every rule finds too
        assert any(len({rule.spec for rule in rules if rule.selects(node)}) > 1 for node in nodes)
        return
    assert [(node.name, rule.pattern) for node, rule in selection.matches] == expected


TFLITE = [open(fixture(name), "rb").read() for name in ("digits_float16.tflite", "digits_int8.tflite")]


@SETTINGS
@given(st.sampled_from(TFLITE), st.data())
def test_mutated_tflite_models_rebuild_or_are_refused_in_one_line(original, data):
    """A damaged .tflite (bytes flipped, cut, inserted) is rebuilt into a GraphDef
    that serializes, or refused with graphgrad's error: never another exception."""
    from graphgrad.files.tflite_graph import rebuilt_graph_def

    try:
        graph_def = rebuilt_graph_def("mutated.tflite", mutated(original, data))
    except GraphgradError as error:
        assert str(error).startswith("mutated.tflite") and "\n" not in str(error)
        return
    graph_def.SerializeToString()
