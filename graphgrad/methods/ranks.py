"""Several targets a row (``top:K``, ``all``), TensorFlow-free: which classes each
row's attributions are of, and the one array and report the passes, one a class
rank, join into."""

from dataclasses import replace
from typing import Any

from ..errors import UsageError
from .options import AttributionReport, RankedTargets, Refinement


def class_order(scores: Any, ranked: RankedTargets, name: str) -> Any:
    """For each row of ``scores`` (rows, classes) its classes to attribute, shape
    (rows, K): the K it scores highest, best first (ties by index), or every class
    in index order; a K over the number of classes refused, naming ``name``."""
    import numpy as np

    scores = np.asarray(scores)
    classes = scores.shape[-1]
    if ranked.count is None:
        return np.tile(np.arange(classes, dtype=np.int32), (len(scores), 1))
    if ranked.count > classes:
        raise UsageError(f"{name} {ranked}: y has {classes} classes; give top:K with K at most {classes}, or all")
    return np.argsort(-scores, axis=1, kind="stable")[:, :ranked.count].astype(np.int32)


def joined(passes: list[tuple[Any, AttributionReport]], order: Any, ranked: RankedTargets) -> tuple[Any,
                                                                                                     AttributionReport]:
    """The attributions of each pass (one per column of ``order``) as one array of
    shape (rows, K, *row), and one report: each row's classes, its completeness
    checks class by class, the refinements summed."""
    import numpy as np

    attributions = np.stack([each for each, _ in passes], axis=1)
    reports = [report for _, report in passes]
    report = replace(reports[0], target=None, targets=order.tolist(), ranked=str(ranked),
                     shape=tuple(attributions.shape))
    report.completeness = [replace(checks.completeness[row], target=int(order[row, rank]))
                           for row in range(len(order)) for rank, checks in enumerate(reports) if checks.completeness]
    refined = [each.refinement for each in reports if each.refinement is not None]
    if refined:
        report.refinement = Refinement(refined[0].tolerance, refined[0].max_steps, all(each.met for each in refined),
                                       sum(each.evaluations for each in refined))
    return attributions, report
