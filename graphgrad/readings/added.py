"""The nodes an edit adds, held as plain Python values until a scope encodes them
all at once (see :meth:`graphgrad.readings.scope.Scope.commit`)."""

from collections.abc import Sequence
from typing import Any

from ..files.protos import AttrValue
from ..names import GROUP

# Output argument names of the ops graphgrad creates (function bodies need them).
OUTPUT_ARGS = {
    "Identity": "output", "StopGradient": "output", "ClipByValue": "output", "Const": "output",
    "Sub": "z", "AddV2": "z", "Mul": "z", "Abs": "y", "Sigmoid": "y", "IsFinite": "y", "ZerosLike": "y",
    "Select": "output", "Shape": "output", "Reshape": "output", "ExpandDims": "output",
}


class AddedNode:
    """A node an edit added, held as plain Python values until :meth:`Scope.commit`
    appends all of a scope's new nodes in one parse (in C): a protobuf NodeDef made
    and filled per node costs several times as much. It reads as a NodeDef does
    (``attr`` is a dict of AttrValues)."""

    __slots__ = ("name", "op", "input", "device", "attr")

    def __init__(self, name: str, op: str, inputs: list, device: str, attr: dict):
        self.name, self.op, self.input, self.device, self.attr = name, op, inputs, device, attr


def new_node(op: str, name: str, inputs: Sequence[str], attrs: dict | None, group_value: AttrValue,
             device: str) -> AddedNode:
    attr = dict(attrs) if attrs else {}  # the values themselves are shared, never changed
    attr[GROUP] = group_value
    return AddedNode(name, op, list(inputs), device, attr)


def output_ref_of(in_function: bool, node: Any, index: int) -> str:
    if not in_function:
        return node.name if index == 0 else f"{node.name}:{index}"
    return f"{node.name}:{OUTPUT_ARGS[node.op]}:{index}"
