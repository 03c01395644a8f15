"""Groups of nodes added many times under other names (``--embed`` adds one
surrogate per selected node): recorded once as a :class:`NodeTemplate` by a
:class:`Recorder`, and encoded per use from bytes made once."""

import re
from operator import itemgetter
from collections.abc import Callable, Sequence
from typing import Any

from ..files.protos import AttrValue
from ..files.wireformat import encode_nodes
from ..names import SOURCE
from ..readings.added import AddedNode, new_node, output_ref_of

class NodeTemplate:
    """A group of nodes added many times under other names (``--embed`` adds one
    surrogate per selected node, each the same nodes): recorded once, with
    placeholders (``slots``) in names, inputs, the device and string attributes.
    The first slot is the group: every node is named ``<group>/<label>``.

    An instance is encoded from bytes made once per set of value lengths
    (:class:`_Encoding`) and the slots' values, and indexed by its few uses of
    values from outside the group, instead of a Python object per node (25,000
    ste surrogates are 250,000 nodes).
    """

    def __init__(self, nodes: list, slots: tuple, output: int, stands_in_for: str, output_ref: str):
        self.nodes, self.slots, self.output = nodes, slots, output
        self.stands_in_for, self.output_ref = stands_in_for, output_ref
        self.labels = [node.name.partition("/")[2] for node in nodes]
        self.index_of = {label: index for index, label in enumerate(self.labels)}
        # ("/" + node label, input position, slot) of each input that is exactly a value from outside
        self.slot_uses = [("/" + self.labels[index], position, ref) for index, node in enumerate(nodes)
                          for position, ref in enumerate(node.input) if ref in slots]
        self.output_suffix = "/" + self.labels[output]  # the output node's name after the group's
        self._pattern = re.compile("|".join(map(re.escape, slots)))
        self._output_ref_parts = [part for part in re.split(f"({self._pattern.pattern})", output_ref) if part]
        self._compiled: dict = {}

    def encoding(self, values: tuple, field_number: int) -> bytes:
        """The nodes encoded (see :func:`graphgrad.files.wireformat.encode_nodes`)
        with the slots' ``values`` (byte strings, in the order of ``slots``)."""
        key = (tuple(map(len, values)), field_number)
        compiled = self._compiled.get(key)
        if compiled is None:  # once per lengths
            lengths = dict(zip(self.slots, key[0]))
            compiled = self._compiled[key] = _Encoding(encode_nodes(self.nodes, field_number, lengths), self.slots)
        return compiled.encode(values)

    def output_ref_of(self, values: dict) -> str:
        """The output's ref, the slots' ``values`` in place."""
        return "".join([values[part] if part in values else part for part in self._output_ref_parts])

    def substitute(self, text: str, values: dict) -> str:
        # One pass: a value that happens to contain a placeholder is not read again.
        return self._pattern.sub(lambda found: values[found.group()], text)

    def node(self, index: int, values: dict) -> AddedNode:
        """Node ``index`` with the slots' ``values`` in place."""
        node, sub = self.nodes[index], self.substitute
        attr = {key: AttrValue(s=sub(value.s.decode(), values).encode()) if value.WhichOneof("value") == "s"
                and self._pattern.search(value.s.decode()) else value for key, value in node.attr.items()}
        return AddedNode(sub(node.name, values), node.op, [sub(ref, values) for ref in node.input],
                         sub(node.device, values), attr)


class _Encoding:
    """A template's encoding for one set of value lengths: the bytes between the
    occurrences of the group's name (each node's name holds it) joined by that name,
    and the few stretches that hold other values as %-formats. One ``bytes.join``
    costs a quarter of one %-format with a slot per occurrence of the group."""

    def __init__(self, pieces: list, slots: tuple):
        group = slots[0]
        stretches: list = [[]]
        for piece in pieces:  # bytes, or the slot (a str) whose value goes there
            if isinstance(piece, str) and piece == group:
                stretches.append([])
            else:
                stretches[-1].append(piece)
        self.constant: list = [b"".join(stretch) if all(isinstance(piece, bytes) for piece in stretch) else b""
                               for stretch in stretches]
        self.formatted: list = []  # (stretch index, %-format, values picker)
        for index, stretch in enumerate(stretches):
            order = [slots.index(piece) for piece in stretch if isinstance(piece, str)]
            if order:
                literal = b"".join(piece.replace(b"%", b"%%") if isinstance(piece, bytes) else b"%b"
                                   for piece in stretch)
                self.formatted.append((index, literal, _picker(order)))

    def encode(self, values: tuple) -> bytes:
        """The encoding with ``values`` (bytes, in the order of the slots) in place."""
        stretches = self.constant.copy()
        for index, literal, pick in self.formatted:
            stretches[index] = literal % pick(values)
        return values[0].join(stretches)


def _picker(order: list) -> Callable[[tuple], tuple]:
    """``values -> tuple(values[i] for i in order)``, in C."""
    if len(order) == 1:
        return lambda values: (values[order[0]],)
    return itemgetter(*order)


class Recorder:
    """Records what a builder adds as a :class:`NodeTemplate`: the methods of
    :class:`Scope` a builder of new nodes calls, over placeholders."""

    def __init__(self, slots: tuple, in_function: bool):
        self.slots, self.in_function = slots, in_function
        self.nodes: list = []
        self._group_value = AttrValue(s=slots[0].encode())
        self._marks: dict = {}

    def add(self, op: str, name: str, inputs: Sequence[str] = (), attrs: dict | None = None, group: str | None = None,
            device: str = "") -> AddedNode:
        node = new_node(op, name, inputs, attrs, self._group_value, device)
        self.nodes.append(node)
        return node

    def output_ref(self, node: Any, index: int = 0) -> str:
        return output_ref_of(self.in_function, node, index)

    def mark(self, node: AddedNode, key: str, value: str) -> None:
        node.attr[key] = AttrValue(s=value.encode())

    def template(self, output: AddedNode, stands_in_for: str) -> NodeTemplate:
        """The template, ``output`` (one of its nodes) standing in for the tensor
        that the slot ``stands_in_for`` names."""
        self.mark(output, SOURCE, stands_in_for)
        return NodeTemplate(self.nodes, self.slots, self.nodes.index(output), stands_in_for, self.output_ref(output))
