"""Tensor names and placeholder shapes read from a graph file, without TensorFlow:
what ``check`` and ``attribute`` can refuse before they import it (a misspelt
``--x`` costs a second, not TensorFlow's start-up)."""

from typing import Any

from .hints import close_names


def unknown_tensor(nodes: dict, name: str) -> str | None:
    """Why ``name`` (``NODE`` or ``NODE:INDEX``) names no tensor of the graph whose
    top-level nodes are ``nodes`` (name -> NodeDef), with the close names; None
    where it may name one (an index past a node's outputs is left to TensorFlow)."""
    node, separator, index = name.rpartition(":") if ":" in name else (name, "", "0")
    if node in nodes and (not separator or index.isdigit()):
        return None
    close = close_names(name if separator else name + ":0", [f"{other}:0" for other in nodes], cutoff=0.5)
    hint = f"; close ones: {', '.join(close)}" if close else ""
    return f"no tensor {name!r} in the graph{hint}"


def placeholder_shape(node: Any) -> list | None:
    """The shape a placeholder node declares (None for an unknown dimension), or
    None where it declares none or is no placeholder."""
    if node.op not in ("Placeholder", "PlaceholderWithDefault") or "shape" not in node.attr:
        return None
    shape = node.attr["shape"].shape
    if shape.unknown_rank:
        return None
    return [dim.size if dim.size >= 0 else None for dim in shape.dim]


def shape_mismatch(wanted: list, given: tuple) -> bool:
    """Whether an array of shape ``given`` cannot be fed where ``wanted`` (None: any size) is declared."""
    return len(wanted) != len(given) or any(w is not None and w != g for w, g in zip(wanted, given))
