"""Straight-through estimators: replacements for ops whose true gradient is zero
or undefined (``Sign``, ``Round``, quantizers, non-differentiable preprocessing).

Each maps dy of output 0 to input 0 (x), None for any other input; on the
``IdentityN`` of a ``tf.custom_gradient``, dy of result i to argument i (see
:func:`~graphgrad.gradients.common.elementwise_pairs`).
"""

from .common import custom_gradient_results, elementwise, mask
from .registry import REPLACEMENT, Param, builtin, check_positive


@builtin(
    REPLACEMENT,
    formula="input i gets dy of output i where they match (Identity, IdentityN), else input 0 gets dy",
)
def identity(tf, op, grads):
    inputs, outputs = list(op.inputs), list(op.outputs)
    corresponds = len(inputs) == len(outputs) and all(
        i.dtype.base_dtype == o.dtype.base_dtype for i, o in zip(inputs, outputs)
    )
    if corresponds and custom_gradient_results(op) is None:
        return list(grads)
    return elementwise(op, grads, lambda x, dy: 1)


@builtin(
    REPLACEMENT,
    Param("clip", float, 1.0),
    formula="dy * 1{|x| <= clip}",
    check=check_positive("clip"),
    aliases=[("QuantizeGrad", "ste(clip=1.0)")],
)
def ste(tf, op, grads, clip):
    return elementwise(op, grads, lambda x, dy: mask(tf, tf.abs(x) <= clip, dy))


@builtin(REPLACEMENT, formula="dy * max(0, 2 - 2|x|)")
def approx_sign(tf, op, grads):
    return elementwise(op, grads, lambda x, dy: _hinge(tf, 2.0 - 2.0 * tf.abs(tf.cast(x, dy.dtype))))


@builtin(
    REPLACEMENT,
    Param("beta", float, 5.0),
    formula="dy * beta * (2 - beta*x*tanh(beta*x/2)) / (1 + cosh(beta*x))",
    check=check_positive("beta"),
)
def swish_sign(tf, op, grads, beta):
    def derivative(x, dy):
        bx = beta * tf.cast(x, dy.dtype)
        return beta * (2.0 - bx * tf.tanh(bx / 2.0)) / (1.0 + tf.cosh(bx))

    return elementwise(op, grads, derivative)


@builtin(REPLACEMENT, formula="dy * max(0, 1 - |x|)")
def triangle(tf, op, grads):
    return elementwise(op, grads, lambda x, dy: _hinge(tf, 1.0 - tf.abs(tf.cast(x, dy.dtype))))


def _hinge(tf, value):
    """max(0, value), in value's dtype (a Python 0.0 would be float32)."""
    return tf.maximum(tf.zeros_like(value), value)
