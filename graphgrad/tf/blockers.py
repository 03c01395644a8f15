"""Where the gradient stops on the path from x to y, and why: ops whose
TensorFlow gradient is zero or None, unregistered ones, StopGradient, PyFunc
without an override, integer or bool edges, dangling overrides, each with a ready
``graphgrad rewrite`` or ``bypass`` fix; and what stops it on purpose (``--embed``
surrogates, tf.nn.moments' StopGradient) or reads only shapes, which is no blocker.

TensorFlow is imported inside functions only, as in the runtime.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

from ..edits.embed import surrogate_for
from ..names import BYPASS, EMBED_SPEC, GROUP, SOURCE
from ..gradients.calls import CALL_GRADIENT
from ..gradients.spec import parse_spec
from ..graph.functions import function_calls
from ..graph.stops import NONE_GRADIENT, STOPPERS, ZERO_GRADIENT, moments_stop
from ..names import CUSTOM_GRADIENT, FUNCTIONAL_OPS, VALUE_INDEPENDENT
from .internals import (
    function_def_to_graph,
    gradient_registry,
    registered_gradient,
)
from .runtime import (
    tensorflow,
)

from .paths import between, differentiable, floating, override_on
from .loading import tf_message
from .masking import bypass_advice


@dataclass(frozen=True)
class Blocker:
    node: str
    op_type: str
    reason: str
    fix: str
    region: tuple = ()  # (from, to): the tensors its bypass fix joins, to be checked against their values


def _fix(path, node: str, override, op_type: str) -> str:
    # Sign's input is a value near [-1, 1] (a binarised net's), where ste's clip at 1 is the estimator's meaning; a
    # rounding's input is any scale (a 3-bit defence rounds 7x), where a clip at 1 would zero most of the gradient
    # and make the defence look robust: the identity carries it whatever the scale (BPDA's own choice).
    spec = "ste" if op_type == "Sign" else "identity"
    force = " --force" if override else ""
    return f"graphgrad rewrite {path} --node '{node}={spec}'{force} -o OUT"


def find_blockers(xs: list, y: Any, float_path: set, surrogates: dict, context: "BlockerContext") -> list:
    """Ops on the float paths from x to y (``float_path``) that stop the gradient,
    also inside the functions that call ops on them run (If branches, loop bodies);
    when no float path is left, the integer or bool edges that cut them."""
    # What y's gradient reaches: not what lies behind a StopGradient only (a bypass's forward region, whose own
    # gradient is never taken, so stops nothing; show draws it so too)
    blockers = _stoppers(float_path & _reached_without_stopping(y, float_path), surrogates, context, None)
    if y.op not in float_path:
        any_path = between(xs, y, only_differentiable=False)
        for op in sorted(any_path, key=lambda op: op.name):
            if op.type in VALUE_INDEPENDENT:  # reads a shape, not values: None is its right gradient
                continue
            edges = [
                t for t in op.outputs
                if not differentiable(t.dtype) and any(c in any_path for c in t.consumers())
            ]
            if edges and any(differentiable(t.dtype) for t in op.inputs):
                region = _region(xs, y, op, any_path)
                blockers.append(Blocker(
                    op.name, op.type,
                    f"turns floats into {edges[0].dtype.name} ({edges[0].name}): TensorFlow never backpropagates "
                    "through integer or bool tensors, so no override upstream of it fires",
                    ": ".join(bypass_advice(context.path, region[0], region[1], None)) if region else (
                        "no rewrite carries a gradient through this edge; keep the path in floats (e.g. Round "
                        "instead of Cast to int, with --op Round=ste)"),
                    tuple(t.name for t in region),
                ))
    return blockers


def _reached_without_stopping(y: Any, ops: set) -> set:
    """The ops among ``ops`` whose outputs reach y's gradient: walked back from y,
    a StopGradient (or PreventGradient) included but not what lies behind it."""
    seen, stack = set(), [y.op]
    while stack:
        op = stack.pop()
        if op in seen or op not in ops and op is not y.op:
            continue
        seen.add(op)
        if op.type not in STOPPERS:
            stack.extend(t.op for t in op.inputs)
    return seen


def _region(xs: list, y: Any, edge: Any, any_path: set) -> tuple:
    """The smallest region an integer ``edge`` opens, as ``(start, end)`` tensors: the
    float tensor on the path the edge reads (before the roundings that feed it), and
    the first float tensor after it from which a float path leads to y; () where
    there is none."""
    start = next((t for t in edge.inputs if differentiable(t.dtype) and (t.op in any_path or any(t is x for x in xs))),
                 None)
    while start is not None and start.op.type in NONE_GRADIENT | ZERO_GRADIENT and start.op.inputs:
        start = start.op.inputs[0]  # a rounding just before the cast: part of the region, else it blocks the bypass
    seen, queue = {edge}, [c for t in edge.outputs for c in t.consumers() if c in any_path]
    while queue and start is not None:
        op = queue.pop(0)
        if op in seen:
            continue
        seen.add(op)
        for output in op.outputs:
            if floating(output.dtype) and (output is y or y.op in between([output], y, only_differentiable=True)):
                return start, output
        queue += [c for t in op.outputs for c in t.consumers() if c in any_path]
    return ()


class _Surrogate(NamedTuple):
    source: str  # the node it stands in for
    spec: str
    group: bytes  # the _graphgrad_group of its nodes
    bypasses: bool  # whether its gradient goes around the source node


@dataclass
class BlockerContext:
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


def _stoppers(float_path, surrogates, context: BlockerContext, function: str | None) -> list:
    """The blockers among ``float_path``'s ops (in ``function``'s body, if given).
    The ops of --embed surrogates, and the nodes whose gradient a surrogate's
    replacement bypasses, stop gradients on purpose and are left out."""
    groups = {surrogate.group for surrogate in surrogates.values()}
    on_purpose = {surrogate.source for surrogate in surrogates.values() if surrogate.bypasses} | {
        op.name for op in float_path if GROUP in op.node_def.attr and op.node_def.attr[GROUP].s in groups
    }
    blockers = []
    for op in sorted(float_path, key=lambda op: op.name):
        override = override_on(op)
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
    """Whether ``op`` is tf.nn.moments' StopGradient (:func:`graphgrad.graph.stops.moments_stop`)."""
    if op.type != "StopGradient" or not op.inputs or not op.inputs[0].op.inputs:
        return False
    source = op.inputs[0].op
    readers = [(consumer.type, [tensor.name for tensor in consumer.inputs]) for consumer in op.outputs[0].consumers()]
    return moments_stop(op.type, source.type, source.inputs[0].name, op.outputs[0].name, readers)


def _function_stoppers(call, context: BlockerContext) -> list:
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
            body = function_def_to_graph(tf_message(FunctionDef, context.library[name]))
        except Exception:  # noqa: BLE001  best effort: a body TF cannot rebuild on its own is
            continue  # not looked into; the gradients above were computed all the same
        float_path = set().union(*(
            between(body.inputs, output, only_differentiable=True)
            for output in body.outputs if differentiable(output.dtype)
        ))
        blockers += _stoppers(float_path, surrogates_in(body), context, name)
    return blockers


def _called_functions(node_def) -> list:
    keys = ("then_branch", "else_branch", "branches", "body", "f")
    return [call.name for key in keys if key in node_def.attr for call in function_calls(node_def.attr[key])]


def _reason(op_type: str, override, context: BlockerContext) -> str | None:
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


def surrogates_in(graph: Any) -> dict:
    """{output op of an --embed surrogate: its _Surrogate}."""
    surrogates = {}
    for op in graph.get_operations():
        attrs = op.node_def.attr
        if EMBED_SPEC in attrs:
            spec = attrs[EMBED_SPEC].s.decode()
            # a replacement (ste, identity, ...) differentiates h(x) of the node's input
            # instead of the node; a transform alone scales the node's own gradient
            bypasses = BYPASS in attrs or surrogate_for(parse_spec(spec)).replacement is not None
            surrogates[op.name] = _Surrogate(attrs[SOURCE].s.decode().split(":")[0], spec, attrs[GROUP].s, bypasses)
    return surrogates


def idle_overrides(ops: Iterable, float_path: set) -> list:
    return [(op.name, override_on(op)) for op in ops if override_on(op) is not None and op not in float_path]


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
