"""Replacements that cut or gate the gradient rather than estimate it."""

from .common import first_input_only, is_differentiable, mask
from .registry import REPLACEMENT, builtin


@builtin(REPLACEMENT, formula="zeros for every differentiable input, None for the others")
def zero(tf, op, grads):
    return [tf.zeros_like(x) if is_differentiable(x.dtype) else None for x in op.inputs]


@builtin(
    REPLACEMENT,
    formula="dy * 1{dy > 0} * 1{y > 0}  (guided backpropagation)",
    aliases=[("GuidedRelu", "guided_relu")],
)
def guided_relu(tf, op, grads):
    y, dy = op.outputs[0], grads[0]
    return first_input_only(op, dy * mask(tf, dy > 0, dy) * mask(tf, y > 0, dy))
