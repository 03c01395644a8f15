"""Randomness in a model: the ops that draw another number at every run, which make
a defence's gradient and its verdict a draw (expectation over transformation
averages them out; Athalye, Carlini and Wagner 2018).

Over a built graph's ops; TensorFlow's objects are passed in.
"""

import re
from collections.abc import Iterable
from typing import Any

from .paths import ancestors_of_ops

# Op types that draw from a state that moves on at every run (TensorFlow's random ops,
# the stateful generators, and the ops that advance a generator's state).
_STATEFUL = re.compile(r"(Random\w*|Multinomial|TruncatedNormal|ParameterizedTruncatedNormal|Stateful\w*|"
                       r"RngReadAndSkip|RngSkip|SampleDistortedBoundingBox\w*|NonDeterministicInts)\Z")
_STATELESS = re.compile(r"Stateless(Random|Truncated|Multinomial|ParameterizedTruncated)\w*\Z")


def random_ops(ops: Iterable) -> list[str]:
    """The ops among ``ops`` that draw other numbers at every run, as ``NAME (OP)``:
    the stateful random ops, and the stateless ones whose seed is not a constant
    (a seed drawn or read from a variable each run)."""
    found = []
    for op in sorted(ops, key=lambda op: op.name):
        if _STATEFUL.match(op.type) and not _STATELESS.match(op.type):
            found.append(f"{op.name} ({op.type})")
        elif _STATELESS.match(op.type) and _varying_seed(op):
            found.append(f"{op.name} ({op.type})")
    return found


# Where a seed that changes between runs comes from: a generator's state, a variable, a feed.
_VARYING = {"VarHandleOp", "VariableV2", "Variable", "Placeholder", "PlaceholderWithDefault"}


def _varying_seed(op: Any) -> bool:
    """Whether a stateless random op's seed (its inputs but the shape) is drawn or
    read anew each run: computed from a stateful random op, a variable or a feed."""
    seeds = [tensor.op for tensor in list(op.inputs)[1:]]
    return any(ancestor.type in _VARYING or (_STATEFUL.match(ancestor.type) and not _STATELESS.match(ancestor.type))
               for ancestor in ancestors_of_ops(seeds))
