"""Which op types on the path from x to y an attribution method's rules cover: those
every method leaves their own gradient (:data:`PASS_THROUGH`), the products of two
tensors computed from x that need a rule of their own, and the op types that run
inside the functions the path calls."""


from typing import Any

from ..gradients.attribution import gate_factor
from ..graph.functions import function_bodies, functions_run
from ..methods.registry import SIGNAL_TAKE_ALL

# Op types whose own gradient every method keeps: linear in their data input, or
# only moving entries around (so the rules at the nonlinearities decide).
PASS_THROUGH = frozenset({
    "Placeholder", "PlaceholderWithDefault", "Const", "Identity", "IdentityN", "StopGradient", "Snapshot",
    "MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Conv1D", "Conv2D", "Conv3D",
    "DepthwiseConv2dNative", "Conv2DBackpropInput", "Conv3DBackpropInputV2", "BiasAdd", "Add", "AddV2", "AddN",
    "Sub", "Neg", "Mul",
    "RealDiv", "Reshape", "Squeeze", "ExpandDims", "Transpose", "ConcatV2", "Pack", "Unpack", "Split", "SplitV",
    "Slice", "StridedSlice", "Pad", "PadV2", "MirrorPad", "Tile", "GatherV2", "MaxPool", "AvgPool", "MaxPool3D",
    "AvgPool3D", "Mean", "Sum", "FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3", "Cast", "Shape",
    "Fill", "ZerosLike", "OnesLike", "Select", "SelectV2", "ResizeBilinear", "ResizeNearestNeighbor",
    # control flow and TensorArrays (TF1 loops, dynamic_rnn): they route values unchanged
    "Enter", "RefEnter", "Exit", "RefExit", "Merge", "RefMerge", "Switch", "RefSwitch", "NextIteration",
    "LoopCond", "TensorArrayV3", "TensorArrayReadV3", "TensorArrayWriteV3", "TensorArrayScatterV3",
    "TensorArrayGatherV3", "TensorArraySizeV3", "TensorArrayConcatV3", "TensorArraySplitV3", "Gather", "GatherNd",
    # no float output, or no data at all: never on a path a gradient takes
    "NoOp", "Assert", "ReadVariableOp", "VarHandleOp", "Size", "Rank", "Range", "Equal", "NotEqual", "Less",
    "LessEqual", "Greater", "GreaterEqual", "All", "Any", "LogicalAnd", "LogicalOr", "LogicalNot",
})


# Linear in each input alone: of two tensors that both depend on x, a product (an
# LSTM's or GRU's gate times its state) is not linear; deeplift's rule for Mul
# covers it, LRP's signal-take-all rule only where one factor is a gate.
_BILINEAR = ("Mul", "RealDiv", "Div", "MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")


def products(path_ops: set, x: Any, rules: dict) -> list:
    """``"Mul (of two tensors computed from x)"`` for each op type on the path with
    such a product that no rule of ``rules`` (op type -> spec) takes."""
    found = set()
    for op in path_ops:
        if op.type in _BILINEAR and sum(t.op in path_ops or t is x for t in op.inputs) >= 2:
            spec = rules.get(op.type)
            if spec is None or (spec == SIGNAL_TAKE_ALL and gate_factor(op) is None):
                found.add(op.type)
    return [f"{op_type} (of two tensors computed from x{'' if rules.get(op_type) is None else ', neither a gate'})"
            for op_type in sorted(found)]


def op_types_run(run: Any, ops: Any) -> set:
    """The op types of ``ops``, with those of the functions they call (call ops,
    If branches, While bodies; transitively) in place of the calls."""
    bodies = function_bodies(run.graph.as_graph_def())
    types = {op.type for op in ops if op.type not in bodies}
    pending = functions_run([op.node_def for op in ops], bodies)
    seen: set = set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        nodes = bodies[name]
        types |= {node.op for node in nodes if node.op not in bodies}
        pending |= functions_run(nodes, bodies)
    return types - ({"PartitionedCall", "StatefulPartitionedCall"} if seen else set())
