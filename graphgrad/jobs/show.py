"""graphgrad show: a picture of the gradient path from x to y, with every override,
blocker and surrogate on it (DOT; SVG and a self-contained HTML page laid out by
Graphviz's ``dot``).

It reads the file as every file command does, without TensorFlow: the path is the
nodes that lie between x and y through data inputs, and the marks come from the
nodes themselves (their override and its status, graphgrad's own nodes, the op
types whose TensorFlow gradient is None or zero, casts to integers). What only a
run can tell (a zero gradient on this feed) is ``check``'s.
"""

import html
import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from ..names import BYPASS, EMBED_SPEC, GROUP, SERVING_DEFAULT, SOURCE
from ..edits.summary import DANGLING, classify_override
from ..errors import GraphgradError, UsageError
from ..files.outputs import Output, model_files, refuse_outputs_over_inputs
from ..files.reading import read_model
from ..files.writing import write_chunks
from ..graph.functions import called_function, saved_gradients
from ..graph.tensors import unknown_tensor
from ..graph.model import SAVEDMODEL, Model, meta_graphs_of, override_of, signatures_of
from ..tf.blockers import NONE_GRADIENT, STOPPERS, ZERO_GRADIENT

FORMATS = (".dot", ".svg", ".html")
GRAPHVIZ_TIMEOUT = 120.0  # seconds dot may take to lay out a path
LAYOUT_LIMIT = 5000  # boxes a laid-out picture may hold: past it, dot takes minutes and no one reads it
INTEGER_TYPES = {3, 4, 5, 6, 9, 10, 17, 22, 23}  # DataType: int32, uint8, int16, int8, int64, bool, uint16, ...

# The marks, each with its colour and its line in the legend, in the order they win.
MARKS = {
    "blocker": ("#d62728", "the gradient stops here (no gradient, zero, StopGradient, a cast to integers)"),
    "dangling": ("#8c564b", "an override no process can resolve (tf.custom_gradient's CustomGradient-<n>)"),
    "override": ("#1f77b4", "a gradient override (_gradient_op_type)"),
    "surrogate": ("#2ca02c", "an --embed surrogate or an inserted gradient"),
    "bypass": ("#9467bd", "a bypass (BPDA): the region's gradient goes around it"),
    "intended": ("#7f7f7f", "stopped on purpose (tf.nn.moments' StopGradient)"),
    "scope": ("#bcbd22", "a name scope collapsed into one box"),
}


@dataclass(frozen=True)
class ShowOptions:
    """What ``graphgrad show`` draws: the path from ``x`` to ``y`` (either may be
    None: from the inputs, to the outputs), scopes collapsed past ``max_nodes``."""

    x: tuple = ()
    y: str | None = None
    max_nodes: int = 150
    tags: str | None = None
    kind: str | None = None
    ys: tuple = ()  # without y: several outputs to draw up to (a SavedModel's signature)
    signed: bool = False  # x and ys from the model's signature: an input that reaches no output is left out


@dataclass
class Picture:
    """The path as drawn: each node (or collapsed scope) with its mark."""

    nodes: dict = field(default_factory=dict)  # name -> (op type, mark or "", tooltip)
    edges: set = field(default_factory=set)  # (from, to)
    collapsed: dict = field(default_factory=dict)  # scope -> count of nodes inside
    bodies: dict = field(default_factory=dict)  # call node -> (function, names drawn inside its box)


@dataclass
class Findings:
    """What a run of ``check`` found, drawn on the picture: nodes where the gradient
    stopped (name -> why, with the fix) and the lines of its results, each
    ``(text, node)``: the node it is about, linked to its box, or None."""

    blockers: dict = field(default_factory=dict)
    results: list = field(default_factory=list)


def findings_of_check(report: Any) -> Findings:
    """What a ``graphgrad check`` report (:class:`graphgrad.tf.check.CheckReport`)
    found, to draw: its blockers, with their fixes, and a line per x."""
    findings = Findings({blocker.node: f"{blocker.reason}; fix: {blocker.fix}" for blocker in report.blockers})
    verdict = "every x gets a usable gradient" if report.ok else "not every x gets a usable gradient"
    findings.results.append((f"graphgrad check: d {report.y} / dx: {verdict}", None))
    for gradient in report.gradients:
        norm = f", norm {gradient.norm:.4g}" if gradient.norm is not None else ""
        why = f": {gradient.why or gradient.error}" if gradient.why or gradient.error else ""
        findings.results.append((f"{gradient.x}: {gradient.status}{norm}{why}", None))
    if report.summed_softmax is not None:
        findings.results.append((report.summed_softmax.describe().replace("\n", " "), None))
    findings.results += [(f"stops at {blocker.node} ({blocker.op_type}): {blocker.reason}; fix: {blocker.fix}",
                          blocker.node) for blocker in report.blockers]
    findings.results += [(f"cannot take effect (not on a differentiable path from x to y): {node}: {value}", node)
                         for node, value in report.idle_overrides]
    return findings


def require_output(model: str, out: str, formats: tuple = FORMATS, option: str = "-o") -> str:
    """The extension of a picture's output path, refused (one line) unless it is one
    of ``formats`` in a folder that exists, and not a file the model is read from:
    before any work is done."""
    extension = os.path.splitext(out)[1].lower()
    if extension not in formats:
        *others, last = formats
        written = f"{', '.join(others)} or {last}" if others else last
        raise UsageError(f"{option} {out}: graphgrad writes {written} there; name a file ending in "
                         f"{'one of them' if others else last}")
    refuse_outputs_over_inputs({f"the model {model}": model_files(model)}, [Output(option, out)])
    return extension


def show_model(path: str, out: str, options: ShowOptions, findings: Findings | None = None) -> Picture:
    """Draw the gradient path of the model at ``path`` into ``out`` (.dot, .svg or
    .html), with what a run of ``check`` found if given; returns what was drawn.
    Nothing is written on any failure."""
    extension = require_output(path, out)
    model = read_model(path, options.kind)
    picture = path_picture(_graph_def(model, options.tags), _with_signature(model, options))
    if findings is not None:
        _mark_findings(picture, findings)
    if extension != ".dot" and len(picture.nodes) > LAYOUT_LIMIT:
        raise UsageError(f"{len(picture.nodes)} boxes on the path, even with its name scopes collapsed: more than a "
                         f"picture shows ({LAYOUT_LIMIT}); narrow it with --x and --y, or write .dot")
    dot = to_dot(picture)
    if extension == ".dot":
        write_chunks(out, [dot.encode()])
    else:
        svg = layout(dot)
        page = to_html(svg, path, findings.results if findings else ())
        write_chunks(out, [(svg if extension == ".svg" else page).encode()])
    return picture


def _with_signature(model: Model, options: ShowOptions) -> ShowOptions:
    """Without --x and --y, a SavedModel's path runs from its signature's inputs to
    its outputs (serving_default's, else every signature's), as ``check`` picks them."""
    if options.x or options.y:
        return options
    metas = meta_graphs_of(model.message, model.kind)
    if options.tags is not None:
        wanted = {tag.strip() for tag in options.tags.split(",")}
        metas = [(label, meta) for label, meta in metas if set(meta.meta_info_def.tags) == wanted]
    signatures = [signature for _, meta in metas[:1] for signature in signatures_of(meta)]
    serving = [signature for signature in signatures if signature[0] == SERVING_DEFAULT] or signatures
    inputs = tuple(dict.fromkeys(tensor for _, ins, _ in serving for _, tensor in ins))
    outputs = tuple(dict.fromkeys(tensor for _, _, outs in serving for _, tensor in outs))
    if not outputs:
        return options
    return replace(options, x=inputs, ys=outputs, signed=True)


def _mark_findings(picture: Picture, findings: Findings) -> None:
    """Mark the nodes where check found the gradient stopping (a node in a function
    body is drawn as ``CALL|FUNCTION/NODE``)."""
    for name, (op, mark, tooltip) in list(picture.nodes.items()):
        found = findings.blockers.get(name) or findings.blockers.get(name.rsplit("|", 1)[-1])
        if found:
            picture.nodes[name] = (op, "blocker", f"{tooltip}; check: {found}")


def _graph_def(model: Model, tags: str | None) -> Any:
    graphs = model.graphs()
    if model.kind == SAVEDMODEL and tags is not None:
        wanted = {tag.strip() for tag in tags.split(",")}
        graphs = [(label, graph) for label, graph in graphs if set(label.split(",")) == wanted]
    if len(graphs) != 1:
        raise UsageError(f"{model.path} holds {len(graphs)} graphs; choose one with --tag "
                         f"({'; '.join(label for label, _ in model.graphs())})")
    return graphs[0][1]


def _name(ref: str) -> str:
    return ref.lstrip("^").split(":")[0]


def path_picture(graph_def: Any, options: ShowOptions) -> Picture:
    """The nodes between x and y (through data inputs) with their marks."""
    nodes = {node.name: node for node in graph_def.node}
    ys = [options.y] if options.y else list(options.ys)
    for wanted in ys + list(options.x):
        wrong = unknown_tensor(nodes, wanted)  # the same check, and close names, as check's and attribute's
        if wrong:
            raise UsageError(wrong)
    inputs = {name: [_name(ref) for ref in node.input if not ref.startswith("^")] for name, node in nodes.items()}
    on_path = set(nodes)
    if ys:
        on_path &= _reach([_name(y) for y in ys], inputs)
    xs = [x for x in options.x if _name(x) in on_path] if options.signed else list(options.x)
    if xs:
        consumers: dict = {}
        for name, sources in inputs.items():
            for source in sources:
                consumers.setdefault(source, []).append(name)
        on_path &= _reach([_name(x) for x in xs], consumers)
        missing = [x for x in xs if _name(x) not in on_path]
        if missing:
            raise UsageError(f"{missing[0]} is not an ancestor of {' or '.join(ys)}: no path to draw (graphgrad "
                             "check says the same of its gradient)")
    saved = saved_gradients(graph_def)
    library = {function.signature.name: function for function in graph_def.library.function}
    # What y's gradient reaches: not what lies behind a StopGradient (a bypass's forward region), whose own
    # gradient is never taken, so stops nothing.
    live = _reach([_name(y) for y in ys], {name: [] if nodes[name].op in STOPPERS else sources
                                           for name, sources in inputs.items()}) if ys else set(nodes)
    picture = Picture()
    for name in (node.name for node in graph_def.node if node.name in on_path):
        node = nodes[name]
        mark, why = _mark(node, nodes, saved)
        if mark == "blocker" and name not in live:
            mark, why = "", "behind a StopGradient: the gradient is not taken through it (a bypass routes it)"
        picture.nodes[name] = (node.op, mark, f"{name} ({node.op})" + (f": {why}" if why else ""))
        picture.edges |= {(source, name) for source in inputs[name] if source in on_path}
        _draw_body(picture, name, [source if source in on_path else None for source in inputs[name]],
                   called_function(node.op, node.attr), library, saved, set())
    if len(picture.nodes) > options.max_nodes:
        _collapse(picture)
    return picture


def _draw_body(picture: Picture, call: str, sources: list, function: str, library: dict, saved: dict,
               seen: set) -> None:
    """The path through the body of ``function``, which the node ``call`` runs: from
    its arguments to what it returns, drawn in a box of its own inside the picture
    (names ``CALL|FUNCTION/NODE``), the calls it makes in boxes inside it. The path is
    joined to the caller's: ``sources`` (the call's data inputs as drawn, None for
    those off the path) feed the nodes that read the matching arguments, and what the
    body returns feeds ``call``, whose own input edges the body then stands for."""
    if function not in library or function in seen:
        return
    body = library[function]
    nodes = {node.name: node for node in body.node_def}
    inputs = {name: [_name(ref) for ref in node.input if not ref.startswith("^")] for name, node in nodes.items()}
    consumers: dict = {}
    for name, sources_of in inputs.items():
        for source in sources_of:
            consumers.setdefault(source, []).append(name)
    arguments = [arg.name for arg in body.signature.input_arg]
    returned = [_name(ref) for ref in body.ret.values()]
    on_path = _reach(returned, inputs) & _reach(arguments, consumers) - set(arguments)
    prefix = f"{call}|{function}/"
    drawn = []
    for name in (node.name for node in body.node_def if node.name in on_path):
        node = nodes[name]
        mark, why = _mark(node, nodes, saved)
        picture.nodes[prefix + name] = (node.op, mark, f"{function}/{name} ({node.op}), run by {call}"
                                        + (f": {why}" if why else ""))
        drawn.append(prefix + name)
        picture.edges |= {(prefix + source, prefix + name) for source in inputs[name] if source in on_path}
        for index, argument in enumerate(arguments):
            if argument in inputs[name]:
                picture.edges.add((sources[index] if index < len(sources) and sources[index] else call,
                                   prefix + name))
        inner = [prefix + source if source in on_path else  # an argument: what the call was given for it
                 sources[arguments.index(source)] if source in arguments and arguments.index(source) < len(sources)
                 else None for source in inputs[name]]
        _draw_body(picture, prefix + name, inner, called_function(node.op, node.attr), library, saved,
                   seen | {function})
    if drawn:
        picture.bodies[call] = (function, drawn)
        picture.edges -= {(source, call) for source in sources if source}
        picture.edges |= {(prefix + name, call) for name in returned if name in on_path}


def _reach(starts: Iterable[str], links: dict) -> set:
    seen, stack = set(), list(starts)
    while stack:
        name = stack.pop()
        if name not in seen:
            seen.add(name)
            stack.extend(links.get(name, ()))
    return seen


def _mark(node, nodes: dict, saved: dict) -> tuple[str, str]:
    """The mark of a node on the path, and why."""
    attrs = node.attr
    if BYPASS in attrs:
        return "bypass", "the bypass's output: the gradient goes to " + attrs[BYPASS].s.decode("utf-8", "replace")
    if EMBED_SPEC in attrs or SOURCE in attrs:
        spec = attrs[EMBED_SPEC].s.decode("utf-8", "replace") if EMBED_SPEC in attrs else "inserted"
        return "surrogate", spec
    if GROUP in attrs:
        return "surrogate", "part of a surrogate graphgrad wrote"
    override = override_of(node)
    if override:
        status, _ = classify_override(override, saved)
        return ("dangling" if status == DANGLING else "override"), f"{override} ({status})"
    if node.op in STOPPERS:
        if _moments_stop(node, nodes):
            return "intended", "tf.nn.moments' StopGradient: on purpose"
        return "blocker", f"{node.op} stops the gradient"
    if node.op in ZERO_GRADIENT:
        return "blocker", "TensorFlow's gradient is zero everywhere"
    if node.op in NONE_GRADIENT:
        return "blocker", "TensorFlow's gradient is None"
    if node.op == "Cast" and node.attr["DstT"].type in INTEGER_TYPES:
        return "blocker", "a cast to integers: TensorFlow never backpropagates through it"
    return "", ""


def _moments_stop(node, nodes: dict) -> bool:
    """tf.nn.moments' StopGradient, by its structure (as check tells it)."""
    source = nodes.get(_name(node.input[0])) if node.input else None
    if source is None or source.op != "Mean":
        return False
    averaged = _name(source.input[0]) if source.input else ""
    return any(other.op == "SquaredDifference" and {node.name, averaged} <= set(map(_name, other.input))
               for other in nodes.values())


def _collapse(picture: Picture) -> None:
    """Name scopes into one box each, but those holding a blocker (kept open)."""
    scope_of = {name: name.split("/")[0] if "/" in name else "" for name in picture.nodes}
    open_scopes = {scope_of[name] for name, (_, mark, _) in picture.nodes.items() if mark == "blocker"}
    box = {name: scope for name, scope in scope_of.items() if scope and scope not in open_scopes}
    kept: dict = {}
    for name, value in picture.nodes.items():
        if name in box:
            scope = box[name]
            picture.collapsed[scope] = picture.collapsed.get(scope, 0) + 1
            marks = kept.get(f"{scope}/*", ("scope", "scope", ""))[2]
            mark = value[1]
            kept[f"{scope}/*"] = ("scope", "scope", marks + (f" {mark}" if mark and mark not in marks else ""))
        else:
            kept[name] = value
    for scope, count in picture.collapsed.items():
        marks = kept[f"{scope}/*"][2].split()
        kept[f"{scope}/*"] = ("scope", "scope", f"{scope}: {count} nodes" + (f" ({', '.join(marks)})" if marks
                                                                            else ""))
    picture.edges = {(box.get(a, a) + "/*" if a in box else a, box.get(b, b) + "/*" if b in box else b)
                     for a, b in picture.edges}
    picture.edges = {(a, b) for a, b in picture.edges if a != b}
    picture.nodes = kept


def _short(name: str, limit: int = 28) -> str:
    return name if len(name) <= limit else "..." + name[-(limit - 3):]


# Graphviz refuses a quoted string longer than 16,384 bytes; DOT joins "a" + "b" into one, so a
# long name (ids and tooltips keep it whole) is written in pieces that stay under it even escaped.
DOT_PIECE = 4000


def _quoted(text: str) -> str:
    return " + ".join('"' + text[start:start + DOT_PIECE].replace("\\", "\\\\").replace('"', '\\"') + '"'
                      for start in range(0, max(len(text), 1), DOT_PIECE))


def _text_colour(mark: str) -> str:
    return "white" if mark and mark not in ("scope", "intended") else "black"


def to_dot(picture: Picture) -> str:
    """The picture in Graphviz's DOT language, with a legend of the marks it uses."""
    lines = ["digraph gradient_path {", "  rankdir=TB;",
             '  node [shape=box, style="rounded,filled", fillcolor="#ffffff", fontname="Helvetica", fontsize=10];']
    for name, (op, mark, tooltip) in picture.nodes.items():
        colour = MARKS[mark][0] if mark else "#ffffff"
        shown = name.rsplit("|", 1)[-1].split("/", 1)[-1] if "|" in name else name  # in a body: its own name
        label = _quoted(_short(op))[:-1] + "\\n" + _quoted(_short(shown))[1:]  # two lines: DOT's own \n
        lines.append(f"  {_quoted(name)} [label={label}, tooltip={_quoted(tooltip)}, fillcolor={_quoted(colour)}, "
                     f"fontcolor={_text_colour(mark)}, id={_quoted('node:' + name)}];")
    for index, (call, (function, names)) in enumerate(sorted(picture.bodies.items())):
        lines.append(f'  subgraph cluster_body_{index} {{ label={_quoted(function + " (run by " + call + ")")}; '
                     'style="dashed"; fontname="Helvetica"; fontsize=9;')
        lines += [f"    {_quoted(name)};" for name in names if name in picture.nodes]
        lines.append("  }")
    for source, target in sorted(picture.edges):
        style = " [style=dashed]" if "|" in target and "|" not in source else ""
        lines.append(f"  {_quoted(source)} -> {_quoted(target)}{style};")
    used = [mark for mark in MARKS if any(value[1] == mark for value in picture.nodes.values())]
    if used:
        lines.append('  subgraph cluster_legend { label="legend"; fontname="Helvetica"; fontsize=10;')
        for mark in used:
            colour, meaning = MARKS[mark]
            lines.append(f"    {_quoted('legend:' + mark)} [label={_quoted(mark + ': ' + meaning)}, "
                         f"fillcolor={_quoted(colour)}, fontcolor={_text_colour(mark)}, shape=box, "
                         f"id={_quoted('legend:' + mark)}];")
        for above, below in zip(used, used[1:]):  # stacked, one mark a line
            lines.append(f"    {_quoted('legend:' + above)} -> {_quoted('legend:' + below)} [style=invis];")
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def layout(dot: str) -> str:
    """SVG laid out by Graphviz's ``dot`` (on PATH), stopped after GRAPHVIZ_TIMEOUT."""
    program = shutil.which("dot")
    if program is None:
        raise GraphgradError("drawing .svg or .html needs Graphviz's dot, which is not on PATH: install it "
                             "(apt-get install graphviz, brew install graphviz), or write .dot")
    # In a process group of its own, ended whole: dot (or a wrapper script named dot) may have
    # children, which would outlive it and hold its pipes open.
    process = subprocess.Popen([program, "-Tsvg"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        svg, errors = process.communicate(dot, timeout=GRAPHVIZ_TIMEOUT)
    except subprocess.TimeoutExpired:
        _end_group(process)
        raise GraphgradError(f"Graphviz's dot took over {GRAPHVIZ_TIMEOUT:g} s to lay out the path and was "
                             "stopped; draw fewer nodes (--max-nodes) or write .dot") from None
    except BaseException:  # Ctrl-C, or anything else: no dot left running
        _end_group(process)
        raise
    if process.returncode:
        raise GraphgradError(f"Graphviz's dot failed: {errors.strip()[:300]}")
    return svg


def _end_group(process: subprocess.Popen) -> None:
    """Kill ``process`` and every process of its group, and reap it."""
    import signal

    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.communicate()


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>gradient path of {title}</title>
<style>
body {{ margin: 0; font-family: Helvetica, Arial, sans-serif; }}
#bar {{ position: fixed; top: 0; left: 0; right: 0; padding: 6px; background: #f4f4f4; border-bottom: 1px solid #ccc;
        white-space: nowrap; overflow: hidden; }}
#view {{ position: absolute; top: 40px; left: 0; right: 0; bottom: 0; overflow: hidden; cursor: grab; }}
#results {{ position: fixed; top: 40px; right: 0; bottom: 0; width: 30%; overflow: auto; padding: 6px 10px;
            background: #fffbe6; border-left: 1px solid #ccc; font-size: 13px; z-index: 1; box-sizing: border-box; }}
#results ~ #view {{ right: 30%; }}
#results div {{ margin: 0 0 6px; }}
#results .finding {{ color: #0645ad; cursor: pointer; text-decoration: underline; }}
#view svg {{ transform-origin: 0 0; }}
g.node.found polygon, g.node.found path {{ stroke: #ff7f0e; stroke-width: 4px; }}
</style></head><body>
<div id="bar">gradient path of <b>{title}</b> &nbsp; <input id="search" placeholder="search a node name" size="40">
<span id="count"></span> &nbsp; Enter: next match; drag to pan, wheel to zoom</div>
{results}<div id="view">{svg}</div>
<script>
const view = document.getElementById("view"), svg = view.querySelector("svg");
let scale = 1, x = 0, y = 0, drag = null;
function place() {{ svg.style.transform = `translate(${{x}}px, ${{y}}px) scale(${{scale}})`; }}
view.addEventListener("wheel", e => {{ e.preventDefault(); const f = e.deltaY < 0 ? 1.15 : 1 / 1.15;
  x = e.offsetX - (e.offsetX - x) * f; y = e.offsetY - (e.offsetY - y) * f; scale *= f; place(); }});
view.addEventListener("mousedown", e => {{ drag = [e.clientX - x, e.clientY - y]; }});
window.addEventListener("mouseup", () => {{ drag = null; }});
window.addEventListener("mousemove", e => {{
  if (drag) {{ x = e.clientX - drag[0]; y = e.clientY - drag[1]; place(); }} }});
let found = [], current = -1;
function focus(node) {{  // the box's centre to the view's centre; where it now is, for tests
  const box = node.getBoundingClientRect(), frame = view.getBoundingClientRect();
  x += frame.left + frame.width / 2 - (box.left + box.width / 2);
  y += frame.top + frame.height / 2 - (box.top + box.height / 2); place();
  const now = node.getBoundingClientRect();
  document.body.dataset.focus = [now.left, now.top, now.right, now.bottom].map(Math.round).join(","); }}
function step() {{
  if (!found.length) return; current = (current + 1) % found.length; focus(found[current]);
  document.getElementById("count").textContent = `${{current + 1}} of ${{found.length}}`; }}
function search(text) {{
  text = text.toLowerCase(); found = []; current = -1;
  for (const node of svg.querySelectorAll("g.node")) {{
    const name = node.querySelector("title").textContent.toLowerCase();
    const hit = Boolean(text) && name.includes(text); node.classList.toggle("found", hit); if (hit) found.push(node); }}
  document.getElementById("count").textContent = text ? (found.length ? "" : "0 found") : ""; step(); }}
const box = document.getElementById("search");
box.addEventListener("input", e => search(e.target.value));
box.addEventListener("keydown", e => {{ if (e.key === "Enter") step(); }});
for (const line of document.querySelectorAll("#results .finding")) {{
  line.addEventListener("click", () => {{ const node = document.getElementById("node:" + line.dataset.node);
    if (node) {{ found = [node]; current = -1; step(); }} }}); }}
if (location.hash.startsWith("#search=")) {{  // a link to a node: page.html#search=NAME
  box.value = decodeURIComponent(location.hash.slice(8)); search(box.value); }}
</script></body></html>
"""


def to_html(svg: str, title: str, results: Iterable[tuple] = ()) -> str:
    """One page that opens offline: the SVG inline, pan, zoom and a search by name that
    moves the view to each match in turn (``#search=NAME`` in the address too), no
    fetch; ``results``, ``(line, node)`` of what check found, in a column beside the
    picture, each line about a node a link to its box."""
    start = svg.find("<svg")
    lines = "".join(f'<div class="finding" data-node="{html.escape(node)}">{html.escape(line)}</div>' if node
                    else f"<div>{html.escape(line)}</div>" for line, node in results)
    panel = f'<div id="results">{lines}</div>' if lines else ""
    return _PAGE.format(title=html.escape(title), svg=svg[start:] if start >= 0 else svg, results=panel)
