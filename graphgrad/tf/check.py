"""graphgrad check: compute dy/dx of a graph file with TensorFlow and explain it.

For each x: connected or not; gradient None, all zero, finite, or NaN/Inf, and
its norm. Along the paths from x to y: the gradient blockers (ops whose
TensorFlow gradient is zero or None, unregistered ones, StopGradient, PyFunc
without an override, integer or bool edges, dangling overrides), each with a
ready ``graphgrad rewrite`` fix; and overrides that cannot take effect. Where
the graph carries graphgrad overrides, the gradients without them too. A y that
is a softmax, differentiated whole (its entries sum to 1), is caught: one class
of it (``target``) or its logits have a gradient, its sum has none.

TensorFlow is imported inside functions only, as in the runtime.
"""

import json
import math
import os
import re
import shlex
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, NamedTuple

from ..edits.embed import surrogate_for
from ..edits.nodes import EMBED_SPEC, GROUP, SOURCE, rename_functions
from ..edits.summary import bodies_of, graph_ends
from ..edits.surgery import ResetOptions, reset_model
from ..edits.traps import SIGN, graphgrad_spec, scopes_of, sign_notes
from ..errors import GraphgradError, UnresolvedGradientsError, UsageError
from ..files.arrays import load_array
from ..files.io import kind_of_file, read_model
from ..gradients.calls import CALL_GRADIENT
from ..gradients.spec import parse_spec
from ..graph.functions import call_cycle, first_names, function_bodies, function_calls, functions_run
from ..graph.hints import close_names
from ..graph.tensors import placeholder_shape, shape_mismatch, unknown_tensor
from ..graph.model import GRAPHDEF, KIND_NAMES, METAGRAPH, SAVEDMODEL, Model, override_of, signatures_of
from ..names import ATTR, CALL_OPS, CUSTOM_GRADIENT, FUNCTIONAL_OPS, NAMESPACE, VALUE_INDEPENDENT
from .effects import effects_in
from .variables import graph_variables, initializers_of, restore_variables
from .internals import (
    function_def_to_graph,
    gradient_registry,
    registered_gradient,
    saved_model_init_op,
    saved_model_loader_class,
)
from .runtime import (
    holds_tf1_loops,
    import_tf1_loops,
    is_registered,
    overrides_in,
    register_gradients,
    route_calls_in,
    tensorflow,
    tf1_control_flow,
)

# Ops whose registered TensorFlow gradient returns None or zeros (math_grad.py,
# array_grad.py); a registry lookup cannot tell these from real gradients.
NONE_GRADIENT = {"Round", "Floor", "Ceil", "Rint", "FloorDiv", "FloorMod", "ArgMax", "ArgMin", "TruncateDiv"}
ZERO_GRADIENT = {"Sign"}
STOPPERS = {"StopGradient", "PreventGradient"}
DEFAULT_TIMEOUT = 300.0  # seconds a run may take: a real model's gradient takes seconds
QUANTIZERS = {"Sign", "Round", "Floor", "Ceil", "Rint"}


class CheckUsageError(UsageError):
    """A tensor, feed or tag set given on the command line does not fit the model (a usage error)."""


@dataclass(frozen=True)
class Blocker:
    node: str
    op_type: str
    reason: str
    fix: str


@dataclass
class Gradient:
    """dy/dx for one x: ``status`` is none, zero, finite, nan or error."""

    x: str
    connected: bool
    status: str
    norm: float | None = None
    error: str | None = None
    why: str | None = None  # why a gradient that ran is not usable (an empty y)


@dataclass(frozen=True)
class SummedSoftmax:
    """y passes on the ``softmax`` op's output unchanged: d sum(y)/dx is zero up to
    rounding, whatever the graph. ``logits``: the softmax's input tensor."""

    softmax: str
    logits: str

    def describe(self) -> str:
        """What is wrong and the fix, as check and attribute say it."""
        return (f"y is the softmax {self.softmax}: its entries sum to 1, so the gradient of their sum (what "
                "tf.gradients computes) is zero up to rounding\n"
                "  fix: choose one class, --target INDEX, or differentiate the logits, "
                f"--y {self.logits.removesuffix(':0')}")


@dataclass
class CheckReport:
    model: str
    y: str
    target: int | None = None  # differentiate y[..., target] instead of sum(y)
    tags: str = ""  # the MetaGraphDef's tag set, for a SavedModel
    gradients: list = field(default_factory=list)
    blockers: list = field(default_factory=list)
    idle_overrides: list = field(default_factory=list)  # (node, value)
    embedded: list = field(default_factory=list)  # (node, spec): --embed surrogates on the path
    routed_calls: list = field(default_factory=list)  # call ops differentiated through their bodies (``call``)
    without_overrides: list = field(default_factory=list)  # Gradient, when the graph has overrides
    feeds: dict = field(default_factory=dict)  # placeholder -> "given" / "random <dtype> <shape>"
    defaults: list = field(default_factory=list)  # PlaceholderWithDefault inputs left at their defaults
    intended_stops: list = field(default_factory=list)  # StopGradients a library puts there on purpose
    shape_only: list = field(default_factory=list)  # ops that read x's shape, not its values: None is right
    variables: str = ""  # of a MetaGraphDef: restored from which checkpoint, or initialised
    y_name: str = ""  # y's name in the model's signature, if it has one
    guessed_shapes: dict = field(default_factory=dict)  # placeholder -> the shape chosen for its unknown dimensions
    summed_softmax: SummedSoftmax | None = None  # y is a softmax, differentiated whole
    notes: list = field(default_factory=list)  # patterns that make an override do what was not meant

    @property
    def ok(self) -> bool:
        return self.summed_softmax is None and all(g.status == "finite" for g in self.gradients)


@dataclass
class Run:
    """A model loaded to run in graph mode (what ``check`` and ``attribute`` share):
    the file, the MetaGraphDef chosen, the tf.Graph and Session, and x and y."""

    model: Model
    tags: list | None
    checkpoint: str | None
    graph: Any
    session: Any
    unresolved: set
    routed: list
    y: str = ""
    y_name: str = ""  # y's name in the model's signatures, if it has one
    y_tensor: Any = None
    xs: list = field(default_factory=list)
    x_tensors: list = field(default_factory=list)
    moved: dict = field(default_factory=dict)  # x or y -> the graphgrad node's output that stands in for it

    def moved_notes(self) -> list[str]:
        """One line for each x or y taken at the node that stands in for it."""
        return [f"{tensor} has a gradient written into the graph (--embed or insert) at {stand_in}, which its "
                f"consumers read: differentiated there, as an override on its node would apply at {tensor}"
                for tensor, stand_in in self.moved.items()]


def prepare_run(model: Model, xs: Sequence[str], y: str | None, tags: str | None, checkpoint: str | None,
                allow_effects: bool, command: str = "check", feeds: dict | None = None,
                fed_are_not_x: bool = False) -> Run:
    """Load ``model`` and find x and y as ``check`` does (signature names taken;
    without y, the one floating-point output; without xs, the floating-point
    placeholders y depends on, but those given in ``feeds`` if ``fed_are_not_x``),
    refusing ops with effects outside the graph on the path unless
    ``allow_effects``. Names and ``feeds`` (name -> value text) that do not fit the
    file are refused before TensorFlow is imported."""
    chosen = chosen_tags(model, tags)
    feeds = feeds or {}
    cycle = call_cycle(function_bodies(_graph_def(model, chosen)))
    if cycle:
        raise GraphgradError(
            f"{model.path}: its functions call themselves ({' -> '.join(cycle)}), which TensorFlow cannot import "
            "(it recurses until the process crashes); no model TensorFlow wrote holds such a library"
        )
    refuse_unknown_names(model, chosen, xs, y, feeds)
    refuse_misshapen_feeds(model, chosen, {name: _value(text) for name, text in feeds.items()})
    prefix = checkpoint or _checkpoint_beside(model)
    if prefix:
        _refuse_irregular_checkpoint(prefix)
    if model.kind == SAVEDMODEL and model.root:
        _refuse_irregular_checkpoint(os.path.join(model.root, "variables", "variables"))
    graph, session, unresolved, routed = _load(model, chosen, prefix, allow_effects, command)
    named = _signature_names(model, chosen)  # signature input and output names, to their tensors
    run = Run(model, chosen, prefix, graph, session, unresolved, routed)
    run.y = named.get(y, y) if y else _only_output(graph, model, chosen)
    run.y_name = next((name for name, tensor in named.items() if _same_tensor(tensor, run.y)), "")
    stand_ins = _stand_ins(graph)
    with graph.as_default():
        run.y_tensor = _stood_in(run, _tensor(graph, run.y), stand_ins)
        if not _floating(run.y_tensor.dtype):
            raise CheckUsageError(
                f"--y {run.y} is {run.y_tensor.dtype.name}: {command} differentiates a floating-point tensor"
                + _signatures(model, chosen)
            )
        given = {name.removesuffix(":0") for name in feeds} if fed_are_not_x else set()
        run.xs = [named.get(x, x) for x in xs] or [x for x in _float_placeholders(run.y_tensor) if x not in given]
        run.x_tensors = [_stood_in(run, _tensor(graph, x), stand_ins) for x in run.xs]
        # what runs: y's ancestors, cut where x and the --feed tensors are fed
        fed = set(run.x_tensors) | {_tensor(graph, name) for name in feeds}
        effects = effects_in([op.node_def for op in _ancestors([run.y_tensor], fed=fed)],
                             function_bodies(_graph_def(model, chosen)))
    if effects and not allow_effects:
        raise GraphgradError(
            f"{model.path}: {command} runs the graph, and {len(effects)} op(s) on the path act outside it "
            f"({first_names(sorted(effects))}); to run it anyway, add --allow-effects"
        )
    return run


def refuse_unknown_names(model: Model, tags: list | None, xs: Sequence[str], y: str | None,
                         fed: Iterable[str] = ()) -> None:
    """Refuse, from the file alone (before TensorFlow is imported), an ``--x``,
    ``--y`` or ``--feed`` name that names no tensor of the graph to load; signature
    names count as the tensors they stand for."""
    named = _signature_names(model, tags)
    nodes = {node.name: node for node in _graph_def(model, tags).node}
    asked: list[tuple[str, str]] = [("--y", y)] if y else []
    asked += [("--x", x) for x in xs] + [("--feed", name) for name in fed]
    for option, name in asked:
        wrong = unknown_tensor(nodes, named.get(name, name))
        if wrong:
            raise CheckUsageError(f"{option} {name}: {wrong}")


def refuse_misshapen_feeds(model: Model, tags: list | None, values: dict, option: str = "--feed") -> None:
    """Refuse a feed (name -> array) whose shape the placeholder it feeds does not
    take, naming the shape it wants (from the file, before anything runs);
    ``option`` names where the array came from."""
    named = _signature_names(model, tags)
    nodes = {node.name: node for node in _graph_def(model, tags).node}
    for name, value in values.items():
        node = nodes.get(named.get(name, name).removesuffix(":0"))
        wanted = placeholder_shape(node) if node is not None else None
        if node is not None and wanted is not None and shape_mismatch(wanted, value.shape):
            given = f"{option} {name}" if option == "--feed" else option
            raise CheckUsageError(f"{given} has shape {list(value.shape)}, and {node.name} takes "
                                  f"{wanted} (None: any size)")


def _stand_ins(graph) -> dict:
    """``{tensor name: the tensor of the graphgrad node that stands in for it}``: an
    ``--embed`` surrogate or an inserted gradient, which the tensor's consumers read."""
    found = {}
    for op in graph.get_operations():
        if SOURCE in op.node_def.attr:
            ref = op.node_def.attr[SOURCE].s.decode()
            found[ref if ":" in ref else ref + ":0"] = op.outputs[0]
    return found


def _stood_in(run: Run, tensor, stand_ins: dict):
    """``tensor``, or the graphgrad node's output that stands in for it: its gradient
    (embedded or inserted) applies there, as an override on its node would apply
    at the tensor itself; ``run.moved`` records the move."""
    stand_in = stand_ins.get(tensor.name)
    if stand_in is None:
        return tensor
    run.moved[tensor.name] = stand_in.name
    return stand_in


def tensor_entry(y: Any, target: int | None) -> Any:
    """``y[..., target]``, or y itself when there is no target (a usage error names
    the entries there are)."""
    return _entry(y, target)


def ops_between(xs: Sequence, y: Any) -> set:
    """The ops on a path from some tensor of ``xs`` to ``y`` (any dtype)."""
    return _between(xs, y, only_differentiable=False)


def check_model(path: str, xs: Sequence[str] = (), y: str | None = None, feeds: dict | None = None, batch: int = 1,
                seed: int = 0, kind: str | None = None,
                tags: str | None = None, target: int | None = None, allow_effects: bool = False,
                checkpoint: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                shapes: dict | None = None) -> CheckReport:
    """Check the gradients dy/dx of the model at ``path`` (see the module doc).
    ``tags`` ("serve", "serve,gpu") chooses the MetaGraphDef of a SavedModel that
    holds several. ``target`` differentiates ``y[..., target]`` (one class of a
    classifier's output) instead of the sum of y's entries, as tf.gradients does.
    Without ``y``: the model's one floating-point output (see :func:`_only_output`);
    without ``xs``: the floating-point placeholders y depends on. It runs the
    graph: ops on the path whose effects reach outside it (see
    :mod:`graphgrad.tf.effects`) are refused, naming them, unless ``allow_effects``.
    A MetaGraphDef's variables are restored from ``checkpoint`` (a prefix), else
    from the checkpoint beside the file (``model.ckpt-N.meta``: ``model.ckpt-N``),
    else initialised as the graph says; ``variables`` in the report says which.
    A run that takes over ``timeout`` seconds is stopped and reported. ``shapes``
    (placeholder name -> dimensions) sets the shape of random feeds."""
    model = read_model(path, kind)
    run = prepare_run(model, xs, y, tags, checkpoint, allow_effects, feeds=feeds)
    chosen, prefix, graph, session, unresolved, routed = (run.tags, run.checkpoint, run.graph, run.session,
                                                          run.unresolved, run.routed)
    y, xs, y_tensor, x_tensors = run.y, run.xs, run.y_tensor, run.x_tensors
    report = CheckReport(model=path, y=y, target=target, tags=",".join(chosen or ()), y_name=run.y_name)
    if (model.kind == METAGRAPH and graph.get_collection("variables")) or (
            model.kind == GRAPHDEF and graph_variables(graph)):
        report.variables = f"restored from {prefix}" if prefix else "initialised by their initializers (no checkpoint)"
    report.routed_calls = list(routed[0])  # the ones that make overrides apply
    # What the file holds: tf.gradients adds ops, copies of routed call bodies among them.
    loaded = [op for op in graph.get_operations() if op.name not in routed[0] + routed[1]]
    with graph.as_default():
        feed = _feeds(graph, y_tensor, x_tensors, feeds or {}, batch, seed, report, shapes)
        refuse_unfed_pipelines([y_tensor] + x_tensors, feed)
        differentiated = _entry(y_tensor, target)
        for name, x in zip(xs, x_tensors):
            unknown = {op: graph.get_tensor_by_name(f"{op}:0").shape.as_list() for op in report.guessed_shapes}
            report.gradients.append(_with_shape_hint(_gradient(session, name, x, differentiated, feed, timeout),
                                                     report.guessed_shapes, unknown))
        if target is None:
            report.summed_softmax = summed_softmax(y_tensor)
        float_path = _between(x_tensors, y_tensor, only_differentiable=True)
        surrogates = _surrogates(graph)
        context = _Context(unresolved, path, _graph_def(model, chosen))
        report.blockers = _blockers(x_tensors, y_tensor, float_path, surrogates, context)
        report.intended_stops, report.shape_only = context.intended_stops, context.shape_only
        on_path = [surrogates[op.name] for op in float_path if op.name in surrogates]
        report.embedded = sorted((surrogate.source, surrogate.spec) for surrogate in on_path)
        report.idle_overrides = _idle_overrides(loaded, float_path)
    report.notes = run.moved_notes() + trap_notes(_graph_def(model, chosen))
    if any(value.startswith(NAMESPACE) for value in overrides_in(model)):  # function bodies too
        plain, _ = reset_model(model, ResetOptions())
        # TensorFlow keeps the functions cond_v2 builds for gradients process-wide, by
        # branch name: the plain graph's branches, if an edit changed them, would clash.
        rename_functions(plain, "_graphgrad_plain")
        plain_graph, plain_session, _, _ = _load(plain, chosen, prefix, allow_effects)
        with plain_graph.as_default():
            back = {stand_in: tensor for tensor, stand_in in run.moved.items()}
            plain_feed = {_tensor(plain_graph, back.get(t.name, t.name)): v for t, v in feed.items()}
            plain_y = _entry(_tensor(plain_graph, y), target)
            report.without_overrides = [
                _gradient(plain_session, name, _tensor(plain_graph, name), plain_y, plain_feed, timeout) for name in xs
            ]
    return report


def trap_notes(graph_def: Any) -> list[str]:
    """:func:`graphgrad.edits.traps.shifted_sign_notes` for the overrides a GraphDef holds,
    at the top level and in function bodies."""
    notes = []
    for prefix, nodes in scopes_of(graph_def):
        overrides = {node.name: override_of(node) for node in nodes if node.op == SIGN}
        notes += sign_notes(nodes, lambda name: graphgrad_spec(overrides[name]), prefix)
    return notes


DEFAULTED = "PlaceholderWithDefault"
IMAGE_SIDE = 224  # unknown height and width of an image input: the size most image models take

# The most a random feed may take: a placeholder [40000, 40000] or --batch 10**12 is
# a mistake to say, not a MemoryError to raise.
FEED_LIMIT = 1 << 30

SERVING_DEFAULT = "serving_default"  # tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY
LISTED_OUTPUTS = 5  # a learner graph has hundreds of unread float tensors


def _only_output(graph, model: Model, tags: list | None) -> str:
    """The model's one floating-point output, for a check without ``--y``: among the
    outputs of its ``serving_default`` signature, else of all its signatures, else of
    the nodes no node reads (as ``graphgrad ops`` lists them)."""
    meta = _chosen_meta_graph(model, tags)
    signatures = signatures_of(meta) if meta else []
    serving = [signature for signature in signatures if signature[0] == SERVING_DEFAULT]
    signed = [tensor for _, _, outputs in serving or signatures for _, tensor in outputs]
    if signed:
        candidates = [_tensor(graph, tensor) for tensor in signed]
    else:
        _, ends = graph_ends(bodies_of(_graph_def(model, tags), functions=False)[0])
        candidates = [tensor for node, _ in ends for tensor in graph.get_operation_by_name(node).outputs]
    floating = list(dict.fromkeys(t.name.removesuffix(":0") for t in candidates if _floating(t.dtype)))
    if len(floating) != 1:
        listed = f": {first_names(floating, LISTED_OUTPUTS)}" if floating else ""
        every = f"; to list them all: graphgrad ops {model.path} --json" if len(floating) > LISTED_OUTPUTS else ""
        raise CheckUsageError(f"name the tensor to differentiate with --y; the model has {len(floating)} "
                              f"floating-point outputs{listed}{every}")
    return floating[0]


def _float_placeholders(y) -> list[str]:
    """The floating-point placeholders ``y`` depends on, in graph order, for a check
    without ``--x``."""
    ancestors = _ancestors([y])
    found = [op.name for op in y.graph.get_operations()
             if op.type == "Placeholder" and op in ancestors and _floating(op.outputs[0].dtype)]
    if not found:
        pipeline = _pipeline_outputs(ancestors)
        if pipeline:
            raise CheckUsageError(
                f"{y.name} reads its input from {_pipeline_phrase(pipeline)}; name x and feed it, e.g. "
                f"--x {pipeline[0]} --feed {pipeline[0]}=FILE.npy"
            )
        raise CheckUsageError(f"{y.name} depends on no floating-point placeholder; name x with --x")
    return found


# Ops that hand out what an input pipeline produced: nothing fills a queue or an
# iterator when check runs the graph, so a run that reaches one waits forever.
_PIPELINE = re.compile(r"(QueueDequeue\w*|IteratorGetNext\w*|ReaderRead\w*|Unstage|StagePeek|MapUnstage\w*|"
                       r"OrderedMapUnstage\w*|MapPeek|OrderedMapPeek)\Z")


def _pipeline_outputs(ops) -> list[str]:
    """The floating-point outputs of the queue and iterator ops among ``ops``."""
    return [t.name for op in sorted(ops, key=lambda op: op.name) if _PIPELINE.match(op.type)
            for t in op.outputs if _floating(t.dtype)]


def _pipeline_phrase(outputs: list) -> str:
    return f"an input pipeline (a queue or an iterator, which nothing fills here: {first_names(outputs)})"


def refuse_unfed_pipelines(fetched: Iterable, feed: Iterable) -> None:
    """Refuse a run that would wait forever on a queue or an iterator: one among
    what ``fetched`` computes, upstream of no fed tensor."""
    fed = {tensor.op for tensor in feed}
    seen, stack = set(), [t.op for t in fetched]
    while stack:
        op = stack.pop()
        if op in seen or op in fed:
            continue
        seen.add(op)
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    waiting = [op.name for op in seen if _PIPELINE.match(op.type)]
    if waiting:
        outputs = _pipeline_outputs(op for op in seen if _PIPELINE.match(op.type))
        example = outputs[0] if outputs else f"{sorted(waiting)[0]}:0"
        raise CheckUsageError(
            f"the run would wait on {_pipeline_phrase(outputs or sorted(waiting))}; feed what it hands out, "
            f"e.g. --feed {example}=FILE.npy"
        )


def chosen_tags(model: Model, tags: str | None) -> list | None:
    """The tags of the MetaGraphDef to load: the SavedModel's only one, or the one
    whose tag set is ``tags``; None for other kinds."""
    if model.kind != SAVEDMODEL:
        if tags is not None:
            raise CheckUsageError(
                f"--tag chooses a MetaGraphDef of a SavedModel; {model.path} is a {KIND_NAMES[model.kind]}"
            )
        return None
    available = [list(meta.meta_info_def.tags) for meta in model.message.meta_graphs]
    listed = "; ".join(",".join(tag_set) for tag_set in available)
    if tags is None:
        if len(available) == 1:
            return available[0]
        raise CheckUsageError(
            f"{model.path} holds {len(available)} MetaGraphDefs (tag sets: {listed}). "
            f"To fix this, choose one with --tag, e.g. --tag {','.join(available[0])}"
        )
    wanted = {tag.strip() for tag in tags.split(",") if tag.strip()}
    for tag_set in available:
        if set(tag_set) == wanted:
            return tag_set
    raise CheckUsageError(f"no MetaGraphDef of {model.path} has the tag set {tags!r}; its tag sets: {listed}")


def _refuse_irregular_checkpoint(prefix: str) -> None:
    """Refuse a checkpoint whose index or data shards are not regular files (a FIFO
    would block the restore forever), before TensorFlow opens them."""
    import glob

    for path in [prefix + ".index"] + glob.glob(glob.escape(prefix) + ".data-*"):
        try:
            what = kind_of_file(os.stat(path).st_mode)
        except OSError:
            continue
        if what:
            raise GraphgradError(f"checkpoint file {path} is {what}, not a regular file: restoring from it could "
                                 "wait forever; give a checkpoint of regular files")


def _checkpoint_beside(model: Model) -> str | None:
    """The checkpoint prefix a ``.meta`` file was written with (``PREFIX.meta``
    beside ``PREFIX.index``), or None."""
    if model.kind != METAGRAPH or not model.path.endswith(".meta"):
        return None
    prefix = model.path[: -len(".meta")]
    return prefix if os.path.isfile(prefix + ".index") else None


@dataclass
class _LoadEffects:
    """The refusal of ops with effects outside the graph among what loading runs
    (initializers, the restore op, a SavedModel's init op, their inputs), before
    any of it runs; ``--allow-effects`` (``allowed``) lets them run."""

    path: str
    command: str
    allowed: bool
    graph_def: Any

    def refuse_what_loading_runs(self, ops: Sequence, restores: Iterable = ()) -> None:
        """Refuse ``ops`` if any of them, or what they are computed from, acts outside
        the graph; ``restores``: the restore ops that read the checkpoint being loaded."""
        if self.allowed or not ops:
            return
        restores = set(restores)
        reached = [op.node_def for op in _ancestors_of_ops(ops) if op not in restores]
        bodies = function_bodies(self.graph_def)
        # TF2's saver restores in a function it calls with the file name: its reads are the restore
        calls = {op for op in restores if op.type in CALL_OPS}
        reading = functions_run([op.node_def for op in calls], bodies)
        found = [effect for effect in effects_in(reached, bodies)
                 if not (effect.split("/")[0] in reading and effect.endswith(_RESTORE_SUFFIXES))]
        if found:
            raise GraphgradError(
                f"{self.path}: loading it would run {len(found)} op(s) that act outside the graph "
                f"({first_names(sorted(found))}) as its initializers, restore or init ops, before {self.command} "
                "computes anything; to run them anyway, add --allow-effects"
            )


def _restore_op(graph, saver) -> list:
    """The op a Saver runs to restore, in ``graph``."""
    return [graph.get_operation_by_name(saver.saver_def.restore_op_name)] if saver is not None else []


_RESTORES = ("RestoreV2", "Restore", "RestoreSlice")
_RESTORE_SUFFIXES = tuple(f" ({op_type})" for op_type in _RESTORES)


def _restores_of(graph, saver) -> set:
    """The checkpoint reads of ``saver``'s restore: those whose file name is the one
    the saver feeds (the checkpoint being loaded), and no other file; and TF2's
    restore, a call op that takes that file name first (the variables after it)."""
    if saver is None:
        return set()
    filename = saver.saver_def.filename_tensor_name
    reads = {op for op in graph.get_operations()
             if op.type in _RESTORES and op.inputs and op.inputs[0].name == filename}
    restore = graph.get_operation_by_name(saver.saver_def.restore_op_name)
    if restore.type in CALL_OPS and restore.inputs and restore.inputs[0].name == filename:
        reads.add(restore)
    return reads


def _load_graph_variables(tf, session, model: Model, checkpoint: str | None, effects: "_LoadEffects") -> None:
    """Give the variables of a bare GraphDef values: from ``checkpoint`` by name, else
    by the initializers the graph holds for them (scanned for effects first)."""
    variables = graph_variables(session.graph)
    if checkpoint:
        if not variables:
            raise GraphgradError(f"{model.path} has no variables to restore from {checkpoint}")
        restore_variables(tf, session, variables, checkpoint)
    elif variables:
        initializers = initializers_of(variables)
        effects.refuse_what_loading_runs(initializers)
        if initializers:
            session.run(initializers)


def _load(model: Model, tags: list | None, checkpoint: str | None = None, allow_effects: bool = False,
          command: str = "check"):
    """A tf.Graph and Session with the model in it (for a SavedModel, the
    MetaGraphDef with ``tags``); unresolved override names; the call ops routed
    through the ``call`` gradient, those into functions that hold overrides first
    (a list of two)."""
    tf = tensorflow()
    graph = tf.Graph()
    unresolved = set()
    effects = _LoadEffects(model.path, command, allow_effects, _graph_def(model, tags))
    # Marked before the graph is built, calls inside branch functions are routed too.
    # The other calls too: graph mode cannot differentiate some at all (nested Keras calls).
    routed = [route_calls_in(_graph_def(model, tags)), route_calls_in(_graph_def(model, tags), all_calls=True)]
    try:
        register_gradients(model)
    except UnresolvedGradientsError:
        unresolved = {value for value in overrides_in(model) if not is_registered(value)}
    session = tf.compat.v1.Session(graph=graph)
    with graph.as_default():
        try:
            # Devices are cleared, as import_meta_graph(clear_devices=True) does: a graph
            # written for a cluster (/job:learner/...) names devices this process has not.
            # Nothing runs until what loading runs has been scanned for effects.
            if model.kind == GRAPHDEF:
                graph_def = _tf_message(tf.compat.v1.GraphDef, model.message)
                for node in graph_def.node:
                    node.device = ""
                import_tf1_loops(tf, graph_def, name="")
                _load_graph_variables(tf, session, model, checkpoint, effects)
            elif model.kind == METAGRAPH:
                saver = _import_meta_graph(tf, _tf_message(tf.compat.v1.MetaGraphDef, model.message))
                if checkpoint and saver is None:
                    raise GraphgradError(f"{model.path} has no variables to restore from {checkpoint}")
                initializers = [variable.initializer for variable in graph.get_collection("variables")]
                restore = _restore_op(graph, saver) if checkpoint else []
                effects.refuse_what_loading_runs(initializers + restore, _restores_of(graph, saver))
                session.run(initializers)
                if checkpoint:
                    saver.restore(session, checkpoint)
            else:
                _load_saved_model(tf, session, model, tags, effects)
        except (ValueError, tf.errors.OpError) as error:
            raise GraphgradError(f"TensorFlow cannot load {model.path}: {tensorflow_says(error)}") from None
    return graph, session, unresolved, routed


# Lines of TensorFlow's errors that say where, not what: its own header, and the
# Python stack of the op's definition it embeds.
_TF_NOISE = re.compile(r"(Graph execution error:|Detected at node .* defined at|File \"|\[\[|Traceback|Original stack)")


# Messages that quote the values they failed on (an Assert's data, a string that did
# not parse): cut where the values start, since they may be a file's bytes.
_QUOTED_VALUES = re.compile(r"(assertion failed:|could not (?:correctly )?convert string|"
                            r"StringToNumberOp could not)(.*)", re.IGNORECASE)


def tensorflow_says(error: Exception, limit: int = 400) -> str:
    """TensorFlow's reason for ``error`` in one line: the node and what is wrong,
    without the header and the stack it embeds ("Graph execution error:" alone
    says nothing), and without the tensor values some messages quote."""
    text = (getattr(error, "message", None) or str(error)).strip()
    lines = [line.strip() for line in text.splitlines()]
    # The first sentence of each line: the rest is TensorFlow's general advice.
    kept = [_QUOTED_VALUES.sub(r"\1 [values not shown]", line.split(". ")[0])
            for line in lines if line and not _TF_NOISE.match(line)]
    said = "; ".join(kept) or (lines[0] if lines else type(error).__name__)
    return said if len(said) <= limit else said[:limit - 3] + "..."


def _import_meta_graph(tf, meta_graph_def):
    """``import_meta_graph`` with devices cleared; the ``_output_shapes`` hints old TF1
    checkpoints carry dropped when TensorFlow refuses them as stale. Returns the saver."""
    try:
        return tf.compat.v1.train.import_meta_graph(meta_graph_def, clear_devices=True)
    except ValueError as error:
        if "_output_shapes" not in str(error):
            raise
    for node in meta_graph_def.graph_def.node:  # TensorFlow refused the graph whole: nothing was added
        node.attr.pop("_output_shapes", None)
    return tf.compat.v1.train.import_meta_graph(meta_graph_def, clear_devices=True)


def _load_saved_model(tf, session, model: Model, tags: list | None, effects: _LoadEffects) -> None:
    """TensorFlow's TF1 loader (variables, assets, init ops) on the MetaGraphDef
    with ``tags`` as ``model`` holds it in memory, which need not be the file's:
    the comparison without overrides loads the reset graph beside the files. Its
    steps one by one (as ``SavedModelLoader.load`` takes them), so that the restore
    and the init op are scanned for effects before either runs."""
    meta_graph_def = _tf_message(tf.compat.v1.MetaGraphDef, _meta_graph(model, tags))

    class InMemoryLoader(saved_model_loader_class()):  # type: ignore[misc]  # TensorFlow's class, found at run time
        def get_meta_graph_def_from_tags(self, _tags):
            return meta_graph_def

    loader = InMemoryLoader(model.root)
    saver, _ = loader.load_graph(session.graph, tags, clear_devices=True)
    init_op = saved_model_init_op(meta_graph_def)
    init = [init_op if hasattr(init_op, "type") else init_op.op] if init_op is not None else []
    # the model's own files: its checkpoint, and the vocabularies it ships as assets
    assets = _asset_tensors(meta_graph_def)
    own = _restores_of(session.graph, saver) | {
        op for op in session.graph.get_operations()
        if op.type.startswith("InitializeTableFromTextFile") and op.inputs[1].name in assets}
    effects.refuse_what_loading_runs(_restore_op(session.graph, saver) + init, own)
    loader.restore_variables(session, saver)
    loader.run_init_ops(session, tags)


def _asset_tensors(meta_graph_def) -> set:
    """The tensors a SavedModel's loader feeds with the paths of its own asset files:
    its ``asset_file_def``, and the ``saved_model_assets`` collection TF1's builder writes."""
    from tensorflow.core.protobuf.meta_graph_pb2 import AssetFileDef

    assets = {asset.tensor_info.name for asset in meta_graph_def.asset_file_def}
    collection = meta_graph_def.collection_def.get("saved_model_assets")
    for packed in collection.any_list.value if collection is not None else []:
        assets.add(AssetFileDef.FromString(packed.value).tensor_info.name)
    return assets


def _meta_graph(model: Model, tags: list | None):
    """The MetaGraphDef of a SavedModel with ``tags``."""
    [meta] = [meta for meta in model.message.meta_graphs if list(meta.meta_info_def.tags) == tags]
    return meta


def _chosen_meta_graph(model: Model, tags: list | None):
    """The MetaGraphDef that :func:`_load` loads; None for a GraphDef."""
    if model.kind == GRAPHDEF:
        return None
    return model.message if model.kind == METAGRAPH else _meta_graph(model, tags)


def _graph_def(model: Model, tags: list | None):
    """The GraphDef that :func:`_load` loads."""
    meta = _chosen_meta_graph(model, tags)
    return model.message if meta is None else meta.graph_def


def _tf_message(message_type, message):
    return message_type.FromString(message.SerializeToString())


def _signatures(model: Model, tags: list | None) -> str:
    """The signatures' tensors of a MetaGraphDef, as a hint ("" where there are none)."""
    meta = _chosen_meta_graph(model, tags)
    if meta is None:
        return ""
    listed = [
        f"{key}: " + ", ".join(f"{name} = {tensor}" for name, tensor in [*inputs, *outputs])
        for key, inputs, outputs in signatures_of(meta)
    ]
    return f". Its signatures: {'; '.join(listed)}" if listed else ""


def _signature_names(model: Model, tags: list | None) -> dict:
    """The input and output names of the chosen MetaGraphDef's signatures, each to
    its tensor (``note`` -> ``StatefulPartitionedCall:1``), where no two signatures
    use one name for different tensors."""
    meta = _chosen_meta_graph(model, tags)
    names: dict = {}
    for _, inputs, outputs in signatures_of(meta) if meta else []:
        for name, tensor in inputs + outputs:
            names.setdefault(name, set()).add(tensor)
    return {name: tensors.pop() for name, tensors in names.items() if len(tensors) == 1}


def _same_tensor(a: str, b: str) -> bool:
    return (a if ":" in a else a + ":0") == (b if ":" in b else b + ":0")


def _tensor(graph, name: str):
    full = name if ":" in name else name + ":0"
    try:
        return graph.get_tensor_by_name(full)
    except (KeyError, ValueError):
        try:
            op = graph.get_operation_by_name(full.rpartition(":")[0])
        except (KeyError, ValueError):
            op = None
        if op is not None and not op.outputs:
            raise CheckUsageError(f"{name} is a {op.type} op, which has no output tensor to differentiate") from None
        names = [t.name for op in graph.get_operations() for t in op.outputs]
        close = close_names(full, names, cutoff=0.5)
        hint = f"; close ones: {', '.join(close)}" if close else ""
        raise CheckUsageError(f"no tensor {name!r} in the graph{hint}") from None


def _entry(y, target: int | None):
    """``y[..., target]``, or y itself when there is no target."""
    if target is None:
        return y
    if y.shape.rank == 0:
        raise CheckUsageError(f"--target {target}: {y.name} is a scalar, with no entries to choose from")
    size = y.shape[-1] if y.shape.rank is not None else None
    if size is not None and target >= size:
        raise CheckUsageError(f"--target {target}: {y.name} has {size} entries on its last axis (0 to {size - 1})")
    return y[..., target]


# Ops that pass on every entry of their input, only rearranged: a softmax behind
# them still sums to a constant.
_REARRANGING = {"Identity", "Snapshot", "Reshape", "Squeeze", "ExpandDims"}


def summed_softmax(y: Any) -> SummedSoftmax | None:
    """The softmax that ``y`` passes on unchanged, unless an override on the way
    changes its gradient. Its entries sum to 1 for every input, so d sum(y)/dx,
    what tf.gradients computes, is zero up to rounding (1e-8 to 1e-7 in float32,
    which would pass for a usable gradient)."""
    op = y.op
    while _override(op) is None:
        if op.type == "Softmax":
            return SummedSoftmax(op.name, op.inputs[0].name)
        if op.type not in _REARRANGING:
            return None
        op = op.inputs[0].op
    return None


def _ancestors_of_ops(ops) -> set:
    """``ops`` and every op they are computed from or wait for (data and control inputs)."""
    seen, stack = set(), list(ops)
    while stack:
        op = stack.pop()
        if op not in seen:
            seen.add(op)
            stack.extend(t.op for t in op.inputs)
            stack.extend(op.control_inputs)
    return seen


def _ancestors(tensors, fed: Container = ()) -> set:
    """The ops ``tensors`` are computed from; a tensor in ``fed`` is not computed (its op is not reached through it)."""
    seen, stack = set(), [t.op for t in tensors if t not in fed]
    while stack:
        op = stack.pop()
        if op not in seen:
            seen.add(op)
            stack.extend(t.op for t in op.inputs if t not in fed)
            stack.extend(op.control_inputs)
    return seen


def _with_shape_hint(gradient: "Gradient", guessed: dict, unknown: dict) -> "Gradient":
    """``gradient``, its error saying which inputs' unknown dimensions were guessed,
    and how to give them, when there were any (``unknown``: each input's static
    dimensions, None where unknown)."""
    if gradient.status != "error" or not guessed or "--checkpoint" in (gradient.error or ""):
        return gradient
    name, shape = next(iter(guessed.items()))
    fed = ", ".join(f"{input_name} as {input_shape}" for input_name, input_shape in guessed.items())
    known = unknown.get(name, [])
    # the guess failed: the known dimensions as they are, the guessed ones to be filled in
    template = ",".join(str(guess) if index == 0 or index < len(known) and known[index] is not None else f"D{index}"
                        for index, guess in enumerate(shape))
    return replace(gradient, error=f"{gradient.error} (unknown dimensions were guessed: {fed}; give the real "
                                   f"shape with --shape {name}={template}, each Dn the size the model takes there)")


def _feed_shape(tensor, batch: int, given: list | None) -> list:
    """The shape of a random feed for ``tensor``: ``given`` (from --shape), else its
    known dimensions, with --batch for an unknown first one and IMAGE_SIDE for
    the other unknown ones of an image-like input (rank 4: NHWC or NCHW), else --batch."""
    if given is not None:
        return list(given)
    if tensor.shape.rank is None:
        return []
    dims = tensor.shape.as_list()
    other = IMAGE_SIDE if len(dims) == 4 else batch
    return [(batch if index == 0 else other) if d is None else d for index, d in enumerate(dims)]


def _feeds(graph, y, xs, given, batch, seed, report, shapes=None):
    import numpy as np

    tf = tensorflow()
    rng = np.random.default_rng(seed)
    shapes = shapes or {}
    feed = {}
    feed.update(given_feeds(graph, given))
    report.feeds.update({tensor.name: "given" for tensor in feed})
    chosen = {x.op for x in xs}

    def feed_random(tensor):
        op = tensor.op
        shape = _feed_shape(tensor, batch, shapes.get(op.name))
        if any(d is None for d in (tensor.shape.as_list() if tensor.shape.rank else [])[1:]):
            report.guessed_shapes[op.name] = shape
        dtype = tensor.dtype
        size = math.prod(shape) * max(dtype.size, 1)
        if size > FEED_LIMIT:
            raise CheckUsageError(
                f"a random feed for {tensor.name} of shape {shape} ({dtype.name}) would take {size / 2**30:.1f} GiB; "
                f"feed it yourself (--feed {op.name}=FILE.npy) or a smaller --batch"
            )
        if _floating(dtype):
            value = rng.standard_normal(shape).astype(dtype.as_numpy_dtype)
        elif dtype == tf.bool:
            value = rng.random(shape) < 0.5
        elif dtype.is_integer:
            value = rng.integers(0, 4, shape).astype(dtype.as_numpy_dtype)
        else:
            value = np.full(shape, b"", dtype=object)
        feed[tensor] = value
        report.feeds[tensor.name] = f"random {dtype.name} {shape}"

    # Every x is fed, a computed one too (TensorFlow feeds any tensor): what only
    # computes it (a tf.Example parser, a JPEG decoder) is then neither run nor fed.
    for x in xs:
        if x not in feed and x.op.type not in ("Placeholder", DEFAULTED) and graph.is_feedable(x):
            feed_random(x)
    for op in sorted(_ancestors([y] + list(xs), fed=feed), key=lambda op: op.name):
        if op.outputs and op.outputs[0] in feed:
            continue
        if op.type == DEFAULTED and op not in chosen:  # an x is fed even when it has a default
            report.defaults.append(op.name)
            continue
        if op.type == "Placeholder" or (op.type == DEFAULTED and op in chosen):
            feed_random(op.outputs[0])
    return feed


def given_feeds(graph: Any, given: dict) -> dict:
    """``--feed`` values (name -> a number, a JSON list or a .npy path) as a feed
    dict of ``graph``'s tensors, each in its tensor's dtype."""
    feed = {}
    for name, text in given.items():
        tensor = _tensor(graph, name)
        feed[tensor] = _value(text, tensor.dtype.as_numpy_dtype)
    return feed


def unfed_inputs(fetched: Iterable, feed: Container) -> tuple[list, list]:
    """What a run of ``fetched`` with ``feed`` would read from the caller: the
    placeholders nobody feeds (TensorFlow would refuse the run), and the
    ``PlaceholderWithDefault`` inputs left at their defaults."""
    computed = _ancestors(fetched, fed=feed)
    placeholders = sorted(op.name for op in computed if op.type == "Placeholder")
    defaults = sorted(op.name for op in computed if op.type == DEFAULTED)
    return placeholders, defaults


def training_flags(session: Any, graph: Any, defaults: list) -> list[str]:
    """The boolean ``PlaceholderWithDefault`` inputs among ``defaults`` whose default is
    True: a training flag left on keeps dropout and batch normalisation in training mode."""
    import numpy as np

    flags = [graph.get_operation_by_name(name) for name in defaults]
    flags = [op for op in flags if op.outputs[0].dtype.name == "bool" and op.inputs[0].op.type == "Const"]
    values = session.run([op.inputs[0] for op in flags]) if flags else []
    return [op.name for op, value in zip(flags, values) if np.all(value)]


def _value(text: str, dtype=None):
    """A ``--feed`` value as an array (of ``dtype``, where given)."""
    import numpy as np

    if text.endswith(".npy"):
        array = load_array(text, "--feed")
        return array if dtype is None else array.astype(dtype)
    try:
        return np.asarray(json.loads(text), dtype=dtype)
    except RecursionError:
        raise CheckUsageError(f"--feed value {text[:20]!r}...: nested too deeply; give a .npy file") from None
    except MemoryError:
        raise CheckUsageError(f"--feed value {text[:20]!r}...: too large to hold; give a smaller one") from None
    except (ValueError, TypeError) as error:
        raise CheckUsageError(
            f"--feed value {text!r}: expected a number, a JSON list or a .npy file ({error})"
        ) from None


# TF1 while loops: tf.gradients needs their WhileContext, which a MetaGraphDef keeps in
# a collection and a GraphDef loses; graphgrad rebuilds it (graphgrad.tf.loops) from a
# loop's structure, and where it cannot, TensorFlow fails with an AttributeError.
_V1_LOOP_MESSAGE = (
    "TensorFlow cannot differentiate the TF1 while loops (Enter/Exit ops) of this GraphDef, and graphgrad "
    "could not rebuild their loop contexts from its structure. To fix this, check the .meta or SavedModel "
    "the graph was frozen from"
)


def _gradient(session, name, x, y, feed, timeout: float = DEFAULT_TIMEOUT) -> Gradient:
    import numpy as np

    tf = tensorflow()
    connected = x.op in _ancestors([y])
    with session.graph.as_default(), tf1_control_flow(session.graph):
        try:
            [grad] = tf.compat.v1.gradients(y, x)
            if grad is None:
                return Gradient(name, connected, "none")
            options = tf.compat.v1.RunOptions(timeout_in_ms=max(1, int(timeout * 1000)))
            value, y_value = session.run([tf.convert_to_tensor(grad), y], feed, options=options)
        except tf.errors.DeadlineExceededError:
            return Gradient(name, connected, "error", error=(
                f"the run took over {timeout:g} s and was stopped; give it longer with --timeout SECONDS"))
        except tf.errors.FailedPreconditionError as error:
            if "uninitialized" not in str(error).lower() and "not initialized" not in str(error).lower():
                return Gradient(name, connected, "error", error="TensorFlow says: " + tensorflow_says(error))
            return Gradient(name, connected, "error", error=(
                "the graph's variables have no values (TensorFlow: a variable is uninitialized): give them from "
                "the checkpoint they were saved to, with --checkpoint PREFIX"))
        except (LookupError, ValueError, tf.errors.OpError) as error:
            return Gradient(name, connected, "error", error="TensorFlow says: " + tensorflow_says(error))
        except AttributeError:
            if not holds_tf1_loops(session.graph):
                raise
            return Gradient(name, connected, "error", error=_V1_LOOP_MESSAGE)
    value = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(value)):
        return Gradient(name, connected, "nan", float("nan"))
    norm = float(np.linalg.norm(value))
    if np.size(y_value) == 0:  # a detector that found nothing: no entry to differentiate
        return Gradient(name, connected, "zero", norm, why=(
            f"y has no entries for this input (shape {list(np.shape(y_value))}), so there is nothing to "
            "differentiate; feed an input for which the model outputs something (a detector needs an image with "
            "something to detect: --feed NAME=FILE.npy)"))
    return Gradient(name, connected, "zero" if norm == 0 else "finite", norm)


def _floating(dtype) -> bool:
    return dtype.is_floating or dtype.is_complex


def _differentiable(dtype) -> bool:
    return _floating(dtype) or dtype.name in ("resource", "variant")


def _between(xs, y, only_differentiable: bool) -> set:
    """Ops on a path from some x to y (following only float edges if asked)."""
    forward, stack = set(), [consumer for x in xs for consumer in x.consumers()]
    while stack:
        op = stack.pop()
        if op in forward:
            continue
        forward.add(op)
        for output in op.outputs:
            if not only_differentiable or _differentiable(output.dtype):
                stack.extend(output.consumers())
    backward, stack = set(), [y.op]
    while stack:
        op = stack.pop()
        if op in backward:
            continue
        backward.add(op)
        stack.extend(t.op for t in op.inputs if not only_differentiable or _differentiable(t.dtype))
    return forward & backward


def _override(op):
    if ATTR not in op.node_def.attr:
        return None
    return op.node_def.attr[ATTR].s.decode("utf-8", "replace")


def _fix(path, node: str, override, op_type: str) -> str:
    spec = "ste" if op_type in QUANTIZERS else "identity"
    force = " --force" if override else ""
    return f"graphgrad rewrite {path} --node '{node}={spec}'{force} -o OUT"


def _blockers(xs, y, float_path, surrogates, context) -> list:
    """Ops on the float paths from x to y (``float_path``) that stop the gradient,
    also inside the functions that call ops on them run (If branches, loop bodies);
    when no float path is left, the integer or bool edges that cut them."""
    blockers = _stoppers(float_path, surrogates, context, None)
    if y.op not in float_path:
        any_path = _between(xs, y, only_differentiable=False)
        for op in sorted(any_path, key=lambda op: op.name):
            edges = [
                t for t in op.outputs
                if not _differentiable(t.dtype) and any(c in any_path for c in t.consumers())
            ]
            if edges and any(_differentiable(t.dtype) for t in op.inputs):
                blockers.append(Blocker(
                    op.name, op.type,
                    f"turns floats into {edges[0].dtype.name} ({edges[0].name}): TensorFlow never backpropagates "
                    "through integer or bool tensors, so no override upstream of it fires",
                    _bypass_fix(context.path, xs, y, op, any_path),
                ))
    return blockers


def _bypass_fix(path: str, xs, y, edge, any_path) -> str:
    """The ready ``graphgrad bypass`` across the region that ``edge`` (an op turning
    floats into integers) opens: from the x it is computed from, to the first float
    tensor after it from which a float path leads to y (the defence's output)."""
    source = next((x for x in xs if edge in _between([x], y, only_differentiable=False)), None)
    seen, queue = {edge}, [c for t in edge.outputs for c in t.consumers() if c in any_path]
    while queue and source is not None:
        op = queue.pop(0)
        if op in seen:
            continue
        seen.add(op)
        for output in op.outputs:
            if _floating(output.dtype) and (output is y or y.op in _between([output], y, only_differentiable=True)):
                output = _rescaled(output, y)
                return (f"carry the gradient across the region as the identity (BPDA): graphgrad bypass "
                        f"{shlex.quote(path)} --from {source.name} --to {output.name} -o OUT")
        queue += [c for t in op.outputs for c in t.consumers() if c in any_path]
    return ("no rewrite carries a gradient through this edge; keep the path in floats "
            "(e.g. Round instead of Cast to int, with --op Round=ste)")


# Elementwise ops that a defence ends with to bring its values back to the input's
# scale (x / 255 after a cast back to float): part of the region to bypass.
_RESCALES = {"Mul", "RealDiv", "Div", "Sub", "Add", "AddV2", "Cast", "Identity", "Maximum", "Minimum", "ClipByValue"}


def _rescaled(tensor, y):
    """``tensor`` followed through the elementwise ops by constants that rescale it
    (its only use each time), up to y: where the region's values are back on the
    input's scale, so that the identity is the right surrogate."""
    while tensor is not y:
        consumers = tensor.consumers()
        if len(consumers) != 1 or consumers[0].type not in _RESCALES:
            return tensor
        op = consumers[0]
        if any(t is not tensor and t.op.type != "Const" for t in op.inputs) or not _floating(op.outputs[0].dtype):
            return tensor
        tensor = op.outputs[0]
    return tensor


class _Surrogate(NamedTuple):
    source: str  # the node it stands in for
    spec: str
    group: bytes  # the _graphgrad_group of its nodes
    bypasses: bool  # whether its gradient goes around the source node


@dataclass
class _Context:
    """What the search for blockers needs at every depth. Function names come from
    the file's GraphDef: once differentiated, TensorFlow's If ops call
    ``<branch>_rewritten`` copies, which no rule could select."""

    unresolved: set
    path: str
    graph_def: Any  # the loaded graph as the file holds it
    seen: set = field(default_factory=set)  # functions looked into
    intended_stops: list = field(default_factory=list)  # StopGradients put there on purpose (tf.nn.moments)
    shape_only: list = field(default_factory=list)  # ops whose output does not depend on x's values

    @cached_property
    def registry(self) -> Any:
        return gradient_registry()

    @cached_property
    def library(self) -> dict:
        return {function.signature.name: function for function in self.graph_def.library.function}

    @cached_property
    def top_level(self) -> dict:
        return {node.name: node for node in self.graph_def.node}


def _stoppers(float_path, surrogates, context: _Context, function: str | None) -> list:
    """The blockers among ``float_path``'s ops (in ``function``'s body, if given).
    The ops of --embed surrogates, and the nodes whose gradient a surrogate's
    replacement bypasses, stop gradients on purpose and are left out."""
    groups = {surrogate.group for surrogate in surrogates.values()}
    on_purpose = {surrogate.source for surrogate in surrogates.values() if surrogate.bypasses} | {
        op.name for op in float_path if GROUP in op.node_def.attr and op.node_def.attr[GROUP].s in groups
    }
    blockers = []
    for op in sorted(float_path, key=lambda op: op.name):
        override = _override(op)
        if op.name in on_purpose:
            continue
        if override in (None, CALL_GRADIENT) and op.type in FUNCTIONAL_OPS:  # routed or not, look inside
            call = context.top_level.get(op.name, op.node_def) if function is None else op.node_def
            blockers += _function_stoppers(call, context)
            continue
        node = op.name if function is None else f"{function}/{op.name}"
        if override is None and op.type in VALUE_INDEPENDENT:
            context.shape_only.append(node)
            continue
        if override is None and _moments_stop(op):
            context.intended_stops.append(node)
            continue
        reason = _reason(op.type, override, context)
        if reason:
            where = "" if function is None else f" (in function {function})"
            blockers.append(Blocker(node, op.type, reason + where, _fix(context.path, node, override, op.type)))
    return blockers


def _moments_stop(op) -> bool:
    """Whether ``op`` is the StopGradient of tf.nn.moments (batch and layer
    normalisation): ``squared_difference(v, stop_gradient(reduce_mean(v)))``, which
    stops the gradient through the mean it subtracts in the variance on purpose.
    Told by that structure, whatever the scope is called."""
    if op.type != "StopGradient" or op.inputs[0].op.type != "Mean":
        return False
    averaged = op.inputs[0].op.inputs[0].ref()  # graph tensors compare by value in TF2
    return any(consumer.type == "SquaredDifference" and averaged in {tensor.ref() for tensor in consumer.inputs}
               for consumer in op.outputs[0].consumers())


def _function_stoppers(call, context: _Context) -> list:
    """The blockers inside the functions the NodeDef ``call`` runs: If/Case
    branches, While bodies, the ``f`` of a call op (not a While's ``cond``: its
    output is a bool)."""
    from tensorflow.core.framework.function_pb2 import FunctionDef

    blockers = []
    for name in _called_functions(call):
        if name in context.seen or name not in context.library:
            continue
        context.seen.add(name)
        try:
            body = function_def_to_graph(_tf_message(FunctionDef, context.library[name]))
        except Exception:  # noqa: BLE001  best effort: a body TF cannot rebuild on its own is
            continue  # not looked into; the gradients above were computed all the same
        float_path = set().union(*(
            _between(body.inputs, output, only_differentiable=True)
            for output in body.outputs if _differentiable(output.dtype)
        ))
        blockers += _stoppers(float_path, _surrogates(body), context, name)
    return blockers


def _called_functions(node_def) -> list:
    keys = ("then_branch", "else_branch", "branches", "body", "f")
    return [call.name for key in keys if key in node_def.attr for call in function_calls(node_def.attr[key])]


def _reason(op_type: str, override, context: _Context) -> str | None:
    """Why an op of ``op_type`` (with ``override``) stops the gradient, or None."""
    if override is not None:
        if override not in context.unresolved:
            return None
        why = "left by tf.custom_gradient" if CUSTOM_GRADIENT.match(override) else "not registered here"
        return f"override {override!r} cannot be resolved ({why})"
    if op_type in STOPPERS:
        return f"{op_type} stops the gradient"
    if op_type in ZERO_GRADIENT:
        return "TensorFlow's gradient is zero everywhere"
    if op_type in NONE_GRADIENT:
        return "TensorFlow's gradient is None"
    try:
        if context.registry.lookup(op_type) is None:
            return "PyFunc has no gradient unless overridden" if "PyFunc" in op_type else (
                "TensorFlow registers it as not differentiable")
    except LookupError:
        return "no gradient is registered for this op type"
    return None


def _surrogates(graph) -> dict:
    """{output op of an --embed surrogate: its _Surrogate}."""
    surrogates = {}
    for op in graph.get_operations():
        attrs = op.node_def.attr
        if EMBED_SPEC in attrs:
            spec = attrs[EMBED_SPEC].s.decode()
            # a replacement (ste, identity, ...) differentiates h(x) of the node's input
            # instead of the node; a transform alone scales the node's own gradient
            bypasses = surrogate_for(parse_spec(spec)).replacement is not None
            surrogates[op.name] = _Surrogate(attrs[SOURCE].s.decode().split(":")[0], spec, attrs[GROUP].s, bypasses)
    return surrogates


def _idle_overrides(ops, float_path) -> list:
    return [(op.name, _override(op)) for op in ops if _override(op) is not None and op not in float_path]


def gradient_status(op_types: Iterable[str]) -> dict:
    """For each op type, what TensorFlow's own gradient is: registered, zero, None or missing."""
    tensorflow()  # first: without TensorFlow, one line saying what to install

    status = {}
    for op_type in op_types:
        if op_type in ZERO_GRADIENT:
            status[op_type] = "zero"
        elif op_type in NONE_GRADIENT:
            status[op_type] = "None"
        else:
            try:
                status[op_type] = "None" if registered_gradient(op_type) is None else "registered"
            except LookupError:
                status[op_type] = "missing"
    return status
