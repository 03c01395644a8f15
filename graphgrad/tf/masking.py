"""Where a gradient that is zero by value comes back, and the bypass that carries it
there: the one analysis ``attack`` and ``check`` share, whatever op type masks it
(a JPEG coding in a ``map_fn``, ``x - FloorMod(x, c)``, a cast to integers).

The region to bypass is the smallest one: from the last tensor every path from x
to y goes through whose gradient is still masked to the first one where it is
usable again (or, at an integer edge, from the float tensor the edge reads to the
first float tensor after it), so that everything around it keeps its own gradient
and the identity is taken only across the non-differentiable part (a sign mask, a
1 - x or a rescale after it keep their own gradients). A surrogate that changes the
shape is proposed only where it goes the region's way at the run's values, and the
identity too where those are the model's own inputs (BPDA's premise: g(x) close to
f(x)); elsewhere the advice is the user's own g. ``attack`` holds every bypass a
model carries to the same test (:func:`bypass_agreements`).
"""

import math
import shlex
from collections.abc import Callable
from typing import Any

from ..edits.surgery import region_surrogate
from ..methods.pgd import MASKED_SHARE, NOISE, usable_rows
from ..names import BYPASS, NAMESPACE
from .paths import override_on
from .runtime import tensorflow, building_gradients

# An encoding's surrogate fits its region where their values correlate at least this much at the run's feed: a sign
# step along its gradient then goes the region's way (not for an encoding that falls where the soft thermometer rises).
FITS = 0.5


def where_usable_again(graph: Any, x: Any, y: Any, loss: Any, path_ops: set,
                       values_of: Callable[[list], list]) -> tuple[Any, Any] | None:
    """``(start, usable)``: the tensor closest to ``x`` that every path from x to ``y``
    (along ``path_ops``) goes through and at which the gradient of ``loss`` is usable
    on most rows, as ``values_of(fetches)`` computes it, and the last such tensor
    before it whose gradient is not (x itself where none is, or where the path from x
    to that one masks the gradient too: a saturated sigmoid before a quantiser); None
    where none is usable."""
    tf = tensorflow()
    order = [op for op in graph.get_operations() if op in path_ops and op is not y.op]
    cuts = [op.outputs[0] for op in order if op.outputs and op.outputs[0].dtype.is_floating
            and op.outputs[0].shape.rank and op.outputs[0].shape[0] in (None, x.shape[0])
            and not _reaches_around(x.op, y.op, op, path_ops)]
    if not cuts:
        return None
    with graph.as_default(), building_gradients(graph):
        gradients = tf.compat.v1.gradients(loss, cuts)
    fetched = [g for g in gradients if g is not None]
    values = iter(values_of(fetched) if fetched else [])
    start = x
    for cut, g in zip(cuts, gradients):
        if g is not None and usable_rows(next(values)).mean() > MASKED_SHARE:
            return (start if start is x or _reaches_x(graph, x, start, values_of) else x), cut
        start = cut
    return None


def _reaches_x(graph: Any, x: Any, start: Any, values_of: Callable[[list], list]) -> bool:
    """Whether a gradient at ``start`` (every entry, of random sign) reaches most of x's
    entries (a saturated sigmoid passes a few pixels' and underflows the rest)."""
    import numpy as np

    tf = tensorflow()
    with graph.as_default(), building_gradients(graph):
        signs = tf.sign(tf.random.stateless_uniform(tf.shape(start), [7, 11], -1.0, 1.0, dtype=start.dtype))
        [through] = tf.compat.v1.gradients(start, [x], grad_ys=signs)
    if through is None:
        return False
    value = np.abs(np.asarray(values_of([through])[0], dtype=np.float64))
    return bool(np.mean(np.isfinite(value) & (value > NOISE)) > MASKED_SHARE)


def masked_fix(path: str, start: Any, usable: Any, values_of: Callable[[list], list],
               out: str, data: bool = False) -> tuple[str, str, str]:
    """Where the gradient is usable again (the name a report gives), why it is zero
    before, and the command that restores it: an ``ste`` override that zeroes it past
    its clip (a hidden layer's sum of products is over 1) gets a clip covering its
    input's values; else the bypass from ``start`` to ``usable`` (:func:`bypass_advice`;
    ``data``: the values are the model's own inputs, not check's random feed)."""
    spec = _overridden_ste(usable.op)
    if spec is not None:
        import numpy as np

        [values] = values_of([usable.op.inputs[0]])
        reach = float(np.max(np.abs(values))) if np.size(values) else 0.0
        clip = max(math.ceil(reach), 1)
        return (usable.name, f"{usable.op.name}'s override {spec} zeroes it wherever |input| is over the clip, and "
                f"its input reaches {reach:.4g} here",
                f"graphgrad rewrite {shlex.quote(path)} --node '{usable.op.name}=ste(clip={clip})' --force -o {out}")
    why, command = bypass_advice(path, start, usable, values_of, out, data)
    return (usable.name, f"between {start.name} and it no op is a blocker by type (a codec, x - FloorMod(x, c), a "
            f"rounding written in arithmetic): {why}", command)


def bypass_advice(path: str, start: Any, end: Any, values_of: Callable[[list], list] | None,
                  out: str = "OUT", data: bool = False) -> tuple[str, str]:
    """The bypass from ``start`` to ``end`` (tensors of the run's graph) as advice, and
    why it is that one: with the built-in surrogate their shapes call for where it
    approximates the region at the run's values (``values_of``; None: by the shapes
    alone; the identity too where they are the model's own inputs, ``data``), else
    the user's own g."""
    shapes = [_listed(start), _listed(end)]
    surrogate = region_surrogate(*shapes)
    command = f"graphgrad bypass {shlex.quote(path)} --from {start.name} --to {end.name}"
    agreement = None
    if surrogate:
        # an encoding's surrogate must go the region's way at any feed; the identity only on the model's own inputs
        # (attack's images): check's random feed may lie outside the model's domain (a uint8 cast wraps negatives)
        judged = surrogate != "identity" or data
        agreement = _agreement(surrogate, *values_of([start, end])) if values_of is not None and judged else 1.0
        if agreement >= FITS:
            if surrogate == "identity":
                return "carry the gradient across the region as the identity (BPDA)", f"{command} -o {out}"
            return (f"the region maps {shapes[0]} to {shapes[1]}, a thermometer encoding's shapes, and a soft one "
                    "approximates it: carry the gradient across it through that (BPDA)",
                    f"{command} --surrogate '{surrogate}' -o {out}")
    why = (f"{surrogate}'s values correlate {agreement:.2f} with the region's here, under {FITS}: no approximation"
           if surrogate else
           f"it maps {shapes[0]} to {shapes[1]}, which no built-in surrogate does")
    return (f"carry the gradient across the region through your own differentiable approximation g of it (BPDA; "
            f"{why})", f"{command} --surrogate-function FILE.py:NAME -o {out}")


def with_fitted_bypasses(blockers: list, graph: Any, values_of: Callable[[list], list], path: str,
                         data: bool = False) -> list:
    """``blockers``, each bypass fix (:attr:`Blocker.region`) checked against the
    region's values at the run's feed: its surrogate kept where it approximates the
    region, else the advice to write one's own."""
    from dataclasses import replace

    fitted = []
    for blocker in blockers:
        if blocker.region:
            start, end = (graph.get_tensor_by_name(name) for name in blocker.region)
            blocker = replace(blocker, fix=": ".join(bypass_advice(path, start, end, values_of, "OUT", data)))
        fitted.append(blocker)
    return fitted


def _agreement(surrogate: str, start: Any, end: Any) -> float:
    """The correlation of the built-in ``surrogate``'s values on ``start``'s with
    ``end``'s, entry by entry (0 where either is constant or their sizes differ)."""
    import numpy as np

    start, end = np.asarray(start, dtype=np.float64), np.asarray(end, dtype=np.float64)
    if surrogate == "identity":
        h = start
    else:
        levels = int(surrogate.split("=")[1].rstrip(")"))  # as gradients/surrogates.py computes it
        h = 1 / (1 + np.exp(-(start[..., None] - np.arange(levels) / levels) / 0.05))
    if h.size != end.size or h.size < 2 or np.std(h) == 0 or np.std(end) == 0:
        return 0.0
    return float(np.corrcoef(h.reshape(-1), end.reshape(-1))[0, 1])


def bypass_agreements(graph: Any, path_ops: set, values_of: Callable[[list], list]) -> list[tuple[str, float]]:
    """``(bypass, r)`` for each bypass on the path: the correlation, entry by entry at
    the run's feed, of its surrogate's values (h, as the bypass computes it, in the
    end's shape) with the region's own (BPDA's premise: g approximates the region; an
    identity across an inversion, a sign mask or a transposition correlates near 0 or
    below)."""
    import numpy as np

    found = []
    for op in (op for op in path_ops if BYPASS in op.node_def.attr):
        group = op.name.rpartition("/")[0]
        h, end = (graph.get_operation_by_name(f"{group}/{label}").inputs[0] for label in ("stop_h", "stop_y"))
        h_value, end_value = (np.asarray(v, dtype=np.float64) for v in values_of([h, end]))
        if h_value.size != end_value.size or end_value.size < 2 or np.std(h_value) == 0 or np.std(end_value) == 0:
            continue  # nothing to compare at this feed (a constant region)
        found.append((op.name, float(np.corrcoef(h_value.reshape(-1), end_value.reshape(-1))[0, 1])))
    return found


def _listed(tensor: Any) -> list | None:
    return None if tensor.shape.rank is None else [-1 if d is None else d for d in tensor.shape.as_list()]


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
