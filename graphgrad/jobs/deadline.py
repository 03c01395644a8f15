"""Jobs that run TensorFlow, ended at their deadline whatever TensorFlow does.

TensorFlow's own run deadline (``RunOptions.timeout_in_ms``) covers ``session.run``
only: a variable initializer that waits on an empty queue, a ``StagingArea`` that
nothing fills, a checkpoint shard that never ends all block before or beside it.
So where it is safe to fork (a process of one thread: the command line, which has
not imported TensorFlow), the job runs in a child process, which the parent ends
at the deadline; a child that dies (out of memory, a native crash) becomes one
line with its signal. In a process with threads of its own (a program or a test
run that has loaded TensorFlow), forking could deadlock the child: the job runs in
that process, with TensorFlow's run deadline only.
"""

import os
import signal
import traceback
from collections.abc import Callable
from typing import Any

from ..errors import GraphgradError
from .batch import end_with_parent, thread_count


def run_until(timeout: float, job: Callable, *args: Any, what: str = "the job") -> Any:
    """``job(*args)``, ended after ``timeout`` seconds (see the module doc); its
    graphgrad errors are raised here as they were raised there."""
    if thread_count() != 1 or not hasattr(os, "fork"):
        return job(*args)
    import multiprocessing

    context = multiprocessing.get_context("fork")
    receiving, sending = context.Pipe(duplex=False)
    child = context.Process(target=_run_in_child, args=(os.getpid(), sending, job, args), daemon=True)
    child.start()
    sending.close()
    try:
        if not receiving.poll(timeout):
            raise GraphgradError(
                f"{what} took over {timeout:g} s, loading the model included, and was stopped; give it longer "
                "with --timeout SECONDS (a graph that waits on a queue, a staging area or a file nothing fills "
                "would wait forever)")
        try:
            status, value = receiving.recv()
        except EOFError:
            child.join()
            raise GraphgradError(_death(what, child.exitcode)) from None
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        receiving.close()
    if status == "bug":
        raise RuntimeError(f"{what} failed in the process that ran TensorFlow:\n{value}")
    if status == "error":
        raise value
    return value


def _run_in_child(parent: int, sending: Any, job: Callable, args: tuple) -> None:
    end_with_parent(parent)
    try:
        result: tuple = ("done", job(*args))
    except GraphgradError as error:
        result = ("error", error)
    except BaseException:  # noqa: BLE001  a bug: its traceback goes to the parent, which raises it
        result = ("bug", traceback.format_exc())
    try:
        sending.send(result)
    except Exception:  # noqa: BLE001  an answer that does not pickle: said as a bug, with its traceback
        sending.send(("bug", traceback.format_exc()))
    sending.close()


def _death(what: str, code: int | None) -> str:
    """One line for a child that ended without an answer."""
    if code is not None and code < 0:
        name = signal.Signals(-code).name
        hint = ("the system ended it, most likely for want of memory: feed fewer rows (--batch, a smaller "
                "--input) or free memory" if -code == signal.SIGKILL else
                "a crash inside TensorFlow's native code: run with --debug to see its own messages, and report it "
                "to TensorFlow with the model if it repeats")
        return f"{what}: the process running TensorFlow died of {name}; {hint}"
    return f"{what}: the process running TensorFlow ended (exit code {code}) without an answer"
