"""Rows run in batches the graph accepts.

A graph whose batch is fixed (x's static first dimension, or a Reshape on the path
to a fully known shape, as an Estimator's input layer writes it) takes exactly that
many rows per run: rows are run that many at a time, the last batch padded with
copies of its last row whose results are dropped. Any other graph takes chunks of
a bounded size, so that integrated gradients' steps and DeepLIFT's baselines run
in few runs without holding every step in memory. A graph whose x has no batch
axis (it adds one itself, as MTCNN's ``ExpandDims(input, 0)``) takes one example a
run (:func:`adds_its_batch`).
"""

import math
from collections.abc import Iterable
from typing import Any

from ..methods.batching import Batching

# of x per run where the graph takes any batch: 16 MiB (a convolution's activations are many times x; MobileNetV2's
# integrated gradients ran 1.3x faster in 0.4x the memory than at 64 MiB)
CHUNK_BYTES = 1 << 24


def batching_for(x: Any, path_ops: Iterable, row_bytes: int) -> Batching:
    """The batching that ``x`` (a graph tensor, batch first) and the ops on the path
    from it (``path_ops``) accept; ``row_bytes``: the size of one row of x."""
    fixed = _fixed_batch(x, path_ops)
    if fixed is not None:
        return Batching(fixed[0], True, fixed[1])
    return Batching(max(1, CHUNK_BYTES // max(1, row_bytes)), False)


def declared_batch_freed(model: Any, tags: list | None, placeholder: str) -> Any:
    """A copy of ``model`` whose ``placeholder`` (of the graph loaded with ``tags``)
    declares no batch size: its first dimension unknown, its shape hints dropped."""
    from .loading import loaded_graph_def

    copy = model.copy()
    [node] = [node for node in loaded_graph_def(copy, tags).node if node.name == placeholder]
    node.attr["shape"].shape.dim[0].size = -1
    node.attr.pop("_output_shapes", None)
    return copy


def row_shape(x: Any, one_example: str | None = None) -> Any:
    """The shape of one row of x (a TensorShape): x's own where x has no batch axis
    (``one_example`` says why), else x's without its first axis, whatever batch it
    fixes (rows run that many at a time)."""
    return x.shape if one_example or x.shape.rank is None else x.shape[1:]


def adds_its_batch(x: Any, path_ops: Iterable) -> str | None:
    """Why x is one example without a batch axis, or None: every op on the path that
    reads x's values gives it a leading axis of size 1 (``ExpandDims`` at 0, or a
    ``Reshape`` to ``[1, ...]``), so the graph makes its own batch of one."""
    on_path = set(path_ops)
    # the ops that carry x's values on (its shape, size or rank are not where the batch is made)
    readers = [op for op in x.consumers() if op in on_path and op.outputs and op.outputs[0].dtype.is_floating]
    if x.shape.rank is None or not readers:
        return None
    for op in readers:
        shape = op.outputs[0].shape
        if shape.rank != x.shape.rank + 1 or shape[0] != 1:
            return None
    return f"{x.name} has no batch axis: {readers[0].name} ({readers[0].type}) adds one of size 1"


def _fixed_batch(x: Any, path_ops: Iterable) -> tuple[int, str] | None:
    """The number of rows the graph takes per run, and why, or None where any number goes."""
    if x.shape.rank and x.shape[0] is not None:
        return x.shape[0], f"{x.name} has shape {x.shape.as_list()}"
    for op in sorted(path_ops, key=lambda op: op.name):
        if op.type != "Reshape":
            continue
        source, target = op.inputs[0].shape, op.outputs[0].shape
        if not target.is_fully_defined() or not source.rank or source[0] is not None:
            continue
        if not source[1:].is_fully_defined():
            continue
        per_row = math.prod(source[1:].as_list())
        if per_row and target.num_elements() % per_row == 0:
            return target.num_elements() // per_row, f"{op.name} reshapes its input to {target.as_list()}"
    return None
