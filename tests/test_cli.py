import json
import os
import shutil

import pytest

from conftest import GOLDEN, ROOT, fixture, run_cli
from graphgrad import iter_nodes, read_model

# Every test here runs on each reading of binary GraphDefs (conftest.reading).
pytestmark = pytest.mark.usefixtures("reading")


def check_golden(name, text):
    """Compare with tests/golden/NAME; GRAPHGRAD_UPDATE_GOLDEN=1 rewrites it."""
    path = os.path.join(GOLDEN, name)
    if os.environ.get("GRAPHGRAD_UPDATE_GOLDEN"):
        with open(path, "w") as stream:
            stream.write(text)
    with open(path) as stream:
        assert text == stream.read()


@pytest.fixture
def in_root(monkeypatch):
    monkeypatch.chdir(ROOT)


@pytest.mark.parametrize(
    "golden, args",
    [
        ("ops_binary_net.txt", ["ops", "fixtures/binary_net.pb"]),
        ("ops_custom_gradient.txt", ["ops", "fixtures/custom_gradient.meta"]),
        ("ops_functions.txt", ["ops", "fixtures/functions.pb"]),
        ("gradients.txt", ["gradients"]),
    ],
)
def test_golden_output(in_root, golden, args):
    from test_readme import _without_user_gradients  # other tests declare gradients of their own in this process

    output = run_cli(*args).stdout
    check_golden(golden, _without_user_gradients(output) if args == ["gradients"] else output)


def test_ops_golden_on_a_patched_tf2_saved_model(in_root, tmp_path):
    """Its override sits in a function that call ops run: ops names them and the fix."""
    out = tmp_path / "sm"
    run_cli("rewrite", "fixtures/tf2_saved_model", "--op", "Sign=ste", "-o", out)
    check_golden("ops_tf2_saved_model_patched.txt", run_cli("ops", out).stdout.replace(str(out), "OUT"))


def ends_graph():
    """Two placeholders; a node read only as 'split:1', one read only as '^check':
    neither is an output; unread constants and no-ops are not outputs either."""
    from graphgrad.files.protos import GraphDef

    graph_def = GraphDef()
    for name, op, inputs in [
        ("a", "Placeholder", []), ("check", "Assert", ["a"]), ("unused", "Const", []), ("b", "Placeholder", []),
        ("split", "Split", ["a"]), ("sum", "AddV2", ["split:1", "b", "^check"]), ("done", "NoOp", ["^sum"]),
        ("out", "Identity", ["sum"]), ("aux", "Identity", ["split"]),
    ]:
        graph_def.node.add(name=name, op=op, input=inputs)
    return graph_def


def test_ops_finds_inputs_and_outputs_as_summarize_graph_does(tmp_path):
    from google.protobuf import text_format

    binary, text = tmp_path / "g.pb", tmp_path / "g.pbtxt"
    binary.write_bytes(ends_graph().SerializeToString())
    text.write_text(text_format.MessageToString(ends_graph()))
    for path in (binary, text):  # the cut-down parse, and a full one
        printed = run_cli("ops", path).stdout.splitlines()
        assert printed[1:3] == ["  inputs: a, b", "  outputs: out (Identity), aux (Identity)"]
        listing = json.loads(run_cli("ops", path, "--json").stdout)["files"][0]
        assert [(end["graph"], end["node"], end["op_type"]) for end in listing["outputs"]] == [
            ("", "out", "Identity"), ("", "aux", "Identity"),
        ]
        assert [end["node"] for end in listing["inputs"]] == ["a", "b"] and listing["signatures"] == []


def test_ops_shows_a_saved_models_signatures_instead(in_root):
    printed = run_cli("ops", "fixtures/saved_model").stdout.splitlines()
    assert printed[1] == "  signature meta_graph 0 [serve]: serving_default: x = x:0 -> y = y:0"
    assert not any(line.startswith(("  inputs:", "  outputs:")) for line in printed)
    [signature] = json.loads(run_cli("ops", "fixtures/saved_model", "--json").stdout)["files"][0]["signatures"]
    assert signature == {"graph": "meta_graph 0 [serve]", "key": "serving_default", "inputs": {"x": "x:0"},
                         "outputs": {"y": "y:0"}}


def test_ops_shows_signatures_and_the_unsigned_graphs_ends(tmp_path):
    """A SavedModel whose serving graph has a signature and whose training graph has none."""
    from graphgrad import write_model

    model = read_model(fixture("saved_model_two_tags"))
    serving = model.message.meta_graphs[0].signature_def["serving_default"]
    serving.inputs["x"].name, serving.outputs["y"].name = "x:0", "y:0"
    write_model(model, str(tmp_path / "sm"))
    printed = run_cli("ops", tmp_path / "sm").stdout.splitlines()
    assert printed[1:4] == [
        "  signature meta_graph 0 [serve]: serving_default: x = x:0 -> y = y:0",
        "  inputs: meta_graph 1 [train]: x",
        "  outputs: meta_graph 1 [train]: w/IsInitialized/VarIsInitializedOp (VarIsInitializedOp), "
        "meta_graph 1 [train]: save/Identity (Identity), meta_graph 1 [train]: loss (Sum), "
        "meta_graph 1 [train]: save_1/Identity (Identity)",
    ]


def test_rewrite_golden_and_idempotent(in_root, tmp_path):
    out = tmp_path / "patched.pb"
    first = run_cli("rewrite", "fixtures/binary_net.pb", "--op", "Sign=ste", "-o", out)
    check_golden("rewrite_binary_net.txt", first.stdout.replace(str(out), "OUT"))
    data = out.read_bytes()
    check_golden("ops_binary_net_patched.txt", run_cli("ops", out).stdout.replace(str(out), "OUT"))
    again = run_cli("rewrite", out, "--op", "Sign=ste", "--in-place")
    assert "changed 0 node(s); 4 already as asked" in again.stdout
    assert out.read_bytes() == data
    other = tmp_path / "again.pb"
    run_cli("rewrite", "fixtures/binary_net.pb", "--op", "Sign=ste", "-o", other)
    assert other.read_bytes() == data, "same input and rules must give the same bytes"


def test_rewrite_json(in_root, tmp_path):
    out = tmp_path / "o.meta"
    result = run_cli("rewrite", "fixtures/model.meta", "--op", "Round=ste(clip=2)", "-o", out, "--json")
    document = json.loads(result.stdout)
    [entry] = document["files"]
    assert entry["status"] == "changed" and entry["written"] is True
    assert entry["report"]["changes"] == [
        {"graph": "", "node": "quantized", "op_type": "Round", "old": None, "new": "graphgrad/ste(clip=2.0)"}
    ]


def test_ops_json_flags_dangling_overrides():
    document = json.loads(run_cli("ops", fixture("custom_gradient.meta"), "--json").stdout)
    [summary] = document["files"]
    [override] = summary["overrides"]
    assert override["status"] == "dangling" and override["value"].startswith("CustomGradient-")
    assert summary["problems"] == [override]
    counts = {c["op_type"]: c["top"] for c in summary["op_types"]}
    assert counts["IdentityN"] == 1


def test_dry_run_writes_nothing(tmp_path):
    model = tmp_path / "m.pb"
    model.write_bytes(open(fixture("binary_net.pb"), "rb").read())
    result = run_cli("rewrite", model, "--op", "Sign=ste", "--dry-run")
    assert "would change 4 node(s)" in result.stdout
    assert os.listdir(tmp_path) == ["m.pb"]


def test_in_place_saved_model_and_text_output(tmp_path, work):
    run_cli("rewrite", work / "saved_model", "--op", "Sign=ste", "--in-place")
    assert [r.override for r in iter_nodes(read_model(str(work / "saved_model"))) if r.override] == [
        "graphgrad/ste(clip=1.0)"
    ]
    out = tmp_path / "as_text.pbtxt"
    run_cli("rewrite", work / "binary_net.pb", "--op", "Sign=zero", "-o", out, "--output-encoding", "text")
    assert read_model(str(out)).encoding == "text"


def test_examples_name_their_meta_graph_when_a_saved_model_holds_several():
    result = run_cli("rewrite", fixture("saved_model_two_tags"), "--op", "Sign=ste", "--dry-run")
    assert "graphgrad/ste(clip=1.0)  meta_graph 0 [serve]: Sign, meta_graph 1 [train]: Sign" in result.stdout


def test_repair_custom_gradient_in_one_command(tmp_path):
    out = tmp_path / "repaired.meta"
    run_cli("rewrite", fixture("custom_gradient.meta"), "--node", "IdentityN=identity", "--force", "-o", out)
    document = json.loads(run_cli("ops", out, "--json").stdout)
    assert [o["value"] for o in document["files"][0]["overrides"]] == ["graphgrad/identity"]


@pytest.mark.parametrize(
    "args, expect, message",
    [
        (["rewrite", "fixtures/binary_net.pb", "--op", "Sign=ste"], 2,
         "exactly one of -o OUT, --out-dir DIR, --in-place, --dry-run"),
        (["rewrite", "fixtures/binary_net.pb", "--dry-run"], 2, "give at least one rule"),
        (["rewrite", "fixtures/binary_net.pb", "--op", "Sign=stee", "--dry-run"], 1, "Did you mean ste?"),
        (["rewrite", "fixtures/binary_net.pb", "--op", "sign=ste", "--dry-run"], 1, "did you mean Sign?"),
        (["rewrite", "fixtures/binary_net.pb", "--op", "Sign=ste", "-o", "fixtures/binary_net.pb"], 1,
         "use --in-place"),
        (["rewrite", "fixtures/custom_gradient.meta", "--op", "IdentityN=ste", "--dry-run"], 1, "add --force"),
        (["ops", "fixtures/absent.pb"], 1, "cannot read fixtures/absent.pb"),
        (["ops", "tests/golden"], 1, "tests/golden holds no model"),
        (["ops", "fixtures/make_fixtures.py"], 1, "not a TensorFlow graph file"),
    ],
)
def test_errors_are_one_line_without_traceback(in_root, args, expect, message):
    result = run_cli(*args, expect=expect)
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    if expect == 1:
        assert len(result.stderr.strip().splitlines()) == 1


def test_debug_shows_the_traceback(in_root):
    result = run_cli("ops", "fixtures/absent.pb", "--debug", expect=1)
    assert "cannot read" in result.stderr
    result = run_cli("rewrite", "fixtures/binary_net.pb", "--op", "Sign=nope", "--dry-run", "--debug", expect=1)
    assert "Traceback" in result.stderr


def test_one_bad_file_does_not_stop_the_others(tmp_path):
    bad = tmp_path / "bad.pb"
    bad.write_bytes(b"garbage")
    good = tmp_path / "good.pb"
    good.write_bytes(open(fixture("binary_net.pb"), "rb").read())
    result = run_cli("rewrite", bad, good, "--op", "Sign=ste", "--in-place", expect=1)
    assert "bad.pb is not a TensorFlow graph file" in result.stderr
    assert "good.pb  changed  Sign 4" in result.stdout
    assert "2 files: 1 changed, 1 error" in result.stdout
    assert bad.read_bytes() == b"garbage"
    twice = run_cli("rewrite", bad, bad, good, "--op", "Sign=ste", "--dry-run", expect=1)
    assert "3 files: 2 errors, 1 unchanged" in twice.stdout


@pytest.mark.parametrize("reading", ["stored"], indirect=True)  # once: it registers a gradient in this process
def test_user_gradients_module(tmp_path):
    module = tmp_path / "my_grads.py"
    module.write_text(
        "import graphgrad\n\n"
        "@graphgrad.gradient('halve_cli')\n"
        "def halve(op, grad):\n"
        "    '''dy / 2 to input 0'''\n"
        "    return [grad * 0.5] + [None] * (len(op.inputs) - 1)\n"
    )
    listing = run_cli("gradients", "--gradients", module)
    assert "halve_cli" in listing.stdout and "dy / 2 to input 0" in listing.stdout
    out = tmp_path / "o.pb"
    run_cli("rewrite", fixture("binary_net.pb"), "--op", "Sign=halve_cli|scale(2)", "--gradients", module, "-o", out)
    values = {r.override for r in iter_nodes(read_model(str(out))) if r.override}
    assert values == {"graphgrad/halve_cli|scale(factor=2.0)"}
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    result = run_cli("gradients", "--gradients", broken, expect=1)
    assert "cannot load gradients from" in result.stderr and "RuntimeError: boom" in result.stderr


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "is empty"),
        (b"\x0a\x05trunc", "not a TensorFlow graph file"),
        (bytes(range(256)), "not a TensorFlow graph file"),
        (b"\x89HDF\r\n\x1a\n" + bytes(24), "it is an HDF5 file, such as a Keras .h5 model"),
        (b"PK\x03\x04" + bytes(24), "it is a zip archive, such as a Keras 3 .keras model"),
        (b"\x1c\x00\x00\x00TFL3" + bytes(24), "a TensorFlow Lite model without a subgraph"),
        (bytes(24) + b"\x57\xfb\x80\x8b\x24\x75\x47\xdb", "it is a checkpoint's variable index"),
    ],
)
def test_bad_input_writes_nothing(tmp_path, content, message):
    bad = tmp_path / "bad.pb"
    bad.write_bytes(content)
    result = run_cli("rewrite", bad, "--op", "Sign=ste", "-o", tmp_path / "out.pb", expect=1)
    assert message in result.stderr and len(result.stderr.splitlines()) == 1
    assert sorted(os.listdir(tmp_path)) == ["bad.pb"]


def test_a_checkpoint_is_answered_with_its_graph(tmp_path):
    """A checkpoint prefix names no file, and its shards hold values: the graph is the .meta."""
    shutil.copy(fixture("model.meta"), tmp_path / "model.ckpt-100.meta")
    (tmp_path / "model.ckpt-100.data-00000-of-00001").write_bytes(bytes(range(64)))
    prefix = run_cli("ops", tmp_path / "model.ckpt-100", expect=1)
    assert f"if it is a checkpoint prefix, its graph is {tmp_path / 'model.ckpt-100'}.meta" in prefix.stderr
    shard = run_cli("ops", tmp_path / "model.ckpt-100.data-00000-of-00001", expect=1)
    assert "it is a checkpoint's variable values (no graph). To fix this, name the .meta file" in shard.stderr
    assert run_cli("ops", tmp_path / "other", expect=1).stderr.rstrip().endswith("No such file or directory")


def test_graph_def_where_a_saved_model_directory_is_expected(tmp_path):
    (tmp_path / "saved_model.pb").write_bytes(open(fixture("binary_net.pb"), "rb").read())
    result = run_cli("rewrite", tmp_path, "--op", "Sign=ste", "-o", tmp_path / "out", expect=1)
    assert "holds a GraphDef, not a SavedModel" in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("typed, meant", [("rewite", "rewrite"), ("inspect", "ops"), ("draw", "show")])
def test_a_misspelt_command_gets_a_suggestion(typed, meant):
    result = run_cli(typed, expect=2)
    assert f"no such command '{typed}'. Did you mean '{meant}'?" in result.stderr


def test_ctrl_c_exits_130_quietly(monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("graphgrad.cli.ops.summarize_files", interrupted)
    result = run_cli("ops", fixture("binary_net.pb"), expect=130)
    assert "Aborted" not in result.output and "Traceback" not in result.output


def test_grad_status_without_tensorflow_is_one_line():
    import subprocess
    import sys

    program = ("import sys; sys.modules['tensorflow'] = None; sys.argv = ['graphgrad', 'ops', sys.argv[1], "
               "'--grad-status']; from graphgrad.cli import run; run()")
    result = subprocess.run([sys.executable, "-c", program, fixture("binary_net.pb")], capture_output=True, text=True)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().startswith("graphgrad: error: this needs TensorFlow, which is not installed")


def test_shell_completion_offers_paths_after_output_options(monkeypatch):
    from click.shell_completion import ShellComplete

    from graphgrad.cli import main

    for option in ("-o", "--out-dir", "--rules", "--gradients"):
        completions = ShellComplete(main, {}, "graphgrad", "_GRAPHGRAD_COMPLETE").get_completions(
            ["rewrite", "model.pb", option], "")
        assert [item.type for item in completions] in (["file"], ["dir"]), option


@pytest.mark.parametrize("args, exit_code", [
    (["insert", "missing.pb", "--at", "a:0", "--grad", "ste", "--dry-run"], 1),
    (["insert", fixture("binary_net.pb"), "--at", "nothing:0", "--grad", "ste", "--dry-run"], 1),
    (["diff", "missing.pb", fixture("binary_net.pb")], 2),
    (["rewrite", fixture("binary_net.pb"), "--op", "Sign=nosuch", "--dry-run"], 1),
    (["rewrite", fixture("binary_net.pb"), "--dry-run"], 2),
    (["reset", fixture("binary_net.pb")], 2),
])
def test_json_prints_one_error_document_when_the_command_fails(args, exit_code):
    result = run_cli(*args, "--json", expect=exit_code)
    document = json.loads(result.stdout)
    assert document["exit_code"] == exit_code and document["error"]
    assert document["error"] in result.stderr or document["error"].split(":")[0] in result.stderr


@pytest.mark.parametrize("command", [["ops"], ["rewrite", "--op", "Sign=ste", "--dry-run"], ["reset", "--dry-run"]])
def test_json_gives_each_failed_file_its_input_and_error(command):
    result = run_cli(command[0], "missing.pb", fixture("binary_net.pb"), *command[1:], "--json", expect=1)
    document = json.loads(result.stdout)
    failed = document.get("errors") or [entry for entry in document["files"] if entry.get("error")]
    assert [entry["input"] for entry in failed] == ["missing.pb"] and "cannot read missing.pb" in failed[0]["error"]


def test_gradients_fits_eighty_columns_and_json_keeps_every_word():
    listing = run_cli("gradients").stdout
    assert max(map(len, listing.splitlines())) <= 80
    entries = json.loads(run_cli("gradients", "--json").stdout)["gradients"]
    guided = next(entry for entry in entries if entry["name"] == "guided_relu")
    assert guided["op_types"] == ["Relu", "Relu6", "LeakyRelu", "Elu", "Selu"] and "\n" not in guided["formula"]


@pytest.mark.parametrize("args", [
    ["rewrite", fixture("binary_net.pb"), "--op", "Sign", "--dry-run"],
    ["rewrite", fixture("binary_net.pb"), fixture("dense_net.pb"), "--op", "Sign=ste", "-o", "x.pb"],
    ["rewrite", fixture("binary_net.pb"), "--op", "Sign=ste", "-o", "-"],
])
def test_usage_mistakes_exit_2(args):
    assert run_cli(*args, expect=2).stderr.count("\n") >= 1


def test_quiet_prints_errors_only(tmp_path):
    (tmp_path / "bad.pb").write_bytes(b"x")
    shutil.copy(fixture("binary_net.pb"), tmp_path / "good.pb")
    result = run_cli("rewrite", tmp_path, "--op", "Sign=ste", "--dry-run", "-q", expect=1)
    assert result.stdout == "" and result.stderr.count("\n") == 1 and "bad.pb" in result.stderr
    assert run_cli("reset", tmp_path / "good.pb", "--dry-run", "-q").output == ""


def test_version():
    import graphgrad

    assert run_cli("--version").stdout.strip() == f"graphgrad, version {graphgrad.__version__}"


def test_an_unexpected_error_is_still_one_json_document(monkeypatch):
    """A bug (any exception graphgrad did not raise on purpose) under --json: the
    document a script reads, then the traceback for the report."""
    from click.testing import CliRunner

    import graphgrad.jobs.api as api
    from graphgrad.cli import main

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(api, "summarize_files", broken)
    monkeypatch.setattr("graphgrad.cli.ops.summarize_files", broken)
    result = CliRunner().invoke(main, ["ops", fixture("binary_net.pb"), "--json"])
    assert json.loads(result.stdout) == {"error": "internal error: RuntimeError: a bug", "exit_code": 1}
    assert isinstance(result.exception, RuntimeError)


@pytest.mark.parametrize("body, message", [
    ("import sys\nsys.exit(0)\n", "it calls sys.exit(0) on import"),
    ("class Odd(BaseException):\n    pass\nraise Odd('no')\n", "Odd: no"),
])
def test_a_gradients_module_that_exits_or_raises_anything_is_one_line(tmp_path, body, message):
    module = tmp_path / "odd_grads.py"
    module.write_text(body)
    out = tmp_path / "out.pb"
    result = run_cli("rewrite", fixture("binary_net.pb"), "--op", "Sign=ste", "--gradients", module, "-o", out,
                     expect=1)
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1 and not out.exists()


def test_a_tensor_name_that_is_not_utf8_is_one_line():
    result = run_cli("check", fixture("binary_net.pb"), "--x", "x\udcff", expect=2)
    assert "no tensor" in result.stderr and len(result.stderr.strip().splitlines()) == 1
