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
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from ..names import BYPASS, EMBED_SPEC, GROUP, SERVING_DEFAULT, SOURCE
from ..edits.summary import DANGLING, classify_override
from ..errors import UsageError
from ..files.outputs import Output, model_files, refuse_outputs_over_inputs
from ..files.reading import read_model
from ..files.writing import write_chunks
from ..graph.functions import called_function, saved_gradients
from ..graph.tensors import unknown_tensor
from ..graph.model import SAVEDMODEL, Model, meta_graphs_of, override_of, signatures_of
from ..graph.stops import NONE_GRADIENT, STOPPERS, ZERO_GRADIENT, moments_stop
from .folding import View, fold
from .graphviz import FEWER_BOXES, GRAPHVIZ_TIMEOUT, layout
from .page import to_html

FORMATS = (".dot", ".svg", ".html")
LAYOUT_LIMIT = 5000  # boxes a laid-out picture may hold: past it, dot takes minutes and no one reads it
INTEGER_TYPES = {3, 4, 5, 6, 9, 10, 17, 22, 23}  # DataType: int32, uint8, int16, int8, int64, bool, uint16, ...

# The marks, each with its colour and its line in the legend, in the order they win.
MARKS = {
    "blocker": ("#d62728", "the gradient stops here (no gradient, zero, StopGradient, a cast to integers)"),
    "dangling": ("#8c564b", "an override no process can resolve (tf.custom_gradient's CustomGradient-<n>)"),
    "override": ("#1f77b4", "a gradient override (_gradient_op_type)"),
    "surrogate": ("#2ca02c", "an --embed surrogate or an inserted gradient"),
    "bypass": ("#9467bd", "the region's gradient carried around it (a bypass, BPDA)"),
    "intended": ("#7f7f7f", "stopped on purpose (tf.nn.moments' StopGradient)"),
    "scope": ("#bcbd22", "a name scope folded into one box"),
    "run": ("#dbdb8d", "a run of one op type folded into one box"),
}


def legend_words(mark: str) -> str:
    """What a legend shows of ``mark`` without hovering: its name and meaning, short."""
    return f"{mark}: {MARKS[mark][1].split(' (')[0].split(':')[0]}"


@dataclass(frozen=True)
class ShowOptions:
    """What ``graphgrad show`` draws: the path from ``x`` to ``y`` (either may be
    None: from the inputs, to the outputs), folded to about ``max_nodes`` boxes."""

    x: tuple = ()
    y: str | None = None
    max_nodes: int = 150
    tags: str | None = None
    kind: str | None = None
    ys: tuple = ()  # without y: several outputs to draw up to (a SavedModel's signature)
    signed: bool = False  # x and ys from the model's signature: an input that reaches no output is left out
    timeout: float = GRAPHVIZ_TIMEOUT  # seconds Graphviz may take to lay the pictures out


@dataclass
class Picture:
    """The path: each node with its mark, and the pictures drawn of it (folded)."""

    nodes: dict = field(default_factory=dict)  # name -> (op type, mark or "", tooltip)
    edges: set = field(default_factory=set)  # (from, to)
    bodies: dict = field(default_factory=dict)  # call node -> (function, names drawn inside its box)
    views: list = field(default_factory=list)  # the pictures drawn (folding.View), the whole path's first


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
    views = fold(picture.nodes, picture.edges, picture.bodies, options.max_nodes, LAYOUT_LIMIT)
    picture.views = views if extension == ".html" else views[:1]  # only the page opens folded boxes
    whole = views[0]
    if extension != ".dot" and len(whole.nodes) > LAYOUT_LIMIT:
        raise UsageError(f"{len(whole.nodes)} boxes on the path, even with its name scopes folded: more than a "
                         f"picture shows ({LAYOUT_LIMIT}); narrow it with --x and --y, or write .dot")
    # Boxes over --max-nodes are scopes and unscoped nodes of the top level, which fewer --max-nodes cannot fold.
    fewer = (f"narrow the path with --x and --y (its top level holds {len(whole.nodes)} name scopes and unscoped "
             f"nodes, over --max-nodes {options.max_nodes}, which folding cannot reduce)"
             if len(whole.nodes) > options.max_nodes else FEWER_BOXES)
    if extension == ".dot":
        write_chunks(out, [to_dot(whole).encode()])
    elif extension == ".svg":
        write_chunks(out, [layout([to_dot(whole)], options.timeout, fewer)[0].encode()])
    else:
        svgs = layout([to_dot(view, legend=False) for view in views], options.timeout, fewer)
        legend = [(mark, MARKS[mark][0], _text_colour(mark), MARKS[mark][1], legend_words(mark))
                  for mark in MARKS if any(mark in marks_used(view) for view in views)]
        page = to_html(list(zip(views, svgs)), path, legend, findings.results if findings else ())
        write_chunks(out, [page.encode()])
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
    _bypasses_as_boxes(picture, nodes)
    return picture


def _bypasses_as_boxes(picture: Picture, nodes: dict) -> None:
    """Each bypass drawn as one box saying what it is (its output's, named after it),
    not as the stop-gradient arithmetic (and copied surrogate graph) it is made of."""
    for output in [name for name in picture.nodes if name in nodes and BYPASS in nodes[name].attr]:
        attrs = nodes[output].attr
        group = attrs[GROUP].s
        members = {name for name in picture.nodes if name != output and name in nodes
                   and GROUP in nodes[name].attr and nodes[name].attr[GROUP].s == group}
        source = attrs[BYPASS].s.decode("utf-8", "replace")
        spec = attrs[EMBED_SPEC].s.decode("utf-8", "replace") if EMBED_SPEC in attrs else "identity"
        picture.nodes[output] = (f"bypass from {source}", "bypass", f"{output}: a bypass (BPDA): the forward "
                                 f"values of the region it ends, the gradient to {source} through {spec}")
        for name in members:
            del picture.nodes[name]
        picture.edges = {(output if a in members else a, output if b in members else b) for a, b in picture.edges}
        picture.edges = {(a, b) for a, b in picture.edges if a != b}


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
    """tf.nn.moments' StopGradient (:func:`graphgrad.graph.stops.moments_stop`), read from the file."""
    source = nodes.get(_name(node.input[0])) if node.input else None
    if source is None or not source.input:
        return False
    readers = [(other.op, [_name(ref) for ref in other.input]) for other in nodes.values()
               if node.name in map(_name, other.input)]
    return moments_stop(node.op, source.op, _name(source.input[0]), node.name, readers)


def _short(name: str, limit: int = 28) -> str:
    return name if len(name) <= limit else "..." + name[-(limit - 3):]


# Graphviz refuses a quoted string longer than 16,384 bytes; DOT joins "a" + "b" into one, so a
# long name (ids and tooltips keep it whole) is written in pieces that stay under it even escaped.
DOT_PIECE = 4000


def _quoted(text: str) -> str:
    if len(text) <= DOT_PIECE:  # nearly every name: one piece
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return " + ".join('"' + text[start:start + DOT_PIECE].replace("\\", "\\\\").replace('"', '\\"') + '"'
                      for start in range(0, max(len(text), 1), DOT_PIECE))


def _text_colour(mark: str) -> str:
    return "white" if mark and mark not in ("scope", "run", "intended") else "black"


def to_dot(view: View, legend: bool = True) -> str:
    """One picture in Graphviz's DOT language, with (``legend``) a small legend of the
    marks it uses, in one box."""
    lines = ["digraph gradient_path {", "  rankdir=TB;",
             '  node [shape=box, style="rounded,filled", fillcolor="#ffffff", fontname="Helvetica", fontsize=10];']
    for name, (top, bottom, mark, tooltip) in view.nodes.items():
        colour = MARKS[mark][0] if mark else "#ffffff"
        label = _quoted(_short(top))[:-1] + "\\n" + _quoted(_short(bottom))[1:]  # two lines: DOT's own \n
        lines.append(f"  {_quoted(name)} [label={label}, tooltip={_quoted(tooltip)}, fillcolor={_quoted(colour)}, "
                     f"fontcolor={_text_colour(mark)}, id={_quoted('node:' + name)}];")
    for index, (call, (function, names)) in enumerate(sorted(view.bodies.items())):
        lines.append(f'  subgraph cluster_body_{index} {{ label={_quoted(function + " (run by " + call + ")")}; '
                     'style="dashed"; fontname="Helvetica"; fontsize=9;')
        lines += [f"    {_quoted(name)};" for name in names]
        lines.append("  }")
    for source, target in sorted(view.edges):
        style = " [style=dashed]" if "|" in target and "|" not in source else ""
        lines.append(f"  {_quoted(source)} -> {_quoted(target)}{style};")
    used = marks_used(view)
    if legend and used:  # one small box of coloured words, each saying what it means (the whole of it on hover)
        cells = "".join(f'<TD ID="legend:{mark}" BGCOLOR="{MARKS[mark][0]}" TOOLTIP="{html.escape(MARKS[mark][1])}">'
                        f'<FONT COLOR="{_text_colour(mark)}" POINT-SIZE="8">{html.escape(legend_words(mark))}</FONT>'
                        '</TD>' for mark in used)
        lines.append(f'  "legend:" [shape=plaintext, style="", id="legend", tooltip="what the colours mean", '
                     f'label=<<TABLE BORDER="0" CELLSPACING="2" CELLPADDING="2"><TR>{cells}</TR></TABLE>>];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def marks_used(view: View) -> list:
    """The marks ``view`` draws, in the legend's order."""
    drawn = {mark for _, _, mark, _ in view.nodes.values()}
    return [mark for mark in MARKS if mark in drawn]
