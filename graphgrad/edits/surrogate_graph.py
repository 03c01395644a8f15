"""A user's own surrogate for ``bypass``: a differentiable approximation g of a
region, given as a frozen GraphDef that maps the region's input (its one
placeholder) to a tensor of the region's output shape (its one output).

Its nodes are copied into the model under the bypass's group, the placeholder
replaced by the region's input; nothing of the file is run here (TensorFlow runs
g's nodes where it runs the model, under the same gate as the model's own).
"""

import hashlib
import os
from dataclasses import dataclass

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
    graph = model.message
    if graph.library.function:
        raise SelectionError(f"{said}: it holds functions ({graph.library.function[0].signature.name}, ...); a "
                             "surrogate graph is plain ops: build g without tf.function, or freeze it inlined")
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
    outputs = [node for node in graph.node if node.name not in used and node is not placeholder]
    if len(outputs) != 1:
        raise SelectionError(f"{said}: g's output is the one node nothing else reads, and it has "
                             f"{len(outputs)} ({', '.join(n.name for n in outputs[:5]) or 'none'}); remove "
                             "the others")
    [output] = outputs
    digest = hashlib.sha256(graph.SerializeToString(deterministic=True)).hexdigest()[:12]
    shape = _recorded_shape(output)
    return SurrogateGraph(f"{os.path.basename(path)} sha256:{digest}", _in_order(graph.node, placeholder.name, said),
                          placeholder.name, output.name, placeholder.attr["dtype"].type, shape)


def _recorded_shape(node) -> list | None:
    shapes = node.attr["_output_shapes"].list.shape if "_output_shapes" in node.attr else []
    if not shapes or shapes[0].unknown_rank:
        return None
    return [dim.size for dim in shapes[0].dim]


def _in_order(nodes, placeholder: str, said: str) -> tuple:
    """The nodes other than the placeholder, each after the nodes it reads."""
    by_name = {node.name: node for node in nodes}
    ordered, done, visiting = [], {placeholder}, set()
    for start in by_name:
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
