import os
import shutil
import subprocess
import sys

from dataclasses import dataclass

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


READINGS = ("parsed", "scanned", "stored")


@dataclass
class Reading:
    name: str
    opened: list  # the class of each fast reading opened so far
    fell_back: list  # the path of each binary GraphDef that a command then parsed whole


@pytest.fixture(params=READINGS)
def reading(request, monkeypatch):
    """Every command's reading of binary GraphDefs forced to one implementation:
    the full parse ("parsed": the fast readings step aside), the scan of large
    nodes through a file window, constants left out of the skeleton ("scanned"),
    or the cut-down parses of small nodes ("stored"). Used by the tests of
    rewrite, summary, reset, insert, bypass, --embed and diff, so that each holds
    for every reading; afterwards, a check that no other reading was opened."""
    from graphgrad.edits import fast, stored as edits_stored
    from graphgrad.jobs import api
    from graphgrad.files import scan, skeleton, stored
    from graphgrad.files.wireformat import NotApplicable

    opened = []
    factory = stored.open_stored

    def forced(data, whole):
        if request.param == "parsed":
            raise NotApplicable("the full parse, forced by the test")
        graph = factory(data, whole)
        opened.append(type(graph).__name__)
        return graph

    for module in (fast, edits_stored, api):
        monkeypatch.setattr(module, "open_stored", forced)
    fell_back: list = []
    whole_parse = api.model_from_bytes

    def parsed_whole(data, path, kind):
        fell_back.append(path)
        return whole_parse(data, path, kind)

    monkeypatch.setattr(api, "model_from_bytes", parsed_whole)
    if request.param == "scanned":
        monkeypatch.setattr(scan, "MIN_AVERAGE_NODE_BYTES", 0)
        monkeypatch.setattr(stored, "WHOLE_READ_LIMIT", 0)
        monkeypatch.setattr(skeleton, "HEAVY_ATTR_BYTES", 64)
    elif request.param == "stored":
        monkeypatch.setattr(scan, "MIN_AVERAGE_NODE_BYTES", 1 << 40)
    yield Reading(request.param, opened, fell_back)
    expected = {"scanned": "ScannedGraph", "stored": "HeadGraph"}.get(request.param)
    assert all(name == expected for name in opened), opened


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
