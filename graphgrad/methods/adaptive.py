"""Integrated gradients refined to a completeness tolerance by adaptive quadrature,
in NumPy (TensorFlow-free).

The path from the baseline to x is cut into ``steps`` segments, each integrated by
the trapezoid rule. The exact integral of the path's derivative over a segment is
known, f at its end minus f at its start (both computed with the gradients), so
each segment's error is known too, and the completeness gap is their sum. Each
round doubles the segments that hold most of a row's error (half of it, at least
one), keeping every point: a segment of n intervals at width w doubled costs n new
gradients, and its sum of gradients becomes half the old one plus w/2 times the new
points'. Each segment holds its vector sum only, never a point's gradient, so the
memory is ``steps`` rows' worth whatever the budget. A row stops when its gap is
under the tolerance or its budget of evaluations would be passed.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .batching import Batching, padded


@dataclass
class Refined:
    """A path integral refined to a tolerance: the attributions, each row's gradient
    evaluations and gap, the evaluations in all, whether every gap is under the
    tolerance, and a per-entry error estimate (the change of the last round)."""

    attributions: Any
    steps: Any
    gaps: Any
    evaluations: int
    met: bool
    error: Any


class _Segments:
    """Each row's segments of the path: their bounds, intervals, vector and scalar
    sums of gradients (trapezoid weights included) and f at their ends."""

    def __init__(self, rows: int, steps: int, shape: tuple):
        self.low = np.tile(np.arange(steps) / steps, (rows, 1))
        self.width = np.full((rows, steps), 1.0 / steps)
        self.intervals = np.ones((rows, steps), dtype=np.int64)
        self.sums = np.zeros((rows, steps) + shape)  # sum of w * gradient over each segment's trapezoid
        self.rises = np.zeros((rows, steps))  # f(end) - f(start): the segment's exact integral
        self.scalars = np.zeros((rows, steps))  # the trapezoid's integral of the path's derivative

    def errors(self) -> Any:
        return self.scalars - self.rises

    def chosen(self, row: int, budget: int) -> list[int]:
        """The segments of ``row`` to double: the largest errors until half of the row's
        error, at least one, as many as ``budget`` new gradients allow."""
        errors = np.abs(self.errors()[row])
        order, covered, spent = np.argsort(-errors, kind="stable"), 0.0, 0
        chosen: list[int] = []
        for segment in order:
            cost = int(self.intervals[row, segment])
            if spent + cost > budget:
                continue
            if chosen and covered >= errors.sum() / 2:
                break
            chosen.append(int(segment))
            covered, spent = covered + errors[segment], spent + cost
        return chosen


# Of the segments' vector sums (float64) held at once: rows are refined this many bytes' worth at a time.
SEGMENT_BYTES = 1 << 28


def adaptive_integral(inputs: Any, base: Any, differences: Any, steps: int, tolerance: float, max_steps: int,
                      batching: Batching, both_at: Callable, origin: Any) -> Refined:
    """Integrated gradients of each row to a completeness gap of ``tolerance`` (|sum -
    (f(x) - f(base))| over |f(x) - f(base)|), each row spending at most ``max_steps``
    gradient evaluations; ``both_at(points, origins)`` gives each point's gradient and
    its output (what is differentiated), in one run."""
    steps = max(1, min(steps, max_steps - 1))  # the first grid within the budget
    group = max(1, SEGMENT_BYTES // (steps * max(1, inputs[:1].size) * 8))
    parts = [_refined_rows(inputs[start:start + group], base[start:start + group],
                           differences[start:start + group], steps, tolerance, max_steps, batching, both_at,
                           origin[start:start + group]) for start in range(0, len(inputs), group)]
    return Refined(np.concatenate([part.attributions for part in parts]),
                   np.concatenate([part.steps for part in parts]), np.concatenate([part.gaps for part in parts]),
                   sum(part.evaluations for part in parts), all(part.met for part in parts),
                   np.concatenate([part.error for part in parts]))


def _refined_rows(inputs: Any, base: Any, differences: Any, steps: int, tolerance: float, max_steps: int,
                  batching: Batching, both_at: Callable, origin: Any) -> Refined:
    count, delta = len(inputs), np.asarray(inputs - base, dtype=np.float64)
    segments = _Segments(count, steps, inputs.shape[1:])
    flat_delta = delta.reshape(count, -1)
    grid = np.arange(steps + 1) / steps
    gradients, outputs = _evaluated(inputs, base, np.repeat(np.arange(count), steps + 1), np.tile(grid, count),
                                    batching, both_at, origin)
    gradients = gradients.reshape((count, steps + 1) + inputs.shape[1:])
    outputs = outputs.reshape(count, steps + 1)
    segments.sums = (gradients[:, :-1] + gradients[:, 1:]) / 2 / steps
    segments.rises = outputs[:, 1:] - outputs[:, :-1]
    segments.scalars = np.einsum("rsk,rk->rs", segments.sums.reshape(count, steps, -1), flat_delta)
    spent = np.full(count, steps + 1)
    attributions = _attributions(segments, delta)
    previous = attributions.copy()
    gaps = _gaps(segments, differences)
    while True:
        active = [row for row in range(count) if gaps[row] > tolerance and spent[row] < max_steps]
        plan = [(row, segment) for row in active for segment in segments.chosen(row, max_steps - spent[row])]
        if not plan:
            break
        _double(segments, plan, inputs, base, flat_delta, batching, both_at, origin)
        for row, segment in plan:
            spent[row] += segments.intervals[row, segment] // 2
        refined = sorted({row for row, _ in plan})
        previous[refined] = attributions[refined]  # each row's map before its own last round
        attributions = _attributions(segments, delta)
        gaps = _gaps(segments, differences)
    return Refined(attributions.astype(inputs.dtype), spent, gaps, int(spent.sum()), bool((gaps <= tolerance).all()),
                   np.abs(attributions - previous).astype(inputs.dtype))


def _double(segments: _Segments, plan: list, inputs: Any, base: Any, flat_delta: Any, batching: Batching,
            both_at: Callable, origin: Any) -> None:
    """Double the intervals of each (row, segment) of ``plan``: the new points are
    the old intervals' midpoints, their gradients and outputs one batch after another."""
    rows, alphas, owners = [], [], []
    for index, (row, segment) in enumerate(plan):
        n, low, width = segments.intervals[row, segment], segments.low[row, segment], segments.width[row, segment]
        new = low + (np.arange(n) + 0.5) * width / n
        rows += [row] * n
        alphas += new.tolist()
        owners += [index] * n
    gradients, _ = _evaluated(inputs, base, np.array(rows), np.array(alphas), batching, both_at, origin)
    owners_array = np.array(owners)
    for index, (row, segment) in enumerate(plan):
        n, width = segments.intervals[row, segment], segments.width[row, segment]
        added = gradients[owners_array == index].sum(axis=0)
        segments.sums[row, segment] = segments.sums[row, segment] / 2 + added * (width / n) / 2
        segments.scalars[row, segment] = float(segments.sums[row, segment].reshape(-1) @ flat_delta[row])
        segments.intervals[row, segment] = 2 * n


def _evaluated(inputs: Any, base: Any, rows: Any, alphas: Any, batching: Batching, both_at: Callable,
               origin: Any) -> tuple[Any, Any]:
    """The gradients (float64) and outputs at base + alpha (x - base) for each
    (row, alpha), a batch at a time."""
    shape = (-1,) + (1,) * (inputs.ndim - 1)
    gradients, outputs = [], []
    for start in range(0, len(rows), batching.rows):
        row, alpha = rows[start:start + batching.rows], alphas[start:start + batching.rows]
        points = base[row] + (alpha.reshape(shape) * (inputs[row] - base[row])).astype(inputs.dtype)
        gradient, output = both_at(padded(points, batching), padded(origin[row], batching))
        gradients.append(np.asarray(gradient, dtype=np.float64)[:len(row)])
        outputs.append(np.asarray(output, dtype=np.float64)[:len(row)])
    return np.concatenate(gradients), np.concatenate(outputs)


def _attributions(segments: _Segments, delta: Any) -> Any:
    return segments.sums.sum(axis=1) * delta


def _gaps(segments: _Segments, differences: Any) -> Any:
    """Each row's completeness gap: the segments' integrals against f(x) - f(base)."""
    missing = np.abs(segments.scalars.sum(axis=1) - differences)
    return np.where(differences != 0, missing / np.where(differences != 0, np.abs(differences), 1), missing)
