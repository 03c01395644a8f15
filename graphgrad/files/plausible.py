"""The full parse's test of whether a parsed GraphDef is one: protobuf takes many
random bytes for a GraphDef, so a graph counts only if its first nodes and
functions have names and op types that look like ones. The fast readings give
the same verdict on bytes (:mod:`graphgrad.readings.validity`).
"""

import re
from collections.abc import Sequence
from typing import Any

SAMPLE = 1000
PLAUSIBLE_NAME = re.compile(r"[^\x00-\x20\x7f]+\Z")


def plausible(nodes: Sequence[tuple[str, str]], functions: Sequence[tuple[str, list]]) -> bool:
    """The full parse's test of a parsed graph: ``nodes``, the ``(name, op)`` of the
    first ``SAMPLE`` top-level nodes, and ``functions``, ``(name, [(node name,
    op), ...])`` of the first ``SAMPLE`` functions and of their first nodes."""
    if not nodes and not functions:
        return False
    if not all(PLAUSIBLE_NAME.match(name) for name, _ in functions):
        return False
    every = [*nodes, *(node for _, body in functions for node in body)]
    return all(PLAUSIBLE_NAME.match(name) and PLAUSIBLE_NAME.match(op) for name, op in every)


def plausible_graph(graph_def: Any) -> bool:
    """:func:`plausible` of a parsed GraphDef."""
    return plausible(
        [(node.name, node.op) for node in graph_def.node[:SAMPLE]],
        [(function.signature.name, [(node.name, node.op) for node in function.node_def[:SAMPLE]])
         for function in graph_def.library.function[:SAMPLE]],
    )
