"""Model files read and written (graphgrad.files.reading, graphgrad.files.writing):
kinds by content, atomic writes, SavedModel directories, what killed writers left."""

import os
import random

import pytest

from conftest import dead_pid, fixture
from graphgrad import ModelReadError, ModelWriteError, read_model, serialize, write_model
from graphgrad.files.reading import parse_model_bytes


@pytest.mark.parametrize(
    "name, kind, encoding",
    [
        ("binary_net.pb", "graphdef", "binary"),
        ("binary_net.pbtxt", "graphdef", "text"),
        ("functions.pb", "graphdef", "binary"),
        ("model.meta", "metagraph", "binary"),
        ("model_text.meta", "metagraph", "text"),
        ("custom_gradient.meta", "metagraph", "binary"),
        ("saved_model", "savedmodel", "binary"),
        ("saved_model/saved_model.pb", "savedmodel", "binary"),
    ],
)
def test_kind_and_encoding_come_from_content(name, kind, encoding):
    model = read_model(fixture(name))
    assert (model.kind, model.encoding) == (kind, encoding)


def test_extension_does_not_decide(tmp_path):
    disguised = tmp_path / "graph.pb"
    disguised.write_bytes(open(fixture("binary_net.pbtxt"), "rb").read())
    assert read_model(str(disguised)).encoding == "text"
    meta_as_pb = tmp_path / "meta.pb"
    meta_as_pb.write_bytes(open(fixture("model.meta"), "rb").read())
    assert read_model(str(meta_as_pb)).kind == "metagraph"


def test_format_override_forces_the_kind():
    data = open(fixture("binary_net.pb"), "rb").read()
    _, kind, _ = parse_model_bytes(data, "graphdef")
    assert kind == "graphdef"
    with pytest.raises(ModelReadError, match="SavedModel directory, not a graphdef"):
        read_model(fixture("saved_model"), "graphdef")


@pytest.mark.parametrize("name", ["binary_net.pb", "binary_net.pbtxt", "model.meta", "model_text.meta", "saved_model"])
def test_round_trip_is_lossless(name, tmp_path):
    model = read_model(fixture(name))
    out = tmp_path / ("out" if name == "saved_model" else name)
    write_model(model, str(out))
    again = read_model(str(out))
    assert again.message == model.message
    assert (again.kind, again.encoding) == (model.kind, model.encoding)


def test_binary_bytes_are_deterministic():
    model = read_model(fixture("model.meta"))
    assert serialize(model) == serialize(read_model(fixture("model.meta")))
    assert serialize(model) == serialize(model.copy())


def test_saved_model_brings_variables_and_assets(tmp_path):
    model = read_model(fixture("saved_model"))
    out = tmp_path / "patched"
    write_model(model, str(out))
    assert sorted(os.listdir(out)) == ["assets", "saved_model.pb", "variables"]
    assert (out / "assets" / "vocab.txt").read_text() == "a\nb\n"
    assert sorted(os.listdir(out / "variables")) == sorted(os.listdir(fixture("saved_model", "variables")))
    # Writing again over a SavedModel directory replaces it whole.
    write_model(model, str(out), encoding="text")
    assert sorted(os.listdir(out)) == ["assets", "saved_model.pbtxt", "variables"]
    assert read_model(str(out)).message == model.message


def test_a_saved_model_copy_that_is_up_to_date_is_not_rewritten(tmp_path):
    import shutil

    source = tmp_path / "exported"
    shutil.copytree(fixture("saved_model"), source)
    model, out = read_model(str(source)), tmp_path / "patched"
    assert write_model(model, str(out)) is True
    os.utime(out / "saved_model.pb", (1, 1))
    assert write_model(model, str(out)) is False, "the same graph and members: nothing to write"
    assert os.stat(out / "saved_model.pb").st_mtime == 1
    index = next((source / "variables").glob("*.index"))
    os.utime(index, (5, 5))  # a newer mtime alone: the bytes are compared, and they are the same
    assert write_model(model, str(out)) is False
    index.write_bytes(index.read_bytes() + b"retrained")  # new variables under the same graph
    assert write_model(model, str(out)) is True
    assert (out / "variables" / index.name).read_bytes() == index.read_bytes()
    (out / "notes.txt").write_text("not part of the SavedModel")
    assert write_model(model, str(out)) is True and not (out / "notes.txt").exists()


def test_saved_model_refuses_to_replace_another_directory(tmp_path):
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "notes.txt").write_text("mine")
    with pytest.raises(ModelWriteError, match="not a SavedModel directory"):
        write_model(read_model(fixture("saved_model")), str(occupied))
    assert os.listdir(occupied) == ["notes.txt"]


def test_a_write_that_replaces_a_file_is_flushed_to_disk_first(tmp_path, monkeypatch):
    from conftest import run_cli

    synced = []
    original_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or original_fsync(fd))
    model = read_model(fixture("binary_net.pb"))
    write_model(model, str(tmp_path / "new.pb"))
    assert not synced  # a new file: a crash can lose it and nothing else (as with cp)
    (tmp_path / "old.pb").write_bytes(b"an earlier output")
    write_model(model, str(tmp_path / "old.pb"))
    assert len(synced) == 1  # a crash leaves the old version or the new one
    source = tmp_path / "in.pb"
    source.write_bytes(open(fixture("binary_net.pb"), "rb").read())
    run_cli("rewrite", source, "--op", "Sign=ste", "--in-place")  # through the fast path's writer
    assert len(synced) == 2
    write_model(read_model(fixture("saved_model")), str(tmp_path / "saved"))
    assert len(synced) == 2
    write_model(read_model(fixture("saved_model")), str(tmp_path / "saved"), encoding="text")
    members = sum(len(files) for _, _, files in os.walk(tmp_path / "saved"))
    assert len(synced) == 2 + members  # a SavedModel directory replaced: every file in it
    source.write_bytes(open(fixture("binary_net.pb"), "rb").read())
    run_cli("rewrite", source, "--op", "Sign=ste", "--in-place", "--backup", ".orig")
    assert len(synced) == 4 + members  # the new backup too: on disk before the original is replaced
    assert (tmp_path / "in.pb.orig").read_bytes() == open(fixture("binary_net.pb"), "rb").read()


def test_unchanged_output_is_not_rewritten(tmp_path):
    model = read_model(fixture("binary_net.pb"))
    out = tmp_path / "same.pb"
    assert write_model(model, str(out)) is True
    os.utime(out, (1, 1))
    assert write_model(model, str(out)) is False
    assert os.stat(out).st_mtime == 1


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "is empty"),
        (b"\x0a\xff\xff\xff\x0f", "not a TensorFlow graph file"),
        (random.Random(64).randbytes(64) + b"\x00", "not a TensorFlow graph file"),  # the same ids in every worker
        (b"node { name: 'a' op: ", "not a valid text GraphDef"),
        (b"meta_info_def { nonsense: 1 }", "not a valid text MetaGraphDef"),
        (b"hello, world\n", "not a TensorFlow graph file"),
    ],
)
def test_bad_files_give_one_clear_error(tmp_path, content, message):
    path = tmp_path / "bad.pb"
    path.write_bytes(content)
    with pytest.raises(ModelReadError) as error:
        read_model(str(path))
    assert message in str(error.value)
    assert "\n" not in str(error.value)
    assert str(path) in str(error.value)


def test_truncated_file(tmp_path):
    data = open(fixture("binary_net.pb"), "rb").read()
    path = tmp_path / "truncated.pb"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelReadError, match="not a TensorFlow graph file"):
        read_model(str(path))


def test_missing_and_unreadable_paths(tmp_path):
    with pytest.raises(ModelReadError, match="cannot read .*No such file"):
        read_model(str(tmp_path / "absent.pb"))
    with pytest.raises(ModelReadError, match="without saved_model.pb"):
        read_model(str(tmp_path))
    if os.geteuid() != 0:  # root reads everything
        locked = tmp_path / "locked.pb"
        locked.write_bytes(b"x")
        locked.chmod(0)
        with pytest.raises(ModelReadError, match="Permission denied"):
            read_model(str(locked))


def test_graphdef_given_as_saved_model_directory(tmp_path):
    (tmp_path / "saved_model.pb").write_bytes(open(fixture("binary_net.pb"), "rb").read())
    with pytest.raises(ModelReadError, match="holds a GraphDef, not a SavedModel"):
        read_model(str(tmp_path))


def test_failed_write_leaves_nothing_and_keeps_the_old_file(tmp_path, monkeypatch):
    model = read_model(fixture("binary_net.pb"))
    out = tmp_path / "out.pb"
    out.write_bytes(b"old content")

    def refuse(*_):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("graphgrad.files.writing.os.replace", refuse)
    with pytest.raises(ModelWriteError, match="cannot write .*No space left"):
        write_model(model, str(out))
    assert os.listdir(tmp_path) == ["out.pb"]
    assert out.read_bytes() == b"old content"


def test_write_into_missing_directory_fails_cleanly(tmp_path):
    model = read_model(fixture("binary_net.pb"))
    with pytest.raises(ModelWriteError, match="cannot write .*No such file"):
        write_model(model, str(tmp_path / "absent" / "out.pb"))
    assert os.listdir(tmp_path) == []


def test_an_input_shortened_while_it_is_copied_is_an_error_and_leaves_no_output(tmp_path):
    from graphgrad.files.reading import SourceFile
    from graphgrad.files.writing import write_chunks

    source_path, out = tmp_path / "in.pb", tmp_path / "out.pb"
    source_path.write_bytes(b"x" * 10_000)
    with SourceFile(str(source_path)) as source:
        os.truncate(source_path, 100)
        with pytest.raises(ModelReadError, match="changed while it was read"):
            write_chunks(str(out), [b"head", (0, 10_000)], source)
    assert os.listdir(tmp_path) == ["in.pb"]


@pytest.mark.parametrize("accepted", [0, 1, 5, 7, 3000])
def test_many_chunks_are_written_in_order_whatever_each_writev_takes(tmp_path, monkeypatch, accepted):
    """Runs of byte strings go through writev, which may write less than asked."""
    from graphgrad.files import writing
    from graphgrad.files.reading import SourceFile
    from graphgrad.files.writing import write_chunks

    writev = os.writev
    monkeypatch.setattr(os, "writev", lambda fd, buffers: writev(fd, [b"".join(buffers)[:accepted]]))
    source_path, out = tmp_path / "in.pb", tmp_path / "out.pb"
    source_path.write_bytes(bytes(range(256)) * 40)
    pieces = [bytes([n % 251]) * (n % 7) for n in range(writing._IOV_MAX * 2 + 5)]  # empty ones too
    chunks = [b"head", *pieces[:900], (10, 5000), bytearray(b"mid"), *pieces[900:], (0, 3)]
    with SourceFile(str(source_path)) as source:
        write_chunks(str(out), chunks, source)
    data = source_path.read_bytes()
    expected = b"head" + b"".join(pieces[:900]) + data[10:5000] + b"mid" + b"".join(pieces[900:]) + data[:3]
    assert out.read_bytes() == expected


def test_a_write_removes_what_killed_writers_left_for_its_target_only(tmp_path):
    dead, alive = dead_pid(), os.getpid()
    left = {
        f".out.pb.{dead}.k3x9_a1.graphgrad-tmp": True,          # a killed writer's, for this target
        f".out.pb.{alive}.q7w2e4r.graphgrad-tmp": False,        # a live writer's
        f".other.pb.{dead}.z1x2c3v.graphgrad-tmp": False,       # another target's
        "notes.txt": False,
    }
    for name in left:
        (tmp_path / name).write_bytes(b"partial")
    write_model(read_model(fixture("binary_net.pb")), str(tmp_path / "out.pb"))
    assert sorted(os.listdir(tmp_path)) == sorted(["out.pb"] + [name for name, gone in left.items() if not gone])


def test_a_sweep_of_a_directory_removes_every_killed_writers_temporary(tmp_path):
    from graphgrad.files.writing import remove_stale_temporaries

    dead, alive = dead_pid(), os.getpid()
    (tmp_path / f".a.1.pb.{dead}.k3x9_a1.graphgrad-tmp").write_bytes(b"partial")  # dots and digits in the target
    (tmp_path / f".model.{dead}.b8n7m6q.graphgrad-tmp").mkdir()  # a SavedModel being staged
    (tmp_path / f".model.{dead}.c1v2b3n.graphgrad-tmp.old").mkdir()  # and one swapped out: the only copy left
    (tmp_path / f".b.pb.{alive}.q7w2e4r.graphgrad-tmp").write_bytes(b"in progress")
    (tmp_path / f".b.pb.{dead}.graphgrad-tmp").write_bytes(b"not graphgrad's naming")
    remove_stale_temporaries(str(tmp_path))
    kept = [f".b.pb.{alive}.q7w2e4r.graphgrad-tmp", f".b.pb.{dead}.graphgrad-tmp", "model"]  # model: put back
    assert sorted(os.listdir(tmp_path)) == sorted(kept)
