"""Attribution rules: the gradients that saliency and relevance methods put on
nonlinearities (DeepExplain, Lucid, SHAP). Linear ops keep their own gradient, so
a method is these rules on the nonlinear ops, then the gradient times the input
(see :mod:`graphgrad.tf.attribute`).
"""

from .common import first_input_only, own_gradient
from .masking import RELU_FAMILY
from .registry import REPLACEMENT, Param, builtin, check_positive

# Elementwise nonlinearities: one input, one output of its shape, y = f(x). The
# op types eps_lrp and deeplift are meant for.
NONLINEARITIES = RELU_FAMILY + ("Sigmoid", "Tanh", "Softplus", "Softsign")
# Max pooling: nonlinear over its window; deeplift rescales it there, as SHAP does.
MAX_POOLS = ("MaxPool", "MaxPoolV2", "MaxPool3D")


@builtin(
    REPLACEMENT,
    formula="relu(dy), whatever x is  (deconvnet, Zeiler and Fergus)",
    op_types=RELU_FAMILY,
)
def deconvnet(tf, op, grads):
    return first_input_only(op, tf.nn.relu(grads[0]))


@builtin(
    REPLACEMENT,
    Param("eps", float, 1e-4),
    formula="dy * y / (x + eps * sign(x)), sign(0) = 1  (epsilon-LRP, as DeepExplain)",
    check=check_positive("eps"),
    op_types=NONLINEARITIES,
)
def eps_lrp(tf, op, grads, eps):
    x, y = op.inputs[0], op.outputs[0]
    stabiliser = tf.where(x >= 0, tf.ones_like(x), -tf.ones_like(x)) * tf.cast(eps, x.dtype)
    return first_input_only(op, grads[0] * y / (x + stabiliser))


@builtin(
    REPLACEMENT,
    formula="dy * (y - y0) / (x - x0), the op's own gradient where |x - x0| < 1e-6; on max pooling, the "
            "rescale over each window, as SHAP defines it  (DeepLIFT rescale; the batch is inputs then "
            "baselines, as SHAP's DeepExplainer runs it)",
    op_types=NONLINEARITIES + MAX_POOLS,
)
def deeplift(tf, op, grads):
    if op.type in MAX_POOLS:
        return _deeplift_max_pool(tf, op, grads)
    x, y = op.inputs[0], op.outputs[0]
    x_in, x_ref = tf.split(x, 2)
    y_in, y_ref = tf.split(y, 2)
    delta = x_in - x_ref
    both_halves = tf.concat([[2], tf.ones_like(tf.shape(x)[1:])], 0)  # the multiplier serves both halves
    tiled_delta = tf.tile(delta, both_halves)
    rescale = tf.tile((y_in - y_ref) / tf.where(tf.abs(delta) < 1e-6, tf.ones_like(delta), delta), both_halves)
    own = own_gradient(op, grads)[0]
    return first_input_only(op, tf.where(tf.abs(tiled_delta) < 1e-6, own, grads[0] * rescale))


def _deeplift_max_pool(tf, op, grads):
    """DeepLIFT's rescale rule for max pooling (SHAP's DeepExplainer, ``maxpool``): the
    change of each window's max from the baseline to the input, split between the
    input's and the baseline's arg max by the pool's own gradient, over the change
    of each entry; zero where an entry does not change. Both halves of the batch get it."""
    x, y = op.inputs[0], op.outputs[0]
    x_in, x_ref = tf.split(x, 2)
    y_in, y_ref = tf.split(y, 2)
    delta = x_in - x_ref
    cross_max = tf.maximum(y_in, y_ref)
    differences = tf.concat([cross_max - y_ref, y_in - cross_max], 0)
    at_input_max, at_reference_max = tf.split(own_gradient(op, [grads[0] * differences])[0], 2)
    safe = tf.where(tf.abs(delta) < 1e-7, tf.ones_like(delta), delta)
    multiplier = tf.where(tf.abs(delta) < 1e-7, tf.zeros_like(delta), (at_input_max + at_reference_max) / safe)
    both_halves = tf.concat([[2], tf.ones_like(tf.shape(x)[1:])], 0)
    return first_input_only(op, tf.tile(multiplier, both_halves))


@builtin(
    REPLACEMENT,
    formula="the op's own gradient, or, for a row where it is zero everywhere, dy without the part that "
            "would push x further below the threshold  (Lucid's redirected ReLU)",
    op_types=("Relu", "Relu6"),
)
def redirected_relu(tf, op, grads):
    x, dy = op.inputs[0], grads[0]
    gated = own_gradient(op, grads)[0]
    pushing_out = tf.logical_and(x < 0, dy > 0)
    if op.type == "Relu6":
        pushing_out = tf.logical_or(pushing_out, tf.logical_and(x > 6, dy < 0))
    redirected = tf.where(pushing_out, tf.zeros_like(dy), dy)
    rows = tf.reshape(gated, [tf.shape(gated)[0], -1])
    row_shape = tf.concat([tf.shape(gated)[:1], tf.ones_like(tf.shape(gated)[1:])], 0)
    passes = tf.reshape(tf.norm(rows, axis=1) > 0, row_shape)
    return first_input_only(op, tf.where(passes, gated, redirected))
