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
    call_outputs: dict = field(default_factory=dict)  # function -> call-like node -> its outputs from x (flat)
    values: dict = field(default_factory=dict)  # function -> the names of its nodes computed from x, of any type
    choices: set = field(default_factory=set)  # branches and loops whose choice is computed from x
    functions: dict = field(default_factory=dict)  # name -> FunctionDef

    def varies(self, function: str, ref: str) -> bool:
        """Whether the value ``ref`` (a FunctionDef input: an argument's name or
        ``node:output:index``) of ``function`` is computed from x."""
        parts = ref.split(":")
        if len(parts) == 1:
            return ref in self.varying_inputs.get(function, set())
        calls = self.call_outputs.get(function, {})
        if parts[0] in calls:  # which output of the call
            return output_index(self.functions, self.bodies[function][parts[0]], parts) in calls[parts[0]]
        return parts[0] in self.values.get(function, set())


def carries_no_gradient(node: Any) -> bool:
    """Whether ``node``'s output is of a type no gradient flows through (an integer,
    a bool: by the attributes that give it), or depends on its input's shape only."""
    if node.op in VALUE_INDEPENDENT:
        return True
    for name in _OUTPUT_TYPE_ATTRS:
        if name in node.attr and node.attr[name].WhichOneof("value") == "type":
            return node.attr[name].type in _NO_GRADIENT_TYPES
    return False


def _a_step(node: Any) -> bool:
    """A Cast to a float type from one no gradient flows through (an integer, a bool)."""
    return (node.op == "Cast" and node.attr["SrcT"].type in _NO_GRADIENT_TYPES
            and node.attr["DstT"].type not in _NO_GRADIENT_TYPES)


def reached_in_functions(library: Any, calls: Iterable[tuple[Any, Sequence[bool]]]) -> Reach:
    """What ``calls`` (NodeDefs outside the functions, each with which of its inputs
    are computed from x) compute from x inside ``library``'s functions, transitively."""
    functions = {function.signature.name: function for function in library.function}
    reach = Reach(functions=functions)
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
        its inputs are (``varying``: one flag per data input); none for a node
        whose function the library does not hold (TensorFlow would not load it)."""
        op, attrs = node.op, node.attr
        if op in WHILES:
            return self._loop(attrs["body"].func.name, attrs["cond"].func.name,
                              frozenset(i for i, v in enumerate(varying) if v))
        if op in BRANCHES or op in CASES:
            names = ([attrs["then_branch"].func.name, attrs["else_branch"].func.name] if op in BRANCHES
                     else [call.name for call in attrs["branches"].list.func])
            if varying and varying[0]:  # the branch taken is decided by x: no rule makes that a sum
                self.reach.choices.add(f"{op} (its branch chosen from x)")
            arguments = frozenset(i - 1 for i, v in enumerate(varying) if v and i > 0)  # input 0 picks the branch
            return frozenset().union(*(self.function(name, arguments) for name in names))
        name = attrs["f"].func.name if op in CALL_OPS else op
        return self.function(name, frozenset(i for i, v in enumerate(varying) if v))

    def _loop(self, body: str, cond: str, varying: frozenset) -> frozenset:
        """A loop variable varies where its initial value does or the body makes it
        from one that does: the fixed point; a loop whose condition reads one is
        ended by x (its number of steps, which no rule makes a sum)."""
        while True:
            more = varying | self.function(body, varying)
            if more == varying:
                break
            varying = more
        if 0 in self.function(cond, varying):
            self.reach.choices.add("While (its number of steps chosen from x)")
        return varying

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
            elif node.name in reached or node.op in VALUE_INDEPENDENT:  # x's values, through every type
                continue
            elif _a_step(node):  # a float made of integers or comparisons of x: it jumps
                self.reach.choices.add("Cast (a float of integers or comparisons computed from x: a step)")
            reached[node.name] = node
            pending.extend(readers.get(node.name, []))
        returned = [function.ret.get(arg.name, "") for arg in function.signature.output_arg]
        result = frozenset(i for i, ref in enumerate(returned)
                           if ref and self._varies(ref, varying_args, nodes, reached, varying_outputs))
        self.reach.nodes.setdefault(name, {}).update(
            {key: node for key, node in reached.items() if not carries_no_gradient(node)})
        self.reach.values.setdefault(name, set()).update(reached)
        for node, outputs in varying_outputs.items():
            self.reach.call_outputs.setdefault(name, {}).setdefault(node, set()).update(outputs)
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
            return output_index(self.functions, nodes[name], parts) in outputs[name]
        return name in reached


def output_index(functions: dict, node: Any, parts: list) -> int:
    """The flat output index of ``node:output:index`` (``parts``, split at the
    colons): a list output's index (calls, loops, branches), or the position of a
    called function's output (a call by op type)."""
    index = int(parts[2]) if len(parts) > 2 else 0
    if node.op in functions:
        names = [arg.name for arg in functions[node.op].signature.output_arg]
        return names.index(parts[1]) if parts[1] in names else index
    return index
