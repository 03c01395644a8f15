"""Graphviz's ``dot``, run to lay out pictures: on every core the process may use,
each run in a process group of its own, stopped (the whole group) after a deadline."""

import os
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from ..errors import GraphgradError

GRAPHVIZ_TIMEOUT = 120.0  # seconds dot may take to lay out a path, by default (show --timeout)
MAX_PROCESSES = 4


FEWER_BOXES = "draw fewer boxes (--max-nodes)"


def layout(dots: list, timeout: float = GRAPHVIZ_TIMEOUT, fewer: str = FEWER_BOXES) -> list:
    """The SVG of each DOT picture in ``dots``, laid out by Graphviz's ``dot`` (on
    PATH): the pictures shared, in order, between one run per usable core; every run
    stopped after ``timeout`` seconds in all, saying so with ``fewer``, how to draw less."""
    program = shutil.which("dot")
    if program is None:
        raise GraphgradError("drawing .svg or .html needs Graphviz's dot, which is not on PATH: install it "
                             "(apt-get install graphviz, brew install graphviz), or write .dot")
    shares = _shares(dots, min(_cores(), MAX_PROCESSES))
    deadline = time.monotonic() + timeout
    processes: list = []
    pool = ThreadPoolExecutor(len(shares))  # a thread per run, each feeding and reading its pipes
    try:
        for share in shares:
            # In a process group of its own, ended whole: dot (or a wrapper script named dot) may
            # have children that outlive it and hold its pipes open.
            processes.append(subprocess.Popen([program, "-Tsvg"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                              stderr=subprocess.PIPE, start_new_session=True))
        runs = [pool.submit(_communicate, process, "".join(share), deadline)
                for process, share in zip(processes, shares)]
        outputs = [run.result() for run in runs]
    except subprocess.TimeoutExpired:
        _end_groups(processes)
        raise GraphgradError(f"Graphviz's dot took over {timeout:g} s to lay out the path and was stopped; give it "
                             f"longer (--timeout SECONDS), {fewer}, or write .dot") from None
    except BaseException:  # Ctrl-C, or anything else: no dot left running
        _end_groups(processes)
        raise
    finally:
        pool.shutdown()
    svgs = []
    for process, share, (out, errors) in zip(processes, shares, outputs):
        laid_out = [svg + "</svg>\n" for svg in out.decode("utf-8", "replace").split("</svg>")[:-1]]  # one a graph
        if process.returncode or len(laid_out) != len(share):
            reason = errors.decode("utf-8", "replace").strip()[:300] or "fewer pictures than graphs"
            raise GraphgradError(f"Graphviz's dot failed: {reason}")
        svgs += laid_out
    return svgs


def _communicate(process: subprocess.Popen, dot: str, deadline: float) -> tuple:
    return process.communicate(dot.encode("utf-8"), timeout=max(deadline - time.monotonic(), 0.0))


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _shares(dots: list, count: int) -> list:
    """``dots`` in ``count`` runs of consecutive pictures, about alike in size."""
    shares: list[list[str]] = [[]]
    total, size = sum(map(len, dots)), 0
    for dot in dots:
        if size >= total * len(shares) / count and len(shares) < count:
            shares.append([])
        shares[-1].append(dot)
        size += len(dot)
    return [share for share in shares if share]


def _end_groups(processes: list) -> None:
    """Kill each process and every process of its group, and reap it."""
    import signal

    for process in processes:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
