"""graphgrad attribute: attributions of a graph file's output, by gradient overrides.

A method is a set of rules of the gradient library on op types (guided
backpropagation: ``guided_relu`` on the Relu family; epsilon-LRP: ``eps_lrp`` on
the elementwise nonlinearities; ...), applied to a copy of the graph in memory,
then tf.gradients of ``y[..., target]`` with respect to x, times the input for the
methods that say so. Linear and structural ops keep their own gradient; any other
op type on the x -> y paths that the method has no rule for is named before the
graph runs (and refused for the methods whose meaning depends on a rule at every
nonlinearity). The graph runs as ``check`` runs it (:func:`graphgrad.tf.run.open_run`).
"""

from typing import Any

from ..errors import UsageError
from ..files.reading import read_model
from ..methods.options import COMMAND_NAMES, AttributeOptions, AttributionReport
from .explainer import Explainer
from .loading import chosen_tags, refuse_misshapen_feeds


def attribute_model(path: str, inputs: Any, baseline: Any, options: AttributeOptions) -> tuple[Any, AttributionReport]:
    """Attributions of ``y[..., target]`` to x for every row of ``inputs`` (an
    array of x's shape), as ``options.method`` computes them; ``baseline`` (an
    array of x's shape, or of one row) for the methods that take one, None: zeros.
    Every placeholder y reads besides x must be fed (``options.feeds``); rows run
    in batches the graph accepts (:mod:`graphgrad.tf.batches`). Returns
    ``(attributions, report)``; the file is not changed. One :class:`Explainer`,
    used once."""
    import numpy as np

    model = read_model(path, options.kind)
    if options.x:  # the rows against x's declared shape, from the file, before TensorFlow
        tags, inputs = chosen_tags(model, options.tags), np.asarray(inputs)
        try:
            refuse_misshapen_feeds(model, tags, {options.x: inputs}, "--input", rows=True)
        except UsageError as misshapen:
            try:  # unless it is several examples of an x without a batch axis, stacked (the explainer tells)
                if not inputs.ndim:
                    raise
                refuse_misshapen_feeds(model, tags, {options.x: inputs[0]}, "--input")
            except UsageError:
                raise misshapen from None
    return Explainer(model, options.method, options, COMMAND_NAMES).explain(inputs, baseline=baseline)
