"""Straight-through estimators: replacements for ops whose true gradient is zero
or undefined (``Sign``, ``Round``, quantizers, non-differentiable preprocessing).

Each returns a gradient for the op's first input x and None for any other input.
"""

from .common import first_input_only, mask
from .registry import REPLACEMENT, Param, builtin, check_positive


@builtin(
    REPLACEMENT,
    formula=(
        "input i gets dy of output i where outputs match inputs (Identity, IdentityN, "
        "PyFunc identities); otherwise input 0 gets dy, other inputs None"
    ),
)
def identity(tf, op, grads):
    inputs, outputs = list(op.inputs), list(op.outputs)
    corresponds = len(inputs) == len(outputs) and all(
        i.dtype.base_dtype == o.dtype.base_dtype for i, o in zip(inputs, outputs)
    )
    if corresponds:
        return list(grads)
    return first_input_only(op, grads[0])


@builtin(
    REPLACEMENT,
    Param("clip", float, 1.0),
    formula="dy * 1{|x| <= clip}",
    check=check_positive("clip"),
    aliases=[("QuantizeGrad", "ste(clip=1.0)")],
)
def ste(tf, op, grads, clip):
    x, dy = op.inputs[0], grads[0]
    return first_input_only(op, dy * mask(tf, tf.abs(x) <= clip, dy))


@builtin(REPLACEMENT, formula="dy * max(0, 2 - 2|x|)")
def approx_sign(tf, op, grads):
    x, dy = op.inputs[0], grads[0]
    x = tf.cast(x, dy.dtype)
    return first_input_only(op, dy * tf.maximum(tf.zeros_like(x), 2.0 - 2.0 * tf.abs(x)))


@builtin(
    REPLACEMENT,
    Param("beta", float, 5.0),
    formula="dy * beta * (2 - beta*x*tanh(beta*x/2)) / (1 + cosh(beta*x))",
    check=check_positive("beta"),
)
def swish_sign(tf, op, grads, beta):
    x, dy = op.inputs[0], grads[0]
    bx = beta * tf.cast(x, dy.dtype)
    derivative = beta * (2.0 - bx * tf.tanh(bx / 2.0)) / (1.0 + tf.cosh(bx))
    return first_input_only(op, dy * derivative)


@builtin(REPLACEMENT, formula="dy * max(0, 1 - |x|)")
def triangle(tf, op, grads):
    x, dy = op.inputs[0], grads[0]
    x = tf.cast(x, dy.dtype)
    return first_input_only(op, dy * tf.maximum(tf.zeros_like(x), 1.0 - tf.abs(x)))
