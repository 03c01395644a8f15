"""Integrated gradients refined to a completeness tolerance by adaptive quadrature,
in NumPy (TensorFlow-free).

The path from the baseline to x starts as ``steps`` intervals, each integrated by
the trapezoid rule. The exact integral of the path's derivative over an interval
is known, f at its end minus f at its start (both computed with the gradients), so
each interval's error is known too, and the completeness gap is their sum. Each
round splits, at its midpoint, each interval that holds most of a row's error (half
of it, at least one): one new gradient an interval, so the points gather where the
integrand changes fastest (a random MobileNetV2's path has a few kinks of slope
100 times its mean), and every point computed is kept. The attributions are the
trapezoid rule over the final points, so each point's gradient is kept (in x's
type) until the row is done: the memory is the evaluations' worth, rows refined together
as many as :data:`POINT_BYTES` holds. A row stops when its gap is under the
tolerance or its budget of evaluations is spent.
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
    tolerance, and a per-entry error estimate (the change of a row's last round; for
    a row met on its first grid, the change from every other point of that grid to
    all of it)."""

    attributions: Any
    steps: Any
    gaps: Any
    evaluations: int
    met: bool
    error: Any


class _Path:
    """One row's points on the path, in the order computed: where (alpha), f there,
    the path's derivative there (the gradient dotted with x - base) and the gradient,
    kept in x's type (what the graph computed it in)."""

    def __init__(self, alphas: Any, outputs: Any, gradients: Any, delta: Any, dtype: Any):
        self.delta, self.dtype = delta, dtype
        self.alphas, self.outputs = np.asarray(alphas, dtype=np.float64), np.asarray(outputs, dtype=np.float64)
        self.gradients = [np.asarray(gradients, dtype=dtype)]
        self.slopes = np.asarray(gradients, dtype=np.float64) @ delta

    def add(self, alphas: Any, outputs: Any, gradients: Any) -> None:
        self.alphas = np.concatenate([self.alphas, alphas])
        self.outputs = np.concatenate([self.outputs, outputs])
        self.gradients.append(np.asarray(gradients, dtype=self.dtype))
        self.slopes = np.concatenate([self.slopes, np.asarray(gradients, dtype=np.float64) @ self.delta])

    def intervals(self, chosen: Any = None) -> tuple[Any, Any, Any]:
        """The points ``chosen`` (their indices in the order computed; default: all)
        in path order, and each interval's width and error (the trapezoid's integral
        of the derivative less f's exact rise)."""
        chosen = np.arange(len(self.alphas)) if chosen is None else np.asarray(chosen)
        order = chosen[np.argsort(self.alphas[chosen], kind="stable")]
        alphas, outputs, slopes = self.alphas[order], self.outputs[order], self.slopes[order]
        widths = np.diff(alphas)
        return order, widths, widths / 2 * (slopes[:-1] + slopes[1:]) - np.diff(outputs)

    def integral(self) -> float:
        """The trapezoid rule's integral of the path's derivative over every interval."""
        order, widths, _ = self.intervals()
        slopes = self.slopes[order]
        return float((widths / 2 * (slopes[:-1] + slopes[1:])).sum())

    def attributions(self, chosen: Any = None) -> Any:
        """The trapezoid rule over the points ``chosen`` (default: all) of each entry's
        gradient, times x - base."""
        order, widths, _ = self.intervals(chosen)
        weights = np.zeros(len(order))
        weights[:-1] += widths / 2
        weights[1:] += widths / 2
        gradients = np.concatenate(self.gradients)[order]
        return (weights @ gradients.astype(np.float64)) * self.delta

    def to_split(self, budget: int) -> Any:
        """The midpoints of the intervals to split: the largest errors until half of the
        row's error, at least one, as many as ``budget`` new gradients allow (none
        where no interval has an error left: the gap is then rounding's)."""
        order, widths, errors = self.intervals()
        magnitude = np.abs(errors)
        ranked = np.argsort(-magnitude, kind="stable")
        covered = np.cumsum(magnitude[ranked])
        if not covered[-1]:
            return ranked[:0].astype(np.float64)
        count = min(budget, int(np.searchsorted(covered, covered[-1] / 2)) + 1)
        chosen = ranked[:count]
        return self.alphas[order][chosen] + widths[chosen] / 2


# The points' gradients held at once: rows are refined this many bytes' worth at a time.
POINT_BYTES = 1 << 30


def adaptive_integral(inputs: Any, base: Any, differences: Any, steps: int, tolerance: float, max_steps: int,
                      batching: Batching, both_at: Callable, origin: Any) -> Refined:
    """Integrated gradients of each row to a completeness gap of ``tolerance`` (|sum -
    (f(x) - f(base))| over |f(x) - f(base)|), each row spending at most ``max_steps``
    gradient evaluations; ``both_at(points, origins)`` gives each point's gradient and
    its output (what is differentiated), in one run."""
    steps = max(1, min(steps, max_steps - 1))  # the first grid within the budget
    group = max(1, POINT_BYTES // (max_steps * max(1, inputs[:1].nbytes)))
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
    flat_delta = delta.reshape(count, -1)
    grid = np.arange(steps + 1) / steps
    gradients, outputs = _evaluated(inputs, base, np.repeat(np.arange(count), steps + 1), np.tile(grid, count),
                                    batching, both_at, origin)
    gradients = gradients.reshape(count, steps + 1, -1)
    outputs = outputs.reshape(count, steps + 1)
    paths = [_Path(grid, outputs[row], gradients[row], flat_delta[row], inputs.dtype) for row in range(count)]
    spent = np.full(count, steps + 1)
    before_last = spent.copy()  # each row's points before its own last round, for the error estimate
    gaps = _gaps(paths, differences)
    while True:
        plan = {row: paths[row].to_split(max_steps - spent[row]) for row in range(count)
                if gaps[row] > tolerance and spent[row] < max_steps}
        plan = {row: alphas for row, alphas in plan.items() if len(alphas)}
        if not plan:
            break
        rows = np.concatenate([np.full(len(alphas), row) for row, alphas in plan.items()])
        alphas = np.concatenate(list(plan.values()))
        gradients, outputs = _evaluated(inputs, base, rows, alphas, batching, both_at, origin)
        for row in plan:
            mine = rows == row
            paths[row].add(alphas[mine], outputs[mine], gradients[mine].reshape(int(mine.sum()), -1))
            before_last[row], spent[row] = spent[row], spent[row] + int(mine.sum())
        gaps = _gaps(paths, differences)
    attributions = np.stack([path.attributions() for path in paths]).reshape(delta.shape)
    # A row met on its first grid had no last round: its estimate is that grid's against every other point of it.
    coarser = np.unique(np.append(np.arange(0, steps + 1, 2), steps))
    previous = np.stack([path.attributions(np.arange(int(points)) if points < spent[row] else coarser)
                         for row, (path, points) in enumerate(zip(paths, before_last))])
    return Refined(attributions.astype(inputs.dtype), spent, gaps, int(spent.sum()), bool((gaps <= tolerance).all()),
                   np.abs(attributions - previous.reshape(delta.shape)).astype(inputs.dtype))


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


def _gaps(paths: list, differences: Any) -> Any:
    """Each row's completeness gap: the path's integral against f(x) - f(base)."""
    missing = np.abs(np.array([path.integral() for path in paths]) - differences)
    return np.where(differences != 0, missing / np.where(differences != 0, np.abs(differences), 1), missing)
