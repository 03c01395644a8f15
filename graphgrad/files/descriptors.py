"""File descriptors opened without blocking on what is not a regular file, and
written without short writes: what reading and writing files share."""

import os
import stat

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


def write_all(fd: int, data: bytes | bytearray | memoryview) -> int:
    """Write all of ``data`` to ``fd`` (``os.write`` may write less); its length."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    return len(data)
