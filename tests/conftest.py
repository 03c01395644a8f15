import os
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from graphgrad.cli import main
from graphgrad.edits.rewrite import RewriteOptions
from graphgrad.edits.select import parse_rule
from graphgrad.edits.fast import rewrite_graphdef_bytes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "fixtures")
GOLDEN = os.path.join(ROOT, "tests", "golden")
REALGRAPHS = os.path.normpath(os.path.join(ROOT, "..", "shared", "realgraphs"))


def fixture(*parts):
    return os.path.join(FIXTURES, *parts)


def run_cli(*args, expect=0):
    """Run the real graphgrad command in-process; check its exit code."""
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == expect, (
        f"exit {result.exit_code}, expected {expect}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    )
    return result


@pytest.fixture
def work(tmp_path):
    """A scratch copy of the fixtures folder."""
    target = tmp_path / "fixtures"
    shutil.copytree(FIXTURES, target)
    return target


def rule_options(*rules, **kwargs) -> RewriteOptions:
    """RewriteOptions from ``("op" | "node", "KEY=SPEC")`` pairs."""
    return RewriteOptions(rules=tuple(parse_rule(kind, text) for kind, text in rules), **kwargs)


def fast_rewrite(data: bytes, rewrite_options: RewriteOptions):
    """(output bytes, report) of the fast path for binary GraphDefs."""
    chunks, report = rewrite_graphdef_bytes(data, rewrite_options)
    return b"".join(bytes(chunk) for chunk in chunks), report


def dead_pid() -> int:
    """The pid of a process that has exited: a killed writer's, as far as its temporaries tell."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


@pytest.fixture(autouse=True)
def control_flow_v2_restored():
    """graphgrad.import_graph_def turns control flow v2 off for graphs with TF1 loops,
    process-wide (as it says): each test gets it back as TensorFlow sets it."""
    yield
    tf = sys.modules.get("tensorflow")
    if tf is not None and hasattr(tf, "compat") and not tf.compat.v1.control_flow_v2_enabled():
        tf.compat.v1.enable_control_flow_v2()
