"""Reading and writing model files: the only module that touches the file system.

Kinds are recognised by content, not by name: text GraphDefs called ``.pb`` and
text MetaGraphDefs called ``.pb`` exist in the wild. Writes are atomic: a
temporary file (or directory) beside the target, then a rename, so an error
leaves no partial output and never harms the input. A write that replaces a file
(``--in-place``, or an output that exists) is flushed to disk (fsync) before the
rename, so a crash leaves the old version or the new one, never an empty file. A
new file is not, as with ``cp``: a crash can lose it, and nothing else.
"""

import os
import re
import shutil
import stat
import tempfile
from collections.abc import Sequence
from itertools import groupby
from typing import Any

from google.protobuf.message import DecodeError

from ..errors import GraphgradError, ModelReadError, ModelWriteError
from ..graph.model import BINARY, GRAPHDEF, KIND_NAMES, METAGRAPH, SAVEDMODEL, TEXT, Model, graphs_of
from . import protos
from .plausible import plausible_graph

SAVED_MODEL_FILES = {BINARY: "saved_model.pb", TEXT: "saved_model.pbtxt"}
# What a SavedModel directory holds besides its graph; fingerprint.pb is left
# out on purpose: it hashes the graph file, which a rewrite changes.
SAVED_MODEL_MEMBERS = ("variables", "assets", "assets.extra", "keras_metadata.pb")
PROTOBUF_LIMIT = 2**31 - 1
TEMP_SUFFIX = ".graphgrad-tmp"
# .TARGET.PID.RANDOM.graphgrad-tmp, as mkstemp/mkdtemp make them below (RANDOM has no dot)
NAME_MAX = 255  # bytes of a file name on Linux's file systems
# What a temporary adds to its target's name: ".", ".PID.", mkstemp's 8 characters,
# the suffix and a swap's ".old" (a pid has at most 7 digits: pid_max is 2^22).
_TEMPORARY_EXTRA = len(".") + len(".4194304.") + 8 + len(TEMP_SUFFIX) + len(".old")
_SHORTENED = re.compile(r"~[0-9a-f]{16}\Z")
_TEMPORARY = re.compile(r"\.(?P<target>.+)\.(?P<pid>\d+)\.[^.]+" + re.escape(TEMP_SUFFIX) + r"(\.old)?\Z", re.DOTALL)
COPY_BLOCK = 1 << 20  # bytes per read where a range cannot be copied in the kernel
MODEL_SUFFIXES = (".pb", ".pbtxt", ".meta")
NOT_MODELS = {"fingerprint.pb", "keras_metadata.pb"}

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

class NotRegularFile(Exception):
    """A path names a FIFO, a device, a socket or a directory where a file is needed."""


_KINDS_OF_FILE = [
    (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"),
]


def kind_of_file(mode: int) -> str | None:
    """What a file of ``mode`` is, when it is not a regular file (None for one)."""
    return None if stat.S_ISREG(mode) else next((what for test, what in _KINDS_OF_FILE if test(mode)), "not a file")


def open_regular(path: str) -> int:
    """A read-only descriptor of the regular file ``path``. Raises
    :class:`NotRegularFile` for anything else, without blocking: a FIFO is opened
    non-blocking (an ordinary open waits for a writer), and a device is never read."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    what = kind_of_file(os.fstat(descriptor).st_mode)
    if what:
        os.close(descriptor)
        raise NotRegularFile(f"it is {what}, not a regular file")
    os.set_blocking(descriptor, True)
    return descriptor


def _new_message(kind: str):
    return getattr(protos, KIND_NAMES[kind])()  # the class names are the kind names


def read_model(path: str, kind: str | None = None) -> Model:
    """Read a GraphDef, MetaGraphDef or SavedModel from a file or directory.

    ``kind`` (graphdef, metagraph, savedmodel) skips detection. Raises
    :class:`~graphgrad.errors.ModelReadError` with a one-line reason.
    """
    root = None
    if os.path.isdir(path):
        root = path
        path = _saved_model_file(path)
        if kind not in (None, SAVEDMODEL):
            raise ModelReadError(f"{root} is a SavedModel directory, not a {kind}")
        kind = SAVEDMODEL
    return model_from_bytes(read_file(path), path, kind, root)


def model_from_bytes(data: bytes, path: str, kind: str | None = None, root: str | None = None) -> Model:
    """A :class:`Model` from the bytes of the file at ``path``; a SavedModel's
    ``root`` (where its variables and assets are) defaults to the file's folder."""
    message, kind, encoding = parse_model_bytes(data, kind, path)
    if kind != SAVEDMODEL:
        root = None
    elif root is None:
        root = os.path.dirname(path) or "."
    return Model(message=message, kind=kind, encoding=encoding, path=path, root=root)


def _saved_model_file(directory: str) -> str:
    for name in SAVED_MODEL_FILES.values():
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate):
            return candidate
    raise ModelReadError(
        f"{directory} is a directory without saved_model.pb or saved_model.pbtxt, "
        "so it is not a SavedModel; name a model file or a SavedModel directory"
    )


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
                copied = _write_all(fd, self.read(start, min(end, start + COPY_BLOCK)))
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
    (lambda data, path: data[4:8] == b"TFL3",
     "it is a TensorFlow Lite model, which has no gradients to override. To fix this, rewrite the "
     "SavedModel or frozen graph it was converted from"),
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


def serialize(model: Model, encoding: str | None = None) -> bytes:
    """The bytes of ``model``'s message: deterministic for equal messages."""
    try:
        if (encoding or model.encoding) == TEXT:
            from google.protobuf import text_format

            return text_format.MessageToString(model.message).encode("utf-8")
        return model.message.SerializeToString(deterministic=True)
    except (ValueError, OverflowError, MemoryError) as error:
        raise ModelWriteError(
            f"cannot serialize {model.path or 'the model'}: {error} (protobuf's limit is 2 GiB)"
        ) from None


def write_model(model: Model, out: str, encoding: str | None = None, sweep: bool = True) -> bool:
    """Write ``model`` to ``out`` atomically, in ``encoding`` (default: as read).

    A SavedModel goes to the directory ``out`` (or ``out``'s directory, when
    ``out`` names a ``saved_model.pb``/``.pbtxt``); written anywhere but its own
    directory, its variables and assets come along so the result loads. Returns
    False when ``out`` already held exactly these bytes (nothing was written);
    for a SavedModel copied elsewhere, when that directory already holds this
    graph file and the same members as the source.
    ``sweep``: see :func:`write_chunks`.
    """
    encoding = encoding or model.encoding
    data = serialize(model, encoding)
    if model.kind != SAVEDMODEL:
        return _atomic_write(out, data, sweep=sweep)
    out_dir = os.path.dirname(out) if os.path.basename(out) in SAVED_MODEL_FILES.values() else out
    out_dir = out_dir or "."
    if out_dir == out and out.endswith(MODEL_SUFFIXES) and not os.path.isdir(out):
        raise ModelWriteError(
            f"cannot write {out}: a SavedModel is a directory, and {out} names a file; name a directory, "
            f"e.g. -o {out.rsplit('.', 1)[0]}"
        )
    filename = SAVED_MODEL_FILES[encoding]
    if model.root and _same_directory(out_dir, model.root):
        return _atomic_write(os.path.join(out_dir, filename), data, sweep=sweep)
    if _saved_model_dir_holds(out_dir, model, data, filename):
        return False
    _write_saved_model_dir(model, data, out_dir, filename, sweep)
    return True


def _saved_model_dir_holds(out_dir: str, model: Model, data: bytes, filename: str) -> bool:
    """Whether ``out_dir`` already is what :func:`_write_saved_model_dir` would make
    of it: exactly ``data`` as its graph file, and the members of the source
    directory. Member files count as equal when their size and mtime are (copies
    keep mtimes, and rsync decides the same way); otherwise their bytes are compared."""
    if not os.path.isdir(out_dir):
        return False
    root = model.root or ""
    members = [m for m in SAVED_MODEL_MEMBERS if root and os.path.exists(os.path.join(root, m))]
    graph = os.path.join(out_dir, filename)
    if sorted(os.listdir(out_dir)) != sorted([filename, *members]) or not os.path.isfile(graph):
        return False
    if os.path.getsize(graph) != len(data) or not _holds(graph, [data], None):
        return False
    return all(_same_tree(os.path.join(root, m), os.path.join(out_dir, m)) for m in members)


def _same_tree(a: str, b: str) -> bool:
    """Whether files or directory trees ``a`` and ``b`` hold the same (see above)."""
    import filecmp

    if os.path.islink(a) or os.path.islink(b):  # copied as links: never followed
        return os.path.islink(a) and os.path.islink(b) and os.readlink(a) == os.readlink(b)
    if os.path.isfile(a) or os.path.isfile(b):
        return os.path.isfile(a) and os.path.isfile(b) and filecmp.cmp(a, b, shallow=True)
    if not (os.path.isdir(a) and os.path.isdir(b)):
        return False
    names = sorted(os.listdir(a))
    return names == sorted(os.listdir(b)) and all(_same_tree(os.path.join(a, n), os.path.join(b, n)) for n in names)


def _model_files(path: str) -> set:
    """The real paths a model at ``path`` occupies, or would as an output: the file,
    and for a SavedModel its directory and the graph file inside it."""
    paths = {path}
    if os.path.isdir(path):
        paths |= {os.path.join(path, name) for name in SAVED_MODEL_FILES.values()}
    elif os.path.basename(path) in SAVED_MODEL_FILES.values():
        paths.add(os.path.dirname(path) or ".")
    return {os.path.realpath(p) for p in paths}


def same_model(source: str, output: str) -> bool:
    """Whether writing ``output`` would change the model at ``source``: the same
    file, or the same SavedModel named by its directory or its graph file."""
    return bool(_model_files(source) & _model_files(output))


def _same_directory(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def write_chunks(path: str, chunks: Sequence, source: SourceFile | None = None, sweep: bool = True) -> bool:
    """Write chunks in order to ``path``, atomically (for outputs never held whole).

    A chunk is bytes, or a ``(start, end)`` range of ``source``, copied as it is.
    ``sweep``: first remove the temporaries killed writers left for ``path``; a
    batch turns it off after one :func:`remove_stale_temporaries` per directory,
    since listing the directory once per file would make a batch quadratic.
    """
    return _atomic_write(path, chunks, source, sweep=sweep)


def _atomic_write(path: str, data, source: SourceFile | None = None, durable: bool = False,
                  sweep: bool = True) -> bool:
    """Write ``data`` (bytes, or chunks as for :func:`write_chunks`) through a
    temporary file; flushed to disk first if ``durable`` or if it replaces a file."""
    chunks = [data] if isinstance(data, (bytes, bytearray)) else list(data)
    if _length(chunks) > PROTOBUF_LIMIT:
        raise ModelWriteError(
            f"cannot write {path}: the result is {_length(chunks) / 2**30:.1f} GiB, over protobuf's 2 GiB limit, "
            "so no reader could parse it"
        )
    refuse_unless_regular(path)
    try:
        replacing = os.path.exists(path)
        if os.path.isfile(path) and os.path.getsize(path) == _length(chunks) and _holds(path, chunks, source):
            return False
        directory = os.path.dirname(os.path.abspath(path))
        if sweep:
            remove_stale_temporaries(directory, os.path.basename(path))
        descriptor, temporary = tempfile.mkstemp(
            prefix=f".{temporary_target(os.path.basename(path))}.{os.getpid()}.", suffix=TEMP_SUFFIX, dir=directory
        )
        _lock(descriptor)
    except OSError as error:
        raise ModelWriteError(f"cannot write {path}: {error.strerror or error}") from None
    try:
        try:
            _write_chunks_to(descriptor, chunks, source)
            if durable or replacing:  # see the module docstring
                os.fsync(descriptor)
            _copy_mode(path, temporary)
            os.replace(temporary, path)
        finally:
            os.close(descriptor)  # the lock goes with it, once the file has its name
    except BaseException as error:
        _remove(temporary)
        if isinstance(error, OSError):
            raise ModelWriteError(f"cannot write {path}: {error.strerror or error}") from None
        raise
    return True


def _lock(descriptor: int) -> None:
    """Mark a temporary as a live writer's (see :func:`remove_stale_temporaries`):
    an advisory lock, which the kernel drops when the writer dies, whatever its pid
    means in another pid namespace."""
    import fcntl

    fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)


def _held_by_a_writer(path: str) -> bool:
    """Whether a live writer holds the lock of the temporary at ``path``."""
    import fcntl

    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(descriptor)
    return False


def refuse_unless_regular(path: str) -> None:
    """Raise :class:`ModelWriteError` if ``path`` exists and is not a regular file
    (a device, a FIFO, a socket): a write replaces its target by a rename, which
    would put a regular file in place of ``/dev/null``. graphgrad never writes
    through such a file either: it refuses."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    what = kind_of_file(mode)
    if what and not stat.S_ISDIR(mode):
        raise ModelWriteError(
            f"cannot write {path}: it is {what}, and graphgrad replaces only regular files; choose a file path"
        )


def _write_chunks_to(fd: int, chunks: list, source: SourceFile | None) -> None:
    """Write ``chunks`` (see :func:`write_chunks`) to ``fd`` in order: runs of byte
    strings through ``writev`` (an edit may leave 20,000 small ones: one system call,
    or one join, each would cost more), ranges of ``source`` copied as they are."""
    for kind, group in groupby(chunks, type):
        if kind is tuple:
            assert source is not None, "a range of the input comes with its source"
            for start, end in group:
                source.copy_to(fd, start, end)
            continue
        run = list(group)
        for start in range(0, len(run), _IOV_MAX):
            _write_all_of(fd, run[start:start + _IOV_MAX])


# What one writev takes (POSIX's least IOV_MAX); without writev, one write per chunk.
_IOV_MAX = 1024 if hasattr(os, "writev") else 1


def _write_all_of(fd: int, chunks: list) -> None:
    written = os.writev(fd, chunks) if len(chunks) > 1 else 0
    if written == sum(map(len, chunks)):
        return
    for chunk in chunks:  # what a short write left, one chunk at a time
        if written >= len(chunk):
            written -= len(chunk)
            continue
        _write_all(fd, memoryview(chunk)[written:])
        written = 0


def _write_all(fd: int, data) -> int:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    return len(data)


def _length(chunks) -> int:
    return sum(chunk[1] - chunk[0] if isinstance(chunk, tuple) else len(chunk) for chunk in chunks)


def _holds(path: str, chunks, source: SourceFile | None) -> bool:
    """Whether the file at ``path`` holds exactly ``chunks`` (its size already matches)."""
    with open(path, "rb") as stream:
        for chunk in chunks:
            if isinstance(chunk, tuple):
                assert source is not None, "a range of the input comes with its source"
                for start in range(chunk[0], chunk[1], COPY_BLOCK):
                    end = min(start + COPY_BLOCK, chunk[1])
                    if stream.read(end - start) != source.read(start, end):
                        return False
            elif stream.read(len(chunk)) != chunk:
                return False
    return True


def temporary_target(name: str) -> str:
    """``name`` as its temporaries carry it: itself, or where that would make their
    names longer than a file name may be, its first 150 bytes and a digest of it."""
    encoded = os.fsencode(name)
    if len(encoded) + _TEMPORARY_EXTRA <= NAME_MAX:
        return name
    import hashlib

    return os.fsdecode(encoded[:150]) + "~" + hashlib.sha256(encoded).hexdigest()[:16]


def remove_stale_temporaries(directory: str, basename: str | None = None) -> None:
    """Remove the temporaries killed graphgrad processes left in ``directory``
    (only those for the target ``basename``, if given).

    Their names (``.BASENAME.PID.RANDOM.graphgrad-tmp``, and ``.old`` after it for a
    SavedModel being swapped) carry the writer's pid, and a live writer holds a
    lock on its temporary: only those of processes that are gone, by both signs,
    are removed, so a concurrent writer's file is never touched (even one in
    another pid namespace, whose pid means nothing here). A ``.old`` copy whose
    target is missing (a swap killed half-way) is the only copy: it is put back,
    never deleted.
    """
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        match = _TEMPORARY.match(name) if TEMP_SUFFIX in name else None  # the search first: it is cheap
        if not (match and (basename is None or temporary_target(basename) == match["target"])
                and not _alive(int(match["pid"]))):
            continue
        path = os.path.join(directory, name)
        if _held_by_a_writer(path):
            continue
        target = os.path.join(directory, match["target"])
        if name.endswith(".old") and _SHORTENED.search(match["target"]):
            continue  # the only copy, of a target whose whole name it does not carry: kept as it is
        if name.endswith(".old") and not os.path.lexists(target):
            try:
                os.rename(path, target)
            except OSError:
                pass
            continue
        _remove(path)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs. A zombie (exited, not yet reaped: the workers of
    a killed batch until something reaps them) holds no file and no lock: gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stream:
            return stream.read().rpartition(b")")[2].split()[:1] == [b"Z"]
    except OSError:  # no /proc: only the lock tells
        return False


def _copy_mode(existing: str, temporary: str) -> None:
    """Give the temporary the mode, owner and group of the file it replaces (the
    owner and group where this process may: root may, others keep their own)."""
    if os.path.exists(existing):
        shutil.copymode(existing, temporary)
        status = os.stat(existing)
        try:
            os.chown(temporary, status.st_uid, status.st_gid)
        except OSError:
            pass
    else:
        os.chmod(temporary, 0o666 & ~_umask())


def _remove(path: str) -> None:
    try:
        if os.path.isdir(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    except OSError:
        pass


def _write_saved_model_dir(model: Model, data: bytes, out_dir: str, filename: str, sweep: bool) -> None:
    replacing = os.path.exists(out_dir)
    if replacing and not (
        os.path.isdir(out_dir)
        and (not os.listdir(out_dir) or any(
            os.path.isfile(os.path.join(out_dir, f)) for f in SAVED_MODEL_FILES.values()
        ))
    ):
        raise ModelWriteError(
            f"cannot write SavedModel to {out_dir}: it exists and is not a SavedModel "
            "directory; choose another output"
        )
    parent = os.path.dirname(os.path.abspath(out_dir))
    staging = backup = staging_lock = None
    try:
        if sweep:
            remove_stale_temporaries(parent, os.path.basename(out_dir))
        staging = tempfile.mkdtemp(
            prefix=f".{temporary_target(os.path.basename(out_dir))}.{os.getpid()}.", suffix=TEMP_SUFFIX, dir=parent
        )
        staging_lock = os.open(staging, os.O_RDONLY)
        _lock(staging_lock)
        for member in SAVED_MODEL_MEMBERS:
            # Symbolic links are copied as links, as cp -R does: never followed out of the model.
            source = os.path.join(model.root or "", member)
            if model.root and os.path.islink(source):
                os.symlink(os.readlink(source), os.path.join(staging, member))
            elif model.root and os.path.isdir(source):
                shutil.copytree(source, os.path.join(staging, member), symlinks=True)
            elif model.root and os.path.isfile(source):
                shutil.copy2(source, os.path.join(staging, member))
        with open(os.path.join(staging, filename), "wb") as stream:
            stream.write(data)
        if replacing:  # see the module docstring
            _flush_tree(staging)
        os.chmod(staging, 0o777 & ~_umask())
        if replacing and _exchange(staging, out_dir):
            pass  # one step: out_dir is the new model, staging the old one (removed below)
        else:
            if replacing:  # two steps where the kernel cannot exchange: a kill between them
                backup = staging + ".old"  # leaves the old model here, which a sweep puts back
                os.rename(out_dir, backup)
            os.rename(staging, out_dir)
            staging = None
        if backup:
            _remove(backup)
    except OSError as error:
        if backup and not os.path.exists(out_dir):
            os.rename(backup, out_dir)
        raise ModelWriteError(f"cannot write {out_dir}: {error.strerror or error}") from None
    finally:
        if staging_lock is not None:
            os.close(staging_lock)
        if staging:
            _remove(staging)


_RENAME_EXCHANGE = 2  # linux/fs.h


def _exchange(a: str, b: str) -> bool:
    """Swap the names of ``a`` and ``b`` in one step (Linux ``renameat2`` with
    ``RENAME_EXCHANGE``): whatever kills the process, each name holds one whole
    directory. False where the kernel, the C library or the file system cannot."""
    import ctypes
    import errno

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):  # not glibc 2.28+ (or not Linux)
        return False
    at_cwd = -100
    if renameat2(at_cwd, os.fsencode(a), at_cwd, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), b)


def _flush_tree(directory: str) -> None:
    """fsync every file under ``directory``."""
    for root, _, files in os.walk(directory):
        for name in files:
            descriptor = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(descriptor)
            finally:
                os.close(descriptor)


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def find_models(path: str, recursive: bool = False, skipped: list | None = None) -> list[str]:
    """Model files and SavedModel directories named by ``path``.

    A file is itself; a SavedModel directory is one model; another directory
    gives its ``.pb``/``.pbtxt``/``.meta`` files and SavedModels (and, with
    ``recursive``, those of its subdirectories). Each directory is searched once:
    one reached again through a symbolic link (a loop, ``ln -s . zoo/self``) is
    skipped, and said in ``skipped`` if given.
    """
    if not os.path.isdir(path) or is_saved_model_dir(path):
        return [path]
    found = _search(path, recursive, set(), skipped if skipped is not None else [], os.path.realpath(path))
    if not found:
        raise ModelReadError(
            f"{path} holds no model (.pb, .pbtxt, .meta files or SavedModel directories)"
            + ("" if recursive else "; to search its subdirectories, add -r")
        )
    return found


def _search(path: str, recursive: bool, visited: set, skipped: list, tree: str) -> list[str]:
    """:func:`find_models` of one directory; ``visited``: the (device, inode) of those
    searched; ``tree``: the real path of the directory named, out of which no link
    is followed (as find, cp -R, rsync -r and grep -r do not)."""
    try:
        status = os.stat(path)
        identity = (status.st_dev, status.st_ino)
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError as error:
        if not visited:
            raise ModelReadError(f"cannot list {path}: {error.strerror or error}") from None
        skipped.append(f"{path}: cannot list it ({error.strerror or error}); skipped")
        return []
    if identity in visited:
        skipped.append(f"{path}: a link to a directory already searched; skipped")
        return []
    visited.add(identity)
    found = []
    for entry in entries:
        if entry.is_symlink() and (entry.is_dir() or entry.name.endswith(MODEL_SUFFIXES)):
            real = os.path.realpath(entry.path)
            if os.path.commonpath([real, tree]) != tree:
                skipped.append(f"{entry.path}: a link out of the tree searched (to {real}); skipped")
                continue
        if entry.is_dir():
            if is_saved_model_dir(entry.path):
                found.append(entry.path)
            elif recursive:
                found.extend(_search(entry.path, recursive, visited, skipped, tree))
        elif entry.name.endswith(MODEL_SUFFIXES) and entry.name not in NOT_MODELS:
            found.append(entry.path)
    return found


def is_saved_model_dir(path: str) -> bool:
    """Whether ``path`` is a directory holding saved_model.pb or saved_model.pbtxt."""
    return any(os.path.isfile(os.path.join(path, name)) for name in SAVED_MODEL_FILES.values())


def expand_pattern(pattern: str) -> list[str]:
    """Paths a glob pattern matches (``**`` recurses), sorted; an existing path is itself."""
    if os.path.exists(pattern) or not any(c in pattern for c in "*?["):
        return [pattern]
    import glob

    matches = sorted(glob.glob(pattern, recursive=True))
    if not matches:
        raise ModelReadError(f"no file matches {pattern}")
    return matches


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


def backup_file(path: str, suffix: str, sweep: bool = True) -> str:
    """Copy ``path`` to ``path + suffix`` (atomically, in the kernel) before it is
    overwritten; on disk before the original is replaced, so a crash never loses both.
    For a SavedModel directory, the graph file inside it is what gets replaced.
    ``sweep``: see :func:`write_chunks`."""
    if os.path.isdir(path):
        path = _saved_model_file(path)
    target = path + suffix
    with SourceFile(path) as source:
        _atomic_write(target, [(0, source.size)], source, durable=True, sweep=sweep)
    return target


def make_parent_directories(path: str) -> None:
    """Create the directories ``path`` goes in (for --out-dir mirrors)."""
    make_directory(os.path.dirname(os.path.abspath(path)))


def first_missing(directory: str) -> str | None:
    """The outermost of ``directory`` and its parents that does not exist (what
    creating it would create first), or None where it exists."""
    missing = None
    path = os.path.abspath(directory)
    while not os.path.lexists(path):
        missing, path = path, os.path.dirname(path)
    return missing


def remove_empty_directories(root: str) -> None:
    """Remove ``root`` and the folders below it that hold nothing, deepest first
    (never a file, and never a link's target)."""
    for folder, _, _ in sorted(os.walk(root), key=lambda entry: -entry[0].count(os.sep)):
        try:
            os.rmdir(folder)
        except OSError:
            pass


def make_directory(directory: str) -> None:
    """Create ``directory`` and its parents, unless they exist."""
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as error:
        raise ModelWriteError(f"cannot create {directory}: {error.strerror or error}") from None
