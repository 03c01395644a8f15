"""Random and mutated input to the reader and the spec parser: a clean error or a
valid result, never a crash or a hang."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import fixture
from graphs import mutated
from graphgrad import GraphgradError, SpecError, parse_spec
from graphgrad.files.io import parse_model_bytes

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
