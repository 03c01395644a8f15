"""Attribution rules: the gradients that saliency and relevance methods put on
nonlinearities (DeepExplain, Lucid, SHAP). Linear ops keep their own gradient, so
a method is these rules on the nonlinear ops, then the gradient times the input
(see :mod:`graphgrad.tf.attribute`).
"""

from typing import Any

from ..errors import SpecError
from ..names import TWIN_PREFIX
from .common import ancestors, first_input_only, own_gradient
from .masking import RELU_FAMILY
from .registry import REPLACEMENT, Param, builtin, check_positive

# Elementwise nonlinearities: one input, one output of its shape, y = f(x). The
# op types eps_lrp and deeplift are meant for.
NONLINEARITIES = RELU_FAMILY + ("Sigmoid", "Tanh", "Softplus", "Softsign")
# Max pooling: nonlinear over its window; deeplift rescales it there, as SHAP does.
MAX_POOLS = ("MaxPool", "MaxPoolV2", "MaxPool3D")
# Products: nonlinear when both factors change with x (an LSTM's or a GRU's gates).
PRODUCTS = ("Mul",)
# Softmax over the last axis (a classifier's head, attention weights): deeplift
# splits it into the exponentials and their normaliser, as SHAP does.
SOFTMAXES = ("Softmax", "LogSoftmax")
# Every op type deeplift has a rule for.
DEEPLIFT_OPS = NONLINEARITIES + MAX_POOLS + PRODUCTS + SOFTMAXES
# Where a gate comes from: a product's factor computed by one of these (or one minus
# it, a GRU's 1 - z) scales the other factor, the signal, as LRP treats gates.
GATES = ("Sigmoid", "Softmax")
# What a gate may pass through on its way to the product, unchanged or cut into parts
# (a GRU cell splits one Sigmoid into its reset and update gates): op type -> the
# index of the input it passes on.
_FORWARDS = {"Identity": 0, "Snapshot": 0, "Split": 1, "SplitV": 0, "Unpack": 0, "Slice": 0, "StridedSlice": 0,
             "Reshape": 0}
# The linear layers LRP's alpha-beta rule redistributes relevance across.
LINEAR_LAYERS = ("MatMul", "Conv2D")
_STABILISER = 1e-9  # keeps an all-zero z+ or z- from dividing by zero (its share is zero then)


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
    formula="dy * y / (x + eps * sign(x)), sign(0) = 1; on softmax, each output's relevance to its own "
            "logit, the normaliser taken as a gate  (epsilon-LRP, as DeepExplain)",
    check=check_positive("eps"),
    op_types=NONLINEARITIES + ("Softmax",),
)
def eps_lrp(tf, op, grads, eps):
    x, y = op.inputs[0], op.outputs[0]
    stabiliser = tf.where(x >= 0, tf.ones_like(x), -tf.ones_like(x)) * tf.cast(eps, x.dtype)
    return first_input_only(op, grads[0] * y / (x + stabiliser))


@builtin(
    REPLACEMENT,
    formula="dy * (y - y0) / (x - x0), the op's own gradient where |x - x0| < 1e-6; on max pooling, the "
            "rescale over each window, as SHAP defines it; on a product a * b, each factor's multiplier the "
            "mean of the other's two values, dy * (b + b0) / 2 (the Shapley split of SHAP's two-input rule, "
            "which gates need); on softmax e_j / S, the rescale of each exponential and the two-input rule "
            "between it and the normaliser S = sum_k e_k (log softmax: log S rescaled)  (DeepLIFT rescale; "
            "the batch is inputs then baselines, as SHAP's DeepExplainer runs it)",
    op_types=DEEPLIFT_OPS,
)
def deeplift(tf, op, grads):
    if not _Pairs(tf, op).holds_both(op.outputs[0]):  # a weight's value in a loop body: while_v2 differentiates
        return own_gradient(op, grads)  # it too, and its gradient never reaches x; it holds no baseline half
    if op.type in MAX_POOLS:
        return _deeplift_max_pool(tf, op, grads)
    if op.type in PRODUCTS:
        return _deeplift_product(tf, op, grads)
    if op.type in SOFTMAXES:
        return _deeplift_softmax(tf, op, grads)
    pairs = _Pairs(tf, op)
    x_in, x_ref = pairs.of(op.inputs[0], 0)
    y_in, y_ref = pairs.of(op.outputs[0], 0, output=True)
    delta = x_in - x_ref
    every_delta = pairs.for_all(delta)  # the multiplier serves both halves
    rescale = pairs.for_all((y_in - y_ref) / tf.where(tf.abs(delta) < 1e-6, tf.ones_like(delta), delta))
    own = own_gradient(op, grads)[0]
    return first_input_only(op, tf.where(tf.abs(every_delta) < 1e-6, own, grads[0] * rescale))


class _Pairs:
    """An op's values at the input and at the baseline, which DeepLIFT's rules compare:
    the two halves of one batch (the inputs, then their baselines: SHAP's convention),
    or, where the graph runs its baselines through a twin of itself (a batch fixed by
    the graph, :mod:`graphgrad.edits.twin`), the op's own and its twin's."""

    def __init__(self, tf: Any, op: Any):
        self.tf, self.op = tf, op
        try:
            self.twin = op.graph.get_operation_by_name(TWIN_PREFIX + op.name)
        except (KeyError, ValueError):
            self.twin = None

    def of(self, tensor: Any, index: int, output: bool = False) -> tuple:
        """(at the input, at the baseline) of the op's input (or output) ``index``, which is ``tensor``."""
        if self.twin is None:
            return tuple(self.tf.split(tensor, 2))
        return tensor, (self.twin.outputs if output else self.twin.inputs)[index]

    def for_all(self, multiplier: Any) -> Any:
        """A multiplier of the input's rows, for every row the op's gradient covers."""
        if self.twin is not None:
            return multiplier
        return self.tf.tile(multiplier, self.tf.concat([[2], self.tf.ones_like(self.tf.shape(multiplier)[1:])], 0))

    def holds_both(self, tensor: Any) -> bool:
        """Whether ``tensor`` may hold the inputs' rows and the baselines' (a batch
        of an even size, or unknown), as every value computed from x does."""
        if self.twin is not None:
            return True
        rank = tensor.shape.rank
        return rank != 0 and (rank is None or tensor.shape[0] is None or tensor.shape[0] % 2 == 0)

    def upstream(self, grad: Any) -> Any:
        """The multipliers reaching the op's output, of the input's rows (both halves carry the same)."""
        return grad if self.twin is not None else self.tf.split(grad, 2)[0]

    def has_rows(self, tensor: Any, like: Any) -> bool | None:
        """Whether a factor varies with the rows of ``like`` (else a constant broadcast
        along them, whose own value is its mean), as the static shapes tell; None where
        they do not (a TF1 loop imported from a GraphDef keeps no shapes inside it)."""
        if self.twin is not None:
            return True
        rank, like_rank = tensor.shape.rank, like.shape.rank
        if rank == 0 or (rank is not None and tensor.shape[0] == 1):
            return False
        if rank is None or like_rank is None:
            return None
        return rank == like_rank

    def varies(self, tensor: Any, like: Any) -> Any:
        """:meth:`has_rows` decided when the graph runs: the same rank and first dimension as ``like``."""
        tf = self.tf

        def first(t: Any) -> Any:  # a scalar's first dimension taken as 0
            return tf.concat([tf.shape(t), [0]], 0)[0]

        return tf.logical_and(tf.equal(tf.rank(tensor), tf.rank(like)), tf.equal(first(tensor), first(like)))


def _deeplift_product(tf, op, grads):
    """DeepLIFT's rule for z = a * b when both factors may change from the baseline
    (SHAP's ``nonlinearity_2d`` for Mul): of z's change, a gets ((a - a0) (b + b0) / 2)
    and b the rest, so a's multiplier is the mean of b's input and baseline values
    (b itself where b holds no rows, a constant: the op's own gradient then)."""
    a, b = op.inputs
    z = op.outputs[0]
    pairs = _Pairs(tf, op)

    def halves_mean(t, index):
        at_input, at_baseline = pairs.of(t, index)
        mean = (at_input + at_baseline) * tf.cast(0.5, t.dtype)
        return mean if pairs.twin is not None else tf.concat([mean, mean], 0)

    def centred(t, index):
        rows = pairs.has_rows(t, z)
        if rows is None:  # shapes unknown (inside an imported TF1 loop): told apart as the graph runs
            return tf.cond(pairs.varies(t, z), lambda: halves_mean(t, index), lambda: tf.identity(t))
        return halves_mean(t, index) if rows else t

    def summed_to(gradient, t):  # over the dimensions the product broadcast t along
        reduce, _ = tf.raw_ops.BroadcastGradientArgs(s0=tf.shape(t), s1=tf.shape(z))
        return tf.reshape(tf.reduce_sum(gradient, reduce), tf.shape(t))

    return [summed_to(grads[0] * centred(b, 1), a), summed_to(grads[0] * centred(a, 0), b)]


def _deeplift_softmax(tf, op, grads):
    """DeepLIFT for softmax over the last axis as SHAP's DeepExplainer decomposes it:
    c = x - max(x) for the input and the baseline each, e_j = exp(c_j), S = sum_k e_k,
    s_j = e_j / S; the rescale rule on each exponential, the sum linear, and SHAP's
    two-input rule between e_j and 1 / S (e_j's multiplier the mean of 1 / S at input
    and baseline; S's the mean of e_j times (1/S - 1/S0) / (S - S0) = -1 / (S S0)).
    Log softmax is c_j - log S, log S rescaled. Each max is taken out of its own row,
    which keeps the two-input rule's shares of the order of s (one shift for both rows
    makes the smaller row's S tiny, and the shares cancel in the large); the
    multipliers of c then carry over to x by c's change over x's (where x's change is
    below 1e-12, c's multiplier, as SHAP does). Computed in float64."""
    x = op.inputs[0]
    pairs = _Pairs(tf, op)
    x_in, x_ref = (tf.cast(t, tf.float64) for t in pairs.of(x, 0))
    c_in, c_ref = x_in - tf.reduce_max(x_in, -1, keepdims=True), x_ref - tf.reduce_max(x_ref, -1, keepdims=True)
    exp_in, exp_ref = tf.exp(c_in), tf.exp(c_ref)
    sum_in, sum_ref = tf.reduce_sum(exp_in, -1, keepdims=True), tf.reduce_sum(exp_ref, -1, keepdims=True)
    dy = pairs.upstream(tf.cast(grads[0], tf.float64))
    exp_rescale = _rescale(tf, exp_in - exp_ref, c_in - c_ref, exp_in)
    if op.type == "Softmax":
        to_exp = dy * (1 / sum_in + 1 / sum_ref) / 2
        to_sum = -tf.reduce_sum(dy * (exp_in + exp_ref) / 2, -1, keepdims=True) / (sum_in * sum_ref)
        of_c = (to_exp + to_sum) * exp_rescale
    else:
        log_rescale = _rescale(tf, tf.math.log(sum_in) - tf.math.log(sum_ref), sum_in - sum_ref, 1 / sum_in)
        of_c = dy - tf.reduce_sum(dy, -1, keepdims=True) * log_rescale * exp_rescale
    multiplier = _rescale(tf, of_c * (c_in - c_ref), x_in - x_ref, of_c)
    return first_input_only(op, tf.cast(pairs.for_all(multiplier), x.dtype))


def _rescale(tf, change_out, change_in, where_unchanged):
    """change_out / change_in, and ``where_unchanged`` where |change_in| < 1e-12."""
    unchanged = tf.abs(change_in) < 1e-12
    return tf.where(unchanged, where_unchanged + tf.zeros_like(change_out),
                    change_out / tf.where(unchanged, tf.ones_like(change_in), change_in))


def _deeplift_max_pool(tf, op, grads):
    """DeepLIFT's rescale rule for max pooling (SHAP's DeepExplainer, ``maxpool``): the
    change of each window's max from the baseline to the input, split between the
    input's and the baseline's arg max by the pool's own gradient, over the change
    of each entry; zero where an entry does not change. Both halves of the batch get it."""
    pairs = _Pairs(tf, op)
    x_in, x_ref = pairs.of(op.inputs[0], 0)
    y_in, y_ref = pairs.of(op.outputs[0], 0, output=True)
    delta = x_in - x_ref
    cross_max = tf.maximum(y_in, y_ref)
    if pairs.twin is None:
        at_input_max, at_reference_max = tf.split(own_gradient(op, [grads[0] * tf.concat(
            [cross_max - y_ref, y_in - cross_max], 0)])[0], 2)
    else:  # each max's change routed to its own arg max, the baseline's through the twin
        dy = pairs.upstream(grads[0])
        at_input_max = own_gradient(op, [dy * (cross_max - y_ref)])[0]
        at_reference_max = own_gradient(pairs.twin, [dy * (y_in - cross_max)])[0]
    safe = tf.where(tf.abs(delta) < 1e-7, tf.ones_like(delta), delta)
    multiplier = tf.where(tf.abs(delta) < 1e-7, tf.zeros_like(delta), (at_input_max + at_reference_max) / safe)
    return first_input_only(op, pairs.for_all(multiplier))


@builtin(
    REPLACEMENT,
    Param("eps", float, 1e-4),
    formula="the op's own gradient of dy * z / (z + eps * sign(z)), z the layer's output (the op's, plus "
            "the bias a BiasAdd after it adds), sign(0) = 1  (epsilon-LRP at a linear layer, as the layer-wise "
            "definition and innvestigate put it: R_i = sum_j x_i w_ij / (z_j + eps sign(z_j)) R_j)",
    check=check_positive("eps"),
    op_types=LINEAR_LAYERS + ("DepthwiseConv2dNative",),
)
def eps_lrp_linear(tf, op, grads, eps):
    z = _layer_output(op)
    stabiliser = tf.where(z >= 0, tf.ones_like(z), -tf.ones_like(z)) * tf.cast(eps, z.dtype)
    return first_input_only(op, own_gradient(op, [grads[0] * z / (z + stabiliser)])[0])


def gate_factor(op: Any) -> int | None:
    """Which input of the product ``op`` is a gate: the output of a Sigmoid or a
    Softmax, or one minus it (through Identity, or a part of it), where the other
    input is not one; None where neither or both are."""
    gates = [index for index, factor in enumerate(op.inputs) if _is_gate(factor)]
    return gates[0] if len(op.inputs) == 2 and len(gates) == 1 else None


def _is_gate(tensor: Any) -> bool:
    op = _forwarded(tensor).op
    if op.type == "Sub":  # 1 - z (a GRU's update gate, kept for the candidate)
        return _forwarded(op.inputs[0]).op.type == "Const" and _is_gate(op.inputs[1])
    return op.type in GATES


def _forwarded(tensor: Any) -> Any:
    while tensor.op.type in _FORWARDS:
        tensor = tensor.op.inputs[_FORWARDS[tensor.op.type]]
    return tensor


def _computed_from_inputs(tensor: Any) -> bool:
    """Whether ``tensor`` depends on a floating-point placeholder of its graph (the
    graph's inputs; in a function body, its arguments), through loops included."""
    return any(ref.deref().op.type in ("Placeholder", "PlaceholderWithDefault") and ref.deref().dtype.is_floating
               for ref in ancestors(tensor))


@builtin(
    REPLACEMENT,
    formula="on a product gate * signal (the gate a Sigmoid's or Softmax's output, or one minus it), the "
            "op's own gradient to the signal and none to the gate, where the signal is computed from the "
            "graph's inputs; elsewhere the op's own gradient  (LRP's signal-take-all rule for LSTM and GRU "
            "gates, Arras et al. 2017)",
    op_types=PRODUCTS,
)
def signal_take_all(tf, op, grads):
    own = own_gradient(op, grads)
    gate = gate_factor(op)
    if gate is not None and _computed_from_inputs(op.inputs[1 - gate]):
        own[gate] = None
    return own


def _layer_output(op: Any) -> Any:
    """The output of the layer a MatMul or convolution ``op`` computes: the BiasAdd's
    that reads only it, where there is one (a Dense or Conv2D layer's op pair), else
    the op's own. LRP's rules take a layer's relevance at its biased output."""
    output = op.outputs[0]
    readers = output.consumers()
    if len(readers) == 1 and readers[0].type == "BiasAdd" and readers[0].inputs[0] is output:
        return readers[0].outputs[0]
    return output


def _check_alpha_beta(params: dict) -> None:
    alpha, beta = params["alpha"], params["beta"]
    if not all(isinstance(value, (int, float)) for value in (alpha, beta)):
        raise SpecError("lrp_alpha_beta: alpha and beta are numbers written in the spec, not tensors")
    if beta < 0 or abs(alpha - beta - 1) > 1e-9:
        raise SpecError(f"lrp_alpha_beta: alpha - beta must be 1 and beta at least 0 (relevance is conserved), "
                        f"got alpha={alpha!r}, beta={beta!r}")


@builtin(
    REPLACEMENT,
    Param("alpha", float, 1.0),
    Param("beta", float, 0.0),
    formula="relevance R = z * dy at the layer's output z = x W + b (b: the bias a BiasAdd after the op "
            "adds), passed to x in the shares of the positive and negative parts of each x_i w_ij, the bias "
            "left out of the shares: R_i = sum_j (alpha (x_i w_ij)+ / z+_j - beta (x_i w_ij)- / z-_j) R_j, "
            "given as R_i / x_i  (LRP alpha-beta, Bach et al. 2015, as innvestigate's rules that ignore the "
            "bias define it; alpha=1, beta=0 is the z+ rule)",
    check=_check_alpha_beta,
    op_types=LINEAR_LAYERS,
)
def lrp_alpha_beta(tf, op, grads, alpha, beta):
    x, weights = op.inputs[0], op.inputs[1]
    relevance = grads[0] * _layer_output(op)
    positive_weights, negative_weights = tf.nn.relu(weights), -tf.nn.relu(-weights)
    positive_x, negative_x = tf.nn.relu(x), -tf.nn.relu(-x)
    forward, backward = _linear_pair(tf, op)
    z_plus = forward(positive_x, positive_weights) + forward(negative_x, negative_weights)
    share_plus = alpha * relevance / (z_plus + _STABILISER)
    # (x_i w_ij)+ / x_i is w_ij+ where x_i > 0 and w_ij- where x_i < 0; (x_i w_ij)- / x_i the other way round
    above, below = backward(share_plus, positive_weights), backward(share_plus, negative_weights)
    if beta:  # z+ (beta 0) needs no negative part: half the convolutions
        z_minus = forward(positive_x, negative_weights) + forward(negative_x, positive_weights)
        share_minus = beta * relevance / (z_minus - _STABILISER)
        above -= backward(share_minus, negative_weights)
        below -= backward(share_minus, positive_weights)
    zero = tf.zeros_like(x)
    return first_input_only(op, tf.where(x > 0, above, tf.where(x < 0, below, zero)))


def _linear_pair(tf, op):
    """``(forward(x, w), backward(dz, w))`` of a MatMul or Conv2D with ``op``'s
    attributes: the op itself on other operands, and its gradient with respect to x."""
    if op.type == "MatMul":
        return _matmul_pair(tf, op.get_attr("transpose_a"), op.get_attr("transpose_b"))
    attrs = {key: op.get_attr(key) for key in ("strides", "padding", "data_format", "dilations")}
    explicit = op.get_attr("explicit_paddings") if attrs["padding"] == b"EXPLICIT" else []
    return (lambda x, w: tf.raw_ops.Conv2D(input=x, filter=w, explicit_paddings=explicit, **attrs),
            lambda dz, w: tf.raw_ops.Conv2DBackpropInput(input_sizes=tf.shape(op.inputs[0]), filter=w,
                                                         out_backprop=dz, explicit_paddings=explicit, **attrs))


def _matmul_pair(tf, transpose_a: bool, transpose_b: bool):
    def forward(x, w):
        return tf.linalg.matmul(x, w, transpose_a=transpose_a, transpose_b=transpose_b)

    def backward(dz, w):
        if transpose_a:
            return tf.linalg.matmul(w, dz, transpose_a=transpose_b, transpose_b=True)
        return tf.linalg.matmul(dz, w, transpose_b=not transpose_b)

    return forward, backward


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
