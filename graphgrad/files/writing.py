"""Writing model files, atomically and where asked: a temporary file (or directory)
beside the target, then a rename, so an error leaves no partial output and never
harms the input. A write that replaces a file (``--in-place``, or an output that
exists) is flushed to disk (fsync) before the rename, so a crash leaves the old
version or the new one, never an empty file. A new file is not, as with ``cp``: a
crash can lose it, and nothing else. Temporaries that killed writers left are
swept; a write through a link, or onto a FIFO or a device, is refused.
"""

import contextlib
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator, Sequence
from itertools import groupby

from ..errors import ModelWriteError
from ..graph.model import SAVEDMODEL, TEXT, Model
from .descriptors import kind_of_file, write_all
from .discovery import MODEL_SUFFIXES
from .reading import COPY_BLOCK, PROTOBUF_LIMIT, SAVED_MODEL_FILES, SourceFile, saved_model_file

# What a SavedModel directory holds besides its graph; fingerprint.pb is left
# out on purpose: it hashes the graph file, which a rewrite changes.
SAVED_MODEL_MEMBERS = ("variables", "assets", "assets.extra", "keras_metadata.pb")


TEMP_SUFFIX = ".graphgrad-tmp"


# .TARGET.PID.RANDOM.graphgrad-tmp, as mkstemp/mkdtemp make them below (RANDOM has no dot)
NAME_MAX = 255  # bytes of a file name on Linux's file systems


# What a temporary adds to its target's name: ".", ".PID.", mkstemp's 8 characters,
# the suffix and a swap's ".old" (a pid has at most 7 digits: pid_max is 2^22).
_TEMPORARY_EXTRA = len(".") + len(".4194304.") + 8 + len(TEMP_SUFFIX) + len(".old")


_SHORTENED = re.compile(r"~[0-9a-f]{16}\Z")


_TEMPORARY = re.compile(r"\.(?P<target>.+)\.(?P<pid>\d+)\.[^.]+" + re.escape(TEMP_SUFFIX) + r"(\.old)?\Z", re.DOTALL)


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
        write_all(fd, memoryview(chunk)[written:])
        written = 0


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
    with replaced_directory(out_dir, sweep) as staging:
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


@contextlib.contextmanager
def replaced_directory(out_dir: str, sweep: bool = True) -> Iterator[str]:
    """A staging directory beside ``out_dir`` for the block to fill; when the block
    ends without an error it becomes ``out_dir`` in one step (what ``out_dir`` held
    is removed), with ``out_dir``'s mode, or the umask's for a new folder. On any
    error nothing changes. The staging directory is named and locked as the
    temporary files are, so the next write sweeps the one a killed writer left.
    ``sweep``: see :func:`write_chunks`."""
    replacing = os.path.exists(out_dir)
    mode = stat.S_IMODE(os.stat(out_dir).st_mode) if replacing else 0o777 & ~_umask()
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
        yield staging
        if replacing:  # see the module docstring
            _flush_tree(staging)
        os.chmod(staging, mode)
        if replacing and _exchange(staging, out_dir):
            pass  # one step: out_dir is the new folder, staging the old one (removed below)
        else:
            if replacing:  # two steps where the kernel cannot exchange: a kill between them
                backup = staging + ".old"  # leaves the old folder here, which a sweep puts back
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


def backup_file(path: str, suffix: str, sweep: bool = True) -> str:
    """Copy ``path`` to ``path + suffix`` (atomically, in the kernel) before it is
    overwritten; on disk before the original is replaced, so a crash never loses both.
    For a SavedModel directory, the graph file inside it is what gets replaced.
    ``sweep``: see :func:`write_chunks`."""
    if os.path.isdir(path):
        path = saved_model_file(path)
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
