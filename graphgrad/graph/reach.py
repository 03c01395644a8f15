"""Which values inside a graph's functions are computed from x: through call ops,
``If``/``Case`` branches and ``While`` bodies (a loop variable is computed from x
where its initial value is, or where the body makes it from one that is).

The attribution methods' coverage asks this of a SavedModel's calls and of the
loops Keras 3's recurrent layers run: an op a body runs on weights alone, or on
integers (a loop's counter, its ``Max`` of lengths), needs no rule.

Pure functions over a GraphDef's ``FunctionDef`` messages (either proto flavour).
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..names import CALL_OPS, VALUE_INDEPENDENT

WHILES = ("While", "StatelessWhile")
BRANCHES = ("If", "StatelessIf")
CASES = ("Case", "StatelessCase")
# DataType values no gradient flows through: the integers, bool, string and the quantised types.
_NO_GRADIENT_TYPES = frozenset({3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 15, 16, 17, 22, 23})
# The attributes that give a node's output dtype where it is not the input's.
_OUTPUT_TYPE_ATTRS = ("out_type", "output_type", "DstT", "T", "dtype")


@dataclass
class Reach:
    """The nodes of each function computed from x (function name -> node name ->
    NodeDef), for each function analysed which of its inputs were, and the bodies
    of those functions (name -> node name -> NodeDef)."""

    nodes: dict = field(default_factory=dict)
    varying_inputs: dict = field(default_factory=dict)
    bodies: dict = field(default_factory=dict)

    def varies(self, function: str, ref: str) -> bool:
        """Whether the value ``ref`` (a FunctionDef input: an argument's name or
        ``node:output:index``) of ``function`` is computed from x."""
        name = ref.split(":")[0]
        if name in self.nodes.get(function, {}):
            return True
        return ":" not in ref and name in self.varying_inputs.get(function, set())


def carries_no_gradient(node: Any) -> bool:
    """Whether ``node``'s output is of a type no gradient flows through (an integer,
    a bool: by the attributes that give it), or depends on its input's shape only."""
    if node.op in VALUE_INDEPENDENT:
        return True
    for name in _OUTPUT_TYPE_ATTRS:
        if name in node.attr and node.attr[name].WhichOneof("value") == "type":
            return node.attr[name].type in _NO_GRADIENT_TYPES
    return False


def reached_in_functions(library: Any, calls: Iterable[tuple[Any, Sequence[bool]]]) -> Reach:
    """What ``calls`` (NodeDefs outside the functions, each with which of its inputs
    are computed from x) compute from x inside ``library``'s functions, transitively."""
    functions = {function.signature.name: function for function in library.function}
    reach = Reach()
    analysis = _Analysis(functions, reach)
    for node, varying in calls:
        analysis.outputs_of_call(node, tuple(varying))
    return reach


class _Analysis:
    def __init__(self, functions: dict, reach: Reach):
        self.functions, self.reach = functions, reach
        self.done: dict = {}  # (function, varying argument indices) -> varying output indices
        self.running: set = set()

    def outputs_of_call(self, node: Any, varying: tuple) -> frozenset:
        """Which outputs of the call-like ``node`` are computed from x, given which of
        its inputs are (``varying``: one flag per data input); every output for a
        node that calls no function of the library."""
        op, attrs = node.op, node.attr
        if op in WHILES:
            return self._loop(attrs["body"].func.name, frozenset(i for i, v in enumerate(varying) if v))
        if op in BRANCHES or op in CASES:
            names = ([attrs["then_branch"].func.name, attrs["else_branch"].func.name] if op in BRANCHES
                     else [call.name for call in attrs["branches"].list.func])
            arguments = frozenset(i - 1 for i, v in enumerate(varying) if v and i > 0)  # input 0 picks the branch
            return frozenset().union(*(self.function(name, arguments) for name in names))
        name = attrs["f"].func.name if op in CALL_OPS else op
        return self.function(name, frozenset(i for i, v in enumerate(varying) if v))

    def _loop(self, body: str, varying: frozenset) -> frozenset:
        """A loop variable varies where its initial value does or the body makes it
        from one that does: the fixed point."""
        while True:
            more = varying | self.function(body, varying)
            if more == varying:
                return varying
            varying = more

    def function(self, name: str, varying: frozenset) -> frozenset:
        """The output indices of ``name`` computed from x where its arguments
        ``varying`` are; its nodes that are recorded in the reach."""
        function = self.functions.get(name)
        if function is None or not varying:
            return frozenset()
        key = (name, varying)
        if key in self.done:
            return self.done[key]
        if key in self.running:  # a call cycle (refused where graphs are loaded): every output, to be safe
            return frozenset(range(len(function.signature.output_arg)))
        self.running.add(key)
        arguments = [arg.name for arg in function.signature.input_arg]
        self.reach.varying_inputs.setdefault(name, set()).update(arguments[i] for i in varying)
        nodes = self.reach.bodies.setdefault(name, {node.name: node for node in function.node_def})
        readers: dict = {}  # a node's or argument's name -> the nodes that read it
        for node in function.node_def:
            for ref in node.input:
                if not ref.startswith("^"):
                    readers.setdefault(ref.split(":")[0], []).append(node)
        varying_args = {arguments[i] for i in varying if i < len(arguments)}
        reached: dict = {}  # node name -> NodeDef, of the nodes computed from x here
        varying_outputs: dict = {}  # call-like node name -> its varying output indices
        pending = [node for arg in varying_args for node in readers.get(arg, [])]
        while pending:  # a FunctionDef's nodes are in no particular order: a worklist to the fixed point
            node = pending.pop()
            flags = tuple(self._varies(ref, varying_args, nodes, reached, varying_outputs)
                          for ref in node.input if not ref.startswith("^"))
            if not any(flags):
                continue
            if self._calls(node):
                outputs = self.outputs_of_call(node, flags)
                if node.name in reached and outputs == varying_outputs[node.name]:
                    continue
                varying_outputs[node.name] = outputs
            elif node.name in reached or carries_no_gradient(node):
                continue
            reached[node.name] = node
            pending.extend(readers.get(node.name, []))
        returned = [function.ret.get(arg.name, "") for arg in function.signature.output_arg]
        result = frozenset(i for i, ref in enumerate(returned)
                           if ref and self._varies(ref, varying_args, nodes, reached, varying_outputs))
        self.reach.nodes.setdefault(name, {}).update(reached)
        self.running.discard(key)
        self.done[key] = result
        return result

    def _calls(self, node: Any) -> bool:
        return node.op in CALL_OPS or node.op in WHILES or node.op in BRANCHES or node.op in CASES \
            or node.op in self.functions

    def _varies(self, ref: str, arguments: set, nodes: dict, reached: dict, outputs: dict) -> bool:
        parts = ref.split(":")
        if len(parts) == 1:
            return ref in arguments
        name = parts[0]
        if name in outputs:  # a call: which of its outputs, by its flat index
            return self._output_index(nodes[name], parts) in outputs[name]
        return name in reached

    def _output_index(self, node: Any, parts: list) -> int:
        """The flat output index of ``node:output:index``: a list output's index
        (calls, loops, branches), or the position of a called function's output."""
        index = int(parts[2]) if len(parts) > 2 else 0
        if node.op in self.functions:
            names = [arg.name for arg in self.functions[node.op].signature.output_arg]
            return names.index(parts[1]) if parts[1] in names else index
        return index
