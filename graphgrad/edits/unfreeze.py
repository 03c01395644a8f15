"""Unfreezing, the graph side (no TensorFlow): which constants are weights, and the
GraphDef in which each becomes a variable that keeps the constant's name.

A weight ``w`` becomes three nodes and keeps its name: ``w/graphgrad_variable``
(VariableV2), its initializer ``w/graphgrad_variable/Assign`` from
``w/graphgrad_initial_value`` (zeros: the values live in the checkpoint), and ``w``
itself, now an Identity of the variable marked ``_graphgrad_unfrozen``, so every
consumer, feed and fetch name works as before. Overrides and graphgrad's own nodes
are untouched. :mod:`graphgrad.tf.unfreeze` writes the checkpoint and folds it back.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from ..errors import ModelReadError, SelectionError
from ..files.protos import GraphDef
from ..graph.hints import close_names

UNFROZEN = "_graphgrad_unfrozen"  # on the Identity that keeps a weight's name
# The meta graph's collection that records the unfrozen graph's nodes and their
# attributes' names ("name\0key\0key..."): what freeze gives back, whatever the
# training added and however a later export of the graph spelt it.
FROZEN_NODES = "graphgrad_frozen_nodes"
VARIABLE_SUFFIX = "/graphgrad_variable"
INITIAL_SUFFIX = "/graphgrad_initial_value"
FLOATS = {1: "float32", 2: "float64", 19: "float16", 14: "bfloat16"}  # DataType -> name
# Op types and the inputs at which they read weights (None: any input that is a constant).
WEIGHT_INPUTS: dict = {
    "MatMul": None, "BatchMatMul": None, "BatchMatMulV2": None, "BatchMatMulV3": None,
    "Conv1D": (1,), "Conv2D": (1,), "Conv3D": (1,), "DepthwiseConv2dNative": (1,), "Conv2DBackpropInput": (1,),
    "BiasAdd": (1,), "Add": None, "AddV2": None, "Sub": None, "Mul": None,
    "FusedBatchNorm": (1, 2, 3, 4), "FusedBatchNormV2": (1, 2, 3, 4), "FusedBatchNormV3": (1, 2, 3, 4),
}
# Ops a weight may pass through on its way to the node that reads it: a binarized
# net's Sign, a quantizer's Round, a reshape, a cast, a TF1 loop's Enter, and the fake
# quantisation of a quantisation-aware net (its gradient is straight-through, so the
# float kernel behind it trains).
WEIGHT_PASSES = {"Identity", "Enter", "Sign", "Round", "Floor", "Ceil", "Rint", "Reshape", "Transpose", "Cast", "Tanh",
                 "ClipByValue", "Neg", "Abs", "FakeQuantWithMinMaxVars", "FakeQuantWithMinMaxVarsPerChannel",
                 "FakeQuantWithMinMaxArgs", "QuantizeAndDequantizeV2", "QuantizeAndDequantizeV3",
                 "QuantizeAndDequantizeV4"}
# Ops that make floats of integer weights: such a weight stays a constant (a float
# variable cannot hold it), and unfreeze says so.
DEQUANTIZERS = {"Dequantize", "UniformDequantize", "XlaDequantize"}


@dataclass(frozen=True)
class UnfreezeOptions:
    """Which constants become variables: weights (float constants of at least
    ``min_size`` entries that a node reads as its weights), narrowed by ``consts``
    (globs: any constant they name, weight or not) and ``exclude``."""

    min_size: int = 2
    consts: tuple = ()
    exclude: tuple = ()


@dataclass
class Weight:
    name: str
    dtype: int
    shape: list
    size: int


@dataclass
class Unfrozen:
    graph_def: Any
    weights: list = field(default_factory=list)
    kept: list = field(default_factory=list)  # (constant, why it stays one): weights no variable can hold

    @property
    def parameters(self) -> int:
        return sum(weight.size for weight in self.weights)


def _shape(node: Any) -> list:
    return [dim.size for dim in node.attr["value"].tensor.tensor_shape.dim]


def choose_weights(graph_def: Any, options: UnfreezeOptions) -> list[Weight]:
    """The constants of ``graph_def``'s top level that become variables."""
    nodes = {node.name: node for node in graph_def.node}
    if any(UNFROZEN in node.attr for node in graph_def.node):
        raise SelectionError("this graph was unfrozen already: its weights are variables (see graphgrad freeze)")
    read_as_weights = set()
    for node in graph_def.node:
        positions = WEIGHT_INPUTS.get(node.op, ())
        for index, ref in enumerate(node.input):
            if positions is None or index in positions:
                read_as_weights.add(ref.split(":")[0])
    pending = [name for name in read_as_weights if name in nodes and nodes[name].op in WEIGHT_PASSES]
    while pending:  # back through the ops a weight passes (binarized: Const -> Sign -> MatMul)
        node = nodes[pending.pop()]
        source = node.input[0].split(":")[0] if node.input else ""
        if source in nodes and source not in read_as_weights:
            read_as_weights.add(source)
            if nodes[source].op in WEIGHT_PASSES:
                pending.append(source)
    chosen = []
    for pattern in options.consts:
        if not any(fnmatchcase(name, pattern) for name in nodes):
            in_bodies = [f"{f.signature.name}/{n.name}" for f in graph_def.library.function for n in f.node_def
                         if fnmatchcase(n.name, pattern) or fnmatchcase(f"{f.signature.name}/{n.name}", pattern)]
            if in_bodies:
                raise SelectionError(f"--const {pattern!r} names constants inside function bodies ({in_bodies[0]}); "
                                     "unfreeze makes variables of the top level's constants only")
            close = close_names(pattern, [name for name, node in nodes.items() if node.op == "Const"], cutoff=0.5)
            raise SelectionError(f"--const {pattern!r} names no node" + (f"; close ones: {', '.join(close)}"
                                                                         if close else ""))
    for node in graph_def.node:
        named = any(fnmatchcase(node.name, pattern) for pattern in options.consts)
        if options.consts and not named:
            continue
        if any(fnmatchcase(node.name, pattern) for pattern in options.exclude):
            continue
        if node.op != "Const":
            if named:
                raise SelectionError(f"--const matches {node.name}, a {node.op}: only constants become variables")
            continue
        dtype = node.attr["dtype"].type
        if dtype not in FLOATS:
            if named:
                raise SelectionError(f"{node.name} holds integers or other non-floats (DataType {dtype}): a "
                                     "variable of them would get no gradient to train on; leave it out")
            continue
        shape = _shape(node)
        size = math.prod(shape)
        if not named and (size < options.min_size or node.name not in read_as_weights):
            continue
        _refuse_damaged(node, dtype, size)
        chosen.append(Weight(node.name, dtype, shape, size))
    variables = [name for name, node in nodes.items() if node.op in ("VariableV2", "VarHandleOp", "Variable")]
    if not chosen and variables:
        raise SelectionError(f"its weights are variables already ({len(variables)}, e.g. {variables[0]}): there is "
                             "nothing to unfreeze; train it as it is")
    if not chosen:
        consts = [name for name, node in nodes.items() if node.op == "Const"]
        raise SelectionError("no constant is chosen: none is a float weight of at least "
                             f"{options.min_size} entries that a MatMul, Conv2D, BiasAdd, ... reads (through a Sign, "
                             "Round, Reshape, ... or not)"
                             + (f" (the graph's constants: {', '.join(consts[:3])}{', ...' if len(consts) > 3 else ''};"
                                " name them with --const GLOB)" if consts else ""))
    return chosen


def kept_weights(graph_def: Any) -> list[tuple[str, str]]:
    """The weights of ``graph_def``'s top level that stay constants, each with why:
    integers a dequantising op turns into floats (a quantised net's), which a float
    variable cannot hold."""
    nodes = {node.name: node for node in graph_def.node}
    kept = []
    for node in graph_def.node:
        if node.op in DEQUANTIZERS and node.input:
            source = nodes.get(node.input[0].split(":")[0])
            if source is not None and source.op == "Const" and source.attr["dtype"].type not in FLOATS:
                size = math.prod(_shape(source))
                kept.append((source.name, f"{size} quantised (integer) entries behind {node.op} {node.name}: a float "
                                          "variable cannot hold them; train the float model it was quantised from, "
                                          "or a quantisation-aware one (its fake-quantised kernels become variables)"))
    return kept


ITEM_BYTES = {1: 4, 2: 8, 19: 2, 14: 2}  # FLOATS' sizes


def _refuse_damaged(node: Any, dtype: int, size: int) -> None:
    """Refuse a constant whose content disagrees with its shape: TensorFlow's reading
    of it fails (more values than the shape holds, or raw bytes of another length;
    fewer values are repeated to fill it, as TensorFlow does)."""
    tensor = node.attr["value"].tensor
    content = len(tensor.tensor_content)
    values = len(tensor.half_val if dtype in (14, 19) else tensor.double_val if dtype == 2 else tensor.float_val)
    if (content and content != size * ITEM_BYTES[dtype]) or values > size:
        held = f"{content} bytes" if content else f"{values} values"
        raise ModelReadError(f"constant {node.name}: its shape {'x'.join(map(str, _shape(node))) or 'scalar'} "
                             f"holds {size} {FLOATS[dtype]} entries ({size * ITEM_BYTES[dtype]} bytes), and its "
                             f"value has {held}: the file is damaged (leave it out: --exclude '{node.name}')")


def unfrozen(graph_def: Any, weights: Sequence[Weight]) -> Unfrozen:
    """A copy of ``graph_def`` whose ``weights`` are variables (see the module doc),
    each in the place of its constant, so the order of nodes is kept."""
    chosen = {weight.name: weight for weight in weights}
    result = GraphDef()
    result.CopyFrom(graph_def)
    del result.node[:]
    for node in graph_def.node:
        weight = chosen.get(node.name)
        if weight is None:
            result.node.add().CopyFrom(node)
            continue
        initial = result.node.add(name=weight.name + INITIAL_SUFFIX, op="Const", device=node.device)
        initial.attr["dtype"].type = weight.dtype
        tensor = initial.attr["value"].tensor
        tensor.dtype = weight.dtype
        tensor.tensor_shape.CopyFrom(node.attr["value"].tensor.tensor_shape)
        _zero(tensor, weight.dtype)
        variable = result.node.add(name=weight.name + VARIABLE_SUFFIX, op="VariableV2", device=node.device)
        variable.attr["dtype"].type = weight.dtype
        variable.attr["shape"].shape.CopyFrom(node.attr["value"].tensor.tensor_shape)
        variable.attr["container"].s = b""
        variable.attr["shared_name"].s = b""
        assign = result.node.add(name=weight.name + VARIABLE_SUFFIX + "/Assign", op="Assign",
                                 input=[variable.name, initial.name], device=node.device)
        assign.attr["T"].type = weight.dtype
        assign.attr["use_locking"].b = True
        assign.attr["validate_shape"].b = True
        read = result.node.add(name=weight.name, op="Identity", input=[variable.name], device=node.device)
        read.attr["T"].type = weight.dtype
        read.attr[UNFROZEN].s = b"1"
    return Unfrozen(result, list(weights))


def node_record(graph_def: Any) -> list[bytes]:
    """The :data:`FROZEN_NODES` entries of a graph: each node's name and its attributes' names."""
    return ["\0".join([node.name] + sorted(node.attr)).encode() for node in graph_def.node]


def _zero(tensor: Any, dtype: int) -> None:
    """One zero, which TensorFlow repeats over the shape (a splat: the graph stays small)."""
    if dtype == 2:
        tensor.double_val.append(0.0)
    elif dtype == 1:
        tensor.float_val.append(0.0)
    else:  # float16 and bfloat16 are stored as their bits
        tensor.half_val.append(0)
