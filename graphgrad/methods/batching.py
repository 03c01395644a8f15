"""Rows in batches: how many rows one run of the graph takes, and running a
function over rows that many at a time (:mod:`graphgrad.tf.batches` decides the
batching from the graph)."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Batching:
    """How many rows one run takes, and whether exactly that many (``why`` says what fixes it)."""

    rows: int
    fixed: bool
    why: str = ""


def in_batches(run: Callable, rows: Any, batching: Batching, origin: Any = None) -> Any:
    """``run(chunk, origins)`` on ``rows`` a batch at a time, the results' rows
    joined: what ``run(rows, origin)`` gives where the graph takes rows one by one.
    ``origin``: for each row, the input row it stands for (default: itself), which
    ``run`` gets, padded as its chunk is, to choose each row's target."""
    import numpy as np

    origin = np.arange(len(rows)) if origin is None else origin
    results = []
    for start in range(0, len(rows), batching.rows):
        chunk = rows[start:start + batching.rows]
        origins = origin[start:start + batching.rows]
        results.append(np.asarray(run(padded(chunk, batching), padded(origins, batching)))[:len(chunk)])
    return np.concatenate(results)


def padded(chunk: Any, batching: Batching) -> Any:
    """``chunk`` filled up to the fixed batch with copies of its last row (unchanged where the batch is free)."""
    import numpy as np

    short = batching.rows - len(chunk) if batching.fixed else 0
    return np.concatenate([chunk, np.repeat(chunk[-1:], short, axis=0)]) if short > 0 else chunk
