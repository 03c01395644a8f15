"""What stops a gradient, told from op types and structure alone: the facts that
``check`` (on the graph TensorFlow built) and ``show`` (on the file, without
TensorFlow) share, so that the two mark the same nodes."""

from collections.abc import Iterable

# TensorFlow registers these as not differentiable: their gradient is None (math_grad.py,
# array_grad.py; a registry lookup cannot tell these from real gradients). Not FloorMod: its
# gradient for x is 1, which x - FloorMod(x, c) cancels to a zero found by value.
NONE_GRADIENT = {"Round", "Floor", "Ceil", "Rint", "FloorDiv", "ArgMax", "ArgMin", "TruncateDiv"}

# Their gradient is registered, and zero everywhere.
ZERO_GRADIENT = {"Sign"}

# They stop the gradient on purpose; what lies behind one is never differentiated.
STOPPERS = {"StopGradient", "PreventGradient"}


def moments_stop(op_type: str, source_type: str, averaged: str, stopped: str,
                 readers: Iterable[tuple[str, Iterable[str]]]) -> bool:
    """Whether a node is the StopGradient of tf.nn.moments (batch and layer
    normalisation): ``squared_difference(v, stop_gradient(reduce_mean(v)))``, which
    stops the gradient through the mean it subtracts in the variance on purpose.
    Told by that structure, whatever the scope is called: the node (``op_type``,
    its output ``stopped``) reads a Mean (``source_type``) of ``averaged``, and one of
    ``readers`` (op type, the tensors it reads) is a SquaredDifference of both."""
    if op_type != "StopGradient" or source_type != "Mean":
        return False
    return any(reader_type == "SquaredDifference" and {averaged, stopped} <= set(inputs)
               for reader_type, inputs in readers)
