"""The gradients TensorFlow cached for a traced function, forgotten.

A ``ConcreteFunction`` builds its backward function the first time a gradient of
it is taken and keeps it (per tape kind, and for graph-mode ``tf.gradients``).
An override written into the function's graph afterwards would never be seen:
TensorFlow reuses what it built. :func:`forget_cached_gradients` empties those
caches, so that the next gradient is built again, through the overrides.

The caches are private attributes of TensorFlow's function objects (the same
names from 2.13 to 2.21, ``concrete_function.py``); they are found as the
attributes of whatever object holds the graph, so that nothing here depends on
how the function was reached (``tf.function``, ``get_concrete_function``, a
loaded SavedModel's functions).
"""

from __future__ import annotations

import gc
from typing import Any

# ConcreteFunction: tape functions by (jvp need, forwardprop indices); the
# delayed-rewrite functions (graph mode and tape-free calls): pairs by output count.
_GRADIENT_CACHES = ("_first_order_tape_functions", "_higher_order_tape_functions", "_cached_function_pairs")


def _attributes_holding(graph: Any) -> list[dict]:
    """The attribute dicts of the objects whose ``_func_graph`` is ``graph``."""
    holders = []
    for referrer in gc.get_referrers(graph):
        # Python 3.11 and later may report the object itself (inline attributes)
        attributes = referrer if isinstance(referrer, dict) else getattr(referrer, "__dict__", None)
        if isinstance(attributes, dict) and attributes.get("_func_graph") is graph:
            holders.append(attributes)
    return holders


def forget_cached_gradients(graph: Any) -> int:
    """Empty the gradient caches of the traced functions built on ``graph`` (a
    ``FuncGraph``; a plain ``tf.Graph`` has none). Returns how many cached
    gradient builds were dropped (0 when no gradient had been taken yet)."""
    dropped = 0
    for attributes in _attributes_holding(graph):
        for name in _GRADIENT_CACHES:
            cache = attributes.get(name)
            if isinstance(cache, dict):
                dropped += len(cache)
                cache.clear()
    return dropped
