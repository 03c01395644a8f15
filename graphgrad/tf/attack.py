"""``graphgrad attack``'s TensorFlow side: the model loaded as ``check`` loads it, the
cross-entropy of its logits against each image's label, that loss's gradient with
respect to x, and where the gradient stops when it does. The loop is
:func:`graphgrad.methods.pgd.pgd`'s.
"""

import time
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import UsageError
from ..files.reading import read_model
from ..methods.batching import in_batches, padded
from ..methods.options import RunOptions, checked_rows
from ..methods.pgd import DECIDING, MASKED_SHARE, Budget, CheckItem, Outcome, checklist, pgd
from .batches import batching_for, row_shape
from .blockers import BlockerContext, find_blockers, surrogates_in
from .masking import FITS, bypass_agreements, masked_fix, where_usable_again, with_fitted_bypasses
from ..graph.functions import first_names
from .loading import chosen_tags, given_feeds, loaded_graph_def, refuse_misshapen_feeds, unfed_inputs
from .run import Deadline, open_run
from .paths import ancestors, ancestors_of_ops, between
from .randomness import random_ops
from .runtime import tensorflow, building_gradients
from .targets import summed_softmax
from .tflite_judge import Rescored, rescored
from ..graph.model import TFLITE



# Accuracy under attack this close to chance is an evaluation whatever the checklist says: it cannot overstate
# robustness (a saturated softmax's tiny gradient fails the slope check of a working attack).
CHANCE_MARGIN = 0.1

# Runs a randomised model's images are judged over when --eval-runs and --eot leave it to the attack.
RANDOM_JUDGE_RUNS = 10


@dataclass
class AttackReport:
    model: str
    x: str
    y: str
    eps: float
    steps: int
    step_size: float
    eot: int
    judge_runs: int
    keep: str
    rows: int
    clean_accuracy: float = 0.0
    attacked_accuracy: float = 0.0
    gradient_runs: int = 0
    seconds: float = 0.0
    blockers: list = field(default_factory=list)  # "node (op): why; fix: ..." where the gradient stops
    masked_images: float = 0.0  # the share of images no step's gradient could move (zero or not finite)
    masked_at: str = ""  # the tensor closest to x every path goes through whose gradient is usable, where masked
    fix: str = ""  # the bypass that restores the gradient, where one is found
    random: list = field(default_factory=list)  # "node (op)": what draws other numbers at every run
    checklist: list = field(default_factory=list)  # {"name", "passed", "said"}: the evaluation's checks
    classes: int = 0  # of y: an attack that brings accuracy down to chance evaluates whatever its checks say
    interpreter: Rescored | None = None  # of a .tflite: both accuracies on TensorFlow Lite's interpreter

    @property
    def valid(self) -> bool:
        """Whether the accuracy under attack is an evaluation: the gradient reached x
        and moved most images (a masked gradient's figure says nothing of robustness)."""
        if self.classes and self.attacked_accuracy <= 1 / self.classes + CHANCE_MARGIN and self.checklist:
            return True  # a figure at chance cannot overstate robustness, whatever the checks found
        failed = {item["name"] for item in self.checklist if not item["passed"]}
        return not self.blockers and self.masked_images <= MASKED_SHARE and not failed & DECIDING


def attack_model(path: str, images: Any, labels: Any, budget: Budget, options: RunOptions
                 ) -> tuple[Any, AttackReport]:
    """L-infinity PGD on the model at ``path``: ``images`` (x's shape, rows first), their
    true ``labels`` (one class index per row; y: logits of shape [rows, classes]).
    Returns the adversarial images and the report; where the gradient is blocked, the
    attack still runs (a masked gradient leaves it at its random start) and the report
    names the blockers with their fixes. The model runs as ``options`` say, through
    :func:`graphgrad.tf.run.open_run`; all runs, loading included, end by
    ``options.timeout``."""
    import numpy as np

    started = time.monotonic()
    images, labels = np.asarray(images), np.asarray(labels)
    budget.refuse_unfit(images, labels)
    model = read_model(path, options.kind)
    if len(options.xs) == 1:  # the images against x's declared shape, from the file, before TensorFlow
        refuse_misshapen_feeds(model, chosen_tags(model, options.tags), {options.xs[0]: images}, "--input", rows=True)
    run = open_run(model, options, "attack", fed_are_not_x=True)
    if len(run.x_tensors) != 1:
        raise UsageError(f"attack perturbs one x; name it with --x (found {', '.join(run.xs)}), and give the "
                         "others with --feed NAME=VALUE")
    x, y = run.x_tensors[0], run.y_tensor
    feed = given_feeds(run.graph, options.feeds)
    drawn = random_ops(ancestors([y], fed={x, *feed}))
    if drawn and budget.judge_runs is None and budget.eot == 1:  # one draw is no verdict on a randomised model
        budget = replace(budget, judge_runs=RANDOM_JUDGE_RUNS)
    images, labels = checked_rows(images, x.dtype.as_numpy_dtype, "--input"), np.asarray(labels)
    _refuse_misfit(images, labels, x, y, run.y)
    tf = tensorflow()
    with run.graph.as_default(), building_gradients(run.graph):
        truth = tf.compat.v1.placeholder(tf.int64, [None], name="graphgrad_labels")
        loss = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=truth, logits=y))
        [gradient] = tf.compat.v1.gradients(loss, [x])
    report = AttackReport(path, run.xs[0], run.y, budget.eps, budget.steps, budget.size, budget.eot, budget.judges,
                          budget.keep, len(images), random=drawn, classes=int(y.shape[-1] or 0))
    _refuse_disconnected(run, x, y, feed)
    path_ops = between([x], y, only_differentiable=True)
    blockers = _blockers(run, model, x, y, path_ops) if gradient is None else []
    report.blockers = _described(blockers)
    batching = batching_for(x, path_ops, images[:1].nbytes)
    deadline = Deadline(started + options.timeout, f"{path}: the attack took over {options.timeout:g} s and was "
                        "stopped; give it longer with --timeout SECONDS")

    def evaluate(fetch: Any, points: Any, rows: Any = None) -> Any:
        fed = {**feed, x: points} if rows is None else {**feed, x: points, truth: rows}
        return run.evaluate(fetch, fed, deadline)

    def gradient_at(points: Any, rows: Any) -> Any:
        if gradient is None:
            return None
        return in_batches(lambda chunk, origins: evaluate(gradient, chunk, rows[origins]), points, batching)

    def scores_at(points: Any) -> Any:
        return in_batches(lambda chunk, _: evaluate(y, chunk), points, batching)

    outcome: Outcome = pgd(images, labels, budget, gradient_at, scores_at)
    report.clean_accuracy = float(outcome.clean_correct.mean())
    report.attacked_accuracy = float(outcome.attacked_correct.mean())
    report.gradient_runs = outcome.gradient_runs
    report.masked_images = float(outcome.masked.mean())
    if report.masked_images > MASKED_SHARE:  # blocked (None) or masked (zero): where the gradient is usable again
        sample = batching.rows if batching.fixed else 8
        points, rows = padded(images[:sample], batching), padded(labels[:sample], batching)

        def values_of(fetches: list) -> list:
            return evaluate(fetches, points[:sample], rows[:sample])

        region = where_usable_again(run.graph, x, y, loss, path_ops, values_of)
        if region is not None:
            report.masked_at, _, fix = masked_fix(path, *region, values_of, "BPDA.pb", data=True)
            report.fix = fix + ", then attack BPDA.pb" + (" (BPDA)" if " bypass " in fix else "")
        if report.blockers:
            report.blockers = _described(with_fitted_bypasses(blockers, run.graph, values_of, path, data=True))
    if gradient is not None:
        items = checklist(images, labels, budget, outcome, gradient_at, scores_at, y.shape[-1])
        first = padded(images[:min(len(images), batching.rows if batching.fixed else 16)], batching)
        agreements = bypass_agreements(run.graph, path_ops, lambda fetches: evaluate(fetches, first))
        if agreements:
            items.append(_bypass_item(agreements))
        report.checklist = [item.__dict__ for item in items]
    if model.rebuilt_from == TFLITE:  # the deployed model is the judge
        report.interpreter = rescored(model, y, images, outcome.adversarial, labels)
    report.seconds = time.monotonic() - started
    return outcome.adversarial, report


def _refuse_misfit(images: Any, labels: Any, x: Any, y: Any, y_name: str) -> None:
    """One line for images, labels or a y the attack cannot use, before it runs."""

    if not row_shape(x).is_compatible_with(images.shape[1:]):  # rows run in the batches the graph takes
        raise UsageError(f"--input has shape {list(images.shape)}, and {x.name} takes {x.shape.as_list()} (None: "
                         "any size; the first axis: rows, run as many at a time as the graph takes)")
    if y.shape.rank != 2:
        raise UsageError(f"attack needs y to be logits of shape [rows, classes]; {y_name} has shape {y.shape}: name "
                         "the logits with --y")
    if y.op.type in ("Softmax", "Sigmoid"):  # the cross-entropy of probabilities taken as logits is not the loss
        raise UsageError(f"attack needs the logits, and {y_name} is a {y.op.type} of them: give --y "
                         f"{y.op.inputs[0].name.removesuffix(':0')}")
    softmax = summed_softmax(y)  # behind Identities (a frozen graph's outputs) or a quantisation (a .tflite's)
    if softmax is not None:
        raise UsageError(f"attack needs the logits, and {y_name} passes on the softmax {softmax.softmax}: give --y "
                         f"{softmax.logits.removesuffix(':0')}")
    classes = y.shape[-1]
    if classes is not None and labels.max() >= classes:
        raise UsageError(f"--labels holds classes {int(labels.min())} to {int(labels.max())}; y has {classes} "
                         f"(0 to {classes - 1})")


def _refuse_disconnected(run: Any, x: Any, y: Any, feed: dict) -> None:
    """One line for an x that y does not read, and for other placeholders y reads
    that no --feed gives."""
    if x.op not in ancestors_of_ops([y.op]):
        raise UsageError(f"{run.y} does not depend on {run.xs[0]}: name the input it reads with --x")
    placeholders, _ = unfed_inputs([y], {**feed, x: None})
    if placeholders:
        raise UsageError(f"{run.y} also reads {first_names(placeholders)}, which --input does not feed: give "
                         f"{'each' if len(placeholders) > 1 else 'it'} a value with --feed, e.g. --feed "
                         f"{placeholders[0]}=VALUE (a number, a JSON list or a .npy file)")


def _bypass_item(agreements: list) -> CheckItem:
    """The checklist's line on the bypasses the model carries: each surrogate goes its region's way."""
    worst_name, worst = min(agreements, key=lambda pair: pair[1])
    fits = worst >= FITS
    said = (f"each bypass's surrogate follows its region at the first images (the least: {worst_name}, "
            f"correlation {worst:.2f})")
    return CheckItem("bypass", fits, said if fits else (
        f"the bypass {worst_name}'s surrogate correlates {worst:.2f} with its region's values at the images (under "
        f"{FITS}): it does not approximate the region, so its gradient misleads the attack; reset it (graphgrad "
        "reset) and bypass only the part that is not differentiable, or give a surrogate that approximates it"))


def _blockers(run: Any, model: Any, x: Any, y: Any, path_ops: set) -> list:
    """Where the loss's gradient stops, each with check's fix."""
    with run.graph.as_default():
        context = BlockerContext(run.unresolved, model.path, loaded_graph_def(model, run.tags))
        return find_blockers([x], y, path_ops, surrogates_in(run.graph), context)


def _described(blockers: list) -> list[str]:
    return [f"{blocker.node} ({blocker.op_type}): {blocker.reason}; fix: {blocker.fix}" for blocker in blockers]
