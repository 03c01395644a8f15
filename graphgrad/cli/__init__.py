"""Command-line interface: options become config objects; the library does the work."""

import gc


def run() -> None:
    """The ``graphgrad`` command (the console script and ``python -m graphgrad``)."""
    # One short process that makes an object per node of graphs with 100k nodes and
    # keeps nearly all of them to the end: the cyclic collector's passes over them
    # (and over everything imported) cost up to a third of a rewrite and free
    # nothing. mypy raises the threshold the same way. Set before click is imported.
    gc.set_threshold(100_000, 50, 100)
    from .group import main

    main()


def __getattr__(name):
    # ``main`` is the click group (for CliRunner and embedding); loaded on first use
    # so that run() comes first.
    if name == "main":
        from .group import main

        return main
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["main", "run"]
