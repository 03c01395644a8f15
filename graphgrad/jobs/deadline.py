"""Jobs that run TensorFlow, ended at their deadline whatever TensorFlow does.

TensorFlow's own run deadline (``RunOptions.timeout_in_ms``) covers ``session.run``
only, and not always that: a variable initializer that waits on an empty queue, a
``StagingArea`` that nothing fills, a checkpoint shard that never ends block before
or beside it, and an endless ``while_loop`` outlives the cancellation. So the job
runs in a child process, which the parent ends at the deadline, whatever threads
this process has: forked where it runs one thread, else started by a fork server
(a clean process that forks children on request), since forking a process whose
threads may hold locks (numpy's BLAS pool, started by loading an array) could
deadlock the child. A child that dies (out of memory, a native crash, an ``exit``
inside TensorFlow) becomes one line with its signal or exit code. Only a program
that has imported TensorFlow itself runs the job in its own process, with
TensorFlow's run deadline alone: its graphs and registered gradients are in it.
"""

import os
import signal
import sys
import traceback
from collections.abc import Callable
from typing import Any

from ..errors import GraphgradError
from .batch import end_with_parent, thread_count


def run_until(timeout: float, job: Callable, *args: Any, what: str = "the job") -> Any:
    """``job(*args)``, ended after ``timeout`` seconds (see the module doc); its
    graphgrad errors are raised here as they were raised there."""
    if "tensorflow" in sys.modules or not hasattr(os, "fork"):
        return job(*args)
    import multiprocessing

    context: Any = multiprocessing.get_context("fork" if thread_count() == 1 else "forkserver")
    receiving, sending = context.Pipe(duplex=False)
    parent = os.getpid() if context.get_start_method() == "fork" else None  # a fork server's child has its own
    child = context.Process(target=_run_in_child, args=(parent, sending, job, args), daemon=True)
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


def _run_in_child(parent: int | None, sending: Any, job: Callable, args: tuple) -> None:
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
