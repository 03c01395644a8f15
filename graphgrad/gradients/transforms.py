"""Transforms of the op's own TensorFlow gradient g, applied input by input.

A transform keeps None where g is None (no gradient flows there).
"""

from ..errors import SpecError
from .common import map_gradients
from .registry import TRANSFORM, Param, builtin, check_not_negative, check_positive


@builtin(TRANSFORM, Param("factor", float), formula="factor * g")
def scale(tf, op, grads, factor):
    return map_gradients(tf, grads, lambda g: g * tf.cast(factor, g.dtype))


@builtin(
    TRANSFORM,
    Param("strength", float, 1.0),
    formula="-strength * g  (gradient reversal layer)",
)
def reverse(tf, op, grads, strength):
    return map_gradients(tf, grads, lambda g: g * tf.cast(-strength, g.dtype))


def _check_bounds(values):
    fixed = all(isinstance(values[key], (int, float)) for key in ("lo", "hi"))  # not read from tensors
    if fixed and values["lo"] > values["hi"]:
        raise SpecError(f"clip_value needs lo <= hi, got lo={values['lo']!r}, hi={values['hi']!r}")


@builtin(
    TRANSFORM,
    Param("lo", float),
    Param("hi", float),
    formula="clip g elementwise to [lo, hi]",
    check=_check_bounds,
)
def clip_value(tf, op, grads, lo, hi):
    return map_gradients(tf, grads, lambda g: tf.clip_by_value(g, lo, hi))


@builtin(
    TRANSFORM,
    Param("max_norm", float),
    formula="g * max_norm / max(||g||_2, max_norm)  (per input)",
    check=check_positive("max_norm"),
)
def clip_norm(tf, op, grads, max_norm):
    return [None if g is None else tf.clip_by_norm(g, max_norm) for g in grads]


@builtin(
    TRANSFORM,
    Param("stddev", float),
    Param("seed", int, None),
    formula="g + N(0, stddev^2)",
    check=check_not_negative("stddev"),
)
def noise(tf, op, grads, stddev, seed):
    def add_noise(g):
        return g + tf.random.normal(tf.shape(g), stddev=stddev, seed=seed, dtype=g.dtype)

    dense = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]
    return map_gradients(tf, dense, add_noise)


@builtin(
    TRANSFORM,
    Param("index", int, 0),
    formula="input `index` keeps g, every other input gets zeros  (Pack, ConcatV2, ...)",
    check=check_not_negative("index"),
)
def select(tf, op, grads, index):
    if index >= len(op.inputs):
        raise ValueError(
            f"select(index={index}) on node {op.name!r} ({op.type}), which has only "
            f"{len(op.inputs)} inputs"
        )
    return [
        g if i == index or g is None else tf.zeros_like(op.inputs[i])
        for i, g in enumerate(grads)
    ]
