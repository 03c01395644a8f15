import os
import re
import shutil
import subprocess
import sys
import tempfile
import zlib
from contextlib import contextmanager

from dataclasses import dataclass

import pytest
from click.testing import CliRunner

from graphgrad.cli import main
from graphgrad.edits.rewrite import RewriteOptions
from graphgrad.edits.select import parse_rule
from graphgrad.edits.rewrite import rewrite
from graphgrad.edits.summary import summarize_reading
from graphgrad.files.reading import SourceFile
from graphgrad.readings import Needs, factory

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "fixtures")
GOLDEN = os.path.join(ROOT, "tests", "golden")
REALGRAPHS = os.path.normpath(os.path.join(ROOT, "..", "shared", "realgraphs"))
# Why a test of a real graph skips: the folder its maintainers keep beside the project.
REALGRAPHS_ABSENT = (f"the real graph files are not at {REALGRAPHS}: the project's maintainers keep them beside "
                     "the project as ../shared/realgraphs (each file's origin in its SOURCES.md); a clone alone "
                     "does not have them")
sys.path.insert(0, FIXTURES)  # fixtures/digits_data.py: the data the fixture script and the tests share


def fixture(*parts):
    return os.path.join(FIXTURES, *parts)


@pytest.fixture(autouse=True)
def rows_whatever_ran_before(request):
    """A test module's ``RNG`` reseeded from the test's id: each test draws the same
    rows whichever tests an xdist worker ran before it, so a bound that fails on some
    rows fails every time, not on one order in ten."""
    if getattr(request.module, "RNG", None) is not None:
        import numpy as np

        request.module.RNG = np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


# What "refused before the run, in one line" may say: the op types a method has no
# rule for, a class activation map's missing layer, what an x without a batch axis
# cannot do, or a row beside its baseline in a graph that runs one row at a time.
REFUSALS = ("has no rule for", "needs a 4-D (N, H, W, C) layer", "has no batch axis", "beside its baseline",
            "blur_ig blurs images", "is not an image (N, H, W, C)", "xrai ranks regions of images")


def every_method(source, inputs, out, *args) -> dict:
    """``graphgrad attribute`` with each method (integrated gradients', Blur IG's and
    Guided IG's steps and expected gradients' samples cut to 4, occlusion's window to 32), each refusal
    checked to be one line that says why; the names of the methods that ran."""
    from graphgrad.methods.registry import CATALOGUE

    ran = set()
    for method in CATALOGUE.signatures():
        for default, cut in (("steps=50", "steps=4"), ("steps=100", "steps=4"), ("steps=200", "steps=4"),
                             ("samples=200", "samples=4"), ("window=4,stride=4", "window=32,stride=32")):
            method = method.replace(default, cut)
        result = CliRunner().invoke(main, ["attribute", str(source), "--method", method, "--input", str(inputs),
                                           "-o", str(out), *map(str, args)])
        if result.exit_code:
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1, (method, result.output, repr(result.exception))
            assert any(refusal in lines[0] for refusal in REFUSALS), (method, lines[0])
        else:
            ran.add(method.split("(")[0])
    return ran


# headless, and with a virtual time budget: the page's promises settle before the DOM or the picture is taken
BROWSER_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--virtual-time-budget=10000"]


def chromium():
    """Debian's headless Chromium, if installed (.ci/run installs it)."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def page_dom(uri: str, profile, size: str = "1280,800") -> str:
    """The DOM of the page at ``uri`` after its scripts ran, in headless Chromium."""
    return subprocess.run([chromium(), *BROWSER_FLAGS,
                           f"--window-size={size}", f"--user-data-dir={profile}", "--dump-dom", uri],
                          capture_output=True, text=True, timeout=120, check=True).stdout


def dot_boxes_reached(text: str, start: str) -> tuple[set, set, list]:
    """Of a DOT picture: its boxes (the legend left out), those reached from ``start``
    along its edges, and its edges."""
    edges = [(a, b) for a, b in re.findall(r'^  "([^"]+)" -> "([^"]+)"', text, re.M)]
    boxes = {name for name in re.findall(r'^  "([^"]+)" \[', text, re.M) if name != "legend:"}
    following: dict = {}
    for source, target in edges:
        following.setdefault(source, []).append(target)
    reached, waiting = set(), [start]
    while waiting:
        name = waiting.pop()
        if name not in reached:
            reached.add(name)
            waiting += following.get(name, [])
    return boxes, reached, edges


def run_cli(*args, expect=0):
    """Run the real graphgrad command in-process; check its exit code (None: any)."""
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert expect is None or result.exit_code == expect, (
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


@contextmanager
def stored_reading(data: bytes, needs: Needs = Needs()):
    """The fast reading of the binary GraphDef ``data`` (read from a temporary
    file); raises NotApplicable where the factory would parse it whole."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "g.pb")
        with open(path, "wb") as stream:
            stream.write(data)
        with SourceFile(path) as file:
            yield factory.open_stored(file, path, needs)


def written(reading) -> bytes:
    """The bytes a reading writes, its edits included."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "out.pb")
        reading.write(path, None, True)
        with open(path, "rb") as stream:
            return stream.read()


def fast_rewrite(data: bytes, rewrite_options: RewriteOptions):
    """(output bytes, report) of a rewrite of a binary GraphDef read as stored."""
    with stored_reading(data) as opened:
        report = rewrite(opened, rewrite_options)
        return written(opened), report


def fast_summary(data: bytes, functions: bool = True):
    """The summary of a binary GraphDef read as stored."""
    with stored_reading(data) as opened:
        return summarize_reading(opened, functions)


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
    for every reading; afterwards, a check that no other reading was opened.

    It patches the factory's one choice (graphgrad.readings.factory.open_stored):
    every module that opens a reading does so through that factory."""
    from graphgrad.readings import factory, scan, skeleton
    from graphgrad.readings.errors import NotApplicable

    opened = []
    choose = factory.open_stored

    def forced(file, path, needs):
        if request.param == "parsed":
            raise NotApplicable("the full parse, forced by the test")
        chosen = choose(file, path, needs)
        opened.append(type(chosen).__name__)
        return chosen

    monkeypatch.setattr(factory, "open_stored", forced)
    fell_back: list = []
    whole_parse = factory.model_from_bytes

    def parsed_whole(data, path, kind):
        fell_back.append(path)
        return whole_parse(data, path, kind)

    monkeypatch.setattr(factory, "model_from_bytes", parsed_whole)
    if request.param == "scanned":
        monkeypatch.setattr(scan, "MIN_AVERAGE_NODE_BYTES", 0)
        monkeypatch.setattr(factory, "WHOLE_READ_LIMIT", 0)
        monkeypatch.setattr(skeleton, "HEAVY_ATTR_BYTES", 64)
    elif request.param == "stored":
        monkeypatch.setattr(scan, "MIN_AVERAGE_NODE_BYTES", 1 << 40)
    yield Reading(request.param, opened, fell_back)
    expected = {"scanned": "FrozenReading", "stored": "StoredReading"}.get(request.param)
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
