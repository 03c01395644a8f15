"""TF1 while loops of a GraphDef made differentiable: the contexts freezing lost,
rebuilt from the graph's structure (:mod:`graphgrad.graph.loops`)."""

from typing import Any

from ..graph.loops import add_missing_exits, loops_of
from ..names import TF1_LOOP_ENTERS
from .internals import set_op_attr, while_context


def prepare_loops(graph_def: Any) -> Any:
    """``graph_def`` (TensorFlow's message), with an Exit for every loop variable
    that freezing left without one (a copy, if any is added)."""
    if not any(node.op in TF1_LOOP_ENTERS for node in graph_def.node):
        return graph_def
    copy = type(graph_def)()
    copy.CopyFrom(graph_def)
    return copy if add_missing_exits(copy) else graph_def


def restore_loop_contexts(graph: Any, graph_def: Any, scope: str | None) -> int:
    """Give the ops of ``graph_def``'s TF1 while loops, imported into ``graph``
    under ``scope`` (import_graph_def's ``name``), the ``WhileContext`` that
    ``tf.gradients`` needs. Returns how many loops there were."""
    prefix = f"{scope}/" if scope else ""
    nodes = {node.name: node for node in graph_def.node}
    contexts: dict = {}
    loops = loops_of(graph_def)
    with graph.as_default():
        for loop in loops:
            values: set[str] = set()
            external: dict[str, str] = {}
            # An inner loop's Exits hand their values to this loop (ExitResult adds them so).
            inner_exits = [name for inner in loops if inner.outer == loop.frame for name in inner.exits]
            for name in loop.members + inner_exits:
                outputs = graph.get_operation_by_name(prefix + name).outputs
                values.update(tensor.name[len(prefix):] for tensor in outputs)
            for name, constant in loop.enters:  # tensors captured from outside the loop
                if constant:
                    source = _captured(nodes, name)
                    values.add(source)
                    external[source] = f"{name}:0"
            contexts[loop.frame] = while_context({
                "context_name": loop.frame, "parallel_iterations": loop.parallel_iterations, "back_prop": True,
                "swap_memory": False, "pivot_name": f"{loop.pivot}:0",
                "pivot_for_pred_name": f"{loop.pivot_for_pred}:0", "pivot_for_body_name": f"{loop.pivot_for_body}:0",
                "loop_exit_names": [f"{name}:0" for name in loop.exits],
                "loop_enter_names": [f"{name}:0" for name, constant in loop.enters if not constant],
                "values": values, "external_values": external,
            }, scope or None, contexts.get(loop.outer))
        if prefix:
            _keep_frames(graph, loops, prefix)
    return len(contexts)


def _captured(nodes: dict, enter: str) -> str:
    """The tensor a constant Enter captures, as outside every loop it names it:
    an inner loop's capture goes through its outer loops' Enters (TensorFlow keys
    a context's external values so)."""
    source = nodes[enter].input[0]
    while source.split(":")[0] in nodes and nodes[source.split(":")[0]].op in TF1_LOOP_ENTERS \
            and nodes[source.split(":")[0]].attr["is_constant"].b:
        source = nodes[source.split(":")[0]].input[0]
    return source if ":" in source else source + ":0"


def _keep_frames(graph: Any, loops: list, prefix: str) -> None:
    """Under an import scope, TensorFlow renames the frame of every Enter whose output
    a context lists, the sources of its inner loops' Enters too (an outer loop's
    Enter of a captured tensor): each Enter gets back its own frame, scoped."""
    from tensorflow.core.framework import attr_value_pb2

    for loop in loops:
        for name, _ in loop.enters:
            frame = attr_value_pb2.AttrValue(s=(prefix + loop.frame).encode())
            set_op_attr(graph.get_operation_by_name(prefix + name), "frame_name", frame)
