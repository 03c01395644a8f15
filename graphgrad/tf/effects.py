"""The gate of every command that runs a graph: only ops known to compute on
tensors in memory run without ``--allow-effects``.

An allowlist, not a list of known bad ops: TensorFlow has hundreds of ops that
read files, open connections or run code (datasets, readers, samplers with a
vocabulary file, proto descriptors, data services), and a new release adds more.
The list is :mod:`graphgrad.tf.allowed_ops`, generated from TensorFlow's own
registry by ``scripts/make_allowed_ops.py``; an op type it does not name is
refused, whatever it is. A node whose op type is a function of the graph's
library is a call: the function's body is gated instead, transitively, as are
the functions a node names in its attributes (a ``While``'s body, an ``If``'s
branches).

Pure functions over NodeDefs (or live ops' NodeDefs) and a GraphDef's function
bodies; nothing here imports TensorFlow.
"""

from collections.abc import Iterable

from ..graph.functions import first_names, functions_run
from .allowed_ops import ALLOWED

# What the gate says of the ops it refuses.
NOT_IN_MEMORY = "not known to compute only on tensors in memory"


def unsafe_ops_in(node_defs: Iterable, bodies: dict, also_run: dict | None = None) -> list[str]:
    """The ops among ``node_defs``, and in the function bodies they run (``bodies``:
    name -> NodeDefs), transitively, that are not known to compute only in memory;
    each as ``NAME (OP)``, ``FUNCTION/NAME (OP)`` in a body. ``also_run``
    (:func:`graphgrad.graph.functions.functions_also_run`): what a function may run
    beyond its nodes (its gradient function, the functions its attributes name, the
    other implementations of its ``api_implements``), and under ``""`` what
    differentiating may run (the registered gradients), scanned too."""
    node_defs, also_run = list(node_defs), also_run or {}
    found = [f"{node.name} ({node.op})" for node in node_defs if _refused(node.op, bodies)]
    seen, pending = set(), sorted(functions_run(node_defs, bodies) | also_run.get("", set()))
    while pending:
        name = pending.pop()
        if name in seen or name not in bodies:
            continue
        seen.add(name)
        found += [f"{name}/{node.name} ({node.op})" for node in bodies[name] if _refused(node.op, bodies)]
        pending += sorted((functions_run(bodies[name], bodies) | also_run.get(name, set())) - seen)
    return found


def refused_phrase(unsafe: list[str]) -> str:
    """The ops :func:`unsafe_ops_in` found, for a one-line refusal: how many, every
    op type among them, and the first nodes."""
    types = sorted({entry.rpartition(" (")[2].rstrip(")") for entry in unsafe})
    return (f"{len(unsafe)} op(s) {NOT_IN_MEMORY}, of type(s) {', '.join(types)} "
            f"({first_names(sorted(unsafe))})")


def _refused(op_type: str, bodies: dict) -> bool:
    return op_type not in ALLOWED and op_type not in bodies
