"""Projected gradient descent under an L-infinity budget (Madry et al., 2018), in NumPy:
the attack loop of ``graphgrad attack``, given the graph as functions.

From a random start in the eps-ball around each image, each step moves every pixel
by ``step_size`` in the direction of the sign of the loss's gradient, then projects
back into the ball and the valid range. The gradient is the mean of ``eot`` runs
(expectation over transformation: a randomised defence gives another gradient each
run), and the class probabilities are the mean of ``judges`` runs' softmax (``eot``'s
by default), so that a randomised defence is judged by what it does on average, not
by one draw. Each
row keeps the point of all its steps at which its true class was least likely
(``keep="best"``), or its last step's (``keep="last"``, what ART's and foolbox's
PGD return): accuracy under attack is over those points.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import UsageError


KEEPS = ("best", "last")


@dataclass(frozen=True)
class Budget:
    """The attack's parameters: ``eps`` (the L-infinity radius), ``steps``, their
    ``step_size`` (default 2.5 eps / steps, as Madry et al.), ``eot`` gradient runs
    per step, ``low``/``high`` (the valid pixel range), ``seed`` of the random start,
    ``judge_runs`` averaged for each classification (None: ``eot``), which point each
    row ``keep``s: its most adversarial step's ("best") or its last step's ("last")."""

    eps: float
    steps: int = 100
    step_size: float | None = None
    eot: int = 1
    low: float = 0.0
    high: float = 1.0
    seed: int = 0
    judge_runs: int | None = None
    keep: str = "best"

    def __post_init__(self) -> None:
        if self.keep not in KEEPS:
            raise UsageError(f"--keep {self.keep}: give one of {', '.join(KEEPS)}")
        if not 0 <= self.eps < math.inf:
            raise UsageError(f"--eps {self.eps}: give the L-infinity radius, at least 0 (e.g. 0.03)")
        if self.steps < 1 or self.eot < 1 or (self.judge_runs is not None and self.judge_runs < 1):
            raise UsageError(f"--steps {self.steps}, --eot {self.eot}, --eval-runs {self.judge_runs}: give at least "
                             "1 of each")
        if self.step_size is not None and not 0 < self.step_size < math.inf:
            raise UsageError(f"--step-size {self.step_size}: give a size above 0")
        if not self.low < self.high:
            raise UsageError(f"--range {self.low},{self.high}: the low end must be below the high end")

    def refuse_unfit(self, images: Any, labels: Any) -> None:
        """One line for images and labels this attack cannot use, from the arrays
        alone (before TensorFlow is imported): no images, labels that are not one
        integer class per image, images outside the valid range, an eps that spans it."""
        if not len(images):
            raise UsageError(f"--input has no images (shape {list(np.shape(images))}): give at least one")
        if labels.dtype.kind not in "iu" or labels.ndim != 1 or len(labels) != len(images):
            raise UsageError(f"--labels holds {labels.dtype} of shape {list(labels.shape)}: give one integer class "
                             f"index per image of --input ({len(images)})")
        if labels.min() < 0:
            raise UsageError(f"--labels holds the class {int(labels.min())}: classes are indices from 0")
        if images.dtype.kind in "fiu":
            seen = float(np.min(images)), float(np.max(images))
            if seen[0] < self.low or seen[1] > self.high:
                raise UsageError(f"--input holds values from {seen[0]:g} to {seen[1]:g}, outside --range "
                                 f"{self.low:g},{self.high:g}: give the range the images are in (e.g. --range "
                                 f"0,255), or scale the images")
        if self.eps >= self.high - self.low:
            raise UsageError(f"--eps {self.eps:g} spans the whole --range {self.low:g},{self.high:g}: every image "
                             "can become any other, so accuracy under attack says nothing; give a smaller eps")

    @property
    def judges(self) -> int:
        return self.judge_runs if self.judge_runs is not None else self.eot

    @property
    def size(self) -> float:
        return self.step_size if self.step_size is not None else 2.5 * self.eps / self.steps


@dataclass
class Outcome:
    adversarial: Any
    clean_correct: Any  # per row
    attacked_correct: Any  # per row, after the attack
    gradient_runs: int
    masked: Any = None  # per row: no step's gradient had a usable entry (all zero, or not finite)


def pgd(images: Any, labels: Any, budget: Budget, gradient_at: Callable, scores_at: Callable) -> Outcome:
    """The attack on ``images`` of true ``labels``: ``gradient_at(points, labels)`` is
    d loss / d x (one run; None where no gradient reaches x), ``scores_at(points)``
    the logits of each point (one run)."""
    rows = np.arange(len(images))

    def probabilities(points: Any) -> Any:
        total = 0.0
        for _ in range(budget.judges):
            logits = np.asarray(scores_at(points), dtype=np.float64)
            shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
            total = total + shifted / shifted.sum(axis=-1, keepdims=True)
        return total / budget.judges

    rng = np.random.default_rng(budget.seed)
    clean = probabilities(images)
    low, high = np.maximum(images - budget.eps, budget.low), np.minimum(images + budget.eps, budget.high)
    current = np.clip(images + rng.uniform(-budget.eps, budget.eps, images.shape), low, high).astype(images.dtype)
    held, least = images.copy(), clean[rows, labels]  # each row's most adversarial point so far
    runs, moved = 0, np.zeros(len(images), dtype=bool)
    for _ in range(budget.steps):
        gradient = np.zeros(current.shape, dtype=np.float64)
        for _ in range(budget.eot):
            found = gradient_at(current, labels)
            runs += 1
            if found is not None:
                gradient += np.asarray(found, dtype=np.float64)
        moved |= usable_rows(gradient)
        gradient = np.where(np.isfinite(gradient), gradient, 0.0)
        current = np.clip(current + budget.size * np.sign(gradient), low, high).astype(images.dtype)
        if budget.keep == "best":
            chance = probabilities(current)[rows, labels]
            better = chance < least
            held[better], least[better] = current[better], chance[better]
    if budget.keep == "last":
        held = current
    attacked = probabilities(held)
    return Outcome(held, clean.argmax(axis=-1) == labels, attacked.argmax(axis=-1) == labels, runs, ~moved)


# Below this, a gradient entry is float noise, not a direction: float32's smallest normal number.
NOISE = float(np.finfo(np.float32).tiny)

# The share of images whose gradient is masked past which an attack's accuracy is no evaluation.
MASKED_SHARE = 0.5


def usable_rows(gradient: Any) -> Any:
    """Per row of ``gradient``, whether it has an entry the attack can follow: finite
    and above float noise. A masked gradient (a quantiser written as ``x - FloorMod(x,
    c)``, a ``Sign``, a ``Round`` under a clip) is zero, not None: found by value."""
    flat = np.abs(np.asarray(gradient, dtype=np.float64)).reshape(len(gradient), -1)
    finite = np.where(np.isfinite(flat), flat, 0.0)
    return (finite > NOISE).any(axis=1)
