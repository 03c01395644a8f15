"""Replacements that cut or gate the gradient rather than estimate it."""

from .common import first_input_only, is_differentiable, own_gradient
from .registry import REPLACEMENT, builtin

# The ops guided backpropagation is defined for: rectifiers, whose own gradient
# is a gate (or a slope) on x.
RELU_FAMILY = ("Relu", "Relu6", "LeakyRelu", "Elu", "Selu")


@builtin(REPLACEMENT, formula="zeros for every differentiable input, None for the others")
def zero(tf, op, grads):
    return [tf.zeros_like(x) if is_differentiable(x.dtype) else None for x in op.inputs]


@builtin(
    REPLACEMENT,
    formula="g(relu(dy)), the op's own gradient of dy's positive part  (guided backpropagation)",
    aliases=[("GuidedRelu", "guided_relu")],
    op_types=RELU_FAMILY,
)
def guided_relu(tf, op, grads):
    return first_input_only(op, own_gradient(op, [tf.nn.relu(grads[0])] + list(grads[1:]))[0])
