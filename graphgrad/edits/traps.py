"""Patterns in a graph that make a rewrite do something other than what was meant.

Pure functions over nodes with ``name``, ``op`` and ``input`` (NodeDefs, or the
cut-down heads of :mod:`graphgrad.readings.small_nodes`), shared by ``rewrite`` and ``check``.
"""

import re
from collections.abc import Callable, Iterable, Sequence
from itertools import chain
from typing import Any

from ..errors import SpecError
from ..gradients.spec import GradientSpec, spec_from_attr_value
from ..names import ADDS, SIGN

# Replacements that do not look at x: a shift of x cannot hurt them.
BLIND_TO_X = ("identity", "zero", "call")


def _producer(reference: str) -> str:
    return reference.partition(":")[0].lstrip("^")


def graphgrad_spec(value: str | None) -> GradientSpec | None:
    """The graphgrad spec an override value names; None for other names, and for
    graphgrad names this process cannot rebuild (reported as unresolved elsewhere)."""
    try:
        return spec_from_attr_value(value) if value else None
    except SpecError:
        return None


def sign_notes(nodes: Sequence | None, spec_of: Callable[[str], Any], prefix: str = "", signs: Sequence | None = None,
               adds: Sequence | None = None) -> list[str]:
    """:func:`shifted_sign_notes` for one list of ``nodes``; ``signs`` and ``adds``,
    if given, are its Sign and Add/AddV2 nodes, found by the caller. ``spec_of`` is
    called only for a Sign that reads such an add."""
    if signs is None:  # then nodes are given
        nodes = nodes or []
        signs = [node for node in nodes if node.op == SIGN]
        adds = [node for node in nodes if node.op in ADDS]
    shifted = shifted_adds(adds, {node.name for node in signs}) if signs and adds else set()
    return shifted_sign_notes(signs, shifted, spec_of, prefix) if shifted else []


def looks_at_x(spec: GradientSpec) -> bool:
    """Whether the gradient ``spec`` gives depends on the value of x (ste's clip, ...)."""
    return bool(spec.stages) and spec.stages[0].name not in BLIND_TO_X


def shifted_adds(adds: Iterable, sign_names: set) -> set:
    """The names of the Add/AddV2 nodes among ``adds`` that read a Sign (of ``sign_names``)."""
    references = set(chain.from_iterable(add.input for add in adds))
    # Inputs are mostly plain names: a set intersection (in C) before any is taken apart.
    if references.isdisjoint(sign_names) and not {
        _producer(reference) for reference in references if ":" in reference or reference.startswith("^")
    } & sign_names:
        return set()
    return {add.name for add in adds if any(_producer(reference) in sign_names for reference in add.input)}


def shifted_sign_notes(signs: Iterable, shifted: set, spec_of: Callable[[str], Any], where: str = "") -> list[str]:
    """Notes on each Sign of ``signs`` whose input is ``Sign(x) + c`` (an add of
    ``shifted``, see :func:`shifted_adds`: larq's ``sign(sign(x) + 0.1)``, which
    makes sign(0) = 1) and whose new gradient ``spec_of(name)`` (None: none) looks
    at x: it sees |±1 + c| instead of x, so a clipping estimator such as ste gives
    zero for every positive input. ``where``: a prefix for names (``FUNCTION/``).
    """
    notes = []
    for sign in signs:
        if not (sign.input and _producer(sign.input[0]) in shifted):
            continue
        spec = spec_of(sign.name)
        if spec is not None and looks_at_x(spec):
            name = where + sign.name
            notes.append(
                f"{name} reads {where}{_producer(sign.input[0])} = Sign(...) + c (larq's sign, which makes "
                f"sign(0) = 1): {spec.canonical} on it sees |±1 + c|, not x, and gives zero "
                f"past its clip. For the straight-through estimator meant, give the outer Sign identity: "
                f"graphgrad rewrite OUT --node '{name}=identity' --force --in-place"
            )
    return notes


# Op types no gradient passes through: the input pipeline (datasets, iterators,
# queues, readers) and ops whose outputs are about shapes, not values.
_NO_GRADIENT = re.compile(
    r"(.*Dataset(V\d+)?|(Anonymous)?Iterator(V\d+)?|IteratorGetNext.*|MakeIterator|.*Queue(V\d+)?|"
    r"QueueDequeue.*|QueueEnqueue.*|.*Reader(V\d+)?|ReaderRead.*|Shape|ShapeN|Size|Rank)\Z"
)


def no_gradient_notes(op_types: Iterable[str]) -> list[str]:
    """Notes on the ``op_types`` given gradients that no gradient ever passes
    through (``rewrite --op MapDataset=identity``): their override is never called."""
    return [
        f"{op_type}: no gradient passes through this op type (the input pipeline and shape ops carry none), "
        "so its override will never be called; to override the gradient of what it feeds, name the ops after it"
        for op_type in sorted(op_types) if _NO_GRADIENT.match(op_type)
    ]
