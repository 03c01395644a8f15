"""Graph surgery: a gradient on one edge (insert), surrogates written into the
graph (embed), and undoing what graphgrad did (reset)."""

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from ..errors import GraphgradError, SelectionError
from ..gradients.spec import GradientSpec
from ..graph.model import Model, override_of
from ..names import ATTR, BYPASS, EMBED_SPEC, GROUP, SOURCE
from ..readings import open_reading
from ..readings.protocol import EditScope
from .embed import RESHAPING, build_embedded, surrogate_for
from .surrogate_graph import SurrogateGraph
from .tensors import dtype_attr, dtype_name, locate_tensor
from .rewrite import NodeChange, RewriteOptions, RewriteReport, refuse_misfits
from .select import op_types_needed, select_nodes
from .tensor_params import check_tensor_params, refuse_in_functions


@dataclass(frozen=True)
class InsertOptions:
    """Where to put a gradient: a tensor, optionally only some of its consumers."""

    tensor: str
    spec: GradientSpec
    consumers: tuple = ()
    embed: bool = False
    dtype: int | None = None


@dataclass(frozen=True)
class Insertion:
    graph: str
    tensor: str
    node: str
    consumers: tuple
    status: str  # "inserted" or "already"


def _spec_of_group_output(node) -> str:
    if BYPASS in node.attr:
        return _bypass_want(node.attr[BYPASS].s.decode(), node.attr[EMBED_SPEC].s.decode())
    if EMBED_SPEC in node.attr:
        return "embedded " + node.attr[EMBED_SPEC].s.decode()
    return override_of(node) or ""


def _already_there(scope: EditScope, ref: str, want: str, described: str):
    """The graphgrad node already standing in for ``ref`` with ``want``, or None
    when there is none; a different one there is an error."""
    existing = scope.stand_in(ref)
    if existing is None:
        return None
    have = _spec_of_group_output(existing)
    if have != want:
        name = scope.prefix + existing.name
        raise SelectionError(
            f"{described} already has a graphgrad node, {name} ({have}). "
            f"To change it, run graphgrad reset --node '{name}' first"
        )
    return existing


def _scopes_of(model: Model, functions: bool = True) -> list[EditScope]:
    """The lists of nodes of a loaded model, to edit in place."""
    with open_reading(model) as reading:
        return reading.scopes(functions)


def insert_gradient(model: Model, options: InsertOptions, inplace: bool = False) -> tuple[Model, list]:
    """Put ``options.spec`` on a tensor: a new Identity carrying the override (or,
    with ``embed``, the surrogate subgraph), with the tensor's consumers moved to it.

    Returns ``(model, [Insertion])``, one per graph that has the tensor.
    """
    result = model if inplace else model.copy()
    return result, insert_in(_scopes_of(result), options)


def insert_in(every_scope: list[EditScope], options: InsertOptions) -> list[Insertion]:
    """:func:`insert_gradient` on the scopes of a graph, however it is read."""
    if options.embed:
        surrogate_for(options.spec)  # refuse unembeddable specs before touching anything
    else:
        refuse_misfits([("Identity", options.spec, options.tensor)])  # what carries the gradient
    check_tensor_params(every_scope, options.spec)
    insertions = []
    for scope, ref in locate_tensor(every_scope, options.tensor):
        if scope.function is not None:
            refuse_in_functions(options.spec, options.tensor)
        want = ("embedded " + options.spec.canonical) if options.embed else options.spec.attr_value
        existing = _already_there(scope, ref, want, options.tensor)
        if existing is not None:
            insertions.append(Insertion(scope.graph, options.tensor, scope.prefix + existing.name, (), "already"))
            continue
        uses = _chosen_uses(scope, ref, options)
        producer = scope.node(scope.split_ref(ref)[0])
        dtype = options.dtype or scope.dtype_of(ref)
        if dtype is None:
            raise GraphgradError(
                f"cannot tell the dtype of {options.tensor} from {producer.name}'s attributes; give --dtype"
            )
        if options.embed:
            _refuse_tf1_loop(scope, producer, options.tensor)
            name, new_ref = build_embedded(scope, ref, ref, dtype, options.spec, producer.name, producer.device)
        else:
            name = scope.unique_name(f"{producer.name}/graphgrad", start=0)
            attrs = {"T": dtype_attr(dtype)}
            node = scope.add("Identity", name, [ref], attrs, device=producer.device)
            scope.mark(node, ATTR, options.spec.attr_value)
            scope.mark_stand_in(node, ref)
            name, new_ref = node.name, scope.output_ref(node)
        scope.reroute(uses, new_ref)
        scope.commit()
        names = tuple(scope.prefix + c if c else f"{scope.prefix}<output {k}>" for c, k in uses)
        insertions.append(Insertion(scope.graph, options.tensor, scope.prefix + name, names, "inserted"))
    return insertions


@dataclass(frozen=True)
class BypassOptions:
    """BPDA across a region: the gradient reaching ``target`` goes to ``source``
    as ``spec`` (a replacement applied to ``source``: the identity by default)."""

    source: str
    target: str
    spec: GradientSpec
    graph: SurrogateGraph | None = None  # the user's own surrogate g, instead of spec's


@dataclass(frozen=True)
class Bypass:
    graph: str
    source: str
    target: str
    node: str  # the graphgrad node that now stands in for target
    consumers: tuple
    status: str  # "bypassed" or "already"


def _bypass_want(source: str, spec: str) -> str:
    return f"bypass from {source} with {spec}"


def _surrogate_named(options: BypassOptions) -> str:
    """What a bypass records as its surrogate: the spec, or the user's graph."""
    return f"graph {options.graph.label}" if options.graph else options.spec.canonical


def bypass_region(model: Model, options: BypassOptions, inplace: bool = False) -> tuple[Model, list]:
    """Backward pass differentiable approximation (Athalye et al., 2018): the
    forward value of ``options.target`` is kept bit for bit, and the gradient that
    reaches it flows to ``options.source`` as ``options.spec`` applied to the
    source says, whatever lies between (casts to integers, Round, JPEG coding,
    PyFunc). Written as ``--embed`` writes surrogates (stop-gradient arithmetic),
    so the result needs no runtime; ``reset`` undoes it.

    Returns ``(model, [Bypass])``, one per graph that has both tensors.
    """
    result = model if inplace else model.copy()
    return result, bypass_in(_scopes_of(result), options)


def bypass_in(every_scope: list[EditScope], options: BypassOptions) -> list[Bypass]:
    """:func:`bypass_region` on the scopes of a graph, however it is read."""
    surrogate = surrogate_for(options.spec)
    if options.graph is not None and options.spec.canonical != "identity":
        raise SelectionError(f"bypass takes one surrogate: --surrogate {options.spec.canonical} or "
                             f"--surrogate-graph ({options.graph.label}), not both")
    if surrogate.replacement is None or surrogate.replacement.name == "zero":
        raise SelectionError(
            f"bypass --surrogate {options.spec.canonical}: a bypass needs a replacement applied to --from "
            "(identity, ste, approx_sign, ...), optionally followed by scale/reverse"
        )
    targets = {id(scope): ref for scope, ref in locate_tensor(every_scope, options.target)}
    bypasses = []
    for scope, source in locate_tensor(every_scope, options.source):
        if id(scope) not in targets:
            continue
        target = targets[id(scope)]
        want = _bypass_want(source, _surrogate_named(options))
        described = f"{options.target} (bypassed from {options.source})"
        existing = _already_there(scope, target, want, described)
        if existing is not None:
            bypasses.append(Bypass(scope.graph, options.source, options.target, scope.prefix + existing.name, (),
                                   "already"))
            continue
        _check_bypass(scope, source, target, options)
        producer = scope.node(scope.split_ref(target)[0])
        _refuse_tf1_loop(scope, producer, options.target)
        uses = scope.consumers(target)
        if not uses:
            raise SelectionError(f"nothing consumes {options.target}, so a bypass there would change nothing")
        if options.graph is not None and scope.function is not None:
            raise SelectionError(f"{options.target} is in the function {scope.function}: a surrogate graph is "
                                 "copied into top-level graphs only; bypass in the graph that calls it")
        name, new_ref = build_embedded(scope, source, target, scope.dtype_of(target), options.spec, producer.name,
                                       producer.device, bypass=True, graph=options.graph)
        scope.reroute(uses, new_ref)
        scope.commit()
        names = tuple(scope.prefix + c if c else f"{scope.prefix}<output {k}>" for c, k in uses)
        bypasses.append(Bypass(scope.graph, options.source, options.target, scope.prefix + name, names,
                               "bypassed"))
    if not bypasses:
        raise SelectionError(
            f"{options.source} and {options.target} are not in one graph (top level or function body): "
            "a bypass joins two tensors of the same graph"
        )
    return bypasses


def _check_bypass(scope: EditScope, source: str, target: str, options: BypassOptions) -> None:
    """One line for each way the two tensors cannot be joined."""
    if not scope.depends_on(target, source):
        raise SelectionError(
            f"--from {options.source} is not an ancestor of --to {options.target}: nothing between them to "
            "bypass. To fix this, give --from the tensor the region reads and --to the one it gives"
        )
    source_dtype, target_dtype = scope.dtype_of(source), scope.dtype_of(target)
    if source_dtype != target_dtype or source_dtype is None:
        names = {dtype: dtype_name(dtype) for dtype in (source_dtype, target_dtype)}
        raise SelectionError(
            f"--from {options.source} is {names[source_dtype]} and --to {options.target} is "
            f"{names[target_dtype]}: the gradient of --to can reach --from only between floating-point tensors "
            "of one dtype. To fix this, choose the float tensors around the region (e.g. the input before it "
            "is cast to integers, and the cast back)"
        )
    if options.graph is not None and options.graph.dtype != source_dtype:
        raise SelectionError(
            f"--surrogate-graph {options.graph.label.split(' sha256:')[0]} takes {dtype_name(options.graph.dtype)} "
            f"and --from {options.source} is {dtype_name(source_dtype)}: build g on the region's input dtype")
    source_shape, target_shape = scope.shape_of(source), scope.shape_of(target)
    mapped = options.graph.shape if options.graph else mapped_shape(options.spec, source_shape)
    if not _compatible(mapped, target_shape):
        surrogate = region_surrogate(source_shape, target_shape)
        advice = (f"--surrogate '{surrogate}' maps one onto the other (a thermometer encoding's)" if surrogate
                  else "choose tensors of one shape, or a surrogate that maps one onto the other")
        through = ("the identity" if mapped == source_shape else
                   f"{_surrogate_named(options)}, which gives {mapped},")
        raise SelectionError(
            f"--from {options.source} has shape {source_shape} and --to {options.target} {target_shape}: "
            f"{through} needs {target_shape}. To fix this, {advice}"
        )


def mapped_shape(spec: GradientSpec, shape: list | None) -> list | None:
    """The shape of h(x) that a bypass's surrogate ``spec`` gives for an x of ``shape``
    (None: unknown), reshaped to y's: a thermometer's levels side by side per channel."""
    first = spec.stages[0] if spec.stages else None
    if shape is None or first is None or first.name not in RESHAPING:
        return shape
    levels = dict(first.args)["levels"]
    return shape[:-1] + [shape[-1] * levels if shape[-1] >= 0 else -1] if shape else None


def region_surrogate(source_shape: list | None, target_shape: list | None) -> str | None:
    """The surrogate spec a bypass from ``source_shape`` to ``target_shape`` takes:
    the identity where the shapes can be equal, a thermometer where the target has
    the source's channels times a number of levels, else None (no built-in fits)."""
    if _compatible(source_shape, target_shape):
        return "identity"
    assert source_shape is not None and target_shape is not None  # _compatible: both known
    if len(source_shape) != len(target_shape) or not source_shape or not _compatible(source_shape[:-1],
                                                                                      target_shape[:-1]):
        return None
    channels, encoded = source_shape[-1], target_shape[-1]
    if channels > 0 and encoded > channels and encoded % channels == 0:
        return f"thermometer(levels={encoded // channels})"
    return None


def _compatible(a: list | None, b: list | None) -> bool:
    """Whether two static shapes (None: unknown; -1: an unknown dimension) can be equal."""
    if a is None or b is None:
        return True
    return len(a) == len(b) and all(x == y or x < 0 or y < 0 for x, y in zip(a, b))


def _chosen_uses(scope: EditScope, ref: str, options: InsertOptions):
    uses = scope.consumers(ref)
    if not uses:
        raise SelectionError(f"nothing consumes {options.tensor}, so a gradient there would change nothing")
    if not options.consumers:
        return uses
    wanted = {name.removeprefix(scope.prefix) for name in options.consumers}
    known = {consumer for consumer, _ in uses if consumer}
    unknown = sorted(wanted - known)
    if unknown:
        raise SelectionError(
            f"--consumer {', '.join(unknown)}: not a consumer of {options.tensor}; its consumers are "
            f"{', '.join(sorted(scope.prefix + name for name in known))}"
        )
    return [(consumer, position) for consumer, position in uses if consumer in wanted]


def embed_rules(model: Model, options: RewriteOptions, inplace: bool = False) -> tuple[Model, RewriteReport]:
    """Like :func:`~graphgrad.edits.apply.rewrite_model`, but writes each selected
    node's surrogate into the graph instead of an override. Returns ``(model, report)``."""
    result = model if inplace else model.copy()
    return result, embed_in(_scopes_of(result, options.functions), options)


def embed_in(every_scope: list[EditScope], options: RewriteOptions) -> RewriteReport:
    """:func:`embed_rules` on the scopes of a graph, however it is read (parsed,
    a frozen model's skeleton, or many small nodes as stored)."""
    for rule in options.rules:
        surrogate_for(rule.spec)
    op_types = op_types_needed(options.rules, options.match, options.exclude)
    candidates, found = [], {}
    for scope in every_scope:
        for ref, node in scope.candidates(op_types):
            candidates.append(ref)
            found[id(ref)] = scope, node
    all_nodes = (lambda: [ref for scope in every_scope for ref, _ in scope.candidates()]) if op_types else None
    selection = select_nodes(candidates, options.rules, options.match, options.exclude, options.allow_missing,
                             all_nodes)
    report = RewriteReport(notes=list(selection.notes))
    for ref, rule in selection.matches:
        scope, node = found[id(ref)]
        change = _embed_node(scope, node, rule.spec, ref.name)
        if change is None:
            report.notes.append(f"{ref.name}: no consumer uses its output; nothing to embed")
            continue
        old, new = change
        (report.changes if old != new else report.unchanged).add(ref.graph, ref.name, ref.op_type, old, new)
    for scope in every_scope:
        scope.commit()
    return report


def _embed_node(scope: EditScope, node, spec: GradientSpec, qualified: str):
    """Embed ``spec`` on output 0 of ``node``; returns (old, new) descriptions or None."""
    uses_by_ref = scope.uses_by_ref(node.name)
    used = sorted(uses_by_ref)
    if not used:
        return None
    if len(used) > 1 or scope.split_ref(used[0])[1] != 0:
        raise SelectionError(
            f"{qualified} ({node.op}): --embed replaces output 0, but consumers use {', '.join(used)}. "
            f"To fix this, leave {qualified} to an override (without --embed), or embed on each tensor "
            f"you mean: graphgrad insert MODEL --at {shlex.quote(used[-1])} "
            f"--grad {shlex.quote(spec.canonical)} --embed"
        )
    _refuse_tf1_loop(scope, node, qualified)
    y_ref = used[0]
    want = "embedded " + spec.canonical
    if _already_there(scope, y_ref, want, qualified) is not None:
        return want, want
    inputs = scope.data_inputs(node)
    if not inputs:
        raise SelectionError(f"{qualified} ({node.op}) has no data input for a surrogate to act on")
    if node.op == "IdentityN" and len(inputs) > 1:
        # tf.custom_gradient's IdentityN(results..., args...): only output 0 is read
        # (checked above); its argument is the x of its gradient.
        inputs = [_custom_gradient_argument(scope, inputs, qualified)]
    dtype = scope.dtype_of(y_ref)
    x_dtype = scope.dtype_of(inputs[0])
    if dtype is not None and x_dtype is not None and x_dtype != dtype and surrogate_for(spec).replacement is not None:
        raise SelectionError(f"{qualified}: its input and output dtypes differ; --embed needs them equal")
    uses = uses_by_ref[y_ref]
    _, new_ref = build_embedded(scope, inputs[0], y_ref, dtype, spec, node.name, node.device)
    scope.reroute(uses, new_ref)
    return None, want


def _custom_gradient_argument(scope: EditScope, inputs: list, described: str) -> str:
    """The argument of result 0 of a ``tf.custom_gradient`` IdentityN with ``inputs``
    (results, then arguments), the split read from the graph as the loading side
    reads it (:func:`graphgrad.gradients.common.custom_gradient_results`): results
    are computed from the arguments, never the other way round; of several splits,
    the one whose results are the arguments themselves (a forward that is the identity)."""
    count = len(inputs)

    def same(a: str, b: str) -> bool:
        return scope.canonical(a) == scope.canonical(b)

    splits = [
        split for split in range(1, count)
        if all(any(same(inputs[i], inputs[j]) or scope.depends_on(inputs[i], inputs[j]) for j in range(split, count))
               for i in range(split))
        and not any(not same(inputs[i], inputs[j]) and scope.depends_on(inputs[j], inputs[i])
                    for i in range(split) for j in range(split, count))
    ]
    identity = [split for split in splits
                if 2 * split <= count and all(same(inputs[i], inputs[split + i]) for i in range(split))]
    chosen = splits if len(splits) == 1 else identity
    if len(chosen) != 1:
        raise SelectionError(
            f"{described} (IdentityN): its results cannot be told from its arguments ({len(splits)} splits of its "
            f"{count} inputs fit the graph), so --embed does not know which input its gradient goes to. To fix "
            "this, leave it to an override (without --embed)"
        )
    return inputs[chosen[0]]


def _refuse_tf1_loop(scope: EditScope, node, described: str) -> None:
    if scope.in_tf1_loop(node.name):
        raise SelectionError(
            f"{described} ({node.op}) is inside a TF1 while loop, whose gradient TensorFlow builds in the "
            "loop's own frame, where an embedded surrogate's nodes cannot be read. To fix this, leave it to an "
            "override (without --embed) and load with graphgrad.import_graph_def or register_gradients"
        )


@dataclass(frozen=True)
class ResetOptions:
    """Which nodes to reset: by op type and/or name glob; nothing given means all."""

    op_types: tuple = ()
    globs: tuple = ()
    functions: bool = True


def reset_selects(options: ResetOptions) -> Callable[[str, str], bool]:
    """``selects(name, op type)``: whether ``options`` reset that node (a function
    body's node is named ``function/node``)."""
    if not options.op_types and not options.globs:
        return lambda name, op_type: True
    return lambda name, op_type: op_type in options.op_types or any(fnmatchcase(name, g) for g in options.globs)


@dataclass
class ResetReport:
    overrides: list = field(default_factory=list)  # NodeChange, new None
    undone: list = field(default_factory=list)  # (graph, node that stood in, tensor restored)

    @property
    def changed(self) -> bool:
        return bool(self.overrides or self.undone)


def reset_model(model: Model, options: ResetOptions, inplace: bool = False) -> tuple[Model, "ResetReport"]:
    """Remove overrides and undo graphgrad's inserted and embedded nodes.

    Returns ``(model, ResetReport)``; ``reset`` after ``rewrite``/``insert``/``--embed``
    on a graph that had no overrides gives back the original message.
    """
    result = model if inplace else model.copy()
    return result, reset_in(_scopes_of(result, options.functions), options)


def reset_in(every_scope: list[EditScope], options: ResetOptions) -> ResetReport:
    """:func:`reset_model` on the scopes of a graph, however it is read (parsed,
    a frozen model's skeleton, or many small nodes as stored)."""
    selects = reset_selects(options)
    report = ResetReport()
    for scope in every_scope:
        groups = set()
        for output in reversed(scope.marked(SOURCE)):
            source = output.attr[SOURCE].s.decode()
            producer = scope.node(scope.split_ref(source)[0])
            if not (selects(scope.prefix + output.name, output.op)
                    or (producer is not None and selects(scope.prefix + producer.name, producer.op))):
                continue
            groups.add(output.attr[GROUP].s)
            scope.reroute(scope.consumers(scope.output_ref(output)), source)
            report.undone.append((scope.graph, scope.prefix + output.name, source))
        if groups:
            scope.remove({node.name for node in scope.marked(GROUP) if node.attr[GROUP].s in groups})
        for ref, node in scope.overriding():
            if selects(scope.prefix + node.name, node.op):
                report.overrides.append(NodeChange(scope.graph, scope.prefix + node.name, node.op, ref.override, None))
                ref.set_override(None)
        scope.commit()
    return report
