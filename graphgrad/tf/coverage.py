"""Which op types on the path from x to y an attribution method's rules cover: those
every method leaves their own gradient (:data:`PASS_THROUGH`), the products of two
tensors computed from x that need a rule of their own, and the op types that
compute from x inside the functions the path runs (calls, branches, TF2 loops:
:mod:`graphgrad.graph.reach`)."""


from typing import Any

from ..gradients.attribution import gate_factor
from ..graph.reach import Reach, carries_no_gradient, reached_in_functions
from ..methods.registry import SIGNAL_TAKE_ALL
from ..names import FUNCTIONAL_OPS, VALUE_INDEPENDENT

# Op types whose own gradient every method keeps: linear in their data input, or
# only moving entries around (so the rules at the nonlinearities decide).
PASS_THROUGH = frozenset({
    "Placeholder", "PlaceholderWithDefault", "Const", "Identity", "IdentityN", "StopGradient", "Snapshot",
    "MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Conv1D", "Conv2D", "Conv3D",
    "DepthwiseConv2dNative", "Conv2DBackpropInput", "Conv3DBackpropInputV2", "BiasAdd", "Add", "AddV2", "AddN",
    "Sub", "Neg", "Mul",
    "RealDiv", "Reshape", "Squeeze", "ExpandDims", "Transpose", "ConcatV2", "Pack", "Unpack", "Split", "SplitV",
    "Slice", "StridedSlice", "Pad", "PadV2", "MirrorPad", "Tile", "GatherV2", "ReverseV2", "ReverseSequence",
    "MaxPool", "AvgPool", "MaxPool3D", "AvgPool3D", "Mean", "Sum", "FusedBatchNorm", "FusedBatchNormV2",
    "FusedBatchNormV3", "Cast", "Shape",
    "Fill", "ZerosLike", "OnesLike", "Select", "SelectV2", "ResizeBilinear", "ResizeNearestNeighbor",
    # control flow and TensorArrays (TF1 loops, dynamic_rnn): they route values unchanged
    "Enter", "RefEnter", "Exit", "RefExit", "Merge", "RefMerge", "Switch", "RefSwitch", "_SwitchN", "NextIteration",
    "LoopCond", "TensorArrayV3", "TensorArrayReadV3", "TensorArrayWriteV3", "TensorArrayScatterV3",
    "TensorArrayGatherV3", "TensorArraySizeV3", "TensorArrayConcatV3", "TensorArraySplitV3", "Gather", "GatherNd",
    # TF2 loops' lists (Keras 3's recurrent layers): the same, as variants
    "TensorListFromTensor", "TensorListGetItem", "TensorListSetItem", "TensorListStack", "TensorListReserve",
    "TensorListPushBack", "TensorListPopBack", "TensorListGather", "TensorListScatterV2", "TensorListScatter",
    "TensorListConcatV2", "TensorListSplit", "TensorListResize",
    # no float output, or no data at all: never on a path a gradient takes
    "NoOp", "Assert", "ReadVariableOp", "VarHandleOp", "Size", "Rank", "Range", "Equal", "NotEqual", "Less",
    "LessEqual", "Greater", "GreaterEqual", "All", "Any", "LogicalAnd", "LogicalOr", "LogicalNot",
})


# Linear in each input alone: of two tensors that both depend on x, a product (an
# LSTM's or GRU's gate times its state) is not linear; deeplift's rule for Mul
# covers it, LRP's signal-take-all rule only where one factor is a gate.
_BILINEAR = ("Mul", "MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")  # divisions: see divisions()


def products(path_ops: set, x: Any, rules: dict, reach: Reach) -> list:
    """``"Mul (of two tensors computed from x)"`` for each op type on the path, or
    in the functions it runs (``reach``), with such a product that no rule of
    ``rules`` (op type -> spec) takes."""
    def untaken(op: Any) -> bool:  # a product of two tensors from x, ``op`` live or a body's
        spec = rules.get(op.type)
        return spec is None or (spec == SIGNAL_TAKE_ALL and gate_factor(op) is None)

    found = {op.type for op in path_ops if op.type in _BILINEAR
             and sum(t.op in path_ops or t is x for t in op.inputs) >= 2 and untaken(op)}
    for function, nodes in reach.nodes.items():
        found |= {node.op for node in nodes.values() if node.op in _BILINEAR
                  and sum(reach.varies(function, ref) for ref in node.input if not ref.startswith("^")) >= 2
                  and untaken(_BodyOp(node, reach.bodies[function]))}
    return [f"{op_type} (of two tensors computed from x{'' if rules.get(op_type) is None else ', neither a gate'})"
            for op_type in sorted(found)]


_DIVISIONS = ("RealDiv", "Div", "DivNoNan")


def divisions(path_ops: set, x: Any, reach: Reach) -> list:
    """``"RealDiv (by a tensor computed from x)"`` for each division on the path, or in
    the functions it runs, whose divisor x reaches: 1 / x is not linear, and no
    rule takes it (a division by a constant is)."""
    found = {op.type for op in path_ops if op.type in _DIVISIONS and (op.inputs[1].op in path_ops or op.inputs[1] is x)}
    for function, nodes in reach.nodes.items():
        found |= {node.op for node in nodes.values() if node.op in _DIVISIONS and len(node.input) > 1
                  and reach.varies(function, node.input[1])}
    return [f"{op_type} (by a tensor computed from x)" for op_type in sorted(found)]


def functions_reached(run: Any, ops: set, x: Any) -> Reach:
    """What the call ops, branches and loops among ``ops`` (the path from ``x``)
    compute from x inside the functions they run (x's values followed through
    every type: an If's predicate, a loop's counter made from x)."""
    library = run.graph.as_graph_def().library
    library_names = {function.signature.name for function in library.function}
    valued = valued_by(x)
    calls = [(op.node_def, [t is x or t.op in valued for t in op.inputs])
             for op in ops if op.type in FUNCTIONAL_OPS or op.type in library_names]
    return reached_in_functions(library, calls)


def valued_by(x: Any) -> set:
    """The ops whose outputs x's values reach, through every type (a comparison, an
    integer), not through the ops that read shapes only."""
    found, stack = set(), list(x.consumers())
    while stack:
        op = stack.pop()
        if op in found or op.type in VALUE_INDEPENDENT:
            continue
        found.add(op)
        stack.extend(consumer for output in op.outputs for consumer in output.consumers())
    return found


def choices(path_ops: set, x: Any, reach: Reach) -> list:
    """The branches, loops and steps on the path, or in the functions it runs, that
    x decides (a TF1 Switch's predicate, an If's, a While's condition; a float
    cast from integers or comparisons of x): the output jumps there, which no
    rule turns into a sum of contributions."""
    valued = valued_by(x)
    found = set(reach.choices)
    if any(op.type in ("Switch", "RefSwitch") and op.inputs[1].op in valued for op in path_ops):
        found.add("Switch (a branch or a loop's number of steps chosen from x)")
    if any(op.type == "Cast" and not op.inputs[0].dtype.is_floating and op.outputs[0].dtype.is_floating
           and op.inputs[0].op in valued for op in path_ops):
        found.add("Cast (a float of integers or comparisons computed from x: a step)")
    return sorted(found)


def op_types_run(ops: set, reach: Reach) -> set:
    """The op types of ``ops`` that compute on floats, with those the functions they
    call compute from x (``reach``) in place of the calls."""
    types = {op.type for op in ops if not carries_no_gradient(op.node_def)}
    types |= {node.op for nodes in reach.nodes.values() for node in nodes.values()}
    return types - set(FUNCTIONAL_OPS) - set(reach.nodes)


class _BodyOp:
    """A node of a function body as :func:`gate_factor` reads an op: its type and
    the ops its data inputs come from (an argument: an op of no type and no inputs)."""

    def __init__(self, node: Any, body: dict):
        self.type, self._refs, self._body = node.op, [ref for ref in node.input if not ref.startswith("^")], body

    @property
    def inputs(self) -> list:
        return [_BodyTensor(ref, self._body) for ref in self._refs]


class _BodyTensor:
    def __init__(self, ref: str, body: dict):
        node = body.get(ref.split(":")[0]) if ":" in ref else None
        self.op = _BodyOp(node, body) if node is not None else _ARGUMENT


class _Argument:
    type = ""
    inputs: list = []


_ARGUMENT = _Argument()
