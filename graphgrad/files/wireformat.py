"""The protobuf wire format, written by hand where building messages would cost
too much: varints, fields, and nodes encoded from plain values. (Reading it by
hand is the fast readings' job: :mod:`graphgrad.readings.wire`.)"""

import re
from collections.abc import Iterable


def encode_varint(value: int) -> bytes:
    """``value`` as a varint."""
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


# A length below 128 is its own one-byte varint: most names and attribute entries.
_SHORT = [bytes([n]) for n in range(128)]
_ATTR_VALUE_S = 2  # AttrValue.s


def encode_field(number: int, payload: bytes) -> bytes:
    """``payload`` as the length-delimited field ``number`` (below 16) of a message."""
    size = len(payload)
    return bytes([number << 3 | 2]) + (_SHORT[size] if size < 128 else encode_varint(size)) + payload


def encode_nodes(nodes: Iterable, field_number: int, slots: dict | None = None) -> list:
    """Nodes given by ``name``, ``op``, ``input``, ``device`` and ``attr`` (a dict of
    AttrValue messages), each encoded as a NodeDef and as the field ``field_number``
    of the message that holds them: the fields in number order and the attribute
    entries sorted by key, as protobuf's deterministic serialization writes them.

    ``slots`` maps placeholder strings to the lengths of what will stand in their
    place: each occurrence in a name, an input or a string attribute is left out,
    and its length counted in the length prefixes around it. Returns the pieces:
    byte strings, and the placeholders where their values go (without ``slots``,
    one byte string). Joined with values of those lengths, they are the encoding.
    """
    slots = slots or {}
    pattern = re.compile("(" + "|".join(map(re.escape, slots)) + ")") if slots else None

    def text(value: str) -> list:
        if pattern is None:
            return [value.encode()]
        return [part if part in slots else part.encode() for part in pattern.split(value) if part]

    entries: dict = {}  # (key, id(value)) -> encoded map entry, for values alive during this call
    pieces: list = []
    for node in nodes:
        parts = _field(1, text(node.name), slots) + [encode_field(2, node.op.encode())]
        for ref in node.input:
            parts += _field(3, text(ref), slots)
        if node.device:
            parts += _field(4, text(node.device), slots)
        for key in sorted(node.attr):
            value = node.attr[key]
            entry = entries.get((key, id(value)))
            if entry is None:
                if value.WhichOneof("value") == "s" and any(slot.encode() in value.s for slot in slots):
                    encoded = _field(_ATTR_VALUE_S, text(value.s.decode()), slots)
                else:
                    encoded = [value.SerializeToString(deterministic=True)]
                entry = _field(5, [encode_field(1, key.encode())] + _field(2, encoded, slots), slots)
                entries[(key, id(value))] = entry
            parts += entry
        pieces += _field(field_number, parts, slots)
    return _merged(pieces)


def _field(number: int, parts: list, slots: dict) -> list:
    size = sum(len(part) if isinstance(part, bytes) else slots[part] for part in parts)
    return [bytes([number << 3 | 2]) + (_SHORT[size] if size < 128 else encode_varint(size)), *parts]


def _merged(pieces: list) -> list:
    """Adjacent byte strings of ``pieces`` joined into one."""
    merged: list = []
    run: list = []
    for piece in pieces:
        if isinstance(piece, bytes):
            run.append(piece)
        else:
            if run:
                merged.append(b"".join(run))
                run = []
            merged.append(piece)
    if run or not merged:
        merged.append(b"".join(run))
    return merged
