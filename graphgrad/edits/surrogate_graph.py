"""A user's own surrogate for ``bypass``: a differentiable approximation g of a
region, given as a frozen GraphDef that maps the region's input (its one
placeholder) to a tensor of the region's output shape (its one output), or as a
Python function traced into one (:mod:`graphgrad.tf.surrogate_function`).

Its nodes are copied into the model under the bypass's group, the placeholder
replaced by the region's input; nothing of the file is run here (TensorFlow runs
g's nodes where it runs the model, under the same gate as the model's own).
"""

import hashlib
import os
from dataclasses import dataclass
from typing import Any

from ..errors import SelectionError
from ..files.reading import read_model
from ..graph.model import GRAPHDEF

# TF1 loops are cycles in a GraphDef: their frames cannot be copied under another group's names.
_LOOP_OPS = {"Enter", "RefEnter", "Exit", "RefExit", "NextIteration", "RefNextIteration", "LoopCond"}


@dataclass(frozen=True)
class SurrogateGraph:
    """g's nodes (each after its inputs; the placeholder left out), the placeholder's
    name, g's output ref and dtype, and the label a bypass records."""

    label: str  # "g.pb sha256:0123456789ab": names the file and its content
    nodes: tuple
    placeholder: str
    output: str
    dtype: int
    shape: list | None  # g's output shape, where the file records it


def read_surrogate_graph(path: str) -> SurrogateGraph:
    """The surrogate graph in the frozen GraphDef at ``path``, or one line saying why it is none."""
    model = read_model(path)
    said = f"--surrogate-graph {path}"
    if model.kind != GRAPHDEF:
        raise SelectionError(f"{said}: a surrogate graph is a frozen GraphDef (.pb or .pbtxt), not a "
                             f"{model.describe()}; freeze it first (graphgrad freeze)")
    return surrogate_graph_of(model.message, os.path.basename(path), said)


def surrogate_graph_of(graph: Any, name: str, said: str, output: str | None = None) -> SurrogateGraph:
    """The surrogate graph of the GraphDef ``graph`` (``name``: what its label calls it,
    ``said``: how errors name it); its output the node ``output`` (what it does not
    read left out), else the one node nothing else reads."""
    if graph.library.function:
        raise SelectionError(f"{said}: it holds functions ({graph.library.function[0].signature.name}, ...); a "
                             "surrogate graph is plain ops: build g without tf.function, tf.map_fn or tf.while_loop")
    looped = [node.name for node in graph.node if node.op in _LOOP_OPS]
    if looped:
        raise SelectionError(f"{said}: it holds TF1 while loops ({looped[0]}, ...), which cannot be copied under "
                             "another name; build g without loops")
    placeholders = [node for node in graph.node if node.op in ("Placeholder", "PlaceholderV2")]
    if len(placeholders) != 1:
        raise SelectionError(f"{said}: g takes the region's input as its one placeholder, and it has "
                             f"{len(placeholders)} ({', '.join(n.name for n in placeholders) or 'none'})")
    [placeholder] = placeholders
    used = {ref.lstrip("^").split(":")[0] for node in graph.node for ref in node.input}
    outputs = [node for node in graph.node if (node.name == output if output else node.name not in used)
               and node is not placeholder]
    if len(outputs) != 1:
        raise SelectionError(f"{said}: g's output is the one node nothing else reads, and it has "
                             f"{len(outputs)} ({', '.join(n.name for n in outputs[:5]) or 'none'}); remove "
                             "the others")
    [found] = outputs
    digest = hashlib.sha256(graph.SerializeToString(deterministic=True)).hexdigest()[:12]
    nodes = _in_order(graph.node, placeholder.name, said, found.name if output else None)
    return SurrogateGraph(f"{name} sha256:{digest}", nodes, placeholder.name, found.name,
                          placeholder.attr["dtype"].type, _recorded_shape(found))


def _recorded_shape(node) -> list | None:
    shapes = node.attr["_output_shapes"].list.shape if "_output_shapes" in node.attr else []
    if not shapes or shapes[0].unknown_rank:
        return None
    return [dim.size for dim in shapes[0].dim]


def _in_order(nodes, placeholder: str, said: str, only_for: str | None = None) -> tuple:
    """The nodes other than the placeholder (those ``only_for`` reads, if given), each
    after the nodes it reads."""
    by_name = {node.name: node for node in nodes}
    ordered, done, visiting = [], {placeholder}, set()
    for start in [only_for] if only_for else by_name:
        stack = [(start, False)]
        while stack:
            name, expanded = stack.pop()
            if name in done:
                continue
            if name not in by_name:
                raise SelectionError(f"{said}: a node reads {name}, which g does not have")
            if expanded:
                visiting.discard(name)
                done.add(name)
                ordered.append(by_name[name])
                continue
            if name in visiting:
                raise SelectionError(f"{said}: its nodes read one another in a cycle through {name}")
            visiting.add(name)
            stack.append((name, True))
            stack.extend((ref.lstrip("^").split(":")[0], False) for ref in by_name[name].input)
    return tuple(ordered)
