"""One verdict on whether bytes are a binary GraphDef, for every reading of them.

The full parse (``GraphDef.FromString``, then :func:`plausible`) is the reference.
The fast readings (:mod:`graphgrad.readings.scan`, :mod:`graphgrad.readings.small_nodes`) skip what
their job does not need, so on their own they would accept corrupt bytes there
and copy them into an output no reader parses. They call :func:`require` first,
which gives the full parse's verdict at a fraction of its cost:

- A *check schema* is derived from the GraphDef schema itself (so it cannot
  drift from it): the same messages, fields, types and nesting, with every
  repeated message field (maps included) declared singular. Protobuf merges
  repeated occurrences of a singular message field into one message, so its
  parser (in C) checks every tag, length, varint, nested message and UTF-8
  string of the file as the full parse does, but builds one message per message
  type instead of one per node and attribute: about 11 ms for a 100k-node graph,
  against 39 ms for the full parse.
- A file read through a window (a frozen model, whose constants never enter the
  process) is checked span by span: a span of up to ``SPAN_LIMIT`` bytes is read
  and parsed with the check schema, wrapped in the fields that enclose it so the
  parser sees its true depth (protobuf refuses nesting past 100 levels); a larger
  message is walked field by field, down to its bytes fields, whose payloads
  (the constants) are skipped by their length, as protobuf does.

Anything :func:`require` cannot decide (a wire type it does not walk) is
:class:`Invalid`, which sends the caller to the full parse: the reference then
decides, so a fast reading never accepts what the full parse refuses.
"""

from functools import lru_cache
from typing import Any

from google.protobuf.message import DecodeError

from ..files.plausible import SAMPLE, plausible
from ..files.protos import GraphDef
from ..files.wireformat import encode_varint
from .errors import Invalid
from .wire import fields, varint

# Spans up to this size are parsed whole by protobuf; larger ones are walked.
SPAN_LIMIT = 1 << 16
_PREFIX = "graphgrad.check."
_NODE_TAG = 1 << 3 | 2  # GraphDef.node, length-delimited


def plausible_sample(nodes: list, library: Any) -> bool:
    """:func:`graphgrad.files.plausible.plausible` of a graph read as stored: ``nodes``,
    ``(name, op)`` of its first top-level nodes, and its :class:`~graphgrad.readings.scan.Library`."""
    functions = [(function.signature.name, [(node.name, node.op) for node in function.node_def[:SAMPLE]])
                 for function in library.functions()[:SAMPLE]]
    return plausible(nodes, functions)


def require(data: Any) -> None:
    """Raise :class:`Invalid` unless the bytes ``data`` parse as a GraphDef."""
    _parse(_check_class(GraphDef.DESCRIPTOR.full_name), data)


def require_field(data: Any, entry: int, end: int) -> tuple[str, str] | None:
    """Raise :class:`Invalid` unless the top-level field at ``data[entry:end]``
    (``data``: bytes, or a window on a file sliced as bytes) is one a GraphDef
    parses; a file checked field by field is checked as :func:`require` checks it.
    For a node, returns its name and op type as protobuf reads them (the last of
    repeated fields wins)."""
    root = _check_class(GraphDef.DESCRIPTOR.full_name)
    is_node = data[entry] == _NODE_TAG
    if end - entry <= SPAN_LIMIT:
        checked = _parse(root, bytes(data[entry:end]))
        return (checked.node.name, checked.node.op) if is_node else None
    _walk(data, root.DESCRIPTOR, entry, end, ())
    if not is_node:
        return None
    _, payload = varint(data, entry + 1)
    name = op = ""
    for number, wire_type, _, start, stop in fields(data, payload, end):
        if wire_type == 2 and number in (1, 2):  # small, and checked above
            text = bytes(data[start:stop]).decode("utf-8")
            name, op = (text, op) if number == 1 else (name, text)
    return name, op


def _walk(data, descriptor, start: int, end: int, enclosing: tuple) -> None:
    """Check the message of type ``descriptor`` (of the check schema) at
    ``data[start:end]``; ``enclosing``: the tags of the fields around it."""
    root = _check_class(GraphDef.DESCRIPTOR.full_name)
    for number, wire_type, entry, payload, stop in fields(data, start, end):
        field = descriptor.fields_by_number.get(number)
        if stop - entry <= SPAN_LIMIT or field is None or wire_type != 2:
            # small, or a field protobuf skips: parsed with what encloses it
            _parse(root, _wrapped(enclosing, bytes(data[entry:stop])))
        elif field.type == field.TYPE_MESSAGE:
            _walk(data, field.message_type, payload, stop, (*enclosing, _tag(field.number)))
        elif field.type == field.TYPE_STRING:
            try:
                bytes(data[payload:stop]).decode("utf-8")
            except UnicodeDecodeError:
                raise Invalid(f"field {field.full_name} is not UTF-8") from None
        elif field.type != field.TYPE_BYTES:  # a large packed array: read and parsed
            _parse(root, _wrapped(enclosing, bytes(data[entry:stop])))


def _wrapped(enclosing: tuple, encoded: bytes) -> bytes:
    """``encoded`` (fields of the innermost message) inside the fields ``enclosing``."""
    for tag in reversed(enclosing):
        encoded = tag + encode_varint(len(encoded)) + encoded
    return encoded


def _tag(number: int) -> bytes:
    return encode_varint(number << 3 | 2)


def _parse(cls, data):
    try:
        return cls.FromString(data)
    except (DecodeError, RuntimeError, ValueError):
        raise Invalid("does not parse as a GraphDef") from None


@lru_cache(maxsize=None)
def _check_class(full_name: str):
    """The message class of ``full_name`` (a GraphDef schema name, or one of the
    check schema) in the check schema."""
    from google.protobuf import message_factory

    name = full_name if full_name.startswith(_PREFIX) else _PREFIX + full_name
    return message_factory.GetMessageClass(_check_pool().FindMessageTypeByName(name))


@lru_cache(maxsize=None)
def _check_pool():
    """The check schema: GraphDef's files, renamed into a pool of their own, every
    repeated message field singular (see the module docstring)."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    files, order = {}, []

    def collect(file) -> None:
        if file.name in files:
            return
        for dependency in file.dependencies:
            collect(dependency)
        proto = descriptor_pb2.FileDescriptorProto()
        file.CopyToProto(proto)
        files[file.name] = proto
        order.append(proto)

    collect(GraphDef.DESCRIPTOR.file)
    pool = descriptor_pool.DescriptorPool()
    for proto in order:
        proto.name = "graphgrad/check/" + proto.name
        proto.dependency[:] = ["graphgrad/check/" + dependency for dependency in proto.dependency]
        proto.package = _PREFIX + proto.package
        for message in proto.message_type:
            _merge_repeated_messages(message)
        pool.Add(proto)
    return pool


def _merge_repeated_messages(message) -> None:
    from google.protobuf.descriptor_pb2 import FieldDescriptorProto

    message.options.ClearField("map_entry")  # a map entry becomes a plain message
    del message.oneof_decl[:]  # members of a oneof overwrite each other; no parse fails on that
    for field in message.field:
        field.ClearField("oneof_index")
        field.ClearField("proto3_optional")
        if field.type_name:
            field.type_name = "." + _PREFIX + field.type_name.lstrip(".")
        if field.type == FieldDescriptorProto.TYPE_MESSAGE and field.label == FieldDescriptorProto.LABEL_REPEATED:
            field.label = FieldDescriptorProto.LABEL_OPTIONAL
    for nested in message.nested_type:
        _merge_repeated_messages(nested)
