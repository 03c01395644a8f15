"""Many files: directories, globs, --out-dir, --backup, -j, --rules, idempotence."""

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from contextlib import contextmanager

import pytest

from conftest import dead_pid, fixture, run_cli
from graphgrad import iter_nodes, read_model


@pytest.fixture
def zoo(tmp_path):
    """A small model zoo: two teams, a SavedModel, and a file that is not a model."""
    root = tmp_path / "zoo"
    (root / "team_a" / "binary").mkdir(parents=True)
    (root / "team_b").mkdir()
    shutil.copy(fixture("binary_net.pb"), root / "team_a" / "binary" / "net.pb")
    shutil.copy(fixture("binary_net.pbtxt"), root / "team_a" / "net_text.pbtxt")
    shutil.copy(fixture("model.meta"), root / "team_b" / "model.meta")
    shutil.copytree(fixture("saved_model"), root / "team_b" / "exported")
    (root / "team_b" / "README.txt").write_text("not a model")
    return root


def overrides(path):
    return sorted({r.override for r in iter_nodes(read_model(str(path))) if r.override})


def test_directory_needs_r_to_recurse(zoo):
    result = run_cli("ops", zoo, expect=1)
    assert "holds no model" in result.stderr and "add -r" in result.stderr
    listing = json.loads(run_cli("ops", "-r", zoo, "--json").stdout)
    paths = [os.path.relpath(f["path"], zoo) for f in listing["files"]]
    assert paths == [
        "team_a/binary/net.pb", "team_a/net_text.pbtxt", "team_b/exported/saved_model.pb", "team_b/model.meta",
    ]


def test_out_dir_mirrors_the_input_tree(zoo, tmp_path):
    out = tmp_path / "patched"
    result = run_cli("rewrite", "-r", zoo, "--op", "Sign=ste", "--allow-missing", "--out-dir", out)
    assert "4 files: 3 changed, 1 unchanged" in result.stdout
    assert overrides(out / "team_a" / "binary" / "net.pb") == ["graphgrad/ste(clip=1.0)"]
    assert read_model(str(out / "team_a" / "net_text.pbtxt")).encoding == "text"
    assert sorted(os.listdir(out / "team_b" / "exported")) == ["assets", "saved_model.pb", "variables"]
    assert overrides(out / "team_b" / "model.meta") == []
    os.utime(out / "team_a" / "binary" / "net.pb", (1, 1))
    again = run_cli("rewrite", "-r", zoo, "--op", "Sign=ste", "--allow-missing", "--out-dir", out)
    assert re.search(r"zoo/team_a/binary/net\.pb +up to date +Sign 4", again.stdout)
    assert "4 files: 1 unchanged, 3 up to date" in again.stdout
    assert os.stat(out / "team_a" / "binary" / "net.pb").st_mtime == 1, "an up-to-date output is not rewritten"


def test_globs_are_expanded_and_mirrored(zoo, tmp_path):
    out = tmp_path / "patched"
    run_cli("rewrite", str(zoo / "**" / "*.pb"), "--op", "Sign=ste", "--out-dir", out)
    assert sorted(os.path.relpath(os.path.join(d, f), out) for d, _, fs in os.walk(out) for f in fs) == [
        "team_a/binary/net.pb", "team_b/exported/assets/vocab.txt", "team_b/exported/saved_model.pb",
        "team_b/exported/variables/variables.data-00000-of-00001", "team_b/exported/variables/variables.index",
    ]
    result = run_cli("rewrite", str(zoo / "nothing*.pb"), "--op", "Sign=ste", "--out-dir", out, expect=1)
    assert "no file matches" in result.stderr


def test_in_place_with_backup_and_idempotent_second_run(zoo):
    net = zoo / "team_a" / "binary" / "net.pb"
    original = net.read_bytes()
    run_cli("rewrite", "-r", zoo / "team_a", "--op", "Sign=ste", "--in-place", "--backup", ".orig")
    assert (zoo / "team_a" / "binary" / "net.pb.orig").read_bytes() == original
    assert overrides(net) == ["graphgrad/ste(clip=1.0)"]
    os.utime(net, (1, 1))
    again = run_cli("rewrite", "-r", zoo / "team_a", "--op", "Sign=ste", "--in-place", "--backup", ".orig")
    assert "2 files: 2 unchanged" in again.stdout
    assert os.stat(net).st_mtime == 1, "an unchanged file is not touched"


def test_backup_of_a_saved_model_directory_keeps_its_graph_file(zoo):
    exported = zoo / "team_b" / "exported"
    original = (exported / "saved_model.pb").read_bytes()
    run_cli("rewrite", exported, "--op", "Sign=ste", "--in-place", "--backup", ".orig")
    assert (exported / "saved_model.pb.orig").read_bytes() == original
    assert overrides(exported) == ["graphgrad/ste(clip=1.0)"]
    listed = run_cli("ops", "-r", zoo).stdout
    assert "saved_model.pb.orig" not in listed  # a backup is not taken for a model


def test_an_in_place_batch_removes_what_killed_writers_left(zoo):
    dead = dead_pid()
    stale = [
        zoo / "team_a" / "binary" / f".net.pb.{dead}.a1b2c3d.graphgrad-tmp",  # a file being written
        zoo / "team_b" / "exported" / f".saved_model.pb.{dead}.e4f5g6h.graphgrad-tmp",  # a SavedModel's graph
        zoo / "team_b" / f".exported.{dead}.i7j8k9l.graphgrad-tmp",  # a SavedModel being staged
    ]
    for path in stale:
        path.write_bytes(b"partial")
    run_cli("rewrite", "-r", zoo, "--op", "Sign=ste", "--allow-missing", "--in-place", "-j", "2")
    assert [path for path in stale if path.exists()] == []


def test_a_batch_lists_each_output_directory_once_not_once_per_file(zoo, tmp_path, monkeypatch):
    """Listing the directory per written file made a zoo of one folder quadratic."""
    from graphgrad import OutputOptions, parse_rule, rewrite_files
    from graphgrad.jobs.batch import BatchOptions
    from graphgrad.edits.rewrite import RewriteOptions

    folder = zoo / "team_a" / "binary"
    for index in range(5):
        shutil.copy(folder / "net.pb", folder / f"net{index}.pb")
    out = tmp_path / "out"
    mirror = out / "team_a" / "binary"
    mirror.mkdir(parents=True)
    stale = mirror / f".net3.pb.{dead_pid()}.a1b2c3d.graphgrad-tmp"
    stale.write_bytes(b"partial")
    listed, list_directory = [], os.listdir
    monkeypatch.setattr(os, "listdir", lambda path=".": listed.append(os.path.abspath(path)) or list_directory(path))
    results = rewrite_files([str(folder)], RewriteOptions(rules=(parse_rule("op", "Sign=ste"),)), OutputOptions(),
                            batch=BatchOptions(out_dir=str(mirror)))
    assert [result.status for result in results] == ["changed"] * 6
    assert listed.count(str(mirror)) == 1
    assert sorted(os.listdir(mirror)) == sorted(["net.pb"] + [f"net{index}.pb" for index in range(5)])


def assert_jobs_give_the_results_of_one(zoo, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    first = run_cli("rewrite", "-r", zoo, "--op", "Sign=ste", "--allow-missing", "--out-dir", one, "--json")
    second = run_cli("rewrite", "-r", zoo, "--op", "Sign=ste", "--allow-missing", "--out-dir", two, "--json", "-j", "2")
    assert json.loads(first.stdout.replace(str(one), "OUT")) == json.loads(second.stdout.replace(str(two), "OUT"))
    for directory, _, files in os.walk(one):
        for name in files:
            mirror = os.path.join(two, os.path.relpath(directory, one), name)
            assert open(os.path.join(directory, name), "rb").read() == open(mirror, "rb").read()


def test_jobs_give_the_same_results(zoo, tmp_path):
    assert_jobs_give_the_results_of_one(zoo, tmp_path)


linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="graphgrad picks start methods on Linux")


@contextmanager
def a_thread_of_its_own():
    """This process as a program with threads of its own (TensorFlow's, say)."""
    stop = threading.Event()
    helper = threading.Thread(target=stop.wait)
    helper.start()
    try:
        yield
    finally:
        stop.set()
        helper.join()


@linux_only
def test_jobs_give_the_same_results_from_a_threaded_program(zoo, tmp_path):
    from graphgrad.jobs.batch import worker_context

    with a_thread_of_its_own():
        assert worker_context().get_start_method() == "forkserver"
        assert_jobs_give_the_results_of_one(zoo, tmp_path)


@linux_only
def test_workers_from_a_fork_server_load_the_users_gradients(zoo, tmp_path):
    """In a process of its own, whose registry the user's gradient does not outlive."""
    loaded = tmp_path / "loaded_by"  # the module notes each process that loads it
    module = tmp_path / "my_batch_grads.py"
    module.write_text("\n".join([
        "import os", "import graphgrad", f"open({str(loaded)!r}, 'a').write(str(os.getpid()) + ' ')", "",
        "@graphgrad.gradient('halve_batch')", "def halve(op, grad):",
        "    return [grad * 0.5] + [None] * (len(op.inputs) - 1)", "",
    ]))
    folder = zoo / "team_a" / "binary"
    for index in range(3):
        shutil.copy(folder / "net.pb", folder / f"net{index}.pb")
    threaded_program = "\n".join([
        "import sys, threading", "from graphgrad.jobs.batch import worker_context", "from graphgrad.cli import main",
        "threading.Thread(target=threading.Event().wait, daemon=True).start()",
        "assert worker_context().get_start_method() == 'forkserver'", "main(sys.argv[1:])",
    ])
    subprocess.run([sys.executable, "-c", threaded_program, "rewrite", str(folder), "--op", "Sign=halve_batch",
                    "--gradients", str(module), "--out-dir", str(tmp_path / "o"), "-j", "2"], check=True)
    assert len(set(loaded.read_text().split())) >= 2, "no worker loaded the module"
    assert {name: overrides(tmp_path / "o" / name) for name in sorted(os.listdir(tmp_path / "o"))} == {
        name: ["graphgrad/halve_batch"] for name in ["net.pb", "net0.pb", "net1.pb", "net2.pb"]
    }


@linux_only
def test_without_proc_the_python_threads_count(monkeypatch):
    def no_proc(path):
        raise FileNotFoundError(path)

    from graphgrad.jobs.batch import worker_context

    monkeypatch.setattr(os, "listdir", no_proc)
    with a_thread_of_its_own():
        assert worker_context().get_start_method() == "forkserver"


@linux_only
def test_a_single_threaded_process_forks_its_workers():
    """The command line: workers inherit its imports (Python 3.14's default would import them again)."""
    probe = "from graphgrad.jobs.batch import worker_context; print(worker_context().get_start_method())"
    threaded = "import threading; threading.Thread(target=threading.Event().wait, daemon=True).start(); "
    methods = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
               for code in (probe, threaded + probe)]
    assert methods == ["fork", "forkserver"]


def test_json_report_for_ci(zoo, tmp_path):
    bad = zoo / "team_b" / "broken.pb"
    bad.write_bytes(b"\x00\x01garbage")
    result = run_cli("rewrite", "-r", zoo, "--op", "Sign=ste", "--allow-missing", "--out-dir", tmp_path / "o",
                     "--json", expect=1)
    files = {os.path.basename(f["input"]): f for f in json.loads(result.stdout)["files"]}
    assert files["broken.pb"]["status"] == "error" and "not a TensorFlow graph file" in files["broken.pb"]["error"]
    assert files["net.pb"]["report"]["by_op_type"] == {"Sign": 4}
    assert files["model.meta"]["status"] == "unchanged"


def write_rules(path, text):
    path.write_text(text)
    return path


def test_rules_file_combines_with_command_line_rules(zoo, tmp_path):
    rules = write_rules(tmp_path / "rules.toml", """
[[rule]]
op = "Sign"
gradient = "ste(clip=2.0)"
match = ["dense*"]

[[rule]]
node = "binarize_input/*"
gradient = "identity"
""")
    out = tmp_path / "net.pb"
    run_cli("rewrite", zoo / "team_a" / "binary" / "net.pb", "--rules", rules,
            "--node", "dense2/logits=tf:Identity", "-o", out)
    values = {r.name: r.override for r in iter_nodes(read_model(str(out))) if r.override}
    assert values == {
        "binarize_input/Sign": "graphgrad/identity",
        "dense1/binarize_weights/Sign": "graphgrad/ste(clip=2.0)",
        "dense1/Sign": "graphgrad/ste(clip=2.0)",
        "dense2/binarize_weights/Sign": "graphgrad/ste(clip=2.0)",
        "dense2/logits": "Identity",
    }


def test_conflicting_rules_name_both(zoo, tmp_path):
    rules = write_rules(tmp_path / "rules.toml", '[[rule]]\nop = "Sign"\ngradient = "ste"\n')
    result = run_cli("rewrite", zoo / "team_a" / "binary" / "net.pb", "--rules", rules,
                     "--node", "dense1/Sign=identity", "--dry-run", expect=1)
    assert "rules disagree on 1 node(s): dense1/Sign (Sign): " in result.stderr
    assert f"{rules} rule 1 (op Sign=ste(clip=1.0))" in result.stderr and "--node dense1/Sign=identity" in result.stderr


@pytest.mark.parametrize(
    "text, message",
    [
        ("[[rule]]\nop = \"Sign\"\n", "op and gradient must be non-empty strings"),
        ("[[rule]]\nop = \"Sign\"\nnode = \"x\"\ngradient = \"ste\"\n", "exactly one of op"),
        ("[[rule]]\nop = \"Sign\"\ngradient = \"stee\"\n", "rule 1: unknown gradient 'stee'"),
        ("[[rule]]\nop = \"Sign\"\ngradient = \"ste\"\nwhen = 1\n", "unknown keys when"),
        ("rule = 3\n", "expected [[rule]] tables"),
        ("[[rule]\n", "is not valid TOML"),
    ],
)
def test_bad_rules_files(tmp_path, text, message):
    rules = write_rules(tmp_path / "rules.toml", text)
    result = run_cli("rewrite", fixture("binary_net.pb"), "--rules", rules, "--dry-run", expect=1)
    assert message in result.stderr and "Traceback" not in result.stderr


def test_destination_usage_errors(zoo, tmp_path):
    result = run_cli("rewrite", zoo / "team_a", "-r", "--op", "Sign=ste", "-o", tmp_path / "x.pb", expect=2)
    assert "use --out-dir or --in-place" in result.stderr
    result = run_cli("rewrite", zoo, "--op", "Sign=ste", "--backup", ".orig", "--dry-run", expect=2)
    assert "--backup goes with --in-place" in result.stderr


def test_reset_over_a_batch(zoo):
    run_cli("rewrite", "-r", zoo / "team_a", "--op", "Sign=ste", "--in-place")
    result = run_cli("reset", "-r", zoo / "team_a", "--in-place")
    assert "2 files: 2 changed" in result.stdout
    assert overrides(zoo / "team_a" / "binary" / "net.pb") == []


def test_reports_survive_the_trip_from_a_worker():
    import pickle

    from graphgrad.edits.rewrite import NodeChange, RewriteReport

    report = RewriteReport(
        changes=[NodeChange("", "a/Sign", "Sign", None, "graphgrad/ste(clip=1.0)"),
                 NodeChange("g", "b", "Round", "CustomGradient-3", "graphgrad/identity")],
        unchanged=[], notes=["note"],
    )
    again = pickle.loads(pickle.dumps(report))
    assert again.changed and vars(again.changes)["_columns"] is None, "packed: a few objects, not one per node"
    assert again.by_op_type == {"Round": 1, "Sign": 1}
    assert again.groups() == report.groups() == [
        ("Sign", "graphgrad/ste(clip=1.0)", 1, 0, [("", "a/Sign")]),
        ("Round", "graphgrad/identity", 1, 1, [("g", "b")]),
    ]
    assert again == report  # rows are built when read
    again.changes.append(NodeChange("", "c", "Sign", None, "graphgrad/identity"))
    assert len(pickle.loads(pickle.dumps(again)).changes) == 3


def test_a_batch_keeps_reports_packed_until_it_prints_them():
    """-j 1 holds every file's report as -j 2's parent does: packed, not a string per node."""
    import pickle

    from graphgrad.edits.rewrite import NodeChange, RewriteReport

    rows = [NodeChange("", f"layer{index}/Sign", "Sign", None, "graphgrad/ste(clip=1.0)") for index in range(1000)]
    packed = RewriteReport(changes=rows, unchanged=[], notes=["n"]).packed()
    assert vars(packed.changes)["_packed"][1] == ("joined", "\0".join(row.node for row in rows))
    assert packed.by_op_type == {"Sign": 1000} and vars(packed.changes)["_columns"] is None, "counts need no unpacking"
    again = pickle.loads(pickle.dumps(packed))
    assert vars(packed.changes)["_columns"] is None, "a packed report pickles as it is"
    assert again == packed and again.changes == rows


def test_packed_columns_keep_every_value():
    import pickle

    from graphgrad.edits.rewrite import NodeChange, RewriteReport

    rows = [NodeChange("", "a\0b", "Sign", None, "x"),  # a separator inside a name: kept as a list
            NodeChange("", "c", "Sign", "joined", "same"),  # values that spell the packing's tags
            NodeChange("", "same", "Round", None, "x")]
    for changes in (rows, rows[1:], rows[:1], []):
        report = RewriteReport(changes=changes, unchanged=changes[::-1], notes=[])
        again = pickle.loads(pickle.dumps(report))
        assert again.changes == changes and again.unchanged == changes[::-1]


def test_column_reports_read_like_row_reports():
    from graphgrad.edits.rewrite import NodeChange, RewriteReport

    columns = RewriteReport.from_columns(
        (("", ""), ("a", "b"), ("Sign", "Sign"), (None, None), ("x", "x")), notes=["n"])
    assert columns.groups() == [("Sign", "x", 2, 0, [("", "a"), ("", "b")])] and columns.by_op_type == {"Sign": 2}
    assert columns == RewriteReport([NodeChange("", "a", "Sign", None, "x"), NodeChange("", "b", "Sign", None, "x")],
                                    [], ["n"])
    empty = RewriteReport.from_columns(([], [], [], [], []))
    assert not empty.changed and empty.changes == [] and empty.by_op_type == {} and empty.groups() == []


def test_progress_bar_only_on_a_terminal(monkeypatch):
    import io

    from graphgrad.jobs.batch import Item
    from graphgrad.cli.render import progress_bar

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    piped = io.StringIO()
    monkeypatch.setattr("sys.stderr", piped)
    with progress_bar(3, "rewriting") as progress:
        assert progress is None
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    with progress_bar(3, "rewriting") as progress:
        for name in ("a.pb", "b.pb", "c.pb"):
            progress(Item(f"zoo/{name}"))
    shown = terminal.getvalue()
    assert "rewriting" in shown and "3/3" in shown and "c.pb" in shown
    assert piped.getvalue() == ""


def test_an_unusable_out_dir_is_one_error_not_one_per_file(tmp_path):
    zoo = tmp_path / "zoo"
    for name in ("a", "b"):
        (zoo / name).mkdir(parents=True)
        for index in range(3):
            shutil.copy(fixture("binary_net.pb"), zoo / name / f"m{index}.pb")
    (tmp_path / "blocker").write_text("a file where a directory should be")
    result = run_cli("rewrite", "-r", zoo, "--op", "Sign=ste", "--out-dir", tmp_path / "blocker" / "out", expect=1)
    assert result.stderr.count("\n") == 1 and "cannot create" in result.stderr and "Not a directory" in result.stderr


def test_files_failing_for_one_cause_share_one_line(tmp_path):
    for index in range(3):
        (tmp_path / f"bad{index}.pb").write_bytes(b"x")
    shutil.copy(fixture("binary_net.pb"), tmp_path / "good.pb")
    result = run_cli("rewrite", tmp_path, "--op", "Sign=ste", "--dry-run", expect=1)
    assert result.stderr.count("\n") == 1 and "3 files like this one:" in result.stderr


def test_outputs_that_cannot_be_written_for_one_cause_share_one_line_and_no_rows(tmp_path):
    """Each file's message names its own output; the cause is one: one line with the
    count and the first file, and the table lists only the files that did not fail."""
    zoo, out = tmp_path / "zoo", tmp_path / "out"
    zoo.mkdir()
    for index in range(40):
        shutil.copy(fixture("binary_net.pb"), zoo / f"model_{index:02d}.pb")
        (out / f"model_{index:02d}.pb").mkdir(parents=True)  # a folder where the output should go
    result = run_cli("rewrite", "-r", zoo, "--op", "Sign=ste", "--out-dir", out, expect=1)
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("graphgrad: error: 40 files like this one:")
    assert f"{out / 'model_00.pb'}" in result.stderr
    assert result.stdout.splitlines() == ["40 files: 40 errors"]


def test_a_rule_that_selects_nothing_in_some_models_of_a_batch_suggests_allow_missing(tmp_path):
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    shutil.copy(fixture("binary_net.pb"), zoo / "binary.pb")
    shutil.copy(fixture("dense_net.pb"), zoo / "dense.pb")
    result = run_cli("rewrite", "-r", zoo, "--op", "Sign=ste", "--dry-run", expect=1)
    assert "no node has op type 'Sign'; to pass over the models that have none, add --allow-missing" in result.stderr
    run_cli("rewrite", "-r", zoo, "--op", "Sign=ste", "--dry-run", "--allow-missing")
    alone = run_cli("rewrite", zoo / "dense.pb", "--op", "Sign=ste", "--dry-run", expect=1)
    assert "--allow-missing" not in alone.stderr


def test_a_failed_batch_leaves_no_out_dir_it_made_and_keeps_one_that_was_there(tmp_path):
    zoo = tmp_path / "zoo"
    (zoo / "deep").mkdir(parents=True)
    shutil.copy(fixture("dense_net.pb"), zoo / "deep" / "dense.pb")
    shutil.copy(fixture("dense_net.pb"), zoo / "dense.pb")
    run_cli("rewrite", "-r", zoo, "--op", "Sign=ste", "--out-dir", tmp_path / "new" / "out", expect=1)
    assert not (tmp_path / "new").exists()
    (tmp_path / "kept").mkdir()
    run_cli("rewrite", "-r", zoo, "--op", "Sign=ste", "--out-dir", tmp_path / "kept", expect=1)
    assert (tmp_path / "kept").is_dir() and not list((tmp_path / "kept").iterdir())


def test_a_batch_table_fits_100_columns_with_long_names_shortened_in_the_middle(tmp_path):
    zoo = tmp_path / "zoo"
    deep = zoo / ("a_folder_with_a_long_name_" * 3) / "and_another"
    deep.mkdir(parents=True)
    shutil.copy(fixture("binary_net.pb"), deep / "a_model_whose_name_is_as_long_as_its_history.pb")
    shutil.copy(fixture("binary_net.pb"), zoo / "short.pb")
    result = run_cli("rewrite", "-r", zoo, "--op", "Sign=ste", "--dry-run")
    lines = result.stdout.splitlines()
    assert max(map(len, lines)) <= 100
    [long_row] = [line for line in lines if "history.pb" in line]  # (under pytest -n the short one is long too)
    assert long_row.startswith(str(zoo)[:20]) and "..." in long_row and "would change" in long_row


def test_the_batch_examples_of_the_docs_print_what_they_show(tmp_path, monkeypatch):
    """docs/batches.md's walk over its zoo, pasted into bash as written: what each
    command prints (stdout, then stderr) is what the page shows."""
    from test_readme import page_examples, shell_words

    page = open(os.path.join(os.path.dirname(fixture("")), "..", "docs", "batches.md")).read()
    shown_rules = re.search(r"```toml\n(.*?)```", page, re.S)[1]
    demo = tmp_path / "demo"
    demo.mkdir()
    made = subprocess.run([sys.executable, os.path.join(os.path.dirname(fixture("")), "..", "docs", "make_zoo.py"),
                           str(demo)], capture_output=True, text=True)  # as the page says to make them
    assert made.returncode == 0, made.stderr
    rules = (demo / "rules.toml").read_text()
    assert rules.strip() == "\n".join(line.strip() for line in shown_rules.splitlines()).strip()  # what it shows
    monkeypatch.chdir(demo)
    examples = [(command, shown) for command, shown in page_examples("docs/batches.md", zoo=True)]
    assert len(examples) >= 3
    for command, shown in examples:
        from click.testing import CliRunner

        from graphgrad.cli import main

        result = CliRunner().invoke(main, shell_words("bash", command), catch_exceptions=False)
        assert (result.stdout + result.stderr).strip("\n") == shown, command


def test_out_dir_mirrors_named_files_and_keeps_a_saved_model_in_its_folder(tmp_path):
    """Files named on the command line keep their paths under --out-dir (two of one
    name no longer collide), and a SavedModel named by its saved_model.pb is written
    in a folder of its own, not as --out-dir itself (issue 49.4)."""
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        shutil.copy(fixture("binary_net.pb"), tmp_path / folder / "net.pb")
    shutil.copytree(fixture("saved_model"), tmp_path / "exported")
    out = tmp_path / "patched"
    with _cwd(tmp_path):
        run_cli("rewrite", "a/net.pb", "b/net.pb", "exported/saved_model.pb", "--op", "Sign=ste", "--out-dir", out,
                "--allow-missing")
    assert (out / "a" / "net.pb").is_file() and (out / "b" / "net.pb").is_file()
    assert (out / "exported" / "saved_model.pb").is_file() and (out / "exported" / "variables").is_dir()
    assert not (out / "saved_model.pb").exists()


@contextmanager
def _cwd(path):
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)
