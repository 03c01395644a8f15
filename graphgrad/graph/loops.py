"""TF1 while loops (control flow v1) in a GraphDef, found from its structure.

A frozen graph keeps a loop's ops (Enter, Merge, Switch, LoopCond, Exit,
NextIteration) but not the ``WhileContext`` that ``tf.gradients`` needs, which
only a MetaGraphDef's collections keep. The frames here are what a context is
rebuilt from (:func:`graphgrad.tf.loops.restore_loop_contexts`): each op's frame
follows from its inputs (an ``Enter`` opens the frame its ``frame_name`` names, an
``Exit`` belongs to its loop and hands on to the frame around it), and each loop's
pivots are the ops ``tf.while_loop`` builds in a fixed order.
"""

from dataclasses import dataclass, field
from typing import Any

from ..names import TF1_LOOP_ENTERS

EXITS = ("Exit", "RefExit")
MERGES = ("Merge", "RefMerge")
SWITCHES = ("Switch", "RefSwitch")
EXIT_SUFFIX = "/graphgrad_exit"  # the Exits added where freezing pruned a loop variable's


@dataclass
class Loop:
    """One while loop: its frame and the ops a ``WhileContextDef`` names."""

    frame: str
    outer: str  # the frame around it ("" at the top level)
    members: list = field(default_factory=list)  # node names, in graph order
    enters: list = field(default_factory=list)  # (node, is_constant)
    exits: list = field(default_factory=list)
    pivot: str = ""  # the LoopCond
    pivot_for_pred: str = ""  # the first loop variable's Merge
    pivot_for_body: str = ""  # the Identity of the first loop variable's Switch:1
    parallel_iterations: int = 10


def loops_of(graph_def: Any) -> list[Loop]:
    """The while loops of a GraphDef's top level, outer loops before inner ones."""
    nodes = {node.name: node for node in graph_def.node}
    frame: dict[str, str] = {}
    parent: dict[str, str] = {}

    def inputs_of(node) -> list:
        names = [i.lstrip("^").split(":")[0] for i in node.input]
        names = names[:1] if node.op in MERGES else names  # a Merge's input 1 is the NextIteration closing the loop
        return [name for name in names if name in nodes]

    def output_frame(name: str) -> str:
        return parent.get(frame.get(name, ""), "") if nodes[name].op in EXITS else frame.get(name, "")

    def settle(node) -> None:
        inputs = inputs_of(node)
        if node.op in TF1_LOOP_ENTERS:
            loop = node.attr["frame_name"].s.decode()
            parent.setdefault(loop, output_frame(inputs[0]) if inputs else "")
            frame[node.name] = loop
        else:
            frame[node.name] = next((f for f in map(output_frame, inputs) if f), "")

    def frame_of(name: str) -> None:
        # Post-order, with an explicit stack: loops are long chains (100k-node graphs).
        # A node seen again while its inputs are pending is on a cycle the Merge rule
        # does not cut (not a TF1 loop): it settles with what is known.
        stack, started = [name], set()
        while stack:
            current = stack[-1]
            if current in frame:
                stack.pop()
            elif current in started:
                stack.pop()
                settle(nodes[current])
            else:
                started.add(current)
                stack.extend(i for i in inputs_of(nodes[current]) if i not in frame and i not in started)

    for name in nodes:
        frame_of(name)
    loops = {name: Loop(name, parent.get(name, "")) for name in sorted({f for f in frame.values() if f})}
    for node in graph_def.node:
        loop = loops.get(frame[node.name])
        if loop is None:
            continue
        loop.members.append(node.name)
        if node.op in TF1_LOOP_ENTERS:
            loop.enters.append((node.name, node.attr["is_constant"].b))
            loop.parallel_iterations = node.attr["parallel_iterations"].i or loop.parallel_iterations
        elif node.op in EXITS:
            loop.exits.append(node.name)
        elif node.op == "LoopCond" and not loop.pivot:
            loop.pivot = node.name
        elif node.op in MERGES and not loop.pivot_for_pred:
            loop.pivot_for_pred = node.name
        elif node.op == "Identity" and not loop.pivot_for_body and node.input and node.input[0].endswith(":1") \
                and nodes.get(node.input[0].split(":")[0]) is not None \
                and nodes[node.input[0].split(":")[0]].op in SWITCHES:
            loop.pivot_for_body = node.name
    found = [loop for loop in loops.values() if loop.pivot and loop.pivot_for_pred and loop.pivot_for_body]
    return sorted(found, key=lambda loop: _depth(loop, loops))


def _depth(loop: Loop, loops: dict) -> int:
    depth, outer = 0, loop.outer
    while outer in loops:
        depth, outer = depth + 1, loops[outer].outer
    return depth


def add_missing_exits(graph_def: Any) -> list[str]:
    """Give every loop variable of ``graph_def`` (edited in place) an ``Exit``:
    freezing drops those whose value nothing read after the loop, and the
    gradient of a loop needs one per variable (an unused one gets a zero
    gradient). Returns the names of the added Exits (harmless when run)."""
    nodes = {node.name: node for node in graph_def.node}
    exited = {node.input[0].split(":")[0] for node in graph_def.node if node.op in EXITS and node.input}
    added = []
    for node in list(graph_def.node):
        if node.op not in SWITCHES or node.name in exited or len(node.input) < 2:
            continue
        data, predicate = (nodes.get(name.split(":")[0]) for name in node.input[:2])
        if data is not None and data.op in MERGES and predicate is not None and predicate.op == "LoopCond":
            exit_node = graph_def.node.add(name=node.name + EXIT_SUFFIX, op="Exit", input=[node.name])
            exit_node.attr["T"].CopyFrom(node.attr["T"])
            added.append(exit_node.name)
    return added
