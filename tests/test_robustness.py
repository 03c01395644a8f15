"""Bad input, faults, nothing lost (file level, no TensorFlow)."""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, fixture, run_cli
from graphs import chain_graph
from graphgrad import ModelReadError, RewriteOptions, parse_rule, read_model, rewrite_model, serialize
from graphgrad.files.protos import AttrValue


def test_a_valid_protobuf_of_another_kind(tmp_path):
    other = tmp_path / "attr.pb"
    other.write_bytes(AttrValue(s=b"hello", i=3).SerializeToString())
    with pytest.raises(ModelReadError, match="not a TensorFlow graph file"):
        read_model(str(other))


def test_broken_symlink_and_unwritable_destinations(tmp_path):
    link = tmp_path / "dangling.pb"
    link.symlink_to(tmp_path / "gone.pb")
    assert "cannot read" in run_cli("ops", link, expect=1).stderr
    result = run_cli("rewrite", fixture("binary_net.pb"), "--op", "Sign=ste", "-o", "/proc/graphgrad.pb", expect=1)
    assert "cannot write /proc/graphgrad.pb" in result.stderr
    result = run_cli("rewrite", fixture("binary_net.pb"), "--op", "Sign=ste", "--out-dir", "/proc/graphgrad", expect=1)
    assert "cannot create /proc/graphgrad" in result.stderr


def test_file_over_the_protobuf_limit(tmp_path):
    huge = tmp_path / "huge.pb"
    with open(huge, "wb") as stream:
        stream.truncate(2**31 + 10)  # sparse: no disk is used
    result = run_cli("ops", huge, expect=1)
    assert "protobuf cannot parse a message over 2 GiB" in result.stderr


def test_saved_model_without_variables(tmp_path):
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(fixture("saved_model", "saved_model.pb"), bare)
    run_cli("rewrite", bare, "--op", "Sign=ste", "-o", tmp_path / "out")
    assert os.listdir(tmp_path / "out") == ["saved_model.pb"]


def test_duplicate_names_and_missing_inputs_are_flagged_not_fatal(tmp_path):
    graph_def = chain_graph(4)
    graph_def.node.add(name="layer1/Sign", op="Sign", input=["x"])
    graph_def.node.add(name="orphan", op="Identity", input=["nowhere:0", "^ghost"])
    path = tmp_path / "odd.pb"
    path.write_bytes(graph_def.SerializeToString())
    result = run_cli("ops", path)
    assert "! 2 nodes are named layer1/Sign" in result.stdout
    assert "! orphan refers to missing input(s) nowhere:0, ^ghost" in result.stdout
    rewritten = run_cli("rewrite", path, "--node", "layer1/Sign=ste", "-o", tmp_path / "out.pb")
    assert "changed 2 node(s)" in rewritten.stdout


@pytest.mark.parametrize("edit", [
    ["rewrite", "--op", "Sign=ste", "--embed"],
    ["insert", "--at", "layer1/Sign:0", "--grad", "ste"],
    ["bypass", "--from", "x:0", "--to", "layer1/Sign:0"],
])
def test_edits_of_structure_refuse_two_nodes_of_one_name(tmp_path, reading, edit):
    """TensorFlow refuses such graphs: an edit says which name, on every reading, and writes nothing."""
    graph_def = chain_graph(4)
    graph_def.node.add(name="layer1/Sign", op="Sign", input=["x"]).attr["T"].type = 1
    path = tmp_path / "odd.pb"
    path.write_bytes(graph_def.SerializeToString())
    result = run_cli(edit[0], path, *edit[1:], "-o", tmp_path / "out.pb", expect=1)
    assert "2 nodes of the graph are named 'layer1/Sign': TensorFlow refuses to import such a graph" in result.stderr
    assert not (tmp_path / "out.pb").exists()


@pytest.mark.slow
def test_killed_workers_never_lose_an_original(tmp_path):
    """SIGKILL the whole batch at random moments: each file is old or new, never broken."""
    original = chain_graph(60000)
    expected = serialize(rewrite_model(
        read_model_bytes(original), RewriteOptions(rules=(parse_rule("op", "Sign=ste"),)))[0])
    data = original.SerializeToString(deterministic=True)
    folder = tmp_path / "zoo"
    folder.mkdir()
    command = [sys.executable, "-m", "graphgrad", "rewrite", str(folder), "--op", "Sign=ste", "--in-place", "-j", "2"]
    for delay in (0.4, 0.8, 1.2, 1.6, 2.0):
        for index in range(6):
            (folder / f"m{index}.pb").write_bytes(data)
        process = subprocess.Popen(command, cwd=ROOT, start_new_session=True,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        for index in range(6):
            content = (folder / f"m{index}.pb").read_bytes()
            assert content in (data, expected), f"m{index}.pb is neither the original nor the result"
    finished = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert finished.returncode == 0, finished.stderr
    assert sorted(os.listdir(folder)) == [f"m{index}.pb" for index in range(6)], "no temporary file is left"
    assert all((folder / f"m{index}.pb").read_bytes() == expected for index in range(6))


def read_model_bytes(graph_def):
    from graphgrad.graph.model import Model

    return Model(graph_def, "graphdef", "binary")


def test_the_temporary_of_a_zombie_writer_is_swept(tmp_path):
    """A killed batch's workers stay zombies until something reaps them (in a container,
    maybe never): their temporaries hold no lock, and the next run removes them."""
    from graphgrad.files.writing import TEMP_SUFFIX, remove_stale_temporaries

    if not os.path.isdir("/proc/self"):
        pytest.skip("no /proc here: only the lock tells a writer's state")
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while open(f"/proc/{child.pid}/stat").read().rpartition(")")[2].split()[0] != "Z":
        assert time.monotonic() < deadline, "the child never exited"
        time.sleep(0.01)
    try:
        temporary = tmp_path / f".m0.pb.{child.pid}.abc123{TEMP_SUFFIX}"
        temporary.write_bytes(b"half a graph")
        remove_stale_temporaries(str(tmp_path))
        assert not temporary.exists()
    finally:
        child.wait()


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = open(f"/proc/{entry}/stat").read().rpartition(")")[2].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry))
    return found


def _running(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_workers_end_when_the_batch_they_work_for_is_killed(tmp_path):
    """SIGKILL to the main process alone (a CI step's timeout): its workers end too, and
    nothing holds the caller's stderr pipe open after it."""
    if not sys.platform.startswith("linux"):
        pytest.skip("the parent-death signal is Linux's")
    data = chain_graph(60000).SerializeToString(deterministic=True)
    folder = tmp_path / "zoo"
    folder.mkdir()
    for index in range(8):
        (folder / f"m{index}.pb").write_bytes(data)
    command = [sys.executable, "-m", "graphgrad", "rewrite", str(folder), "--op", "Sign=ste", "--in-place", "-j", "2"]
    process = subprocess.Popen(command, cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while len(workers := _children(process.pid)) < 2 and process.poll() is None:
            assert time.monotonic() < deadline, "the batch started no workers"
            time.sleep(0.02)
        assert process.poll() is None, "the batch ended before it could be killed: give it more to do"
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        deadline = time.monotonic() + 20
        while any(_running(worker) for worker in workers):
            assert time.monotonic() < deadline, f"workers {workers} outlived their batch"
            time.sleep(0.05)
        import select

        while True:  # to EOF: no process holds the pipe
            ready = select.select([process.stderr], [], [], max(0.0, deadline - time.monotonic()))[0]
            assert ready, "something still holds the batch's stderr"
            if not os.read(process.stderr.fileno(), 65536):
                break
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
