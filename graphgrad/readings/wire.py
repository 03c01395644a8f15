"""The protobuf wire format read by hand, where a parse would build too much:
varints and the fields of a message as spans. Bytes that are not well-formed
protobuf raise :class:`~graphgrad.readings.errors.NotApplicable` (the full parse
then says what is wrong)."""

from collections.abc import Iterator
from typing import Any

from .errors import NotApplicable


def varint(data: Any, position: int) -> tuple[int, int]:
    """The varint at ``data[position]`` and the position after it."""
    result = shift = 0
    while True:
        if position >= len(data) or shift > 63:
            raise NotApplicable("truncated varint")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, position
        shift += 7


def fields(data: Any, start: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """``(field number, wire type, entry start, payload start, payload end)`` of
    each field of the message at ``data[start:end]``."""
    position = start
    while position < end:
        entry = position
        tag, position = varint(data, position)
        number, wire_type = tag >> 3, tag & 7
        if wire_type == 2:
            length, position = varint(data, position)
            payload = position
            position += length
        elif wire_type == 0:
            payload = position
            _, position = varint(data, position)
        elif wire_type == 1:
            payload, position = position, position + 8
        elif wire_type == 5:
            payload, position = position, position + 4
        else:
            raise NotApplicable(f"wire type {wire_type}")
        if position > end or number == 0:
            raise NotApplicable("field runs past the end")
        yield number, wire_type, entry, payload, position
