"""Folding a big path into pictures a person reads (graphgrad.jobs.folding, without
TensorFlow): scopes opened level by level within the budget, runs of one op type
folded, marked nodes kept apart, a picture of each folded box's inside; and the page
that holds them all."""

import base64
import gzip
import json
import re
import shutil

import pytest

from graphgrad.jobs.folding import fold

from conftest import chromium, page_dom, run_cli


def _path(names_ops: list, edges: list, marks: dict | None = None) -> tuple:
    marks = marks or {}
    nodes = {name: (op, marks.get(name, ""), f"{name} ({op})") for name, op in names_ops}
    return nodes, set(edges), {}


def _model(blocks: int, ops_per_block: int) -> tuple:
    """x -> model/block0/op0 -> ... -> model/block{n}/op{m} -> y: one top scope."""
    names = ["x"] + [f"model/block{b}/op{o}" for b in range(blocks) for o in range(ops_per_block)] + ["y"]
    ops = ["Placeholder"] + [f"Op{o}" for _ in range(blocks) for o in range(ops_per_block)] + ["Identity"]
    return _path(list(zip(names, ops)), list(zip(names, names[1:])))


def test_a_single_top_scope_is_opened_level_by_level_and_each_folded_box_has_its_inside():
    nodes, edges, bodies = _model(40, 8)
    whole, *inside = fold(nodes, edges, bodies, budget=150, limit=5000)
    assert whole.key == "" and len(whole.nodes) == 42  # x, y and the 40 blocks: the 320 ops would pass 150
    assert whole.nodes["model/block3/*"][:3] == ("8 nodes", "block3/", "scope")
    assert ("model/block3/*", "model/block4/*") in whole.edges and ("x", "model/block0/*") in whole.edges
    assert [view.key for view in inside] == [f"model/block{b}" for b in range(40)]
    assert whole.opens["model/block3/*"] == "model/block3" and inside[3].parent == ""
    assert list(inside[3].nodes) == [f"model/block3/op{o}" for o in range(8)]
    assert "a click opens it" in whole.nodes["model/block3/*"][3]


def test_a_picture_with_room_shows_every_node():
    nodes, edges, bodies = _model(4, 8)
    [whole] = fold(nodes, edges, bodies, budget=150, limit=5000)
    assert set(whole.nodes) == set(nodes) and whole.edges == edges and not whole.folded


def test_runs_of_one_op_type_fold_into_a_box_with_their_count():
    """A chain of 12 Identities and 5 Relus side by side (the same source and the same
    consumer), inside one scope: each a box, opened in a picture of its own."""
    chain = [f"s/Identity_{i}" for i in range(12)]
    side = [f"s/Relu_{i}" for i in range(5)]
    names = [("x", "Placeholder")] + [(n, "Identity") for n in chain] + [(n, "Relu") for n in side] + [("y", "AddN")]
    edges = list(zip(["x"] + chain, chain)) + [(chain[-1], n) for n in side] + [(n, "y") for n in side]
    nodes, edge_set, bodies = _path(names, edges)
    views = {view.key: view for view in fold(nodes, edge_set, bodies, budget=4, limit=5000)}
    assert set(views[""].nodes) == {"x", "s/Identity_0+11", "s/Relu_0+4", "y"}
    assert views[""].nodes["s/Identity_0+11"][:3] == ("12 x Identity", "s/Identity_0 ...", "run")
    assert views[""].nodes["s/Relu_0+4"][0] == "5 x Relu"
    assert {("x", "s/Identity_0+11"), ("s/Identity_0+11", "s/Relu_0+4"), ("s/Relu_0+4", "y")} == views[""].edges
    assert list(views["s/Identity_0+11"].nodes) == chain and views["s/Identity_0+11"].parent == ""
    [whole] = fold(nodes, edge_set, bodies, budget=150, limit=5000)  # with room: every node its own box
    assert set(whole.nodes) == set(nodes)


def test_a_marked_node_keeps_its_own_box_whatever_holds_it():
    chain = [f"s/Sign_{i}" for i in range(6)]
    nodes, edges, bodies = _path([("x", "Placeholder")] + [(n, "Sign") for n in chain],
                                 list(zip(["x"] + chain, chain)), {"s/Sign_2": "blocker", "s/Sign_4": "override"})
    views = fold(nodes, edges, bodies, budget=3, limit=5000)
    assert {"s/Sign_2", "s/Sign_4", "s/*"} <= set(views[0].nodes)
    assert "2 marked drawn apart" in views[0].nodes["s/*"][3] and views[0].nodes["s/*"][0] == "4 nodes"
    assert ("s/*", "s/Sign_2") in views[0].edges and ("s/Sign_2", "s/*") in views[0].edges


def test_fewer_than_ten_boxes_open_past_the_budget_and_too_big_an_inside_is_not_drawn():
    nodes, edges, bodies = _model(60, 3)  # model/ opened shows 60 boxes: past a budget of 20
    whole, *inside = fold(nodes, edges, bodies, budget=20, limit=5000)
    assert len(whole.nodes) == 62 and len(inside) == 60
    whole, *inside = fold(nodes, edges, bodies, budget=1, limit=5000)  # asked for 1: no floor past it
    assert len(whole.nodes) == 3
    whole, *inside = fold(nodes, edges, bodies, budget=1, limit=10)  # model/'s inside: 60 boxes
    assert not whole.opens and "more than 10 boxes inside: narrow the path" in whole.nodes["model/*"][3]


def _parts_graph(source) -> None:
    """x and 300 Relus in a chain, in 30 scopes part0..part29 of 10 layers each."""
    from graphs import chain_graph

    graph = chain_graph(300)
    for node in graph.node:  # 30 scopes of 10 layers, none marked
        if node.name != "x":
            node.op = "Relu"
            node.name = f"part{int(node.name[5:].split('/')[0]) // 10}/{node.name}"
        node.input[:] = [f"part{int(name[5:].split('/')[0]) // 10}/{name}" if name != "x" else name
                         for name in node.input]
    source.write_bytes(graph.SerializeToString())


def test_the_page_holds_every_picture_and_the_legend_in_its_bar(tmp_path):
    source, page = tmp_path / "chain.pb", tmp_path / "chain.html"
    _parts_graph(source)
    result = json.loads(run_cli("show", source, "--max-nodes", "40", "-o", page, "--json").stdout)
    assert result["boxes"] == 31 and result["pictures"] == 31 and result["nodes"] == 301
    text = page.read_text()
    views = json.loads(re.search(r'<script type="application/json" id="views">(.*?)</script>', text, re.S)[1])
    assert len(views["packed"]) == 30 and views["parents"]["part7"] == "" and views["opens"][""]["part7/*"] == "part7"
    inside = gzip.decompress(base64.b64decode(views["packed"]["part7"])).decode()  # the page's own packing
    assert inside.startswith("<svg") and 'id="node:part7/layer70/Identity"' in inside
    assert views["names"]["part7/layer70/Identity"] == "part7" and views["names"]["part7/*"] == ""
    assert re.search(r'<span class="chip" id="legend:scope" title="a name scope folded into one box"', text)
    assert "subgraph cluster_legend" not in text and 'id="legend"' not in text  # in the bar, not in the picture


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("dot") is None or chromium() is None,
                    reason="needs Graphviz's dot and Debian's chromium (.ci/run installs both)")
def test_in_a_browser_a_folded_box_opens_into_its_inside_and_a_search_finds_a_node_inside_one(tmp_path):
    source, page = tmp_path / "chain.pb", tmp_path / "chain.html"
    _parts_graph(source)
    run_cli("show", source, "--max-nodes", "40", "-o", page)
    dom = page_dom(page.as_uri(), tmp_path / "profile")
    assert 'data-view=""' in dom and 'data-boxes="31"' in dom and dom.count('class="node opens"') == 30
    dom = page_dom(page.as_uri() + "#open=part7", tmp_path / "profile")
    assert 'data-view="part7"' in dom and 'data-boxes="10"' in dom and 'id="node:part7/layer76/Identity"' in dom
    dom = page_dom(page.as_uri() + "#search=layer233%2F", tmp_path / "profile")
    assert 'data-view="part23"' in dom and 'id="count">1 of 1<' in dom and 'class="node found"' in dom
    left, top, right, bottom = map(int, re.search(r'data-focus="([-\d,]+)"', dom)[1].split(","))
    assert 0 <= left < right <= 1280 and 40 <= top < bottom <= 800
