"""The page ``graphgrad show`` writes: one HTML file that opens offline, the path's
pictures inline (the whole path's as SVG, and each folded box's inside packed, opened
by a click),
pan, zoom, a search over every picture, the legend in the bar, and what check found
in a column beside the picture."""

import base64
import gzip
import html
import json
from collections.abc import Iterable


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>gradient path of {title}</title>
<style>
body {{ margin: 0; font-family: Helvetica, Arial, sans-serif; }}
#bar {{ position: fixed; top: 0; left: 0; right: 0; height: 28px; padding: 6px; background: #f4f4f4;
        border-bottom: 1px solid #ccc; white-space: nowrap; overflow: hidden; font-size: 13px; }}
#bar .chip {{ display: inline-block; padding: 1px 5px; margin-left: 3px; border-radius: 3px; font-size: 11px; }}
#crumbs a {{ color: #0645ad; cursor: pointer; text-decoration: underline; }}
#view {{ position: absolute; top: 41px; left: 0; right: 0; bottom: 0; overflow: hidden; cursor: grab; }}
#results {{ position: fixed; top: 41px; right: 0; bottom: 0; width: 30%; overflow: auto; padding: 6px 10px;
            background: #fffbe6; border-left: 1px solid #ccc; font-size: 13px; z-index: 1; box-sizing: border-box; }}
#results ~ #view {{ right: 30%; }}
#results div {{ margin: 0 0 6px; }}
#results .finding {{ color: #0645ad; cursor: pointer; text-decoration: underline; }}
#view svg {{ transform-origin: 0 0; }}
g.node.opens {{ cursor: pointer; }}
g.node.found polygon, g.node.found path {{ stroke: #ff7f0e; stroke-width: 4px; }}
</style></head><body>
<div id="bar"><b>{title}</b> <span id="crumbs"></span> &nbsp;
<input id="search" placeholder="search a node name" size="30"> <span id="count"></span>
&nbsp; {legend}</div>
{results}<div id="view">{svg}</div>
<script type="application/json" id="views">{views}</script>
<script>
const view = document.getElementById("view"), whole = view.querySelector("svg");
// each view's parent, the view each folded box opens, the first view drawing each name, each other picture packed
const {{parents, opens, names, packed}} = JSON.parse(document.getElementById("views").textContent);
const pictures = {{"": whole}};
let svg = whole, key = null, scale = 1, x = 0, y = 0, drag = null, moved = 0;
function place() {{ svg.style.transform = `translate(${{x}}px, ${{y}}px) scale(${{scale}})`; }}
async function picture(k) {{  // a view's SVG, unpacked (base64 of gzip) the first time it is opened
  if (!(k in pictures)) {{
    const bytes = Uint8Array.from(atob(packed[k]), c => c.charCodeAt(0));
    const text = await new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"))).text();
    pictures[k] = document.importNode(new DOMParser().parseFromString(text, "image/svg+xml").documentElement, true); }}
  return pictures[k]; }}
function trail(k) {{ const keys = [k]; while (keys[0] !== "") keys.unshift(parents[keys[0]]); return keys; }}
async function open(k) {{
  if (k === key) return; svg = await picture(k); view.replaceChildren(svg); key = k; x = 0; y = 0;
  const frame = view.getBoundingClientRect(), size = svg.getBBox();  // its width fitted, down to a third
  scale = Math.max(1 / 3, Math.min(1, frame.width / size.width)); place();
  const first = svg.querySelector("g.node");
  if (first) {{ const box = first.getBoundingClientRect();  // the first box (an input) at the top, centred
    x = frame.left + frame.width / 2 - (box.left + box.width / 2); place(); }}
  for (const node of svg.querySelectorAll("g.node")) {{
    const inside = (opens[k] || {{}})[node.querySelector("title").textContent];
    if (inside !== undefined) {{ node.classList.add("opens");
      node.onclick = () => {{ if (moved < 5) open(inside); }}; }} }}
  const crumbs = document.getElementById("crumbs"); crumbs.replaceChildren();
  let outer = "";
  for (const step of trail(k)) {{  // each named inside the one before it
    const link = document.createElement(step === k ? "span" : "a");
    const inside = outer && step.startsWith(outer + "/") ? step.slice(outer.length + 1) : step; outer = step;
    link.textContent = (step === "" ? "whole path" : inside) + (step === k ? "" : " \u203a ");
    if (step !== k) link.onclick = () => open(step);
    crumbs.append(link); }}
  document.body.dataset.view = k; document.body.dataset.boxes = svg.querySelectorAll("g.node").length; }}
view.addEventListener("wheel", e => {{ e.preventDefault(); const f = e.deltaY < 0 ? 1.15 : 1 / 1.15;
  x = e.offsetX - (e.offsetX - x) * f; y = e.offsetY - (e.offsetY - y) * f; scale *= f; place(); }});
view.addEventListener("mousedown", e => {{ drag = [e.clientX - x, e.clientY - y]; moved = 0; }});
window.addEventListener("mouseup", () => {{ drag = null; }});
window.addEventListener("mousemove", e => {{ if (drag) {{ moved += Math.abs(e.movementX) + Math.abs(e.movementY);
  x = e.clientX - drag[0]; y = e.clientY - drag[1]; place(); }} }});
let found = [], current = -1;
function focus(node) {{  // the box's centre to the view's centre; where it now is, for tests
  const box = node.getBoundingClientRect(), frame = view.getBoundingClientRect();
  x += frame.left + frame.width / 2 - (box.left + box.width / 2);
  y += frame.top + frame.height / 2 - (box.top + box.height / 2); place();
  const now = node.getBoundingClientRect();
  document.body.dataset.focus = [now.left, now.top, now.right, now.bottom].map(Math.round).join(","); }}
async function step() {{
  if (!found.length) return; current = (current + 1) % found.length;
  const name = found[current]; await open(names[name]);
  for (const node of svg.querySelectorAll("g.node")) {{
    const hit = node.querySelector("title").textContent === name; node.classList.toggle("found", hit);
    if (hit) focus(node); }}
  document.getElementById("count").textContent = `${{current + 1}} of ${{found.length}}`; }}
function search(text) {{
  text = text.toLowerCase(); current = -1;
  found = text ? Object.keys(names).filter(name => name.toLowerCase().includes(text)) : [];
  for (const node of svg.querySelectorAll("g.node.found")) node.classList.remove("found");
  document.getElementById("count").textContent = text && !found.length ? "0 found" : ""; return step(); }}
const box = document.getElementById("search");
box.addEventListener("input", e => search(e.target.value));
box.addEventListener("keydown", e => {{ if (e.key === "Enter") step(); }});
for (const line of document.querySelectorAll("#results .finding")) {{
  line.addEventListener("click", () => {{ if (line.dataset.node in names) {{
    found = [line.dataset.node]; current = -1; step(); }} }}); }}
(async () => {{
  await open("");
  const wanted = decodeURIComponent(location.hash.slice(location.hash.indexOf("=") + 1));
  if (location.hash.startsWith("#search=")) {{ box.value = wanted; await search(wanted); }}  // page.html#search=NAME
  else if (location.hash.startsWith("#open=") && wanted in parents) await open(wanted);  // page.html#open=SCOPE
  document.body.dataset.ready = "yes"; }})();
</script></body></html>
"""


def to_html(pictures: list, title: str, legend: Iterable[tuple], results: Iterable[tuple] = ()) -> str:
    """One page that opens offline: ``pictures`` (``(view, svg)``: each
    :class:`graphgrad.jobs.folding.View` as laid out, the whole path's first)
    inline, pan, zoom, a click on a folded box opening its inside, and a search by
    name over every picture that moves the view to each match in turn
    (``#search=NAME`` in the address too; ``#open=SCOPE`` opens a folded box), no
    fetch. ``legend`` is ``(mark, colour,
    text colour, meaning, what its chip says)`` of each mark drawn; ``results``, ``(line, node)`` of what
    check found, in a column beside the picture, each line about a node a link to its
    box."""
    lines = "".join(f'<div class="finding" data-node="{html.escape(node)}">{html.escape(line)}</div>' if node
                    else f"<div>{html.escape(line)}</div>" for line, node in results)
    panel = f'<div id="results">{lines}</div>' if lines else ""
    chips = "".join(f'<span class="chip" id="legend:{mark}" title="{html.escape(meaning)}" style="background: '
                    f'{colour}; color: {text}">{html.escape(shown)}</span>'
                    for mark, colour, text, meaning, shown in legend)
    (_, whole), *inside = pictures
    names: dict = {}
    for view, _ in pictures:
        for name in view.nodes:
            names.setdefault(name, view.key)
    views = {"parents": {view.key: view.parent for view, _ in inside}, "opens": {view.key: view.opens
             for view, _ in pictures}, "names": names, "packed": {view.key: _packed(_svg_element(svg))
                                                                  for view, svg in inside}}
    # JSON in a script: "<" escaped, so no name can close the script or open a comment there
    return _PAGE.format(title=html.escape(title), svg=_svg_element(whole), results=panel, legend=chips,
                        views=json.dumps(views).replace("<", "\\u003c"))


def _packed(svg: str) -> str:
    """A picture in the page's JSON: gzip (a folded box's inside is opened by few, and
    a big model's pictures would make the page tens of megabytes; level 3: nearly
    level 9's size in a fifth of its time), in base64."""
    return base64.b64encode(gzip.compress(svg.encode("utf-8"), compresslevel=3, mtime=0)).decode("ascii")


def _svg_element(svg: str) -> str:
    """The ``<svg>`` element of an SVG document (without its XML prolog)."""
    start = svg.find("<svg")
    return svg[start:] if start >= 0 else svg
