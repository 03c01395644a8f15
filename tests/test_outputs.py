"""No command's output may be, contain or replace one of its inputs, --force or not:
each command that writes is pointed at the files it reads, and refuses in one line
with every input's bytes as they were (graphgrad.files.outputs holds the one check)."""

import os
import shutil
import stat

import numpy as np
import pytest

from conftest import fixture, run_cli
from tf_helpers import tf  # noqa: F401  (unfreeze writes the checkpoints read here: skips without TensorFlow)


def _snapshot(root):
    """Every file below ``root`` with its bytes, and every folder with its mode."""
    found = {}
    for folder, _, names in os.walk(root):
        found[folder] = stat.S_IMODE(os.stat(folder).st_mode)
        for name in names:
            path = os.path.join(folder, name)
            with open(path, "rb") as stream:
                found[path] = stream.read()
    return found


@pytest.fixture
def inputs(tmp_path):
    """A frozen model in a folder of its own, a SavedModel, rows for attribute, and a
    checkpoint that unfreeze wrote."""
    (tmp_path / "sub").mkdir()
    shutil.copy(fixture("classifier.pb"), tmp_path / "sub" / "classifier.pb")
    shutil.copytree(fixture("saved_model"), tmp_path / "saved")
    np.save(tmp_path / "rows.npy", np.ones((2, 4), np.float32))
    run_cli("unfreeze", fixture("classifier.pb"), "-o", tmp_path / "ck")
    os.symlink(tmp_path / "saved" / "saved_model.pb", tmp_path / "saved.html")
    os.symlink(tmp_path / "ck" / "model.index", tmp_path / "ck.html")
    os.symlink(tmp_path / "ck" / "model.index", tmp_path / "ck.png")
    return tmp_path


# (command line, the message's words) with {t} the folder of the inputs above; {t}/saved.html,
# {t}/ck.html and {t}/ck.png are links to a file of the SavedModel and of the checkpoint
CASES = [
    (["unfreeze", "{t}/sub/classifier.pb", "-o", "{t}/sub", "--force"], "-o {t}/sub holds the model"),
    (["unfreeze", "{t}/sub/classifier.pb", "-o", "{t}", "--force"], "-o {t} holds the model"),
    (["unfreeze", "{t}/ck/model.meta", "-o", "{t}/ck", "--force"], "-o {t}/ck holds the model"),
    (["freeze", "{t}/ck", "-o", "{t}/ck/model.index"], "-o {t}/ck/model.index would overwrite the checkpoint"),
    (["freeze", "{t}/ck", "-o", "{t}/ck/checkpoint"], "would overwrite the checkpoint"),
    (["freeze", "{t}/ck/model.meta", "-o", "{t}/ck/model.data-00000-of-00001"], "would overwrite the checkpoint"),
    (["freeze", "{t}/ck/model", "-o", "{t}/ck/model.meta"], "would overwrite the checkpoint"),
    (["rewrite", "{t}/saved", "--op", "MatMul=identity", "-o", "{t}/saved/variables/variables.index"],
     "would overwrite the model"),
    (["insert", "{t}/sub/classifier.pb", "--at", "relu:0", "--grad", "reverse", "-o", "{t}/sub/classifier.pb"],
     "is the input"),
    (["bypass", "{t}/saved", "--from", "x:0", "--to", "y:0", "-o", "{t}/saved/variables/variables.index"],
     "would overwrite the model"),
    (["reset", "{t}/saved", "-o", "{t}/saved/variables/variables.index"], "would overwrite the model"),
    (["show", "{t}/saved", "-o", "{t}/saved.html"], "would overwrite the model"),
    (["show", "{t}/ck/model.meta", "-o", "{t}/ck.html"], "would overwrite the model"),
    (["check", "{t}/sub/classifier.pb", "--html", "{t}/sub/classifier.pb"], "graphgrad writes .html there"),
    (["attribute", "{t}/sub/classifier.pb", "--method", "gradient", "--input", "{t}/rows.npy", "--target", "0",
      "-o", "{t}/rows.npy"], "-o {t}/rows.npy would overwrite --input"),
    (["attribute", "{t}/ck/model.meta", "--method", "gradient", "--input", "{t}/rows.npy", "--target", "0",
      "-o", "{t}/out.npy", "--image", "{t}/ck.png"], "--image {t}/ck.png would overwrite the model"),
]


@pytest.mark.parametrize("args, message", CASES, ids=[" ".join(case[0][:1] + case[0][-2:]) for case in CASES])
def test_no_command_writes_onto_what_it_reads(inputs, args, message):
    before = _snapshot(inputs)
    # exit 1: a file of a batch (rewrite, reset) that fails, and insert's output that is its input (a write
    # error, as rewrite's); every other refusal is a usage error
    code = 1 if args[0] in ("rewrite", "insert", "reset") else 2
    result = run_cli(*[arg.format(t=inputs) for arg in args], expect=code)
    assert message.format(t=inputs) in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert _snapshot(inputs) == before


def test_check_html_onto_a_checkpoint_file_it_reads_is_refused(inputs):
    page = inputs / "ck" / "model.html"
    os.symlink(inputs / "ck" / "model.meta", page)  # an .html name that is the model's own file
    before = _snapshot(inputs / "ck")
    result = run_cli("check", inputs / "ck" / "model.meta", "--html", page, expect=2)
    assert "would overwrite the model" in result.stderr
    assert _snapshot(inputs / "ck") == before


def test_an_output_folder_keeps_its_mode_and_a_new_one_takes_the_umask(tmp_path):
    kept = tmp_path / "kept"
    kept.mkdir(mode=0o750)
    os.chmod(kept, 0o750)
    run_cli("unfreeze", fixture("classifier.pb"), "-o", kept, "--force")
    run_cli("unfreeze", fixture("classifier.pb"), "-o", tmp_path / "new")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(os.stat(kept).st_mode) == 0o750
    assert stat.S_IMODE(os.stat(tmp_path / "new").st_mode) == 0o777 & ~umask


def test_unfreeze_onto_a_dangling_link_is_one_line(tmp_path):
    os.symlink(tmp_path / "nowhere", tmp_path / "link")
    result = run_cli("unfreeze", fixture("classifier.pb"), "-o", tmp_path / "link", expect=2)
    assert "is a link to" in result.stderr and "which does not exist" in result.stderr
    assert os.path.islink(tmp_path / "link") and not os.path.exists(tmp_path / "nowhere")


def test_freeze_checks_its_outputs_names_before_tensorflow_runs(inputs):
    result = run_cli("freeze", inputs / "ck", "-o", inputs / "f.pb", "--outputs", "logit:0", expect=2)
    message = "--outputs logit:0: no tensor 'logit:0' in the graph; close ones: logits:0 (the checkpoint's)"
    assert message in result.stderr
    assert not (inputs / "f.pb").exists()
    missing = run_cli("freeze", inputs / "ck", "-o", inputs / "nowhere" / "f.pb", expect=2)
    assert f"no directory {inputs / 'nowhere'}; create it first" in missing.stderr
