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

import math
from dataclasses import dataclass, field, replace
from typing import Any

from ..edits.tensors import rename_functions
from ..errors import GraphgradError
from ..graph.functions import first_names
from ..edits.surgery import ResetOptions, reset_model
from ..edits.traps import SIGN, graphgrad_spec, sign_notes
from ..files.reading import read_model
from ..graph.model import GRAPHDEF, METAGRAPH, override_of, scopes_of
from ..names import NAMESPACE, VALUE_RANGE
from .variables import graph_variables
from .runtime import (
    holds_tf1_loops,
    overrides_in,
    tensorflow,
    building_gradients,
)

from .blockers import BlockerContext, find_blockers, idle_overrides, surrogates_in
from ..methods.options import RunOptions
from .loading import (
    DEFAULTED,
    CheckUsageError,
    given_feeds,
    load_graph,
    loaded_graph_def,
    refuse_unfed_pipelines,
    tensor_named,
    tensorflow_says,
)
from .paths import ancestors, between, floating
from .masking import masked_fix, where_usable_again, with_fitted_bypasses
from .randomness import random_ops
from .run import Deadline, RunStopped, open_run, run_session
from .targets import SummedSoftmax, summed_softmax, tensor_entry
from .tflite_judge import refuse_unverifiable, verified


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
class Masked:
    """dy/dx is zero by value with no blocker to name (a JPEG coding, ``x - FloorMod(x,
    c)``): the tensor where the gradient is usable again, and the bypass to it."""

    x: str
    usable_at: str
    why: str
    fix: str


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
    masked: list = field(default_factory=list)  # Masked: a zero gradient with no blocker, and where it comes back
    verified: list = field(default_factory=list)  # Difference: a .tflite's rebuilt graph against its interpreter

    @property
    def ok(self) -> bool:
        return self.summed_softmax is None and all(g.status == "finite" for g in self.gradients)


@dataclass(frozen=True)
class CheckOptions:
    """What check does with the model it runs: the ``target`` entry of y to
    differentiate (None: the sum of y, as tf.gradients does), and the random feeds'
    ``batch``, ``seed`` and ``shapes`` (placeholder name -> dimensions); ``verify``: of a
    TensorFlow Lite model, its rebuilt graph's outputs against its interpreter's on those feeds."""

    target: int | None = None
    batch: int = 1
    seed: int = 0
    shapes: dict = field(default_factory=dict)
    verify: bool = False


def check_model(path: str, run_options: RunOptions = RunOptions(), options: CheckOptions = CheckOptions()
                ) -> CheckReport:
    """Check the gradients dy/dx of the model at ``path`` (see the module doc),
    run as ``run_options`` say (:func:`graphgrad.tf.run.open_run`: without y, the
    model's one floating-point output; without xs, the floating-point placeholders
    y depends on; ops the gate refuses are named unless ``allow_effects``). A
    MetaGraphDef's variables are restored from ``checkpoint`` (a prefix), else from
    the checkpoint beside the file (``model.ckpt-N.meta``: ``model.ckpt-N``), else
    initialised as the graph says; ``variables`` in the report says which. A run
    that takes over ``timeout`` seconds is stopped and reported."""
    target, batch, seed, shapes = options.target, options.batch, options.seed, options.shapes
    feeds = run_options.feeds
    model = read_model(path, run_options.kind)
    if options.verify:
        refuse_unverifiable(model)
    run = open_run(model, run_options, "check")
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
        if options.verify:
            report.verified = verified(model, run, feed)
        differentiated = tensor_entry(y_tensor, target)
        for name, x in zip(xs, x_tensors):
            unknown = {op: graph.get_tensor_by_name(f"{op}:0").shape.as_list() for op in report.guessed_shapes}
            report.gradients.append(_with_shape_hint(_gradient(session, name, x, differentiated, feed, run.deadline),
                                                     report.guessed_shapes, unknown))
        if target is None:
            report.summed_softmax = summed_softmax(y_tensor)
        float_path = between(x_tensors, y_tensor, only_differentiable=True)
        surrogates = surrogates_in(graph)
        context = BlockerContext(unresolved, path, loaded_graph_def(model, chosen))
        found = find_blockers(x_tensors, y_tensor, float_path, surrogates, context)
        report.blockers = _clips_that_cover(with_fitted_bypasses(found, graph, lambda fetches: run.evaluate(
            fetches, feed), path), run, feed)
        report.intended_stops, report.shape_only = context.intended_stops, context.shape_only
        if not report.blockers and report.summed_softmax is None:  # (a summed softmax's zero is its own, said)
            report.masked = _masked(run, report.gradients, x_tensors, differentiated, feed, path)
        on_path = [surrogates[op.name] for op in float_path if op.name in surrogates]
        report.embedded = sorted((surrogate.source, surrogate.spec) for surrogate in on_path)
        report.idle_overrides = idle_overrides(loaded, float_path)
    report.notes = run.moved_notes() + trap_notes(loaded_graph_def(model, chosen)) + _random_notes(
        random_ops(ancestors([y_tensor], fed=set(feed))))
    if any(value.startswith(NAMESPACE) for value in overrides_in(model)):  # function bodies too
        plain, _ = reset_model(model, ResetOptions())
        # TensorFlow keeps the functions cond_v2 builds for gradients process-wide, by
        # branch name: the plain graph's branches, if an edit changed them, would clash.
        rename_functions(plain, "_graphgrad_plain")
        plain_graph, plain_session, _, _ = load_graph(plain, chosen, prefix, run_options.allow_effects)
        with plain_graph.as_default():
            back = {stand_in: tensor for tensor, stand_in in run.moved.items()}
            plain_feed = {tensor_named(plain_graph, back.get(t.name, t.name)): v for t, v in feed.items()}
            plain_y = tensor_entry(tensor_named(plain_graph, y), target)
            report.without_overrides = [
                _gradient(plain_session, name, tensor_named(plain_graph, name), plain_y, plain_feed, run.deadline)
                for name in xs
            ]
    return report


def _clips_that_cover(blockers: list, run: Any, feed: dict) -> list:
    """``blockers``, each ``Sign`` fix's ste given a clip that covers the values its
    input takes at ``feed``: ste's clip at 1 zeroes the gradient wherever |input| is
    over 1 (a hidden layer's sum of products), a fix that would leave it zero."""
    # a node of a function body (FUNCTION/NODE) is not in the graph: its fix stays
    signs = [blocker for blocker in blockers if blocker.op_type == "Sign" and "=ste'" in blocker.fix
             and _op_or_none(run.graph, blocker.node) is not None]
    if not signs:
        return blockers
    import numpy as np

    try:
        values = run.evaluate([run.graph.get_operation_by_name(b.node).inputs[0] for b in signs], feed)
    except GraphgradError:
        return blockers  # the fix stays as it is; check's own run reports why the graph does not run
    covering = {b.node: math.ceil(float(np.max(np.abs(v)))) for b, v in zip(signs, values) if np.size(v)}
    return [replace(b, fix=b.fix.replace("=ste'", f"=ste(clip={covering[b.node]})'"))
            if covering.get(b.node, 0) > 1 else b for b in blockers]


def _masked(run: Any, gradients: list, x_tensors: list, y: Any, feed: dict, path: str) -> list:
    """Where each x's zero gradient comes back, when no op on the path is a blocker."""
    found = []

    def values_of(fetches: list) -> list:
        return run.evaluate(fetches, feed)

    for gradient, x in zip(gradients, x_tensors):
        if gradient.status != "zero" or gradient.why:
            continue
        region = where_usable_again(run.graph, x, y, y, between([x], y, only_differentiable=True), values_of)
        if region is not None:
            found.append(Masked(gradient.x, *masked_fix(path, *region, values_of, "OUT")))
    return found


def _random_notes(drawn: list) -> list[str]:
    """One line for a model that draws other random numbers at every run: its
    gradient here is one draw's."""
    if not drawn:
        return []
    return [f"the model draws other random numbers at every run ({first_names(drawn)}): this gradient is one "
            "draw's; an attack on it needs expectation over transformation (graphgrad attack --eot 10)"]


def _op_or_none(graph: Any, name: str) -> Any:
    try:
        return graph.get_operation_by_name(name)
    except KeyError:
        return None


def trap_notes(graph_def: Any) -> list[str]:
    """:func:`graphgrad.edits.traps.shifted_sign_notes` for the overrides a GraphDef holds,
    at the top level and in function bodies."""
    notes = []
    for prefix, nodes in scopes_of(graph_def):
        overrides = {node.name: override_of(node) for node in nodes if node.op == SIGN}
        notes += sign_notes(nodes, lambda name: graphgrad_spec(overrides[name]), prefix)
    return notes


IMAGE_SIDE = 224  # unknown height and width of an image input: the size most image models take


# The most a random feed may take: a placeholder [40000, 40000] or --batch 10**12 is
# a mistake to say, not a MemoryError to raise.
FEED_LIMIT = 1 << 30


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
        taken = list(op.node_def.attr[VALUE_RANGE].list.f) if VALUE_RANGE in op.node_def.attr else []
        if floating(dtype) and len(taken) == 2:  # a quantised input: values it takes, not ones it clamps
            value = rng.uniform(taken[0], taken[1], shape).astype(dtype.as_numpy_dtype)
        elif floating(dtype):
            value = rng.standard_normal(shape).astype(dtype.as_numpy_dtype)
        elif dtype == tf.bool:
            value = rng.random(shape) < 0.5
        elif dtype.is_integer:
            value = rng.integers(0, 4, shape).astype(dtype.as_numpy_dtype)
        else:
            value = np.full(shape, b"", dtype=object)
        feed[tensor] = value
        report.feeds[tensor.name] = f"random {dtype.name} {shape}" + (
            f" in [{taken[0]:.4g}, {taken[1]:.4g}] (the values its quantisation takes)" if len(taken) == 2 else "")

    # Every x is fed, a computed one too (TensorFlow feeds any tensor): what only
    # computes it (a tf.Example parser, a JPEG decoder) is then neither run nor fed.
    for x in xs:
        if x not in feed and x.op.type not in ("Placeholder", DEFAULTED) and graph.is_feedable(x):
            feed_random(x)
    for op in sorted(ancestors([y] + list(xs), fed=feed), key=lambda op: op.name):
        if op.outputs and op.outputs[0] in feed:
            continue
        if op.type == DEFAULTED and op not in chosen:  # an x is fed even when it has a default
            report.defaults.append(op.name)
            continue
        if op.type == "Placeholder" or (op.type == DEFAULTED and op in chosen):
            feed_random(op.outputs[0])
    return feed


# TF1 while loops: tf.gradients needs their WhileContext, which a MetaGraphDef keeps in
# a collection and a GraphDef loses; graphgrad rebuilds it (graphgrad.tf.loops) from a
# loop's structure, and where it cannot, TensorFlow fails with an AttributeError.
_V1_LOOP_MESSAGE = (
    "TensorFlow cannot differentiate the TF1 while loops (Enter/Exit ops) of this GraphDef, and graphgrad "
    "could not rebuild their loop contexts from its structure. To fix this, check the .meta or SavedModel "
    "the graph was frozen from"
)


def _gradient(session, name, x, y, feed, deadline: Deadline) -> Gradient:
    import numpy as np

    tf = tensorflow()
    connected = x.op in ancestors([y])
    with session.graph.as_default(), building_gradients(session.graph):
        try:
            [grad] = tf.compat.v1.gradients(y, x)
            if grad is None:
                return Gradient(name, connected, "none")
            value, y_value = run_session(session, [tf.convert_to_tensor(grad), y], feed, deadline)
        except RunStopped as stopped:
            return Gradient(name, connected, "error", error=str(stopped))
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
