"""Names a graph controls (node names, op types, attribute names, function names,
device strings) reach the terminal escaped, from every command, text and --json: no
control character, no forged line."""

import importlib.util
import json
import re

import numpy as np
import pytest

from conftest import fixture, run_cli

from graphgrad.files.protos import GraphDef

FORGED = "\x1b]0;TITLE\x07\x1b[2J\n~ fake (Forged)\u202e"
# A file whose first nodes' names or op types hold C0 controls is not read as a graph (see
# graphgrad.files.plausible), nor a space; these pass that test and still act on a terminal: C1's CSI
# (clear the screen), Unicode's line separator and a right-to-left override.
FORGED_NAME = "\x9b2J\u2028~fake(Forged)\u202e"
# what may not reach a terminal: every control character but the newline between lines, and
# Unicode's line and paragraph separators and bidirectional overrides
UNSHOWABLE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def hostile_graph() -> GraphDef:
    """The bundled classifier with a forged name at every place a graph names
    something: its ReLU's name, an attribute's name, a device, an op type and a
    function's name."""
    graph = GraphDef.FromString(open(fixture("classifier.pb"), "rb").read())
    relu = "relu" + FORGED_NAME
    for node in graph.node:
        if node.name == "relu":
            node.name = relu
        node.input[:] = [relu if name == "relu" else name for name in node.input]
        if node.name == "w1":
            node.attr["note" + FORGED].s = b"x"
        if node.name == "MatMul":
            node.device = "/device:CPU:0" + FORGED
    graph.node.add(name="odd" + FORGED_NAME, op="Odd" + FORGED_NAME)
    graph.library.function.add().signature.name = "function" + FORGED_NAME
    return graph


@pytest.fixture
def hostile(tmp_path):
    path = tmp_path / "hostile.pb"
    path.write_bytes(hostile_graph().SerializeToString())
    np.save(tmp_path / "rows.npy", np.ones((2, 4), np.float32))
    np.save(tmp_path / "labels.npy", np.zeros(2, np.int64))
    return path


def commands(model, tmp_path):
    relu = "relu" + FORGED_NAME
    out = tmp_path / "out"
    return [
        ["ops", model], ["diff", fixture("classifier.pb"), model], ["diff", model, fixture("classifier.pb")],
        ["rewrite", model, "--op", "MatMul=identity", "-o", f"{out}1.pb"],
        ["rewrite", model, "--node", f"{relu}=identity", "-o", f"{out}2.pb"],
        ["insert", model, "--at", f"{relu}:0", "--grad", "reverse", "-o", f"{out}3.pb"],
        ["bypass", model, "--from", "x:0", "--to", f"{relu}:0", "-o", f"{out}4.pb"],
        ["reset", f"{out}3.pb", "-o", f"{out}5.pb"],
        ["check", model, "--y", "logits"], ["check", model, "--y", relu],
        ["attribute", model, "--method", "gradient", "--input", tmp_path / "rows.npy", "--target", "0",
         "--y", "logits", "-o", f"{out}.npy"],
        ["show", model, "--y", "logits", "-o", f"{out}.dot"], ["show", model, "--y", relu, "-o", f"{out}6.dot"],
        ["attack", model, "--y", "logits", "--input", tmp_path / "rows.npy", "--labels", tmp_path / "labels.npy",
         "--eps", "0.1", "--steps", "2"],
        ["unfreeze", model, "--list"], ["unfreeze", model, "-o", tmp_path / "ck"],
        ["freeze", tmp_path / "ck", "-o", f"{out}7.pb", "--outputs", f"{relu}:0"],
    ]


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_no_command_prints_a_control_character_or_a_forged_line(hostile, tmp_path, as_json):
    printed = 0
    for args in commands(hostile, tmp_path):
        result = run_cli(*args, *(["--json"] if as_json else []), expect=None)
        for stream in (result.stdout, result.stderr):
            assert not UNSHOWABLE.search(stream), (args, stream)
            assert not any(line.startswith(("~ fake", "~fake")) for line in stream.splitlines()), (args, stream)
        assert "Traceback" not in result.stderr, (args, result.stderr)
        if as_json and result.stdout:
            json.loads(result.stdout)
        printed += "fake(Forged)" in result.stdout + result.stderr
    # the names were shown, escaped, not left out: by ops, diff, rewrite, insert, bypass and reset, and with
    # TensorFlow by the errors of the commands that load the graph
    assert printed >= (10 if importlib.util.find_spec("tensorflow") else 7)


def test_diff_shows_a_forged_attribute_name_escaped_on_its_own_line(hostile):
    result = run_cli("diff", fixture("classifier.pb"), hostile, expect=1)
    assert "\\x1b]0;TITLE\\x07\\x1b[2J\\n~ fake (Forged)\\u202e" in result.stdout
