"""Hostile and odd inputs: nothing written where not asked, no hang, one line for
every bad input (the real command, in-process; TensorFlow not needed)."""

import hashlib
import os
import shutil
import stat

import pytest

from conftest import fixture, run_cli

import graphgrad
from graphgrad.errors import SpecError
from graphgrad.files.reading import PROTOBUF_LIMIT
from graphgrad.files.writing import write_chunks

BINARY_NET = fixture("binary_net.pb")


def digest(path) -> str:
    """A digest of a file, or of every file below a directory."""
    hashes = hashlib.sha256()
    paths = [path] if os.path.isfile(path) else sorted(
        os.path.join(root, name) for root, _, names in os.walk(path) for name in names)
    for name in paths:
        hashes.update(str(name).encode() + open(name, "rb").read())
    return hashes.hexdigest()


# -- the input, and places outside the destination, are never changed -------------------


@pytest.mark.parametrize("source, out", [("sm", "sm/saved_model.pb"), ("sm/saved_model.pb", "sm")])
def test_a_savedmodel_is_not_its_own_output_without_in_place(tmp_path, source, out):
    shutil.copytree(fixture("saved_model"), tmp_path / "sm")
    before = digest(tmp_path / "sm")
    result = run_cli("rewrite", tmp_path / source, "--op", "Pack=select", "-o", tmp_path / out, expect=1)
    assert "is the input" in result.stderr and "--in-place" in result.stderr
    assert digest(tmp_path / "sm") == before


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_a_device_node_is_never_replaced(tmp_path):
    node = tmp_path / "null"
    os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    result = run_cli("rewrite", BINARY_NET, "--op", "Sign=ste", "-o", node, expect=1)
    assert "it is a character device, and graphgrad replaces only regular files" in result.stderr
    assert stat.S_ISCHR(os.stat(node).st_mode)


def test_a_fifo_output_is_refused(tmp_path):
    os.mkfifo(tmp_path / "out.pb")
    result = run_cli("rewrite", BINARY_NET, "--op", "Sign=ste", "-o", tmp_path / "out.pb", expect=1)
    assert "it is a FIFO (named pipe)" in result.stderr


def test_a_glob_climbing_out_of_out_dir_is_refused(tmp_path):
    (tmp_path / "zoo" / "a").mkdir(parents=True)
    (tmp_path / "victim").mkdir()
    shutil.copy(BINARY_NET, tmp_path / "victim" / "prod.pb")
    (tmp_path / "deploy" / "victim").mkdir(parents=True)
    shutil.copy(BINARY_NET, tmp_path / "deploy" / "victim" / "prod.pb")
    pattern = str(tmp_path / "zoo" / "*" / ".." / ".." / "victim" / "prod.pb")
    result = run_cli("rewrite", pattern, "--op", "Sign=ste", "--out-dir", tmp_path / "deploy" / "patched", expect=1)
    assert "outside --out-dir" in result.stderr
    assert (tmp_path / "deploy" / "victim" / "prod.pb").read_bytes() == open(BINARY_NET, "rb").read()


def test_savedmodel_symlinks_are_copied_as_links_never_followed(tmp_path):
    source = tmp_path / "sm"
    shutil.copytree(fixture("saved_model"), source)
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    (source / "assets" / "shadow").symlink_to(secret)
    shutil.rmtree(source / "variables")
    (source / "variables").symlink_to("/")  # a copy that followed it would never end
    out = tmp_path / "out"
    run_cli("rewrite", source, "--op", "Pack=select", "-o", out)
    assert os.readlink(out / "assets" / "shadow") == str(secret)
    assert os.readlink(out / "variables") == "/"
    again = run_cli("rewrite", source, "--op", "Pack=select", "-o", out)  # compared as links too
    assert "up to date" in again.stdout


def test_an_output_over_two_gib_is_refused_before_writing(tmp_path):
    class Huge:  # a source never read: the size check comes first
        pass

    with pytest.raises(graphgrad.ModelWriteError, match="over protobuf's 2 GiB limit"):
        write_chunks(str(tmp_path / "big.pb"), [(0, PROTOBUF_LIMIT + 1)], Huge())
    assert not os.listdir(tmp_path)


# -- no hang ------------------------------------------------------------------------------


def test_a_fifo_input_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "f.pb")
    result = run_cli("ops", tmp_path / "f.pb", expect=1)
    assert "it is a FIFO (named pipe), not a regular file" in result.stderr


@pytest.mark.parametrize("rules", ["fifo", "/dev/zero"])
def test_rules_from_a_fifo_or_a_device_are_refused(tmp_path, rules):
    if rules == "fifo":
        rules = tmp_path / "rules.toml"
        os.mkfifo(rules)
    result = run_cli("rewrite", BINARY_NET, "--rules", rules, "--dry-run", expect=1)
    assert "not a regular file" in result.stderr


def test_a_huge_rules_file_is_refused(tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text("#" * (2 << 20))
    result = run_cli("rewrite", BINARY_NET, "--rules", rules, "--dry-run", expect=1)
    assert "is over 1 MiB" in result.stderr


# -- one line instead of a traceback ------------------------------------------------------


def deep_text_graph(depth: int) -> str:
    nested = 'attr { key: "k" value { func { name: "f" ' * depth + "} } } " * depth
    return f'node {{ name: "a" op: "Const" attr {{ key: "f" value {{ func {{ name: "x" {nested}}} }} }} }}'


@pytest.mark.parametrize("command", [["ops"], ["insert", "--at", "a:0", "--grad", "ste", "--dry-run"]])
def test_text_nested_past_protobufs_limit(tmp_path, command):
    path = tmp_path / "deep.pbtxt"
    path.write_text(deep_text_graph(2000))
    result = run_cli(command[0], path, *command[1:], expect=1)
    assert "nests messages deeper than protobuf's parser allows" in result.stderr


def test_diff_of_a_deep_text_graph_exits_2(tmp_path):
    path = tmp_path / "deep.pbtxt"
    path.write_text(deep_text_graph(2000))
    assert "deeper than" in run_cli("diff", path, path, expect=2).stderr


@pytest.mark.parametrize("spec, message", [
    ("scale(1" + "0" * 400 + ")", "out of range: whole numbers have at most 18 digits"),
    ("ste" + "|scale(1)" * 400, "in canonical form, over the 4096"),
])
def test_specs_out_of_range(spec, message):
    with pytest.raises(SpecError, match=message):
        graphgrad.parse_spec(spec)
    assert message.split(":")[0] in run_cli("rewrite", BINARY_NET, "--op", f"Sign={spec}", "--dry-run",
                                            expect=1).stderr


def test_a_huge_number_in_a_graph_is_unresolved_not_a_crash(tmp_path):
    model = graphgrad.read_model(BINARY_NET)
    model.message.node[1].attr["_gradient_op_type"].s = ("graphgrad/scale(1" + "0" * 400 + ")").encode()
    path = tmp_path / "odd.pb"
    path.write_bytes(model.message.SerializeToString())
    assert "UNRESOLVED" in run_cli("ops", path).stdout


def test_a_tf_name_that_is_not_utf8():
    result = run_cli("rewrite", BINARY_NET, "--op", "Sign=tf:\udcff", "--dry-run", expect=1)
    assert "is not valid UTF-8 text" in result.stderr


@pytest.mark.parametrize("content, message", [
    (b"a = " + b"[" * 2000 + b"]" * 2000, "nests tables or arrays too deeply"),
    (b"[[rule]]\nop = \"\xff\"\n", "it is not UTF-8 text"),
    (b"n = " + b"9" * 5000, "is not a usable rules file"),
])
def test_rules_files_that_do_not_parse(tmp_path, content, message):
    rules = tmp_path / "rules.toml"
    rules.write_bytes(content)
    result = run_cli("rewrite", BINARY_NET, "--rules", rules, "--dry-run", expect=1)
    assert message in result.stderr and "Traceback" not in result.stderr


def test_a_symlink_loop_is_searched_once_and_said(tmp_path):
    (tmp_path / "zoo" / "a").mkdir(parents=True)
    shutil.copy(BINARY_NET, tmp_path / "zoo" / "a" / "m.pb")
    (tmp_path / "zoo" / "self").symlink_to(".")
    result = run_cli("ops", "-r", tmp_path / "zoo", expect=1)
    assert "a link to a directory already searched; skipped" in result.stderr
    assert result.stdout.count("m.pb") == 1


# -- temporaries and swaps -----------------------------------------------------------------


def test_a_locked_temporary_of_an_unknown_pid_is_left_alone(tmp_path):
    """A writer in another pid namespace: its pid means nothing here, its lock does."""
    import fcntl

    from conftest import dead_pid
    from graphgrad.files.writing import remove_stale_temporaries

    temporary = tmp_path / f".out.pb.{dead_pid()}.a1b2c3d.graphgrad-tmp"
    temporary.write_bytes(b"in progress")
    with open(temporary, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        remove_stale_temporaries(str(tmp_path))
        assert temporary.exists()
    remove_stale_temporaries(str(tmp_path))
    assert not temporary.exists()


def test_a_sweep_puts_back_the_old_savedmodel_of_a_swap_killed_half_way(tmp_path):
    from conftest import dead_pid
    from graphgrad.files.writing import remove_stale_temporaries

    backup = tmp_path / f".model.{dead_pid()}.c1v2b3n.graphgrad-tmp.old"
    shutil.copytree(fixture("saved_model"), backup)
    result = run_cli("rewrite", BINARY_NET, "--op", "Sign=typo", "-o", tmp_path / "model" / "x.pb", expect=1)
    assert "unknown gradient" in result.stderr  # a failed run sweeps nothing away
    remove_stale_temporaries(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["model"] and digest(tmp_path / "model") != ""
    assert (tmp_path / "model" / "saved_model.pb").read_bytes() == open(fixture("saved_model", "saved_model.pb"),
                                                                         "rb").read()


def test_replacing_a_savedmodel_output_is_one_exchange(tmp_path, monkeypatch):
    import graphgrad.files.writing as io

    calls = []
    exchange = io._exchange
    monkeypatch.setattr(io, "_exchange", lambda a, b: calls.append(exchange(a, b)) or calls[-1])
    out = tmp_path / "out"
    run_cli("rewrite", fixture("saved_model"), "--op", "Pack=select", "-o", out)
    run_cli("rewrite", fixture("saved_model"), "--op", "Pack=select(1)", "--force", "-o", out)
    assert calls == [True] and sorted(os.listdir(tmp_path)) == ["out"]  # swapped in one step, old copy gone
    assert "graphgrad/select(index=1)" in run_cli("ops", out).stdout


def test_a_savedmodel_to_a_file_name_is_refused(tmp_path):
    result = run_cli("rewrite", fixture("saved_model"), "--op", "Pack=select", "-o", tmp_path / "X.pb", expect=1)
    assert "a SavedModel is a directory, and" in result.stderr and f"-o {tmp_path / 'X'}" in result.stderr
    assert not os.listdir(tmp_path)


def test_output_dash_is_refused_not_a_file_named_dash(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run_cli("rewrite", BINARY_NET, "--op", "Sign=ste", "-o", "-", expect=2)
    assert "not to standard output" in result.stderr and not os.listdir(tmp_path)


LONG = "m" * 247  # with ".pb", 250 bytes: a file name may have 255, and a temporary adds 29 or more


def test_outputs_with_the_longest_names_are_written_and_leave_no_temporary(tmp_path):
    out = tmp_path / f"{LONG}.pb"
    run_cli("rewrite", BINARY_NET, "--op", "Sign=ste", "-o", out)
    in_place = tmp_path / "in_place"
    in_place.mkdir()
    shutil.copy(BINARY_NET, in_place / f"{LONG}.pb")
    run_cli("rewrite", in_place / f"{LONG}.pb", "--op", "Sign=ste", "--in-place")
    zoo, mirrored = tmp_path / "zoo", tmp_path / "mirrored"
    zoo.mkdir()
    shutil.copy(BINARY_NET, zoo / f"{LONG}.pb")
    shutil.copy(BINARY_NET, zoo / "short.pb")
    run_cli("rewrite", "-r", zoo, "--op", "Sign=ste", "--out-dir", mirrored)
    saved = tmp_path / "saved" / LONG
    saved.parent.mkdir()
    run_cli("rewrite", fixture("saved_model"), "--op", "Pack=select", "-o", saved)
    run_cli("rewrite", fixture("saved_model"), "--op", "Pack=ste", "--force", "-o", saved)  # replaced: a swap
    for folder in (tmp_path, in_place, mirrored, saved.parent):
        assert not [name for name in os.listdir(folder) if "graphgrad-tmp" in name]
    assert out.read_bytes() == (in_place / f"{LONG}.pb").read_bytes() == (mirrored / f"{LONG}.pb").read_bytes()


def test_a_killed_writers_temporary_of_a_long_name_is_swept(tmp_path):
    from conftest import dead_pid
    from graphgrad.files.writing import TEMP_SUFFIX, temporary_target

    out = tmp_path / f"{LONG}.pb"
    left = tmp_path / f".{temporary_target(out.name)}.{dead_pid()}.abcdefgh{TEMP_SUFFIX}"
    left.write_bytes(b"half")
    assert len(left.name) <= 255
    run_cli("rewrite", BINARY_NET, "--op", "Sign=ste", "-o", out)
    assert not left.exists() and out.exists()


# -- links ----------------------------------------------------------------------------

def test_a_link_a_batch_copied_into_out_dir_never_carries_a_later_write_out_of_it(tmp_path):
    """A SavedModel whose variables/ is a link to ../../victim is copied into --out-dir
    as a link; a later input of the batch, mirrored to a_model/variables/prod.pb
    from another tree, would be written through it onto victim/prod.pb."""
    victim = tmp_path / "victim"
    victim.mkdir()
    first, second = tmp_path / "first", tmp_path / "second"
    shutil.copytree(fixture("saved_model"), first / "a_model")
    shutil.rmtree(first / "a_model" / "variables")
    os.symlink("../../victim", first / "a_model" / "variables")
    (second / "a_model" / "variables").mkdir(parents=True)
    shutil.copy(BINARY_NET, second / "a_model" / "variables" / "prod.pb")
    result = run_cli("rewrite", "-r", first, second, "--op", "Sign=ste", "--allow-missing", "--out-dir",
                     tmp_path / "out", expect=1)
    assert "outside --out-dir" in result.stderr and "through a link" in result.stderr
    assert list(victim.iterdir()) == []


def test_a_recursive_search_follows_no_link_out_of_the_tree_and_says_so(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(BINARY_NET, outside / "theirs.pb")
    zoo = tmp_path / "zoo"
    (zoo / "inner").mkdir(parents=True)
    shutil.copy(BINARY_NET, zoo / "inner" / "ours.pb")
    os.symlink(outside, zoo / "elsewhere")
    os.symlink(outside / "theirs.pb", zoo / "theirs_link.pb")
    os.symlink(zoo / "inner", zoo / "inner_again")  # inside the tree: followed (once)
    before = digest(outside)
    result = run_cli("rewrite", "-r", zoo, "--op", "Sign=ste", "--in-place", expect=1)
    assert digest(outside) == before
    assert f"{zoo / 'elsewhere'}: a link out of the tree searched (to {outside}); skipped" in result.stderr
    assert f"{zoo / 'theirs_link.pb'}: a link out of the tree searched" in result.stderr
    assert digest(zoo / "inner" / "ours.pb") != digest(BINARY_NET)


def test_in_place_keeps_the_owner_and_group_of_the_file_it_replaces(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("only root may give a file to another owner")
    path = tmp_path / "model.pb"
    shutil.copy(BINARY_NET, path)
    os.chown(path, 12345, 23456)
    run_cli("rewrite", path, "--op", "Sign=ste", "--in-place")
    status = os.stat(path)
    assert (status.st_uid, status.st_gid) == (12345, 23456)
