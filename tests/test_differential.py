"""Differential fuzzing of the fast readings of binary GraphDefs against the full
parse: mutated real graphs and fixtures, read by every implementation (the scan
of bytes, the scan through a file window, the cut-down parses of small nodes).

When a fast reading accepts the bytes, the full parse accepts them too, as a
GraphDef, and the rewrite, --embed, summary, reset and diff give what the full
parse gives; when it does not, the command falls back to the full parse, so
every command gives one verdict per file."""

import os
from contextlib import contextmanager

import pytest
from conftest import REALGRAPHS, fixture, rule_options, written
from graphs import frozen_graph, mutated
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from graphgrad import GraphgradError, rewrite_model
from graphgrad.edits.diff import diff_models, diff_readings
from graphgrad.edits.rewrite import rewrite
from graphgrad.edits.summary import summarize, summarize_reading
from graphgrad.edits.surgery import ResetOptions, embed_in, reset_in, reset_model
from graphgrad.files.reading import SourceFile, parse_model_bytes
from graphgrad.files.protos import GraphDef
from graphgrad.graph.model import Model
from graphgrad.readings import Needs, factory, skeleton, validity
from graphgrad.readings.errors import NotApplicable

REAL = [
    "dl4j-tf-examples/src/main/resources/tf_graphs/examples/simple_cond/frozen_model.pb",
    "dl4j-tf-examples/src/main/resources/tf_graphs/examples/simplewhile_nested/frozen_model.pb",
    "dl4j-tf-examples/src/main/resources/tf_graphs/examples/tensor_dot_misc/frozen_model.pb",
    "dl4j-tf-examples/src/main/resources/tf_graphs/examples/primitive_gru_dynamic/frozen_model.pb",
    "tf2onnx-tests/tests/models/regression/graphdef/frozen.pb",
]


def _originals() -> list:
    found = [open(fixture(name), "rb").read() for name in ("binary_net.pb", "classifier.pb", "ste_sign_frozen.pb")]
    overridden = frozen_graph(layers=3, width=24)  # large nodes (the scan), overrides and a function library
    overridden.node[3].attr["_gradient_op_type"].s = b"graphgrad/identity"
    found.append(overridden.SerializeToString(deterministic=True))
    found += [open(os.path.join(REALGRAPHS, name), "rb").read() for name in REAL
              if os.path.isfile(os.path.join(REALGRAPHS, name))]
    return found


ORIGINALS = _originals()
RULES = rule_options(("op", "Relu=guided_relu"), ("op", "Identity=scale(2)"), ("op", "Sign=ste"), allow_missing=True,
                     force=True)
EMBED = rule_options(("op", "Relu=identity"), ("op", "Sign=ste"), ("op", "Identity=scale(2)"), allow_missing=True,
                     force=True, embed=True)
SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def mutate(original: bytes, data) -> bytes:
    return mutated(original, data, rounds=3, span=4)


def full_reading(data: bytes):
    """The full parse's GraphDef, or None where it takes the bytes for no GraphDef."""
    try:
        message, kind, encoding = parse_model_bytes(data)
    except GraphgradError:
        return None
    return message if (kind, encoding) == ("graphdef", "binary") else None


def tensorflow_parses(output: bytes) -> bool:
    """Whether TensorFlow's own GraphDef proto parses ``output`` (True without TensorFlow)."""
    try:
        from tensorflow.core.framework.graph_pb2 import GraphDef as TensorFlowGraphDef
    except ImportError:
        return True
    TensorFlowGraphDef.FromString(output)
    return True


class Stored:
    """The fast readings of a binary GraphDef written to a file, as the factory
    opens them (:func:`graphgrad.readings.factory.open_stored`; NotApplicable where
    it would parse the file whole): read whole, or ``windowed`` (as for files over
    ``WHOLE_READ_LIMIT``, with large spans walked: ``SPAN_LIMIT`` made small)."""

    def __init__(self, folder, monkeypatch, windowed: bool = False):
        self.folder = folder
        if windowed:
            monkeypatch.setattr(factory, "WHOLE_READ_LIMIT", 0)
            monkeypatch.setattr(validity, "SPAN_LIMIT", 48)
        monkeypatch.setattr(skeleton, "HEAVY_ATTR_BYTES", 64)  # constants left out of the skeleton

    @contextmanager
    def opened(self, data: bytes, needs: Needs = Needs(), name: str = "g.pb"):
        path = os.path.join(self.folder, name)
        with open(path, "wb") as stream:
            stream.write(data)
        with SourceFile(path) as file:
            yield factory.open_stored(file, path, needs)

    def rewrite(self, data):
        with self.opened(data) as reading:
            report = rewrite(reading, RULES)
            return written(reading), report

    def summary(self, data):
        with self.opened(data) as reading:
            return summarize_reading(reading)

    def embed(self, data):
        with self.opened(data, Needs(edits=True)) as reading:
            report = embed_in(reading.scopes(), EMBED)
            return written(reading), report

    def reset(self, data):
        with self.opened(data, Needs(edits=True)) as reading:
            report = reset_in(reading.scopes(), ResetOptions())
            return written(reading), report

    def diff(self, data, other: bytes):
        with self.opened(data) as left, self.opened(other, name="other.pb") as right:
            return diff_readings(left, right)


def outcome(operation, *args):
    """``("ok", result)``, or ``("refused", message)`` for a GraphgradError."""
    try:
        return "ok", operation(*args)
    except GraphgradError as error:
        return "refused", str(error)


def compare(reading, data: bytes) -> int:
    """Check every fast reading of ``data`` against the full parse; how many of the
    four jobs (rewrite, embed, summary, reset) a fast reading took on."""
    full = full_reading(data)
    model = Model(full, "graphdef", "binary", "g.pb") if full is not None else None
    accepted = 0
    # (job, its options, whether a refusal must be in the full parse's words)
    for job, options, same_words in ((reading.rewrite, RULES, False), (reading.embed, EMBED, True)):
        try:
            fast = outcome(job, data)
        except NotApplicable:
            continue
        expected = outcome(rewrite_model, model, options) if model else ("refused", "not a GraphDef")
        assert fast[0] == expected[0], (fast, expected)
        assert not same_words or fast[0] == "ok" or model is None or fast == expected
        accepted += 1  # read, and given the full parse's verdict
        if fast[0] == "ok":
            assert GraphDef.FromString(fast[1][0]) == expected[1][0].message and fast[1][1] == expected[1][1]
            assert tensorflow_parses(fast[1][0])
            if job == reading.embed:  # and graphgrad's nodes undone, as stored and on the full parse
                compare_reset(reading, fast[1][0], expected[1][0])
            compare_diff(reading, data, fast[1][0], model, expected[1][0])
    try:
        fast_summary = reading.summary(data)
    except NotApplicable:
        pass
    else:  # once open, a reading never steps aside: the file was found a GraphDef
        accepted += 1
        assert full is not None, "a fast summary accepted what the full parse refuses"
        assert fast_summary == summarize(Model(full, "graphdef", "binary", fast_summary.path))
    try:
        output, report = reading.reset(data)
    except NotApplicable:
        pass
    else:
        accepted += 1
        assert full is not None, "a fast reset accepted what the full parse refuses"
        expected, expected_report = reset_model(model, ResetOptions())
        assert GraphDef.FromString(output) == expected.message and report == expected_report
    return accepted


def compare_diff(reading, data: bytes, output: bytes, model: Model, full_output: Model) -> None:
    """diff of a graph and its edit as stored equals the full parse's."""
    try:
        difference = reading.diff(data, output)
    except NotApplicable:
        return
    assert difference == diff_models(model, full_output)


def compare_reset(reading, embedded: bytes, full_embedded: Model) -> None:
    """reset of an --embed output as stored equals the full parse's."""
    try:
        output, report = reading.reset(embedded)
    except NotApplicable:
        return
    expected, expected_report = reset_model(full_embedded, ResetOptions())
    assert GraphDef.FromString(output) == expected.message and report == expected_report


@pytest.mark.parametrize("index", range(len(ORIGINALS)))
def test_every_reading_accepts_the_originals(index, tmp_path, monkeypatch):
    data = ORIGINALS[index]  # rewrite, embed, summary and reset: every reading takes each of them
    assert compare(Stored(tmp_path, monkeypatch), data) == 4
    assert compare(Stored(tmp_path, monkeypatch, windowed=True), data) == 4


@SETTINGS
@given(st.sampled_from(ORIGINALS), st.data())
def test_fast_readings_of_mutated_graphs_agree_with_the_full_parse(tmp_path_factory, original, data):
    edited = mutate(original, data)
    assume(edited)  # an empty file is refused before any reading (tests/test_hostile.py)
    with pytest.MonkeyPatch.context() as monkeypatch:
        compare(Stored(tmp_path_factory.mktemp("whole"), monkeypatch), edited)


@SETTINGS
@given(st.sampled_from(ORIGINALS), st.data())
def test_windowed_readings_of_mutated_graphs_agree_with_the_full_parse(tmp_path_factory, original, data):
    edited = mutate(original, data)
    assume(edited)  # an empty file is refused before any reading (tests/test_hostile.py)
    with pytest.MonkeyPatch.context() as monkeypatch:
        compare(Stored(tmp_path_factory.mktemp("windowed"), monkeypatch, windowed=True), edited)


def test_a_corrupt_constant_is_refused_by_every_reading(tmp_path):
    """Issue 17, item 7: flip a bit inside a constant no rule selects; the rewrite
    refuses the file as the full parse does, and writes nothing."""
    from conftest import run_cli

    data = bytearray(open(fixture("binary_net.pb"), "rb").read())
    data[476] ^= 0x80
    source, out = tmp_path / "broken.pb", tmp_path / "out.pb"
    source.write_bytes(bytes(data))
    assert full_reading(bytes(data)) is None
    for command, code in ((["rewrite", source, "--op", "Sign=ste", "-o", out], 1), (["ops", source], 1),
                          (["reset", source, "-o", out], 1), (["reset", source, "--dry-run"], 1),
                          (["insert", source, "--at", "x:0", "--grad", "identity", "-o", out], 1),
                          (["diff", source, source], 2)):  # diff: 2 when a file cannot be read, as diff(1)
        result = run_cli(*command, expect=code)
        assert "not a TensorFlow graph file" in result.stderr, command
    assert not out.exists()


def test_an_attribute_entry_with_an_unknown_field_is_no_attribute_for_any_reading(tmp_path, monkeypatch):
    """Found by the fuzz: protobuf keeps a map entry holding a field other than its key
    and value out of the map. Here the override's value field is turned into field 3;
    every reading then sees no override, as the full parse does."""
    data = bytearray(open(fixture("ste_sign_frozen.pb"), "rb").read())
    at = data.index(b"\n\x11_gradient_op_type\x12") + 19
    data[at] = 0x1A  # field 3, length-delimited, where the value (field 2) was
    data = bytes(data)
    assert not any("_gradient_op_type" in node.attr for node in full_reading(data).node)
    assert compare(Stored(tmp_path, monkeypatch), data) == 4
    assert compare(Stored(tmp_path, monkeypatch, windowed=True), data) == 4
