"""Reading model files: the kind recognised by content, not by name (text
GraphDefs called ``.pb`` and text MetaGraphDefs called ``.pb`` exist in the wild),
with a one-line error for what is not a graph file and where its graph is; and
:class:`SourceFile`, a file read on demand, whose ranges a write copies in the kernel.
"""

import os
import re
from typing import Any

from google.protobuf.message import DecodeError

from ..errors import GraphgradError, ModelReadError
from ..graph.model import BINARY, GRAPHDEF, KIND_NAMES, METAGRAPH, SAVEDMODEL, TEXT, TFLITE, Model, graphs_of
from . import protos
from .plausible import plausible_graph
from .descriptors import NotRegularFile, open_regular, write_all

SAVED_MODEL_FILES = {BINARY: "saved_model.pb", TEXT: "saved_model.pbtxt"}


PROTOBUF_LIMIT = 2**31 - 1


COPY_BLOCK = 1 << 20  # bytes per read where a range cannot be copied in the kernel


# The first field of a text message tells its kind.
_TEXT_FIELDS = {
    GRAPHDEF: {"node", "versions", "version", "library", "debug_info"},
    METAGRAPH: {
        "meta_info_def", "graph_def", "saver_def", "collection_def",
        "signature_def", "asset_file_def", "object_graph_def",
    },
    SAVEDMODEL: {"saved_model_schema_version", "meta_graphs"},
}


_TEXT_START = re.compile(rb"\A(?:\s*(?:#[^\n]*)?\n)*\s*([A-Za-z_][A-Za-z0-9_]*)\s*[:{<]")


def _new_message(kind: str):
    return getattr(protos, KIND_NAMES[kind])()  # the class names are the kind names


TFLITE_IDENTIFIER = b"TFL3"  # a TensorFlow Lite flatbuffer's file identifier, at bytes 4-8


def is_tflite(data: bytes) -> bool:
    """Whether ``data`` (a file's first bytes, at least 8) is a TensorFlow Lite flatbuffer."""
    return data[4:8] == TFLITE_IDENTIFIER


def read_model(path: str, kind: str | None = None) -> Model:
    """Read a GraphDef, MetaGraphDef or SavedModel from a file or directory.

    ``kind`` (graphdef, metagraph, savedmodel) skips detection. Raises
    :class:`~graphgrad.errors.ModelReadError` with a one-line reason.
    """
    root = None
    if os.path.isdir(path):
        root = path
        path = saved_model_file(path)
        if kind not in (None, SAVEDMODEL):
            raise ModelReadError(f"{root} is a SavedModel directory, not a {kind}")
        kind = SAVEDMODEL
    return model_from_bytes(read_file(path), path, kind, root)


def model_from_bytes(data: bytes, path: str, kind: str | None = None, root: str | None = None) -> Model:
    """A :class:`Model` from the bytes of the file at ``path``; a SavedModel's
    ``root`` (where its variables and assets are) defaults to the file's folder."""
    if is_tflite(data[:8]) and kind in (None, GRAPHDEF):
        from .tflite_graph import rebuilt_graph_def  # the tflite package, only for TensorFlow Lite files

        return Model(message=rebuilt_graph_def(path, data), kind=GRAPHDEF, encoding=BINARY, path=path,
                     rebuilt_from=TFLITE)
    message, kind, encoding = parse_model_bytes(data, kind, path)
    if kind != SAVEDMODEL:
        root = None
    elif root is None:
        root = os.path.dirname(path) or "."
    return Model(message=message, kind=kind, encoding=encoding, path=path, root=root)


def saved_model_file(directory: str) -> str:
    for name in SAVED_MODEL_FILES.values():
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate):
            return candidate
    metas = sorted(name for name in _listed(directory) if name.endswith(".meta"))
    if metas:  # a training checkpoint's folder, as unfreeze writes it
        raise ModelReadError(
            f"{directory} is a training checkpoint's folder ({metas[0]}), not a SavedModel: name its graph, "
            f"{os.path.join(directory, metas[0])}, or fold its trained weights back with graphgrad freeze {directory} "
            "-o OUT.pb"
        )
    raise ModelReadError(
        f"{directory} is a directory without saved_model.pb or saved_model.pbtxt, "
        "so it is not a SavedModel; name a model file or a SavedModel directory"
    )


def _listed(directory: str) -> list[str]:
    try:
        return os.listdir(directory)
    except OSError:
        return []


def read_file(path: str) -> bytes:
    """The bytes of a model file, with a clear error for what cannot be read."""
    with SourceFile(path) as source:
        return source.read(0, source.size)


class SourceFile:
    """A model file, open for reads on demand (``with SourceFile(path) as source``).

    A scan that skips payloads never reads them, and :func:`write_chunks` copies
    ranges of it to an output inside the kernel: a frozen model's constants never
    pass through this process.
    """

    def __init__(self, path: str):
        self.path = path
        try:
            self._fd = open_regular(path)
            self.size = os.fstat(self._fd).st_size
        except OSError as error:
            hint = ""
            if isinstance(error, FileNotFoundError) and os.path.isfile(path + ".meta"):
                hint = f"; if it is a checkpoint prefix, its graph is {path}.meta"
            raise ModelReadError(f"cannot read {path}: {error.strerror or error}{hint}") from None
        except NotRegularFile as error:
            raise ModelReadError(f"cannot read {path}: {error}; name a model file") from None
        if self.size > PROTOBUF_LIMIT:
            self.close()
            raise ModelReadError(f"{path} is {self.size / 2**30:.1f} GiB; protobuf cannot parse a message over 2 GiB")
        if not self.size:
            self.close()
            raise ModelReadError(f"{path} is empty")

    def read(self, start: int, end: int) -> bytes:
        """Bytes ``start`` to ``end`` (fewer if the file ends sooner)."""
        parts = []
        try:
            while start < end:
                part = os.pread(self._fd, end - start, start)
                if not part:
                    break
                parts.append(part)
                start += len(part)
        except OSError as error:
            raise ModelReadError(f"cannot read {self.path}: {error.strerror or error}") from None
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def copy_to(self, fd: int, start: int, end: int) -> None:
        """Append bytes ``start`` to ``end`` to the file open as ``fd``, in the kernel where it can."""
        while start < end:
            try:
                copied = os.copy_file_range(self._fd, fd, end - start, start)
            except (AttributeError, OSError):  # not Linux, or not between these file systems
                copied = 0
            if not copied:  # through this process, then
                copied = write_all(fd, self.read(start, min(end, start + COPY_BLOCK)))
            if not copied:
                raise ModelReadError(f"{self.path} changed while it was read (it is shorter now)")
            start += copied

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


def parse_model_bytes(data: bytes, kind: str | None = None, path: str = "<bytes>") -> tuple[Any, str, str]:
    """Parse file contents; returns (message, kind, encoding)."""
    text_start = _TEXT_START.match(data[:4096]) if b"\0" not in data[:4096] else None
    if text_start:
        return _parse_text(data, kind, path, text_start.group(1).decode())
    return _parse_binary(data, kind, path)


def _parse_text(data: bytes, kind, path, first_field):
    from google.protobuf import text_format  # only for text files

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ModelReadError(f"{path} is not valid UTF-8 text: {error.reason}") from None
    guessed = [k for k, fields in _TEXT_FIELDS.items() if first_field in fields]
    kinds = [kind] if kind else guessed or list(_TEXT_FIELDS)
    first_error = None
    for candidate in kinds:
        message = _new_message(candidate)
        try:
            text_format.Parse(text, message)
        except text_format.ParseError as error:
            first_error = first_error or error
            continue
        except RecursionError:
            raise ModelReadError(
                f"{path} nests messages deeper than protobuf's parser allows, so it is not a usable text "
                f"{KIND_NAMES[candidate]}"
            ) from None
        return message, candidate, TEXT
    raise ModelReadError(
        f"{path} is not a valid text {KIND_NAMES[kinds[0]]}: {first_error}"
    )


def _parse_binary(data: bytes, kind, path):
    if kind:
        kinds = [kind]
    elif data[:1] == b"\x08":  # field 1 as a varint: only SavedModel's schema version
        kinds = [SAVEDMODEL]
    else:
        kinds = [GRAPHDEF, METAGRAPH, SAVEDMODEL]
    for candidate in kinds:
        message = _new_message(candidate)
        try:
            message.ParseFromString(data)
        except (DecodeError, RuntimeError, ValueError):
            continue
        if _plausible(message, candidate):
            return message, candidate, BINARY
    if kind:
        try:
            _, found, _ = _parse_binary(data, None, path)
        except ModelReadError:
            raise ModelReadError(f"{path} is not a binary {KIND_NAMES[kind]}") from None
        raise ModelReadError(f"{path} holds a {KIND_NAMES[found]}, not a {KIND_NAMES[kind]}")
    raise ModelReadError(
        f"{path} is not a TensorFlow graph file (GraphDef, MetaGraphDef or SavedModel, binary or text): "
        + _other_format(data, path)
    )


# Files taken for graph files: (test on the bytes and path, what the file is and
# where its graph is).
_OTHER_FORMATS = [
    (lambda data, path: data.startswith(b"\x89HDF\r\n\x1a\n"),
     "it is an HDF5 file, such as a Keras .h5 model (layers and weights, no graph). To fix this, load it "
     "with Keras and save a SavedModel: tf.saved_model.save(model, DIR), or model.export(DIR) in Keras 3"),
    (lambda data, path: data.startswith(b"PK\x03\x04"),
     "it is a zip archive, such as a Keras 3 .keras model (layers and weights, no graph). To fix this, load "
     "it with Keras and save a SavedModel: model.export(DIR)"),
    (lambda data, path: data.endswith(b"\x57\xfb\x80\x8b\x24\x75\x47\xdb"),  # TensorFlow's table footer
     "it is a checkpoint's variable index (no graph). To fix this, name the .meta file written beside it, "
     "or a SavedModel"),
    (lambda data, path: re.search(r"\.data-\d+-of-\d+\Z", path),
     "it is a checkpoint's variable values (no graph). To fix this, name the .meta file written beside it, "
     "or a SavedModel"),
]


def _other_format(data: bytes, path: str) -> str:
    for test, what in _OTHER_FORMATS:
        if test(data, path):
            return what
    return "it may be truncated or of another format"


def _plausible(message, kind) -> bool:
    graphs = graphs_of(message, kind)
    if kind == METAGRAPH and not (message.HasField("graph_def") or message.HasField("meta_info_def")):
        return False
    if not graphs:
        return False
    return all(plausible_graph(graph_def) for _, graph_def in graphs)


def read_small_file(path: str, limit: int, what: str) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (``what`` it is, for
    messages): a FIFO, a device or a larger file is refused, never read on."""
    try:
        descriptor = open_regular(path)
        with os.fdopen(descriptor, "rb") as stream:
            data = stream.read(limit + 1)
    except OSError as error:
        raise GraphgradError(f"cannot read {what} {path}: {error.strerror or error}") from None
    except NotRegularFile as error:
        raise GraphgradError(f"cannot read {what} {path}: {error}") from None
    if len(data) > limit:
        raise GraphgradError(f"{what} {path} is over {limit >> 20} MiB; a {what} is a few lines")
    return data
