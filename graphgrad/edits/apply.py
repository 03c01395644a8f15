"""A rewrite of a model, read from a file or loaded: overrides (:func:`rewrite`)
or, with ``--embed``, surrogate subgraphs (:func:`embed_in`), decided here once."""

from ..graph.model import Model
from ..readings import open_reading
from ..readings.protocol import Reading
from .rewrite import RewriteOptions, RewriteReport, rewrite


def rewrite_reading(reading: Reading, options: RewriteOptions) -> RewriteReport:
    """Apply ``options`` to a reading of a model, in place."""
    if options.embed:  # surrogates edit the graph's structure
        from .surgery import embed_in  # a rewrite of overrides does not pay for the surgery's imports

        return embed_in(reading.scopes(options.functions), options)
    return rewrite(reading, options)


def rewrite_model(model: Model, options: RewriteOptions, inplace: bool = False) -> tuple[Model, RewriteReport]:
    """Apply ``options`` to ``model``; returns ``(new_model, report)``: overrides,
    or with ``options.embed`` surrogate subgraphs. The input is left as it was
    unless ``inplace``."""
    result = model if inplace else model.copy()
    with open_reading(result) as reading:
        return result, rewrite_reading(reading, options)
