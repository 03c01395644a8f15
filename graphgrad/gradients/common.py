"""Helpers shared by the gradient families. They receive ``tf``; none imports it
at module level."""

from collections.abc import Callable, Sequence
from typing import Any

from ..names import VALUE_INDEPENDENT


def first_input_only(op: Any, gradient: Any) -> list:
    """``gradient`` for input 0, None for every other input of ``op``."""
    return [gradient] + [None] * (len(op.inputs) - 1)


def custom_gradient_results(op: Any) -> int | None:
    """How many inputs of ``op`` are results, when it is the ``IdentityN`` that
    ``tf.custom_gradient`` emits in graph mode, else None.

    That node is ``IdentityN(results..., args..., variables...)``, and
    ``tf.custom_gradient`` hands on only its first ``len(results)`` outputs. So a
    split is taken only where the graph says it: every output something reads lies
    before it (tf.gradients' own ``zeros_like`` of the others reads no value); the
    results are computed from the arguments (each result depends on an input after
    the split, or is one of them), never the other way round. Where several splits
    fit, the one whose results are the arguments themselves (a forward that is the
    identity, as Keras' gradient clipping writes it), else the one whose results
    match the arguments pairwise in dtype and known shape; where the graph still
    cannot tell, ValueError says why. An ``IdentityN`` of unrelated tensors
    (``tf.identity_n``) has no split: None.
    """
    if op.type != "IdentityN" or len(op.inputs) < 2:
        return None
    inputs = [tensor.ref() for tensor in op.inputs]  # graph tensors are not hashable in TF2
    ancestors_of = [ancestors(tensor) for tensor in op.inputs]
    read = max((index + 1 for index, output in enumerate(op.outputs)
                if any(consumer.type not in VALUE_INDEPENDENT for consumer in output.consumers())), default=1)
    splits = [
        split for split in range(read, len(inputs))
        if all(any(inputs[j] in ancestors_of[i] for j in range(split, len(inputs))) for i in range(split))
        and not any(inputs[i] in ancestors_of[j] and inputs[i] != inputs[j]
                    for i in range(split) for j in range(split, len(inputs)))
    ]
    if len(splits) <= 1:
        return splits[0] if splits else None
    for fits in (_results_are_arguments, _results_match_arguments):
        fitting = [split for split in splits if fits(op, split)]
        if len(fitting) == 1:
            return fitting[0]
    raise ValueError(
        f"node {op.name!r}: the IdentityN of a tf.custom_gradient, whose results cannot be told from its "
        f"arguments: its first {read} output(s) are read, and {len(splits)} splits of its {len(inputs)} inputs "
        f"fit the graph ({', '.join(str(split) for split in splits)} results). To fix this, override the nodes "
        "that read it, or the ops inside its forward, instead"
    )


def _results_are_arguments(op: Any, split: int) -> bool:
    """Whether the first ``split`` inputs are the next ``split`` ones (a forward that is the identity)."""
    inputs = [tensor.ref() for tensor in op.inputs]
    return 2 * split <= len(inputs) and inputs[:split] == inputs[split:2 * split]


def _results_match_arguments(op: Any, split: int) -> bool:
    """Whether result i and argument i agree in dtype and, where both are known, shape, for every result."""
    return 2 * split <= len(op.inputs) and all(
        result.dtype.base_dtype == argument.dtype.base_dtype and result.shape.is_compatible_with(argument.shape)
        for result, argument in zip(op.inputs[:split], op.inputs[split:2 * split]))


def ancestors(tensor: Any) -> set:
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
    argument of its dtype and a compatible shape, or without a gradient, gives nothing.
    """
    results = custom_gradient_results(op)
    if results is None:
        return [(0, op.inputs[0], grads[0])]
    pairs = []
    for index in range(results):
        argument = results + index
        if argument < len(op.inputs) and grads[index] is not None and \
                op.inputs[argument].dtype.base_dtype == op.outputs[index].dtype.base_dtype and \
                op.inputs[argument].shape.is_compatible_with(op.outputs[index].shape):
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
