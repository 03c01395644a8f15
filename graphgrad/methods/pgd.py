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
from dataclasses import dataclass, replace
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
    random_start: bool = True  # False: from the images themselves (the checklist's unbounded probe)

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
    three_quarters_accuracy: float = 0.0  # accuracy under attack after 3/4 of the steps (convergence)


def pgd(images: Any, labels: Any, budget: Budget, gradient_at: Callable, scores_at: Callable) -> Outcome:
    """The attack on ``images`` of true ``labels``: ``gradient_at(points, labels)`` is
    d loss / d x (one run; None where no gradient reaches x), ``scores_at(points)``
    the logits of each point (one run)."""
    rows = np.arange(len(images))

    def probabilities(points: Any) -> Any:
        return _probabilities(scores_at, points, budget.judges)

    rng = np.random.default_rng(budget.seed)
    clean = probabilities(images)
    low, high = np.maximum(images - budget.eps, budget.low), np.minimum(images + budget.eps, budget.high)
    start = rng.uniform(-budget.eps, budget.eps, images.shape) if budget.random_start else 0.0
    current = np.clip(images + start, low, high).astype(images.dtype)
    held, least = images.copy(), clean[rows, labels]  # each row's most adversarial point so far
    runs, moved, ever_wrong = 0, np.zeros(len(images), dtype=bool), np.zeros(len(images), dtype=bool)
    three_quarters = max(1, (3 * budget.steps) // 4)
    accuracy_then = float((clean.argmax(axis=-1) == labels).mean())
    for step in range(1, budget.steps + 1):
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
            now = probabilities(current)
            chance = now[rows, labels]
            better = chance < least
            held[better], least[better] = current[better], chance[better]
            ever_wrong |= now.argmax(axis=-1) != labels
            if step == three_quarters:
                accuracy_then = float(1 - ever_wrong.mean())
        elif step == three_quarters:
            accuracy_then = float((probabilities(current).argmax(axis=-1) == labels).mean())
    if budget.keep == "last":
        held = current
    attacked = probabilities(held)
    return Outcome(held, clean.argmax(axis=-1) == labels, attacked.argmax(axis=-1) == labels, runs, ~moved,
                   accuracy_then)


# The checks whose failure makes the figure no evaluation: the gradient does not move the images or is not the
# loss's slope, random noise of the same eps does as well as the attack or the same attack without the gradient
# (finite differences) does better (its gradient misleads it), even a budget spanning the range does not bring the
# images down to chance, or a bypass's surrogate does not approximate its region. A failed convergence, half-eps or
# walk check is printed, and keeps the figure (random steps judged on a randomised model's noisy runs can look as
# strong as a mild attack).
DECIDING = {"gradient", "slope", "noise", "gradient-free", "unbounded", "bypass"}

# What the checklist probes with: the first rows, and at most this many steps.
PROBE_ROWS = 16
PROBE_STEPS = 20
# Accuracy that more steps may still take off before the attack counts as not converged.
CONVERGED = 0.02
# How much better than random steps of its budget an attack does for its gradient to count as leading it, where
# those steps take more than WALK_IDLE off the clean accuracy (where they take less, they say nothing).
WALK_MARGIN = 0.15
WALK_IDLE = 0.1
# The gradient-free attack's pairs of points a step, and how much better than the gradient's it must do for the
# gradient to count as misleading the attack.
SPSA_SAMPLES = 8
FREE_MARGIN = 0.15
# A loss that changes over a step this many times more than the gradient says it would is not the gradient's.
SLOPE_LIMIT = 100.0


@dataclass
class CheckItem:
    """One line of an attack's evaluation checklist (Carlini et al., 2019, "On
    Evaluating Adversarial Robustness"): what was checked, whether it passed, and
    what it found (with the likely cause where it failed)."""

    name: str
    passed: bool
    said: str


def checklist(images: Any, labels: Any, budget: Budget, outcome: Outcome, gradient_at: Callable,
              scores_at: Callable, classes: int | None) -> list[CheckItem]:
    """The evaluation checklist of an attack that ran (``outcome``): its gradient
    moved most images; it converged; random noise of the same eps is weaker; on the
    first rows, a small step changes the loss as the gradient says, random steps of
    the same budget are clearly weaker where they do anything, the same attack on
    finite differences is not much stronger, half the eps is weaker, and an eps
    spanning the whole range brings accuracy down to chance. Probes run with at most
    :data:`PROBE_STEPS` steps on :data:`PROBE_ROWS` rows."""
    attacked = float(outcome.attacked_correct.mean())
    usable = 1 - float(outcome.masked.mean())
    items = [CheckItem("gradient", usable > 1 - MASKED_SHARE,
                       f"the gradient moved {usable:.0%} of the images"
                       + ("" if usable > 1 - MASKED_SHARE else ": masked (zero or not finite); bypass the defence "
                          "(BPDA)"))]
    fell = outcome.three_quarters_accuracy - attacked
    converged = fell <= CONVERGED + 1e-9  # a share of rows: 2 of 100 is 0.020000000000000018
    items.append(CheckItem("convergence", converged,
                           f"the last quarter of the steps took {fell:.0%} more off"
                           + ("" if converged else ": not converged; give more --steps")))
    rng = np.random.default_rng(budget.seed + 1)
    noisy = np.clip(images + rng.uniform(-budget.eps, budget.eps, images.shape), budget.low,
                    budget.high).astype(images.dtype)
    noise = float(np.mean(_probabilities(scores_at, noisy, budget.judges).argmax(axis=-1) == labels))
    items.append(CheckItem("noise", noise >= attacked,
                           f"random noise of the same eps leaves {noise:.0%} correct, the attack {attacked:.0%}"
                           + ("" if noise >= attacked else ": noise does better, so the gradient misleads the attack "
                              "(obfuscated); bypass the defence, or give --eot for a randomised one")))
    rows = slice(0, min(PROBE_ROWS, len(images)))
    probe_steps = min(budget.steps, PROBE_STEPS)
    full = float(outcome.attacked_correct[rows].mean())
    items += _direction_checks(images[rows], labels[rows], budget, full, float(outcome.clean_correct[rows].mean()),
                               gradient_at, scores_at)
    half = _probe(images[rows], labels[rows], replace(budget, eps=budget.eps / 2, steps=probe_steps,
                                                       step_size=None), gradient_at, scores_at)
    items.append(CheckItem("eps", half >= full - 0.05,
                           f"at eps/2 {half:.0%} of the first images stay correct, at eps {full:.0%}"
                           + ("" if half >= full - 0.05 else ": a smaller eps did better, so the attack is weak; give "
                              "more --steps")))
    # from the images themselves, not a random start across the range, which a defence could tell from data
    unbounded = _probe(images[rows], labels[rows], replace(budget, eps=budget.high - budget.low, steps=probe_steps,
                                                            step_size=None, random_start=False), gradient_at,
                       scores_at)
    chance = 1 / classes if classes else 0.0
    items.append(CheckItem("unbounded", unbounded <= chance + 0.1,
                           f"an eps spanning the whole range leaves {unbounded:.0%} of the first images correct "
                           f"(chance {chance:.0%})"
                           + ("" if unbounded <= chance + 0.1 else ": the gradient leads nowhere, whatever the "
                              "budget (masked or obfuscated); bypass the defence (BPDA)")))
    return items


def _direction_checks(images: Any, labels: Any, budget: Budget, attacked: float, clean: float,
                      gradient_at: Callable, scores_at: Callable) -> list[CheckItem]:
    """Whether the gradient is the loss's slope, and leads the attack better than
    random directions do (on the first rows: ``attacked`` and ``clean``, their accuracy)."""
    slope = _slope_ratio(images, labels, budget, gradient_at, scores_at)
    follows = not slope > SLOPE_LIMIT
    items = [CheckItem("slope", follows,
                       f"one step along the gradient changes the loss {slope:.3g} times what the gradient says (the "
                       "median of the first images)"
                       + ("" if follows else ": the gradient is not the loss's slope (a masked gradient with a tiny or "
                          "scrambled part left); bypass the defence (BPDA)"))]
    # the same steps along random directions, each image's most adversarial kept: what a gradient that only looks
    # usable (its signs scrambled, a defence's reversed or hashed backward pass) does no better than
    directions = np.random.default_rng(budget.seed + 2)
    walk = _probe(images, labels, replace(budget, steps=min(budget.steps, PROBE_STEPS), step_size=None, keep="best"),
                  lambda points, _: directions.standard_normal(points.shape), scores_at)
    led = walk >= attacked + WALK_MARGIN or walk >= clean - WALK_IDLE
    items.append(CheckItem("walk", led,
                           f"random steps of the same budget leave {walk:.0%} of the first images correct, the "
                           f"attack {attacked:.0%}"
                           + ("" if led else ": the gradient leads the attack no better than random directions "
                              "(obfuscated, or a randomised model's noisy judging); bypass the defence (BPDA)"
                              + (", or give --eot for a randomised one" if budget.eot == 1 else ""))))
    free = _probe(images, labels, replace(budget, steps=min(budget.steps, PROBE_STEPS), step_size=None),
                  _finite_differences(budget, scores_at), scores_at)
    beaten = free < attacked - FREE_MARGIN
    items.append(CheckItem("gradient-free", not beaten,
                           f"the same attack on finite differences of the loss (SPSA, {SPSA_SAMPLES} random pairs a "
                           f"step) leaves {free:.0%} of the first images correct, the gradient's {attacked:.0%}"
                           + ("" if not beaten else ": without the gradient the attack does better, so the gradient "
                              "misleads it (shattered or obfuscated); bypass the defence (BPDA)")))
    return items


def _finite_differences(budget: Budget, scores_at: Callable) -> Callable:
    """A ``gradient_at`` that never reads the gradient: SPSA's estimate of the loss's
    (Uesato et al., 2018), from the losses at ``SPSA_SAMPLES`` pairs of points a step
    apart along random sign directions, all of a step's points in one run."""
    rng = np.random.default_rng(budget.seed + 3)
    size = budget.size

    def gradient_at(points: Any, labels: Any) -> Any:
        directions = rng.choice([-1.0, 1.0], size=(SPSA_SAMPLES,) + points.shape)
        probes = np.concatenate([points + size * directions, points - size * directions]).reshape(
            (-1,) + points.shape[1:]).astype(points.dtype)
        every = np.tile(labels, 2 * SPSA_SAMPLES)
        chance = _probabilities(scores_at, probes, budget.judges)[np.arange(len(probes)), every]
        losses = -np.log(np.maximum(chance, 1e-300)).reshape(2, SPSA_SAMPLES, len(points))
        change = (losses[0] - losses[1]).reshape((SPSA_SAMPLES, len(points)) + (1,) * (points.ndim - 1))
        return (change * directions).mean(axis=0)
    return gradient_at


def _slope_ratio(images: Any, labels: Any, budget: Budget, gradient_at: Callable, scores_at: Callable) -> float:
    """How many times the loss's change over one step along the gradient's signs is
    what the gradient predicts for it (g . step), the median over ``images``: near 1
    where the gradient is the loss's slope, huge where a defence hides the true one
    behind a tiny part it leaves (1e-6 of a scrambled term on top of a quantiser's zero)."""
    gradient = np.zeros(images.shape, dtype=np.float64)
    for _ in range(budget.eot):
        found = gradient_at(images, labels)
        if found is None:
            return 0.0
        gradient += np.asarray(found, dtype=np.float64) / budget.eot
    gradient = np.where(np.isfinite(gradient), gradient, 0.0)
    # a small step, where a smooth loss is first order (a saturated softmax's is not over an attack's step)
    step = min(budget.size, (budget.high - budget.low) / 100)
    stepped = np.clip(images + step * np.sign(gradient), budget.low, budget.high).astype(images.dtype)
    predicted = (gradient * (stepped.astype(np.float64) - images)).reshape(len(images), -1).sum(axis=1)
    rows = np.arange(len(images))

    def loss(points: Any) -> Any:
        return -np.log(np.maximum(_probabilities(scores_at, points, budget.judges)[rows, labels], 1e-300))

    changed = np.abs(loss(stepped) - loss(images))
    ratios = changed[predicted > 0] / predicted[predicted > 0]
    return float(np.median(ratios)) if len(ratios) else 0.0


def _probabilities(scores_at: Callable, points: Any, judges: int) -> Any:
    """Each point's class probabilities, the mean of ``judges`` runs' softmax."""
    total = 0.0
    for _ in range(judges):
        logits = np.asarray(scores_at(points), dtype=np.float64)
        shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
        total = total + shifted / shifted.sum(axis=-1, keepdims=True)
    return total / judges


def _probe(images: Any, labels: Any, budget: Budget, gradient_at: Callable, scores_at: Callable) -> float:
    return float(pgd(images, labels, budget, gradient_at, scores_at).attacked_correct.mean())


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
