"""Surrogates for defences that change their input's shape, BPDA with a
differentiable approximation (Athalye, Carlini and Wagner, ICML 2018): the
gradient a region ``y = f(x)`` should have had, for an ``f`` whose own is zero.

Each maps dy of output 0 (y's shape) to input 0 (x's shape), None for any other
input; ``graphgrad bypass --surrogate`` writes the same derivative into the graph
as stop-gradient arithmetic (:mod:`graphgrad.edits.embed`).
"""

from typing import Any

from ..errors import SpecError
from .registry import REPLACEMENT, Param, builtin, check_positive


def _check_levels(values: dict) -> None:
    check_positive("temperature")(values)
    if values["levels"] < 2:
        raise SpecError(f"thermometer needs at least 2 levels, got levels={values['levels']!r}")


@builtin(
    REPLACEMENT,
    Param("levels", int, 16),
    Param("temperature", float, 0.05),
    formula="sum over k < levels of dy[..., c*levels + k] * s(1 - s) / temperature, s = sigmoid((x[..., c] - "
            "k/levels) / temperature): a soft thermometer encoding's, of x in [0, 1], each channel's levels "
            "side by side (Buckman et al. 2018)",
    check=_check_levels,
)
def thermometer(tf, op, grads, levels, temperature):
    x, dy = op.inputs[0], grads[0]
    if dy is None:
        return [None] * len(op.inputs)
    soft = soft_thermometer(tf, tf.cast(x, dy.dtype), levels, temperature)
    by_level = tf.reshape(dy, tf.shape(soft))
    dx = tf.reduce_sum(by_level * soft * (1.0 - soft), axis=-1) / temperature
    return [dx] + [None] * (len(op.inputs) - 1)


def soft_thermometer(tf: Any, x: Any, levels: int, temperature: float) -> Any:
    """sigmoid((x - k/levels) / temperature) for each level k, on a new last axis."""
    thresholds = tf.constant([k / levels for k in range(levels)], dtype=x.dtype)
    return tf.sigmoid((x[..., None] - thresholds) / temperature)
