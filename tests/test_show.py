"""graphgrad show: the gradient path drawn with its marks, as DOT, SVG and a page a
browser opens offline (the page rendered in headless Chromium, its pixels and DOM
looked at); bad input in one line, nothing written."""

import html
import io
import json
import os
import re
import shutil
import subprocess
import time

import pytest

from conftest import BROWSER_FLAGS, REALGRAPHS, REALGRAPHS_ABSENT, chromium, dot_boxes_reached, fixture, run_cli

BINARY_PATH = ["x", "binarize_input/Sign", "dense1/MatMul", "dense1/Sign", "dense2/MatMul", "dense2/logits"]


def dot_nodes(text: str) -> dict:
    """``{name: (fill colour, tooltip)}`` of a DOT picture's nodes (the legend's left out)."""
    found = {}
    for name, attributes in re.findall(r'^  "([^"]+)" \[(.*)\];$', text, re.M):
        if name == "legend:":
            continue
        colour = re.search(r'fillcolor="([^"]+)"', attributes)[1]
        found[name] = (colour, re.search(r'tooltip="((?:[^"\\]|\\.)*)"', attributes)[1])
    return found


def test_the_path_from_x_to_y_with_its_blockers(tmp_path):
    out = tmp_path / "path.dot"
    result = run_cli("show", fixture("binary_net.pb"), "--x", "x", "--y", "dense2/logits", "-o", out)
    assert "6 node(s) on the path" in result.stdout and "marked: blocker" in result.stdout
    nodes = dot_nodes(out.read_text())
    assert list(nodes) == BINARY_PATH  # the weights' Signs are not on the path from x
    assert nodes["dense1/Sign"] == ("#d62728", "dense1/Sign (Sign): TensorFlow's gradient is zero everywhere")
    assert nodes["dense1/MatMul"][0] == "#ffffff"
    assert 'ID="legend:blocker"' in out.read_text() and 'ID="legend:override"' not in out.read_text()


def test_overrides_and_surrogates_are_marked_with_what_they_are(tmp_path):
    overridden, embedded = tmp_path / "overridden.pb", tmp_path / "embedded.pb"
    run_cli("rewrite", fixture("binary_net.pb"), "--op", "Sign=ste", "-o", overridden)
    run_cli("rewrite", fixture("binary_net.pb"), "--op", "Sign=ste", "--embed", "-o", embedded)
    run_cli("show", overridden, "--x", "x", "--y", "dense2/logits", "-o", tmp_path / "a.dot")
    nodes = dot_nodes((tmp_path / "a.dot").read_text())
    assert nodes["dense1/Sign"] == ("#1f77b4", "dense1/Sign (Sign): graphgrad/ste(clip=1.0) (graphgrad)")
    run_cli("show", embedded, "--x", "x", "--y", "dense2/logits", "-o", tmp_path / "b.dot")
    nodes = dot_nodes((tmp_path / "b.dot").read_text())
    surrogates = [name for name, (colour, _) in nodes.items() if colour == "#2ca02c"]
    assert any(name.startswith("dense1/Sign/graphgrad_embed") for name in surrogates)
    assert "ste(clip=1.0)" in nodes[[n for n in surrogates if n.endswith("/output")][0]][1]


def test_a_defences_integer_cast_is_where_the_gradient_stops_and_a_bypass_shows_instead(tmp_path):
    run_cli("show", fixture("quantized_classifier.pb"), "--x", "x", "--y", "logits", "-o", tmp_path / "a.dot")
    nodes = dot_nodes((tmp_path / "a.dot").read_text())
    blockers = {name for name, (colour, _) in nodes.items() if colour == "#d62728"}
    assert any("Round" in nodes[name][1] or "cast to integers" in nodes[name][1] for name in blockers)
    bypassed = tmp_path / "bypassed.pb"
    run_cli("bypass", fixture("quantized_classifier.pb"), "--from", "x:0", "--to", "dequantize:0", "-o", bypassed)
    run_cli("show", bypassed, "--x", "x", "--y", "logits", "-o", tmp_path / "b.dot")
    nodes = dot_nodes((tmp_path / "b.dot").read_text())
    assert any(colour == "#9467bd" for colour, _ in nodes.values())


def test_past_max_nodes_scopes_fold_and_a_blocker_keeps_its_own_box(tmp_path):
    out = tmp_path / "path.dot"
    result = run_cli("show", fixture("dense_net.pb"), "--max-nodes", "3", "-o", out)
    nodes = dot_nodes(out.read_text())
    assert "drawn as 7 boxes, 2 of them folded" in result.stdout  # nodes outside any scope are never folded
    assert all(name.endswith("/*") or "/" not in name for name in nodes)
    assert re.match(r"l1_dense: \d+ nodes", nodes["l1_dense/*"][1])
    run_cli("show", fixture("binary_net.pb"), "--y", "dense2/logits", "--max-nodes", "3", "-o", out)
    nodes = dot_nodes(out.read_text())
    assert {"dense1/Sign", "binarize_input/Sign", "dense1/*"} <= set(nodes)  # the Sign apart from its scope's box
    assert nodes["dense1/Sign"][0] == "#d62728" and "2 marked drawn apart" in nodes["dense1/*"][1]


@pytest.mark.parametrize("args, message", [
    (["--y", "dense2/logitz"], "no tensor 'dense2/logitz' in the graph; close ones: dense2/logits"),
    (["--x", "dense2/MatMul", "--y", "dense1/MatMul"], "dense2/MatMul is not an ancestor of dense1/MatMul"),
])
def test_bad_tensors_are_one_line_and_nothing_is_written(tmp_path, args, message):
    out = tmp_path / "path.dot"
    result = run_cli("show", fixture("binary_net.pb"), *args, "-o", out, expect=2)
    assert message in result.stderr and not out.exists()


@pytest.mark.parametrize("out, message", [("nowhere/path.dot", "no directory"), ("path.png", "graphgrad writes .dot")])
def test_bad_outputs_are_one_line(tmp_path, out, message):
    result = run_cli("show", fixture("binary_net.pb"), "-o", tmp_path / out, expect=2)
    assert message in result.stderr


def test_without_graphviz_or_when_it_hangs_one_line_and_nothing_written(tmp_path, monkeypatch):
    import graphgrad.jobs.graphviz as graphviz

    monkeypatch.setattr(graphviz.shutil, "which", lambda name: None)
    result = run_cli("show", fixture("binary_net.pb"), "-o", tmp_path / "a.svg", expect=1)
    assert "needs Graphviz's dot" in result.stderr and "apt-get install graphviz" in result.stderr
    monkeypatch.undo()
    slow = tmp_path / "bin" / "dot"
    slow.parent.mkdir()
    slow.write_text(f"#!/bin/sh\nsleep 30 &\necho $! > {tmp_path}/child\nwait\n")  # dot with a child
    slow.chmod(0o755)
    monkeypatch.setattr(graphviz.shutil, "which", lambda name: str(slow))
    started = time.monotonic()
    result = run_cli("show", fixture("binary_net.pb"), "-o", tmp_path / "a.html", "--timeout", "1", expect=1)
    assert "took over 1 s" in result.stderr and "give it longer (--timeout SECONDS)" in result.stderr
    assert "draw fewer boxes (--max-nodes)" in result.stderr
    assert time.monotonic() - started < 20
    assert not (tmp_path / "a.svg").exists() and not (tmp_path / "a.html").exists()
    child = int((tmp_path / "child").read_text())
    time.sleep(0.2)
    assert not _running(child)  # ended with its parent, not left running


def _running(pid: int) -> bool:
    """Whether ``pid`` runs: neither gone nor a zombie (a killed orphan waits for init to reap it)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stream:
            return stream.read().rpartition(b")")[2].split()[:1] != [b"Z"]
    except FileNotFoundError:
        return False


needs_graphviz = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed "
                                    "(.ci/run installs it: apt-get install graphviz)")


@needs_graphviz
def test_every_marks_legend_is_laid_out_whatever_its_meaning_holds():
    """The legend is an HTML-like label: a meaning with "<" or "'" (the dangling mark's
    CustomGradient-<n>) is escaped, not a syntax error of dot's."""
    from graphgrad.jobs.folding import View
    from graphgrad.jobs.graphviz import layout
    from graphgrad.jobs.show import MARKS, legend_words, to_dot

    view = View("", nodes={mark: ("Op", mark, mark, mark) for mark in MARKS})
    svg = layout([to_dot(view)])[0]
    # each mark's meaning readable without hovering: "blocker: the gradient stops here"
    shown = html.unescape(svg)  # dot writes "-" as &#45;
    assert 'id="legend"' in svg and all(f">{legend_words(mark)}</text>" in shown for mark in MARKS)
    assert ">blocker: the gradient stops here</text>" in shown


@needs_graphviz
def test_svg_holds_one_element_per_node_with_its_full_name(tmp_path):
    out = tmp_path / "path.svg"
    run_cli("show", fixture("binary_net.pb"), "--x", "x", "--y", "dense2/logits", "-o", out)
    text = out.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    assert [name for name in BINARY_PATH if f'id="node:{name}"' in text] == BINARY_PATH


@needs_graphviz
@pytest.mark.slow
@pytest.mark.skipif(chromium() is None, reason="headless Chromium is not installed (.ci/run installs Debian's "
                    "chromium)")
def test_the_page_as_a_browser_shows_it(tmp_path):
    """Rendered offline in headless Chromium: a screenshot that is not blank and shows
    the blocker's red and the legend; the DOM holds one node per name, and no
    script, style or font is fetched from anywhere."""
    Image = pytest.importorskip("PIL.Image", reason="needs Pillow: pip install -e '.[test]'")
    page = tmp_path / "path.html"
    run_cli("show", fixture("binary_net.pb"), "--x", "x", "--y", "dense2/logits", "-o", page)
    text = page.read_text()
    assert not re.search(r"(src|href)=\"(https?:)?//", text) and "@import" not in text
    common = [chromium(), *BROWSER_FLAGS,
              "--window-size=1000,700", f"--user-data-dir={tmp_path / 'profile'}"]
    shot = tmp_path / "shot.png"
    subprocess.run(common + [f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120, check=True)
    image = Image.open(io.BytesIO(shot.read_bytes())).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 20)
    assert len(colours) > 20  # not blank
    reds = sum(count for count, (r, g, b) in colours if abs(r - 0xd6) < 8 and abs(g - 0x27) < 8 and abs(b - 0x28) < 8)
    assert reds > 500  # the blockers and the legend's swatch, in the blocker's colour
    dom = subprocess.run(common + ["--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    for name in BINARY_PATH:
        assert dom.count(f'id="node:{name}"') == 1 and f"<title>{name}</title>" in dom
    assert 'id="legend:blocker"' in dom and 'id="search"' in dom
    assert ">blocker: the gradient stops here</span>" in dom  # what a colour means, without hovering
    assert os.path.getsize(page) < 5 << 20


def test_a_tf2_saved_models_path_goes_through_the_function_bodies_its_calls_run(tmp_path):
    """The Sign inside the called function is where the gradient stops, drawn in the
    box of the function that the call runs."""
    out = tmp_path / "path.dot"
    run_cli("show", fixture("tf2_saved_model"), "--y", "PartitionedCall", "-o", out)
    text = out.read_text()
    nodes = dot_nodes(text)
    [sign] = [name for name in nodes if name.endswith("/Sign")]
    assert "|" in sign and nodes[sign][0] == "#d62728" and "run by" in nodes[sign][1]
    assert text.count("subgraph cluster_body_") == 2  # the signature wrapper, and the function it calls


def test_without_x_and_y_a_saved_models_signature_gives_the_path(tmp_path):
    """As check picks x and y: serving_default's inputs and outputs, not the whole
    graph (whose saver and init nodes lie on no gradient path)."""
    default, named = tmp_path / "default.dot", tmp_path / "named.dot"
    run_cli("show", fixture("tf2_saved_model"), "-o", default)
    run_cli("show", fixture("tf2_saved_model"), "--x", "serving_default_x", "--y", "PartitionedCall", "-o", named)
    assert default.read_text() == named.read_text()
    assert not any("save" in name.lower() for name in dot_nodes(default.read_text()))


def test_a_signature_input_that_reaches_no_output_is_left_out_not_refused(tmp_path):
    import shutil as files

    from graphgrad import read_model

    folder = tmp_path / "model"
    files.copytree(fixture("tf2_saved_model"), folder)
    model = read_model(str(folder))
    signature = model.message.meta_graphs[0].signature_def["serving_default"]
    signature.inputs["unused"].name = "saver_filename:0"  # an input on no path to the output
    (folder / "saved_model.pb").write_bytes(model.message.SerializeToString())
    run_cli("show", folder, "-o", tmp_path / "default.dot")
    run_cli("show", fixture("tf2_saved_model"), "-o", tmp_path / "plain.dot")
    assert (tmp_path / "default.dot").read_text() == (tmp_path / "plain.dot").read_text()


@needs_graphviz
@pytest.mark.slow
@pytest.mark.skipif(chromium() is None, reason="headless Chromium is not installed (.ci/run installs Debian's "
                    "chromium)")
def test_check_html_draws_the_path_with_what_check_measured(tmp_path):
    """check --html: the page of show, with check's results above the picture (the
    gradient per x, the blocker and its fix) and the blocker it found marked, as a
    browser shows it; written even though check exits 1."""
    pytest.importorskip("tensorflow", reason="needs TensorFlow")
    Image = pytest.importorskip("PIL.Image", reason="needs Pillow: pip install -e '.[test]'")
    page = tmp_path / "check.html"
    result = run_cli("check", fixture("quantized_classifier.pb"), "--html", page, expect=1)
    assert f"the gradient path, with what check found: {page}" in result.stdout
    common = [chromium(), *BROWSER_FLAGS,
              "--window-size=1200,800", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(common + ["--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    results = re.search(r'<div id="results">(.*?)</div></div>', dom, re.S)[1]
    assert "graphgrad check: d logits" in results and "<div>x: none</div>" in results
    assert "stops at quantize (Cast)" in results and "fix: carry the gradient across the region" in results
    assert 'id="node:quantize"' in dom and "check: turns floats into uint8" in dom
    shot = tmp_path / "shot.png"
    subprocess.run(common + [f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120, check=True)
    colours = Image.open(io.BytesIO(shot.read_bytes())).convert("RGB").getcolors(maxcolors=1 << 20)
    panel = sum(count for count, colour in colours if colour == (0xff, 0xfb, 0xe6))
    reds = sum(count for count, (r, g, b) in colours if abs(r - 0xd6) < 8 and abs(g - 0x27) < 8 and abs(b - 0x28) < 8)
    assert panel > 5000 and reds > 500  # the results' panel, the blockers in their colour


def test_check_html_to_a_folder_that_does_not_exist_is_refused_before_anything_runs(tmp_path):
    result = run_cli("check", fixture("quantized_classifier.pb"), "--html", tmp_path / "no" / "check.html", expect=2)
    assert "--html" in result.stderr and "create it first" in result.stderr


def test_a_path_too_large_to_lay_out_is_refused_for_pictures_and_written_as_dot(tmp_path, monkeypatch):
    import graphgrad.jobs.show as show

    monkeypatch.setattr(show, "LAYOUT_LIMIT", 4)
    result = run_cli("show", fixture("binary_net.pb"), "--y", "dense2/logits", "-o", tmp_path / "a.svg", expect=2)
    assert "boxes on the path" in result.stderr and "narrow it with --x and --y, or write .dot" in result.stderr
    assert not (tmp_path / "a.svg").exists()
    run_cli("show", fixture("binary_net.pb"), "--y", "dense2/logits", "-o", tmp_path / "a.dot")


@needs_graphviz
def test_a_node_name_longer_than_graphviz_takes_is_drawn_whole_in_its_id_and_tooltip(tmp_path):
    from graphgrad.files.protos import GraphDef

    graph = GraphDef.FromString(open(fixture("classifier.pb"), "rb").read())
    long_name = "scope/" * 3000 + "relu"  # 18,004 characters: over Graphviz's 16,384 for one quoted string
    for node in graph.node:
        node.name = long_name if node.name == "relu" else node.name
        node.input[:] = [long_name if name == "relu" else name for name in node.input]
    source = tmp_path / "long.pb"
    source.write_bytes(graph.SerializeToString())
    run_cli("show", source, "--y", "logits", "-o", tmp_path / "path.svg")
    text = (tmp_path / "path.svg").read_text()
    assert f'id="node:{long_name}"' in text and f"<title>{long_name}</title>" in text
    assert "scope/scope/scope/relu</text>" in text and len(max(re.findall(r">([^<]*)</text>", text), key=len)) < 40


def test_a_signature_with_a_sparse_input_draws_its_components(tmp_path):
    """A TF1 Estimator-style SavedModel whose serving signature takes a SparseTensor
    (a TensorInfo with no name, its coo_sparse components): the default path starts
    at the sparse tensor's parts."""
    tf = pytest.importorskip("tensorflow", reason="needs TensorFlow to build the SavedModel")
    v1 = tf.compat.v1
    with tf.Graph().as_default() as graph, v1.Session(graph=graph) as session:
        features = v1.sparse_placeholder(tf.float32, shape=[None, 4], name="features")
        weights = tf.constant([[1.0], [2.0], [3.0], [4.0]], name="weights")
        scores = tf.identity(v1.sparse_tensor_dense_matmul(features, weights), name="scores")
        builder = v1.saved_model.Builder(str(tmp_path / "sparse_model"))
        signature = v1.saved_model.predict_signature_def(inputs={"features": features}, outputs={"scores": scores})
        builder.add_meta_graph_and_variables(session, ["serve"], signature_def_map={"serving_default": signature})
        builder.save()
    ops = run_cli("ops", tmp_path / "sparse_model").stdout
    assert "features (values) = features/values:0" in ops and "features (indices) = features/indices:0" in ops
    result = run_cli("show", tmp_path / "sparse_model", "-o", tmp_path / "path.dot", "--json")
    drawn = (tmp_path / "path.dot").read_text()
    assert '"features/values"' in drawn and '"scores"' in drawn and json.loads(result.stdout)["nodes"] >= 3


def test_the_digits_classifiers_round_is_the_blocker_and_after_bypass_the_bypass_shows(tmp_path):
    """Issue 31's "Round in a real image model's preprocessing": the bundled digits CNN
    (trained on scikit-learn's digits) behind a bit-depth defence stands for it."""
    run_cli("show", fixture("digits_bit_depth.pb"), "--x", "x", "--y", "classifier/logits", "-o", tmp_path / "a.dot")
    nodes = dot_nodes((tmp_path / "a.dot").read_text())
    blockers = [name for name, (colour, _) in nodes.items() if colour == "#d62728"]
    assert blockers == ["defence/Round"] and "Round" in nodes["defence/Round"][1]
    bypassed = tmp_path / "bypassed.pb"
    run_cli("bypass", fixture("digits_bit_depth.pb"), "--from", "x:0", "--to", "defence/squeezed:0", "-o", bypassed)
    run_cli("show", bypassed, "--x", "x", "--y", "classifier/logits", "-o", tmp_path / "b.dot")
    nodes = dot_nodes((tmp_path / "b.dot").read_text())
    assert [name for name, (colour, _) in nodes.items() if colour == "#9467bd"]  # the bypass region
    assert not [name for name, (colour, _) in nodes.items() if colour == "#d62728"]  # the Round, behind it
    assert "behind a StopGradient" in nodes["defence/Round"][1]


@needs_graphviz
@pytest.mark.slow
@pytest.mark.skipif(chromium() is None, reason="headless Chromium is not installed (.ci/run installs Debian's "
                    "chromium)")
def test_a_search_moves_the_view_to_its_match_and_checks_panel_sits_beside_the_graph(tmp_path):
    """In headless Chromium at 1280x800: page.html#search=NAME (the search box, from the
    address) brings a box 200 boxes down into the view; check --html's findings are a
    column beside the picture, each about a node linked to its box."""
    from graphs import chain_graph

    Image = pytest.importorskip("PIL.Image", reason="needs Pillow: pip install -e '.[test]'")
    source, page = tmp_path / "chain.pb", tmp_path / "chain.html"
    source.write_bytes(chain_graph(200).SerializeToString())
    run_cli("show", source, "--x", "x", "--y", "layer199/Sign", "--max-nodes", "1000", "-o", page)
    common = [chromium(), *BROWSER_FLAGS,
              "--window-size=1280,800", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(common + ["--dump-dom", page.as_uri() + "#search=layer190%2F"], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    left, top, right, bottom = map(int, re.search(r'data-focus="([-\d,]+)"', dom)[1].split(","))
    assert 0 <= left < right <= 1280 and 40 <= top < bottom <= 800  # the match, inside the view
    assert '1 of 1' in dom and 'class="node found"' in dom
    pytest.importorskip("tensorflow", reason="check --html needs TensorFlow")
    checked = tmp_path / "check.html"
    run_cli("check", fixture("quantized_classifier.pb"), "--html", checked, expect=1)
    dom = subprocess.run(common + ["--dump-dom", checked.as_uri()], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    assert 'class="finding" data-node="quantize"' in dom
    shot = tmp_path / "shot.png"
    subprocess.run(common + [f"--screenshot={shot}", checked.as_uri()], capture_output=True, timeout=120, check=True)
    image = Image.open(io.BytesIO(shot.read_bytes())).convert("RGB")
    assert image.size == (1280, 800)
    column = image.crop((int(1280 * 0.72), 60, 1280, 790)).getcolors(maxcolors=1 << 20)
    graph_side = image.crop((0, 60, int(1280 * 0.68), 790)).getcolors(maxcolors=1 << 20)
    panel = lambda colours: sum(count for count, colour in colours if colour == (0xff, 0xfb, 0xe6))  # noqa: E731
    assert panel(column) > 0.5 * (1280 - int(1280 * 0.72)) * 730 and panel(graph_side) == 0


def test_a_function_bodys_path_is_joined_to_its_callers_inputs_and_outputs(tmp_path):
    """The TF2 SavedModel's path is one connected path: the signature's input feeds the
    body nodes that read the matching argument (through two nested calls), and what
    each body returns feeds its call, up to the signature's output; no edge skips a
    drawn body."""
    out = tmp_path / "path.dot"
    run_cli("show", fixture("tf2_saved_model"), "-o", out)
    nodes, reached, edges = dot_boxes_reached(out.read_text(), "serving_default_x")
    assert reached == nodes  # every box lies on the one path from x, the output included
    assert ("serving_default_x", "PartitionedCall") not in edges  # the body stands for the call's input edge
    assert not [name for name in nodes if name != "PartitionedCall" and name not in {a for a, _ in edges}]


def test_a_picture_over_max_nodes_says_so_instead_of_drawing_silently(tmp_path):
    """A Keras graph of hundreds of top-level scopes (issue 49.1): --max-nodes 50
    cannot be met by folding scopes; the command says so, and how to narrow it."""
    path = os.path.join(REALGRAPHS, "tensorflow-testdata", "tensorflow", "compiler", "jit", "tests",
                        "keras_imagenet_main.pbtxt")
    if not os.path.exists(path):
        pytest.skip(REALGRAPHS_ABSENT)
    result = run_cli("show", path, "--max-nodes", "50", "-o", tmp_path / "k.dot")
    assert "over --max-nodes 50" in result.stdout and "narrow it with --x and --y" in result.stdout
    small = run_cli("show", fixture("binary_net.pb"), "-o", tmp_path / "b.dot")
    assert "note:" not in small.stdout


def test_a_layout_stopped_over_max_nodes_says_to_narrow_the_path_not_to_lower_max_nodes(tmp_path, monkeypatch):
    """Unscoped top-level nodes (flat names, as keras_imagenet_main's) cannot be
    folded: when dot is stopped on such a picture, a lower --max-nodes would draw
    the same boxes, so the error does not advise it."""
    import graphgrad.jobs.graphviz as graphviz
    from graphgrad.files.protos import GraphDef

    graph = GraphDef()
    graph.node.add(name="x_input", op="Placeholder").attr["dtype"].type = 1
    for index in range(12):  # parallel branches, each of its own flat name: nothing to fold
        graph.node.add(name=f"branch{index}_relu", op="Relu", input=["x_input"]).attr["T"].type = 1
    graph.node.add(name="y_sum", op="AddN", input=[f"branch{index}_relu" for index in range(12)])
    (tmp_path / "flat.pb").write_bytes(graph.SerializeToString())
    slow = tmp_path / "dot"
    slow.write_text("#!/bin/sh\nexec sleep 30\n")
    slow.chmod(0o755)
    monkeypatch.setattr(graphviz.shutil, "which", lambda name: str(slow))
    result = run_cli("show", tmp_path / "flat.pb", "--max-nodes", "5", "-o", tmp_path / "flat.svg", "--timeout", "1",
                     expect=1)
    assert "narrow the path with --x and --y (its top level holds 14 name scopes and unscoped nodes, over " \
        "--max-nodes 5, which folding cannot reduce)" in result.stderr
    assert "--max-nodes)" not in result.stderr and not (tmp_path / "flat.svg").exists()
