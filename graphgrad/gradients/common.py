"""Helpers shared by the gradient families. They receive ``tf``; none imports it
at module level."""

from collections.abc import Callable, Sequence
from typing import Any


def first_input_only(op: Any, gradient: Any) -> list:
    """``gradient`` for input 0, None for every other input of ``op``."""
    return [gradient] + [None] * (len(op.inputs) - 1)


def custom_gradient_results(op: Any) -> int | None:
    """How many inputs of ``op`` are results, when it is the ``IdentityN`` that
    ``tf.custom_gradient`` emits in graph mode, else None.

    That node is ``IdentityN(results..., args..., variables...)``: the results are
    computed from the arguments (and variables), never the other way round. So the
    split is the first position after which no input depends on one before it,
    while each input before it depends on one after it (or is one of them). An
    ``IdentityN`` of unrelated tensors (``tf.identity_n``) has no such split.
    """
    if op.type != "IdentityN" or len(op.inputs) < 2:
        return None
    inputs = [tensor.ref() for tensor in op.inputs]  # graph tensors are not hashable in TF2
    ancestors = [_ancestors(tensor) for tensor in op.inputs]
    for split in range(1, len(inputs)):
        results, rest = range(split), range(split, len(inputs))
        if all(any(inputs[j] in ancestors[i] for j in rest) for i in results) and not any(
            inputs[i] in ancestors[j] and inputs[i] != inputs[j] for i in results for j in rest
        ):
            return split
    return None


def _ancestors(tensor) -> set:
    """References to ``tensor`` and every tensor it is computed from (data inputs,
    transitively)."""
    seen, pending = {tensor.ref()}, [tensor]
    while pending:
        for source in pending.pop().op.inputs:
            if source.ref() not in seen:
                seen.add(source.ref())
                pending.append(source)
    return seen


def elementwise_pairs(op: Any, grads: Sequence) -> list:
    """``(input index, x, dy)`` for a replacement that maps one input to one output.

    Input 0 and output 0 for most ops. For ``tf.custom_gradient``'s ``IdentityN``
    (see :func:`custom_gradient_results`), the convention of its own gradient:
    the upstream gradient of result i goes to argument i, and the results get
    None (``[None] * len(results) + grads_of_args``). A result without an
    argument of its dtype, or without a gradient, gives nothing.
    """
    results = custom_gradient_results(op)
    if results is None:
        return [(0, op.inputs[0], grads[0])]
    pairs = []
    for index in range(results):
        argument = results + index
        if argument < len(op.inputs) and grads[index] is not None and \
                op.inputs[argument].dtype.base_dtype == op.outputs[index].dtype.base_dtype:
            pairs.append((argument, op.inputs[argument], grads[index]))
    return pairs


def gradients_at(op: Any, gradients: dict) -> list:
    """One entry per input of ``op``: ``gradients[index]`` where given, else None."""
    return [gradients.get(index) for index in range(len(op.inputs))]


def elementwise(op: Any, grads: Sequence, derivative: Callable) -> list:
    """``dy * derivative(x)`` for each pair of :func:`elementwise_pairs`."""
    return gradients_at(op, {index: dy * derivative(x, dy) for index, x, dy in elementwise_pairs(op, grads)})


def own_gradient(op: Any, grads: Sequence) -> list:
    """What TensorFlow's gradient for ``op``'s type gives for ``grads``: one entry
    per input (None where it gives none). Raises LookupError when there is none."""
    from ..tf.internals import registered_gradient  # no public lookup; gradients_util reads it so

    try:
        function = registered_gradient(op.type)
    except LookupError:
        raise LookupError(
            f"node {op.name!r}: op type {op.type} has no TensorFlow gradient for a transform "
            "to act on. To fix this, start the spec with a replacement, e.g. identity|scale(0.5)"
        ) from None
    if function is None:  # registered as not differentiable
        return [None] * len(op.inputs)
    result = function(op, *grads)
    return list(result) if isinstance(result, (list, tuple)) else [result]


def map_gradients(tf: Any, gradients: Sequence, function: Callable) -> list:
    """Apply ``function`` to each gradient tensor, keeping None as None.

    Sparse gradients (``tf.IndexedSlices``, e.g. from ``Gather``) are mapped on
    their values, so they stay sparse.
    """
    mapped: list = []
    for gradient in gradients:
        if gradient is None:
            mapped.append(None)
        elif isinstance(gradient, tf.IndexedSlices):
            mapped.append(
                tf.IndexedSlices(function(gradient.values), gradient.indices, gradient.dense_shape)
            )
        else:
            mapped.append(function(gradient))
    return mapped


def mask(tf: Any, condition: Any, like: Any) -> Any:
    """``condition`` as 0/1 in the dtype of ``like``."""
    return tf.cast(condition, like.dtype)


def is_differentiable(dtype: Any) -> bool:
    return dtype.is_floating or dtype.is_complex
