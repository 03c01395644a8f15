"""Walks over a built tf.Graph that check and attribute share: what a tensor is
computed from, the ops between x and y, which edges carry a gradient.

TensorFlow is not imported here: the ops come built.
"""

from collections.abc import Container, Iterable, Sequence
from typing import Any

from ..names import ATTR


def ops_between(xs: Sequence, y: Any) -> set:
    """The ops on a path from some tensor of ``xs`` to ``y`` (any dtype)."""
    return between(xs, y, only_differentiable=False)


def ancestors_of_ops(ops: Iterable) -> set:
    """``ops`` and every op they are computed from or wait for (data and control inputs)."""
    seen, stack = set(), list(ops)
    while stack:
        op = stack.pop()
        if op not in seen:
            seen.add(op)
            stack.extend(t.op for t in op.inputs)
            stack.extend(op.control_inputs)
    return seen


def ancestors(tensors: Iterable, fed: Container = ()) -> set:
    """The ops ``tensors`` are computed from; a tensor in ``fed`` is not computed (its op is not reached through it)."""
    seen, stack = set(), [t.op for t in tensors if t not in fed]
    while stack:
        op = stack.pop()
        if op not in seen:
            seen.add(op)
            stack.extend(t.op for t in op.inputs if t not in fed)
            stack.extend(op.control_inputs)
    return seen


def floating(dtype: Any) -> bool:
    return dtype.is_floating or dtype.is_complex


def differentiable(dtype: Any) -> bool:
    return floating(dtype) or dtype.name in ("resource", "variant")


def reached_from(xs: Iterable, only_differentiable: bool) -> set:
    """The ops that read some x, or what such an op computes (following only float
    edges if asked: then an op computing a bool or an integer from floats is
    reached, and ends the walk)."""
    forward, stack = set(), [consumer for x in xs for consumer in x.consumers()]
    while stack:
        op = stack.pop()
        if op in forward:
            continue
        forward.add(op)
        for output in op.outputs:
            if not only_differentiable or differentiable(output.dtype):
                stack.extend(output.consumers())
    return forward


def between(xs: Iterable, y: Any, only_differentiable: bool) -> set:
    """Ops on a path from some x to y (following only float edges if asked)."""
    forward = reached_from(xs, only_differentiable)
    backward, stack = set(), [y.op]
    while stack:
        op = stack.pop()
        if op in backward:
            continue
        backward.add(op)
        stack.extend(t.op for t in op.inputs if not only_differentiable or differentiable(t.dtype))
    return forward & backward


def override_on(op: Any) -> str | None:
    if ATTR not in op.node_def.attr:
        return None
    return op.node_def.attr[ATTR].s.decode("utf-8", "replace")
