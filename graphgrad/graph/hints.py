"""Close names for error hints ("close names: ..."), bounded on graphs of a million nodes."""

from collections.abc import Sequence

# difflib compares the wanted name with each candidate in Python: on a million node
# names a misspelt --at took 18 s. Above this many candidates the pool is narrowed.
POOL_LIMIT = 2000


def close_names(wanted: str, names: Sequence[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """Up to ``n`` of ``names`` that difflib finds closest to ``wanted`` (ratio at least
    ``cutoff``, best first), as ``difflib.get_close_matches`` gives them; among more
    than ``POOL_LIMIT`` candidates, from those that begin as ``wanted`` does."""
    import difflib  # only on error paths: not at every command's start

    # Nothing difflib takes is left out: its ratio is at most 2 min(a, b) / (a + b) for
    # lengths a and b (its real_quick_ratio), so a name whose length puts that under
    # cutoff is never a match (the bounds are widened a little against rounding).
    size = len(wanted)
    pool = list(names)
    if cutoff > 0:
        shortest, longest = size * cutoff / (2 - cutoff) - 1e-6, size * (2 - cutoff) / cutoff + 1e-6
        pool = [name for name in pool if shortest <= len(name) <= longest]
    prefix = 1
    while len(pool) > POOL_LIMIT and prefix <= size:  # a hint, not a search: the names that begin alike
        narrower = [name for name in pool if name.startswith(wanted[:prefix])]
        if not narrower:
            break
        pool, prefix = narrower, prefix * 2
    return difflib.get_close_matches(wanted, pool[:POOL_LIMIT], n, cutoff)
