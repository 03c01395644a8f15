"""The README's examples, run as written (in this checkout, their /tmp files in a
scratch folder): each prints what the README shows. The batch examples over a
zoo/ folder are checked in test_batch."""

import difflib
import os
import re
import shlex

from click.testing import CliRunner

from conftest import ROOT
from graphgrad.cli import main

NEEDS_TENSORFLOW = ("check ", "--grad-status")


def examples() -> list:
    """``(command after "graphgrad", output shown)`` in README order."""
    with open(os.path.join(ROOT, "README.md")) as stream:
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
            if command.startswith("$ graphgrad ") and " zoo" not in command:
                found.append((command.removeprefix("$ graphgrad "), output.strip("\n")))
    return found


def test_the_readme_shows_what_its_commands_print(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    try:
        import tensorflow  # noqa: F401
        tensorflow_here = True
    except ImportError:
        tensorflow_here = False
    ran, mismatches = 0, []
    for command, shown in examples():  # in order: later ones read what earlier ones wrote
        if any(marker in command for marker in NEEDS_TENSORFLOW) and not tensorflow_here:
            continue
        command, shown = (text.replace("/tmp/", f"{tmp_path}/") for text in (command, shown))
        result = CliRunner().invoke(main, shlex.split(command), catch_exceptions=False)
        printed = result.output.strip("\n")
        if command.startswith("gradients"):  # user gradients other tests declared in this process
            printed = "\n".join(line for line in printed.split("\n") if line.split()[1:2] != ["user"])
        ran += 1
        if printed != shown:
            diff = "\n".join(difflib.unified_diff(shown.splitlines(), printed.splitlines(), "README", "printed",
                                                  lineterm=""))
            mismatches.append(f"$ graphgrad {command}\n{diff}")
    assert ran >= 15
    assert not mismatches, "\n\n".join(mismatches)
