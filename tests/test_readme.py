"""The examples of the README and of the reference in docs/, run as written (in this
checkout, their /tmp files in a scratch folder): each prints what the page shows.
The batch examples over a zoo/ folder are run in test_batch, on a zoo it builds."""

import difflib
import os
import re
import shutil
import subprocess

from click.testing import CliRunner

from conftest import ROOT
from graphgrad.cli import main

NEEDS_TENSORFLOW = ("check ", "attribute ", "attack ", "--grad-status")


# In the order they are read: later examples read what earlier ones wrote.
PAGES = ["README.md"] + [os.path.join("docs", name) for name in (
    "commands.md", "tensorflow-custom-gradients.md", "gradients.md", "batches.md", "python-api.md",
    "function-calls.md", "performance.md", "design.md", "tests.md", "tflite.md",
)]


def examples() -> list:
    """``(command after "graphgrad", output shown)`` of every page, in order."""
    return [example for page in PAGES for example in page_examples(page)]


def page_examples(page: str, zoo: bool = False) -> list:
    """``(command, output)`` of a page's ``$ graphgrad`` examples: those over its
    zoo/ folder if ``zoo`` (tests/test_batch.py builds one), else the others."""
    with open(os.path.join(ROOT, page)) as stream:
        lines = stream.read().splitlines()
    blocks, current = [], None
    for line in lines:
        if line.startswith("```"):
            if current is None:
                current = []
            else:
                blocks.append("\n".join(current))
                current = None
        elif current is not None:
            current.append(line)
    found = []
    for block in blocks:
        for segment in re.split(r"(?m)^(?=\$ )", block):
            command, _, output = segment.partition("\n")
            if command.startswith("$ graphgrad ") and (" zoo" in command) == zoo:
                found.append((command.removeprefix("$ graphgrad "), output.strip("\n")))
    return found


def test_the_readme_shows_what_its_commands_print(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    try:
        import tensorflow  # noqa: F401
        tensorflow_here = True
    except ImportError:
        tensorflow_here = False
    ran, mismatches, undrawn = 0, [], 0
    for command, shown in examples():  # in order: later ones read what earlier ones wrote
        if any(marker in command for marker in NEEDS_TENSORFLOW) and not tensorflow_here:
            continue
        if re.search(r"\.(html|svg)\b", command) and shutil.which("dot") is None:
            undrawn += 1  # laid out by Graphviz, which this machine lacks
            continue
        command, shown = (text.replace("/tmp/", f"{tmp_path}/") for text in (command, shown))
        result = CliRunner().invoke(main, shell_words("bash", command), catch_exceptions=False)
        printed = result.output.strip("\n")
        if "y is the softmax" in shown:  # the summed softmax's gradient is rounding noise, 0 on some machines
            shown, printed = (re.sub(r"(?m)^(  x +yes +)(zero|finite) +\S+", r"\1<noise>", text)
                              for text in (shown, printed))
        if command.startswith("gradients"):  # user gradients other tests declared in this process
            printed = _without_user_gradients(printed)
        ran += 1
        if printed != shown:
            diff = "\n".join(difflib.unified_diff(shown.splitlines(), printed.splitlines(), "README", "printed",
                                                  lineterm=""))
            mismatches.append(f"$ graphgrad {command}\n{diff}")
    assert ran >= 15  # more with TensorFlow: check examples need it
    assert not mismatches, "\n\n".join(mismatches)
    if undrawn:
        import pytest

        pytest.skip(f"Graphviz's dot is not installed (.ci/run installs it): {undrawn} drawing command(s) not run")


def test_every_page_of_the_reference_is_tested_and_linked():
    pages = sorted(os.path.join("docs", name) for name in os.listdir(os.path.join(ROOT, "docs"))
                   if name.endswith(".md"))  # its pictures and the script that makes them aside
    assert sorted(PAGES[1:]) == pages
    readme = open(os.path.join(ROOT, "README.md")).read()
    assert all(f"]({page})" in readme for page in pages)
    assert len(readme.splitlines()) <= 300


def shell_words(shell: str, command: str) -> list[str]:
    """The arguments ``shell`` passes to graphgrad for the command line ``graphgrad
    COMMAND`` pasted into it: what a user gets, quoting, globs and all (a shell that
    rejects the line fails the test with its own message)."""
    run = subprocess.run([shell, "-c", f"set -- {command}\nprintf '%s\\0' \"$@\""], capture_output=True,
                         text=True, cwd=ROOT)
    assert run.returncode == 0, f"{shell} rejects: graphgrad {command}\n{run.stderr}"
    return run.stdout.split("\0")[:-1]


def documented_command_lines() -> list:
    """``(page, line)`` for every shell command line of every page: ``$ graphgrad ...``
    examples and the commands shown bare in shell blocks (set-up, batches)."""
    found = []
    for page in PAGES:
        text = open(os.path.join(ROOT, page)).read()
        for language, block in re.findall(r"```(\w*)\n(.*?)```", text, re.S):
            if language not in ("", "sh", "bash", "console"):
                continue
            for line in block.splitlines():
                line = line.removeprefix("$ ")
                if re.match(r"(graphgrad|python3?|pip|git|pytest) ", line):
                    found.append((page, line))
    return found


SHELLS = [shell for shell in ("bash", "zsh") if shutil.which(shell)]


def test_every_documented_command_runs_as_pasted_into_bash_and_zsh():
    """Each line is parsed by each shell (zsh is macOS's default, and rejects an
    unquoted [[...]] as a glob that matches nothing); a graphgrad line gives every
    shell the arguments it gives bash."""
    import pytest

    lines = documented_command_lines()
    assert len(lines) >= 40
    for page, line in lines:
        for shell in SHELLS:
            syntax = subprocess.run([shell, "-n", "-c", line], capture_output=True, text=True)
            assert syntax.returncode == 0, f"{page}: {shell} rejects: {line}\n{syntax.stderr}"
        if line.startswith("graphgrad ") and not re.search(r"[|&;$`]", line):
            words = {shell: shell_words(shell, line.removeprefix("graphgrad ")) for shell in SHELLS}
            assert all(read == words["bash"] for read in words.values()), f"{page}: shells differ on: {line}"
    if "zsh" not in SHELLS:
        pytest.skip("zsh is not installed (.ci/run installs it): checked in bash only")


def _without_user_gradients(listing: str) -> str:
    """The listing less the rows of user gradients (and their wrapped lines)."""
    kept, skipping = [], False
    for line in listing.split("\n"):
        if not line.startswith(" "):
            skipping = line.split()[1:2] == ["user"]
        if not skipping:
            kept.append(line)
    return "\n".join(kept)


def test_the_readme_walkthrough_loads_as_written(tmp_path, monkeypatch):
    """Its Python block, after the commands it follows, in TF1 and TF2 (needs TensorFlow)."""
    import contextlib
    import io

    import pytest

    pytest.importorskip("tensorflow", reason="needs TensorFlow: pip install -e '.[test]'")
    monkeypatch.chdir(ROOT)
    readme = open(os.path.join(ROOT, "README.md")).read().replace("/tmp/", f"{tmp_path}/")
    for command in ("rewrite fixtures/binary_net.pb --op Sign=ste -o /tmp/walkthrough.pb",
                    "rewrite fixtures/tf2_saved_model --op Sign=ste -o /tmp/walkthrough_tf2"):
        assert f"graphgrad {command}" in open(os.path.join(ROOT, "README.md")).read()
        CliRunner().invoke(main, shell_words("bash", command.replace("/tmp/", f"{tmp_path}/")), catch_exceptions=False)
    (block,) = re.findall(r"```python\n(.*?)```", readme, re.S)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block, "README.md", "exec"), {})  # the README's own example, in this test process
    assert printed.getvalue().strip() == "[[2. 0. 2.]]"


def test_the_python_examples_of_the_reference_run(tmp_path, monkeypatch):
    """Every Python block of docs/ runs as written (its /tmp files in a scratch
    folder), in page order; a block headed ``# my_grads.py`` is a module of the
    user's, imported from its file as the page says."""
    import contextlib
    import io
    import sys

    import pytest

    pytest.importorskip("tensorflow", reason="needs TensorFlow: pip install -e '.[test]'")
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(tmp_path))
    ran = compared = 0
    for page in PAGES[1:]:
        text = open(os.path.join(ROOT, page)).read().replace("/tmp/", f"{tmp_path}/")
        for block in re.findall(r"```python\n(.*?)```", text, re.S):
            module = re.match(r"# (\w+)\.py\n", block)
            if module:  # a user's module: written out and imported, as the page tells users to
                (tmp_path / f"{module[1]}.py").write_text(block)
                __import__(module[1])
                sys.modules.pop(module[1])
            else:
                printed = io.StringIO()
                with contextlib.redirect_stdout(printed):
                    exec(compile(block, page, "exec"), {})
                for shown in _shown_values(block):  # what a comment says a print prints, it prints
                    assert shown in printed.getvalue(), (page, shown, printed.getvalue())
                    compared += 1
            ran += 1
    assert ran >= 3 and compared >= 4


def _shown_values(block: str) -> list[str]:
    """The values the comments of a block's print lines show (``print(x)  # [2. 0. 0.]``,
    ``# through the overrides: [[2. 0. 2.]]``): a bracketed or braced literal ending
    the comment or followed by a colon."""
    return [found[1] for line in block.splitlines() if "print(" in line and "#" in line
            for found in [re.search(r"([\[{][^#]*?[\]}])(?=:|\s*$)", line.split("#", 1)[1])] if found]


def test_the_straight_through_training_recipe_prints_a_falling_loss_as_documented(tmp_path, monkeypatch):
    """docs/commands.md's training recipe, run as written: it prints its loss and
    accuracy, the loss ends lower and the accuracy higher than they started, and
    the lines are the ones the page shows (needs TensorFlow)."""
    import contextlib
    import io

    import pytest

    pytest.importorskip("tensorflow", reason="needs TensorFlow: pip install -e '.[test]'")
    monkeypatch.chdir(ROOT)
    text = open(os.path.join(ROOT, "docs", "commands.md")).read()
    section = text[text.index("### Straight-through training of a frozen binarized net"):]
    recipe, shown = re.findall(r"```(?:python)?\n(.*?)```", section, re.S)[:2]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(recipe.replace("/tmp/", f"{tmp_path}/"), "docs/commands.md", "exec"), {})
    steps = [line for line in printed.getvalue().splitlines() if line.startswith("step ")]
    assert steps == shown.strip().splitlines()
    values = [re.match(r"step \d+: loss ([\d.]+), accuracy ([\d.]+)", line).groups() for line in steps]
    (first_loss, first_accuracy), (last_loss, last_accuracy) = values[0], values[-1]
    assert float(last_loss) < float(first_loss) / 2 and float(last_accuracy) > float(first_accuracy) + 0.2
