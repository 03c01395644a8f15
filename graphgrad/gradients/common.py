"""Helpers shared by the gradient families. They receive ``tf``; none imports it."""


def first_input_only(op, gradient):
    """``gradient`` for input 0, None for every other input of ``op``."""
    return [gradient] + [None] * (len(op.inputs) - 1)


def map_gradients(tf, gradients, function):
    """Apply ``function`` to each gradient tensor, keeping None as None.

    Sparse gradients (``tf.IndexedSlices``, e.g. from ``Gather``) are mapped on
    their values, so they stay sparse.
    """
    mapped = []
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


def mask(tf, condition, like):
    """``condition`` as 0/1 in the dtype of ``like``."""
    return tf.cast(condition, like.dtype)


def is_differentiable(dtype):
    return dtype.is_floating or dtype.is_complex
