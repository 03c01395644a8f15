"""What check and attribute differentiate: one entry of y, ``y[..., target]``, and
the softmax whose sum has no gradient.

TensorFlow's objects are passed in; nothing here imports it.
"""

from dataclasses import dataclass
from typing import Any

from ..methods.options import given
from .loading import CheckUsageError
from ..files.tflite_quantisation import STRAIGHT_THROUGH
from .paths import override_on


@dataclass(frozen=True)
class SummedSoftmax:
    """y passes on the ``softmax`` op's output unchanged: d sum(y)/dx is zero up to
    rounding, whatever the graph. ``logits``: the softmax's input tensor."""

    softmax: str
    logits: str

    def describe(self) -> str:
        """What is wrong and the fix, as check and attribute say it."""
        return (f"y is the softmax {self.softmax}: its entries sum to 1, so the gradient of their sum (what "
                "tf.gradients computes) is zero up to rounding\n"
                "  fix: choose one class, --target INDEX, or differentiate the logits, "
                f"--y {self.logits.removesuffix(':0')}")


def tensor_entry(y: Any, target: int | None, name: str = "--target") -> Any:
    """``y[..., target]``, or y itself when there is no target (a usage error names
    the entries there are, and the target as ``name``, what the caller calls it)."""
    if target is None:
        return y
    if y.shape.rank == 0:
        raise CheckUsageError(f"{given(name, target)}: {y.name} is a scalar, with no entries to choose from")
    size = y.shape[-1] if y.shape.rank is not None else None
    if size is not None and target >= size:
        raise CheckUsageError(f"{given(name, target)}: {y.name} has {size} entries on its last axis "
                              f"(0 to {size - 1})")
    return y[..., target]


# Ops that pass on every entry of their input, only rearranged: a softmax behind
# them still sums to a constant.
_REARRANGING = {"Identity", "Snapshot", "Reshape", "Squeeze", "ExpandDims"}


def summed_softmax(y: Any) -> SummedSoftmax | None:
    """The softmax that ``y`` passes on unchanged, unless an override on the way
    changes its gradient. Its entries sum to 1 for every input, so d sum(y)/dx,
    what tf.gradients computes, is zero up to rounding (1e-8 to 1e-7 in float32,
    which would pass for a usable gradient)."""
    op = y.op
    while override_on(op) is None or _requantises(op):
        if op.type == "Softmax":
            return SummedSoftmax(op.name, op.inputs[0].name)
        if op.type not in _REARRANGING and not _requantises(op):
            return None
        op = op.inputs[0].op
    return None


# A quantised TensorFlow Lite softmax's requantisation, rebuilt (graphgrad/files/tflite_quantisation.py):
# elementwise steps by constants and a rounding through the straight-through estimator, which keep
# the sum at 1 within a step, and its gradient zero
_REQUANTISING = {"RealDiv", "AddV2", "Sub", "Mul", "ClipByValue"}


def _requantises(op: Any) -> bool:
    if op.type == "Round":
        return override_on(op) == STRAIGHT_THROUGH
    return op.type in _REQUANTISING and all(tensor.op.type == "Const" for tensor in op.inputs[1:])
