"""insert, --embed, --repair-dangling, reset and diff: file level (no TensorFlow)."""

import json

import pytest

from conftest import fixture, run_cli
from graphgrad import RewriteOptions, SelectionError, SpecError, parse_rule, parse_spec, read_model
from graphgrad.edits.diff import diff_models
from graphgrad.edits.surgery import InsertOptions, ResetOptions, embed_rules, insert_gradient, reset_model

# Every test here runs on each reading of binary GraphDefs (conftest.reading).
pytestmark = pytest.mark.usefixtures("reading")


def test_the_forced_reading_is_the_one_that_edits_and_all_give_one_graph(reading, tmp_path):
    """conftest.reading routes the commands to one reading; insert and --embed give the
    parse's graph on each, and reset undoes them, back to the original, on the
    same reading."""
    outputs = {}
    model = read_model(fixture("dense_net.pb"))
    for command in (["insert", "--at", "l1_dense/BiasAdd:0", "--grad", "reverse", "--embed"],
                    ["rewrite", "--op", "Relu=identity", "--embed"]):
        out, restored = tmp_path / f"{command[0]}.pb", tmp_path / f"{command[0]}-reset.pb"
        run_cli(command[0], fixture("dense_net.pb"), *command[1:], "-o", out)
        outputs[command[0]] = read_model(str(out)).message
        assert "undid" in run_cli("reset", out, "-o", restored).stdout
        assert read_model(str(restored)).message == model.message
    expected = {"parsed": [], "scanned": ["FrozenReading"] * 4, "stored": ["StoredReading"] * 4}
    assert reading.opened == expected[reading.name]
    assert len(reading.fell_back) == {"parsed": 4, "scanned": 0, "stored": 0}[reading.name]
    assert outputs["insert"] == insert(model, "l1_dense/BiasAdd:0", "reverse", embed=True)[0].message
    rules = RewriteOptions(rules=(parse_rule("op", "Relu=identity"),), embed=True)
    assert outputs["rewrite"] == embed_rules(model, rules)[0].message


def insert(model, tensor, spec, **kwargs):
    return insert_gradient(model, InsertOptions(tensor, parse_spec(spec), **kwargs))


def test_insert_reroutes_consumers_and_reset_undoes_it():
    model = read_model(fixture("dense_net.pb"))
    patched, [insertion] = insert(model, "l1_dense/BiasAdd:0", "scale(0.8)")
    assert insertion.node == "l1_dense/BiasAdd/graphgrad_0"
    assert insertion.consumers == ("l1_dense/relu",)
    difference = diff_models(model, patched)
    assert [(d.node, d.kind) for d in difference.nodes] == [
        ("l1_dense/BiasAdd/graphgrad_0", "added"), ("l1_dense/relu", "changed")]
    restored, report = reset_model(patched, ResetOptions())
    assert restored.message == model.message
    assert report.undone == [("", "l1_dense/BiasAdd/graphgrad_0", "l1_dense/BiasAdd")]


def test_insert_twice_is_reported_not_stacked():
    model = read_model(fixture("dense_net.pb"))
    once, _ = insert(model, "l1_dense/BiasAdd:0", "reverse")
    twice, [again] = insert(once, "l1_dense/BiasAdd", "reverse")
    assert again.status == "already" and twice.message == once.message
    with pytest.raises(SelectionError, match="already has a graphgrad node, l1_dense/BiasAdd/graphgrad_0"):
        insert(once, "l1_dense/BiasAdd:0", "scale(2)")


def test_insert_for_chosen_consumers_keeps_control_inputs():
    model = read_model(fixture("binary_net.pb"))
    graph_def = model.message
    [matmul] = [n for n in graph_def.node if n.name == "dense2/MatMul"]
    matmul.input.append("^dense1/Sign")
    patched, [insertion] = insert(model, "dense1/Sign:0", "ste", consumers=("dense2/MatMul",))
    [matmul] = [n for n in patched.message.node if n.name == "dense2/MatMul"]
    assert list(matmul.input) == ["dense1/Sign/graphgrad_0", "dense2/binarize_weights/Sign", "^dense1/Sign"]
    with pytest.raises(SelectionError, match="not a consumer of dense1/Sign:0; its consumers are dense2/MatMul"):
        insert(model, "dense1/Sign:0", "ste", consumers=("dense1/MatMul",))


def test_insert_inside_a_function_body():
    model = read_model(fixture("functions.pb"))
    patched, [insertion] = insert(model, "cond_true_39/cond/Sign:y:0", "ste")
    assert insertion.node == "cond_true_39/cond/Sign/graphgrad_0"
    [function] = [f for f in patched.message.library.function if f.signature.name == "cond_true_39"]
    [mul] = [n for n in function.node_def if n.name == "cond/mul"]
    assert mul.input[0] == "cond/Sign/graphgrad_0:output:0"
    assert reset_model(patched, ResetOptions())[0].message == model.message


def test_insert_errors():
    model = read_model(fixture("dense_net.pb"))
    with pytest.raises(Exception, match="no tensor 'l1_dense/Nope:0'"):
        insert(model, "l1_dense/Nope:0", "reverse")
    with pytest.raises(Exception, match="close names: l1_dense/BiasAdd"):
        insert(model, "l1_dense/BiasAd:0", "reverse")
    with pytest.raises(SelectionError, match="nothing consumes loss:0"):
        insert(model, "loss:0", "reverse")
    with pytest.raises(SpecError, match="cannot be embedded"):
        insert(model, "l1_dense/BiasAdd:0", "clip_norm(1.0)", embed=True)


def test_embed_then_reset_is_exact_and_idempotent():
    model = read_model(fixture("binary_net.pb"))
    rules = RewriteOptions(rules=(parse_rule("op", "Sign=ste(clip=0.5)|scale(2)"),), embed=True)
    embedded, report = embed_rules(model, rules)
    assert len(report.changes) == 4
    assert not any(n.attr.get("_gradient_op_type") for n in embedded.message.node if "_gradient_op_type" in n.attr)
    again, report = embed_rules(embedded, rules)
    assert not report.changes and len(report.unchanged) == 4 and again.message == embedded.message
    assert reset_model(embedded, ResetOptions(op_types=("Sign",)))[0].message == model.message


def test_rewrite_model_honours_embed():
    """The library's rewrite_model takes RewriteOptions.embed as rewrite --embed does."""
    from graphgrad import rewrite_model

    model = read_model(fixture("binary_net.pb"))
    rules = RewriteOptions(rules=(parse_rule("op", "Sign=ste(clip=0.5)|scale(2)"),), embed=True)
    rewritten, report = rewrite_model(model, rules)
    assert rewritten.message == embed_rules(model, rules)[0].message and len(report.changes) == 4
    assert not any("_gradient_op_type" in node.attr for node in rewritten.message.node)


@pytest.mark.parametrize(
    "spec", ["clip_value(-1, 1)", "clip_norm(1)", "noise(0.1)", "select", "guided_relu", "tf:Identity"]
)
def test_specs_without_a_surrogate_are_refused(spec):
    model = read_model(fixture("binary_net.pb"))
    with pytest.raises(SpecError, match="cannot be embedded: only these have a forward surrogate: identity, ste"):
        embed_rules(model, RewriteOptions(rules=(parse_rule("op", f"Sign={spec}"),), embed=True))


def test_reset_removes_selected_overrides_only(tmp_path, reading):
    rewritten = tmp_path / "r.pb"
    run_cli("rewrite", fixture("binary_net.pb"), "--op", "Sign=ste", "--node", "dense2/logits=tf:Identity",
            "-o", rewritten)
    partly = tmp_path / "p.pb"
    run_cli("reset", rewritten, "--node", "dense1/*", "-o", partly)
    values = {c["node"] for c in json.loads(run_cli("ops", partly, "--json").stdout)["files"][0]["overrides"]}
    assert values == {"binarize_input/Sign", "dense2/binarize_weights/Sign", "dense2/logits"}
    full = tmp_path / "f.pb"
    run_cli("reset", rewritten, "-o", full)
    assert read_model(str(full)).message == read_model(fixture("binary_net.pb")).message
    assert len(reading.fell_back) == (4 if reading.name == "parsed" else 0)  # overrides are removed as stored


def test_diff_command_exit_codes(tmp_path):
    out = tmp_path / "o.pb"
    run_cli("rewrite", fixture("binary_net.pb"), "--op", "Sign=ste", "-o", out)
    same = run_cli("diff", fixture("binary_net.pb"), fixture("binary_net.pbtxt"))
    assert "no differences" in same.stdout
    different = run_cli("diff", fixture("binary_net.pb"), out, expect=1)
    assert "~ dense1/Sign (Sign)\n    _gradient_op_type: (none) -> 'graphgrad/ste(clip=1.0)'" in different.stdout
    document = json.loads(run_cli("diff", fixture("binary_net.pb"), out, "--json", expect=1).stdout)
    assert document["equal"] is False and len(document["difference"]["nodes"]) == 4
    missing = run_cli("diff", fixture("binary_net.pb"), tmp_path / "absent.pb", expect=2)
    assert "cannot read" in missing.stderr


@pytest.mark.parametrize("edit", [
    ["rewrite", "--op", "Relu=guided_relu"],
    ["insert", "--at", "l1_dense/BiasAdd:0", "--grad", "reverse", "--embed"],
    ["rewrite", "--op", "Relu=identity", "--embed"],
])
def test_diff_on_each_reading_is_the_full_parses(tmp_path, reading, edit):
    """diff compares two binary GraphDefs as stored, in the full parse's words, both ways."""
    out = tmp_path / "o.pb"
    run_cli(edit[0], fixture("dense_net.pb"), *edit[1:], "-o", out)
    reading.opened.clear()
    reading.fell_back.clear()
    for a, b in ((fixture("dense_net.pb"), out), (out, fixture("dense_net.pb"))):
        document = json.loads(run_cli("diff", a, b, "--json", expect=1).stdout)
        expected = diff_models(read_model(str(a)), read_model(str(b)))
        assert document["difference"]["nodes"] == json.loads(json.dumps(
            [vars(node) | {"details": list(node.details)} for node in expected.nodes]))
        assert document["difference"]["other"] == expected.other
    expected = {"parsed": [], "scanned": ["FrozenReading"] * 4, "stored": ["StoredReading"] * 4}
    assert reading.opened == expected[reading.name]
    assert len(reading.fell_back) == (4 if reading.name == "parsed" else 0)  # two files, both ways


def test_diff_of_stored_graphs_sees_a_changed_constant_and_other_fields(tmp_path, reading):
    from graphs import frozen_graph

    frozen = frozen_graph(layers=3, width=24)
    changed = type(frozen)()
    changed.CopyFrom(frozen)
    [kernel] = [node for node in changed.node if node.name == "dense1/kernel"]
    kernel.attr["value"].tensor.tensor_content = bytes(len(kernel.attr["value"].tensor.tensor_content))
    changed.versions.producer += 1
    a, b = tmp_path / "a.pb", tmp_path / "b.pb"
    a.write_bytes(frozen.SerializeToString(deterministic=True))
    b.write_bytes(changed.SerializeToString(deterministic=True))
    result = run_cli("diff", a, b, expect=1).stdout
    assert "~ dense1/kernel (Const)\n    attr value: tensor { dtype: DT_FLOAT" in result
    assert "fields other than nodes differ: versions" in result
    assert result.count("~ ") == 1


def test_diff_reaches_function_bodies_and_other_fields(tmp_path):
    out = tmp_path / "o.pb"
    run_cli("insert", fixture("functions.pb"), "--at", "cond_true_39/cond/Sign:y:0", "--grad", "ste", "-o", out)
    result = run_cli("diff", fixture("functions.pb"), out, expect=1).stdout
    assert "+ cond_true_39/cond/Sign/graphgrad_0 (Identity)" in result
    assert "~ cond_true_39/cond/mul (Mul)" in result
    meta = read_model(fixture("model.meta"))
    changed = meta.copy()
    changed.message.meta_info_def.tags.append("extra")
    assert diff_models(meta, changed).other == ["fields other than nodes differ: meta_info_def"]


def test_repair_dangling_in_one_command(tmp_path):
    out = tmp_path / "repaired.meta"
    result = run_cli("rewrite", fixture("custom_gradient.meta"), "--repair-dangling", "identity", "-o", out)
    assert "IdentityN  1  graphgrad/identity  IdentityN  (1 replaced)" in result.stdout
    nothing = run_cli("rewrite", out, "--repair-dangling", "identity", "--dry-run")
    assert "note: no node carries a dangling CustomGradient-<n> override" in nothing.stdout


def test_insert_cli_reports_and_refuses(tmp_path):
    out = tmp_path / "o.pb"
    result = run_cli("insert", fixture("dense_net.pb"), "--at", "l1_dense/BiasAdd:0", "--grad", "scale(0.8)", "-o", out)
    assert "inserted l1_dense/BiasAdd/graphgrad_0 at l1_dense/BiasAdd:0, feeding l1_dense/relu" in result.stdout
    again = run_cli("insert", out, "--at", "l1_dense/BiasAdd:0", "--grad", "scale(0.8)", "--in-place")
    assert "already carries this gradient" in again.stdout
    refused = run_cli("insert", out, "--at", "l1_dense/BiasAdd:0", "--grad", "scale(0.5)", "--in-place", expect=1)
    assert "run graphgrad reset --node 'l1_dense/BiasAdd/graphgrad_0' first" in refused.stderr


def test_scope_removes_scattered_nodes_in_place_and_keeps_the_order():
    from graphgrad.readings.scope import Scope

    graph_def = read_model(fixture("dense_net.pb")).message
    names = [node.name for node in graph_def.node]
    doomed = {names[0], names[1], names[4], names[-1]}  # two runs, a lone node, the last
    scope = Scope("", graph_def)
    scope.remove(doomed)
    assert [node.name for node in graph_def.node] == [name for name in names if name not in doomed]
    assert scope.node(names[0]) is None and scope.node(names[2]) is not None


def test_reset_names_the_metagraph_of_each_change(tmp_path):
    patched = tmp_path / "patched"
    run_cli("insert", fixture("saved_model_two_tags"), "--at", "Sign:0", "--grad", "ste", "-o", patched)
    text = run_cli("reset", patched, "--dry-run").stdout
    assert "  meta_graph 0 [serve]: would undo Sign/graphgrad_0, restoring Sign\n" in text
    assert "  meta_graph 1 [train]: would undo Sign/graphgrad_0, restoring Sign\n" in text


def test_embed_refuses_a_tensor_that_is_not_floating_point(tmp_path):
    result = run_cli("insert", fixture("acceptance", "pack.pb"), "--at", "x:0", "--grad", "ste", "--embed",
                     "--dtype", "int32", "-o", tmp_path / "x.pb", expect=1)
    assert "--embed builds float32/float64/float16/bfloat16 arithmetic; x is int32. To fix this, drop --embed" \
        in result.output
    assert not (tmp_path / "x.pb").exists()


def test_embed_on_an_op_whose_other_outputs_are_used_says_what_to_do_instead(tmp_path):
    import shlex

    from graphgrad.files.protos import DataType, GraphDef

    graph_def = GraphDef()
    for name, op, inputs in [("x", "Placeholder", []), ("split", "Unpack", ["x"]), ("sign", "Sign", ["split"]),
                             ("y", "AddV2", ["sign", "split:1"])]:
        node = graph_def.node.add(name=name, op=op, input=inputs)
        node.attr["dtype" if op == "Placeholder" else "T"].type = DataType.DT_FLOAT
    path = tmp_path / "unpack.pb"
    path.write_bytes(graph_def.SerializeToString())
    refused = run_cli("rewrite", path, "--op", "Unpack=ste", "--embed", "-o", tmp_path / "out.pb", expect=1)
    assert "split (Unpack): --embed replaces output 0, but consumers use split, split:1. To fix this" in refused.output
    suggestion = refused.output.split("you mean: ")[1].strip()
    assert suggestion == "graphgrad insert MODEL --at split:1 --grad 'ste(clip=1.0)' --embed"
    args = shlex.split(suggestion.replace("MODEL", str(path)))[1:] + ["-o", tmp_path / "out.pb"]
    assert "inserted split/graphgrad_embed/output at split:1, feeding y" in run_cli(*args).output


def test_rename_functions_follows_every_reference():
    from graphgrad import rename_functions

    model = read_model(fixture("functions.pb"))
    graph_def = model.message
    [branching] = [node for node in graph_def.node if "then_branch" in node.attr]
    caller = graph_def.node.add(name="call", op="cond_true_39")  # a function used as an op
    nested = graph_def.node.add(name="nested", op="PartitionedCall")
    nested.attr["f"].func.name = "cond_false_40"
    nested.attr["f"].func.attr["inner"].list.func.add(name="cond_true_39")
    graph_def.library.gradient.add(function_name="cond_true_39", gradient_func="cond_false_40")
    rename_functions(model, "_x")
    assert sorted(f.signature.name for f in graph_def.library.function) == ["cond_false_40_x", "cond_true_39_x"]
    assert (branching.attr["then_branch"].func.name, branching.attr["else_branch"].func.name) == (
        "cond_true_39_x", "cond_false_40_x")
    assert caller.op == "cond_true_39_x" and nested.attr["f"].func.name == "cond_false_40_x"
    assert nested.attr["f"].func.attr["inner"].list.func[0].name == "cond_true_39_x"
    assert (graph_def.library.gradient[0].function_name, graph_def.library.gradient[0].gradient_func) == (
        "cond_true_39_x", "cond_false_40_x")


def test_embed_inside_a_tf1_loop_is_refused_on_every_reading(tmp_path, reading):
    """The loop's frame is found on each reading (as stored: only when the file holds an Enter op)."""
    (_, graph_def), = read_model(fixture("tf1_loop.meta")).graphs()
    frozen = tmp_path / "loop.pb"
    frozen.write_bytes(graph_def.SerializeToString())
    result = run_cli("rewrite", frozen, "--op", "Mul=ste", "--embed", "-o", tmp_path / "out.pb", expect=1)
    assert "while/mul (Mul) is inside a TF1 while loop" in result.stderr and "without --embed" in result.stderr
    assert not (tmp_path / "out.pb").exists()
    assert reading.fell_back == ([str(frozen)] if reading.name == "parsed" else [])
