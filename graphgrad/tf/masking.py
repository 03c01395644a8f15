"""Where a masked gradient comes back: the one analysis ``attack`` and ``check``
share when dy/dx is zero (or not finite) by value, whatever op type masks it (a
JPEG coding in a ``map_fn``, ``x - FloorMod(x, c)``, a ``Sign``): the tensor
closest to x that every path from x to y goes through and whose gradient is usable
there, which is where a bypass from x ends."""

import math
import shlex
from collections.abc import Callable
from typing import Any

from ..methods.pgd import MASKED_SHARE, usable_rows
from ..names import NAMESPACE
from .blockers import rescaled
from .paths import override_on
from .runtime import tensorflow, tf1_control_flow


def where_usable_again(graph: Any, x: Any, y: Any, loss: Any, path_ops: set,
                       values_of: Callable[[list], list]) -> Any:
    """The tensor closest to ``x`` that every path from x to ``y`` (along ``path_ops``)
    goes through and at which the gradient of ``loss`` is usable on most rows, as
    ``values_of(fetches)`` computes it; None where none is. A bypass from x ends at
    :func:`region_end` of it."""
    tf = tensorflow()
    order = [op for op in graph.get_operations() if op in path_ops and op is not y.op]
    cuts = [op for op in order if op.outputs and op.outputs[0].dtype.is_floating and op.outputs[0].shape.rank
            and op.outputs[0].shape[0] in (None, x.shape[0]) and not _reaches_around(x.op, y.op, op, path_ops)]
    if not cuts:
        return None
    with graph.as_default(), tf1_control_flow(graph):
        gradients = tf.compat.v1.gradients(loss, [op.outputs[0] for op in cuts])
    fetched = [g for g in gradients if g is not None]
    values = iter(values_of(fetched) if fetched else [])
    for op, g in zip(cuts, gradients):
        if g is not None and usable_rows(next(values)).mean() > MASKED_SHARE:
            return op.outputs[0]
    return None


def region_end(usable: Any, y: Any, path_ops: set) -> str:
    """Where a bypass from x to the tensor ``usable`` ends: followed on through a
    rescale by constants, where the region's values are back on the input's scale."""
    return rescaled(usable, y, path_ops).name


def masked_fix(path: str, x: Any, usable: Any, y: Any, path_ops: set, values_of: Callable[[list], list],
               out: str) -> tuple[str, str, str]:
    """Where the gradient is usable again (the name a report gives), why it is zero
    before, and the command that restores it: an ``ste`` override that zeroes it past
    its clip (a hidden layer's sum of products is over 1) gets a clip covering its
    input's values; else the bypass that carries it across the masking region (BPDA)."""
    spec = _overridden_ste(usable.op)
    if spec is not None:
        import numpy as np

        [values] = values_of([usable.op.inputs[0]])
        reach = float(np.max(np.abs(values))) if np.size(values) else 0.0
        clip = max(math.ceil(reach), 1)
        return (usable.name, f"{usable.op.name}'s override {spec} zeroes it wherever |input| is over the clip, and "
                f"its input reaches {reach:.4g} here",
                f"graphgrad rewrite {shlex.quote(path)} --node '{usable.op.name}=ste(clip={clip})' --force -o {out}")
    end = region_end(usable, y, path_ops)
    return (end, "no op before it is a blocker by type (a codec, x - FloorMod(x, c), a rounding written in "
            "arithmetic): carry the gradient across the region (BPDA)",
            f"graphgrad bypass {shlex.quote(path)} --from {x.name} --to {end} -o {out}")


def _overridden_ste(op: Any) -> str | None:
    """The ste spec an op's graphgrad override names, or None."""
    value = override_on(op) or ""
    spec = value.removeprefix(NAMESPACE)
    return spec if value.startswith(NAMESPACE) and spec.split("(")[0] == "ste" else None


def _reaches_around(start: Any, end: Any, avoided: Any, path_ops: set) -> bool:
    """Whether ``end`` is reached from ``start`` along ``path_ops`` without ``avoided``."""
    seen, stack = {start}, [start]
    while stack:
        op = stack.pop()
        for consumer in (c for t in op.outputs for c in t.consumers()):
            if consumer is end:
                return True
            if consumer in path_ops and consumer is not avoided and consumer not in seen:
                seen.add(consumer)
                stack.append(consumer)
    return False
