"""A TensorFlow Lite model rebuilt as a frozen GraphDef, without TensorFlow: each
builtin operator of its first subgraph becomes the TensorFlow ops that compute the
same thing (weights as constants, in TensorFlow's layouts), so the graph can be
differentiated, checked, drawn and attributed like any frozen graph.

Read with the ``tflite`` package's code generated from TensorFlow Lite's schema.
Float models, and float16 weights (dequantised to float32), are rebuilt; an
operator without a rebuild, a custom operator, and quantised (integer) tensors are
refused by name, never guessed. Placeholders and outputs are named after the
model's tensors (``serving_default_x:0`` becomes ``serving_default_x``), as
``graphgrad ops`` lists them.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ModelReadError
from .protos import AttrValue, GraphDef, TensorProto
from .tflite_schema import op_name, text, with_schema

# TensorFlow Lite's TensorType -> (numpy dtype, TensorFlow DataType)
_TYPES = {0: (np.float32, 1), 1: (np.float16, 19), 2: (np.int32, 3), 3: (np.uint8, 4), 4: (np.int64, 9),
          6: (np.bool_, 10), 7: (np.int16, 5), 9: (np.int8, 6), 10: (np.float64, 2)}
FLOAT = 1
_ACTIVATIONS = {1: "Relu", 3: "Relu6", 4: "Tanh"}  # NONE (0) is none; RELU_N1_TO_1 (2) a clip: see _activated
_PADDING = {0: b"SAME", 1: b"VALID"}


@dataclass
class _Rebuild:
    """The GraphDef being written, and what each TensorFlow Lite tensor is in it."""

    tflite: Any
    model: Any
    graph: Any
    path: str
    graph_def: Any = field(default_factory=GraphDef)
    names: dict = field(default_factory=dict)  # tensor index -> the node name of its value
    folded: dict = field(default_factory=dict)  # tensor index -> its value, computed here (float16 dequantised)
    used: set = field(default_factory=set)

    def node(self, name: str, op: str, inputs: list, **attrs: Any) -> str:
        node = self.graph_def.node.add(name=self._unique(name), op=op)
        node.input.extend(inputs)
        for key, value in attrs.items():
            node.attr[key].CopyFrom(value)
        return node.name

    def _unique(self, name: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_.\-/]", "_", name).lstrip("_./-") or "tensor"
        candidate, count = base, 1
        while candidate in self.used:
            candidate, count = f"{base}_{count}", count + 1
        self.used.add(candidate)
        return candidate

    def constant(self, name: str, value: Any) -> str:
        value = np.ascontiguousarray(value)
        dtype = {np.dtype(numpy): proto for numpy, proto in _TYPES.values()}[value.dtype]
        tensor = TensorProto(dtype=dtype, tensor_content=value.tobytes())
        for size in value.shape:
            tensor.tensor_shape.dim.add(size=int(size))
        return self.node(name, "Const", [], value=AttrValue(tensor=tensor), dtype=AttrValue(type=dtype))

    def tensor(self, index: int) -> Any:
        return self.graph.Tensors(int(index))

    def value(self, index: int) -> Any:
        """The constant a tensor holds (its buffer, as numpy, or what DEQUANTIZE made of one), or None."""
        if index in self.folded:
            return self.folded[index]
        tensor = self.tensor(index)
        data = self.model.Buffers(tensor.Buffer()).DataAsNumpy()
        if isinstance(data, int) or not len(data):
            return None
        dtype = _TYPES[tensor.Type()][0]
        shape = [int(d) for d in tensor.ShapeAsNumpy()] if tensor.ShapeLength() else []
        return np.frombuffer(data.tobytes(), dtype=dtype).reshape(shape)

    def input(self, index: int) -> str:
        """The node name of tensor ``index``'s value: a constant made on first use."""
        if index not in self.names:
            value = self.value(index)
            if value is None:
                raise ModelReadError(f"{self.path}: tensor {text(self.tensor(index).Name())} is read before "
                                     "any operator writes it")
            if value.dtype == np.float16:  # float16 weights are dequantised (what DEQUANTIZE does to them)
                value = value.astype(np.float32)
            self.names[index] = self.constant(text(self.tensor(index).Name()), value)
        return self.names[index]


def rebuilt_graph_def(path: str, data: bytes) -> Any:
    """The frozen GraphDef that computes the TensorFlow Lite model ``data``."""
    return with_schema(_rebuilt, path, data)


def _rebuilt(tflite: Any, path: str, data: bytes) -> Any:
    model = tflite.Model.GetRootAs(data, 0)
    if not model.SubgraphsLength():
        raise ModelReadError(f"{path}: a TensorFlow Lite model without a subgraph")
    rebuild = _Rebuild(tflite, model, model.Subgraphs(0), path)
    codes = [op_name(tflite, model.OperatorCodes(index)) for index in range(model.OperatorCodesLength())]
    graph = rebuild.graph
    needed = _needed_operators(graph, codes)
    _refuse_what_is_not_rebuilt(rebuild, codes, needed)
    for index in graph.InputsAsNumpy():
        tensor = rebuild.tensor(index)
        shape = tensor.ShapeSignatureAsNumpy() if tensor.ShapeSignatureLength() else tensor.ShapeAsNumpy()
        placeholder = AttrValue()
        for size in shape:
            placeholder.shape.dim.add(size=int(size))
        rebuild.names[int(index)] = rebuild.node(_end_name(tensor), "Placeholder", [],
                                                 dtype=AttrValue(type=_TYPES[tensor.Type()][1]), shape=placeholder)
    for position in needed:
        operator = graph.Operators(position)
        name = codes[operator.OpcodeIndex()]
        output = int(operator.OutputsAsNumpy()[0])
        inputs = [int(i) for i in operator.InputsAsNumpy()]
        built = _REBUILDS[name](rebuild, operator, inputs, output)
        if built is not None:  # None: a value folded into a constant (a dequantisation of stored weights)
            rebuild.names[output] = built
    for index in graph.OutputsAsNumpy():
        rebuild.node(_end_name(rebuild.tensor(index)), "Identity", [rebuild.names[int(index)]],
                     T=AttrValue(type=FLOAT))
    return rebuild.graph_def


# Inputs a rebuild does not read: RESHAPE's new shape (the output's own shape says it, -1 where any).
_UNREAD = {"RESHAPE": {1}}


def _needed_operators(graph: Any, codes: list) -> list:
    """The positions, in order, of the operators the outputs are computed from (a
    Flatten's shape arithmetic, which the rebuilt Reshape does not read, is not)."""
    writer = {int(graph.Operators(p).OutputsAsNumpy()[0]): p for p in range(graph.OperatorsLength())}
    needed, pending = set(), [int(i) for i in graph.OutputsAsNumpy()]
    while pending:
        position = writer.get(pending.pop())
        if position is None or position in needed:
            continue
        needed.add(position)
        operator = graph.Operators(position)
        unread = _UNREAD.get(codes[operator.OpcodeIndex()], set())
        pending += [int(i) for place, i in enumerate(operator.InputsAsNumpy()) if i >= 0 and place not in unread]
    return sorted(needed)


def rebuilt_ends(graph_def: Any) -> tuple[list, list]:
    """The placeholders and the outputs (Identities nothing reads) of a rebuilt graph."""
    nodes = graph_def.node
    readers = {name.split(":")[0].lstrip("^") for node in nodes for name in node.input}
    return ([node.name for node in nodes if node.op == "Placeholder"],
            [node.name for node in nodes if node.name not in readers and node.op == "Identity"])


def _refuse_what_is_not_rebuilt(rebuild: _Rebuild, codes: list, needed: list) -> None:
    graph = rebuild.graph
    used = {codes[graph.Operators(position).OpcodeIndex()] for position in needed}
    quantised = [text(graph.Tensors(i).Name()) for i in range(graph.TensorsLength())
                 if graph.Tensors(i).Type() in (3, 7, 9) and graph.Tensors(i).Quantization() is not None
                 and graph.Tensors(i).Quantization().ScaleLength()]
    if quantised:
        raise ModelReadError(f"{rebuild.path}: {len(quantised)} quantised (integer) tensor(s), e.g. {quantised[0]}; "
                             "graphgrad rebuilds float models and float16 weights, not integer arithmetic yet: "
                             "convert the model without integer quantisation")
    missing = sorted(used - set(_REBUILDS))
    if missing:
        raise ModelReadError(f"{rebuild.path}: graphgrad does not rebuild the TensorFlow Lite operator(s) "
                             f"{', '.join(missing)} as TensorFlow ops yet (graphgrad ops {rebuild.path} lists "
                             "them all)")
    not_float = [text(graph.Tensors(int(i)).Name()) for i in graph.InputsAsNumpy() if graph.Tensors(int(i)).Type()]
    if not_float:
        raise ModelReadError(f"{rebuild.path}: input {not_float[0]} is not float32; graphgrad rebuilds float models")


def _end_name(tensor: Any) -> str:
    return re.sub(r":0\Z", "", text(tensor.Name()))


def _options(rebuild: _Rebuild, operator: Any, kind: str) -> Any:
    table = operator.BuiltinOptions()
    options = getattr(rebuild.tflite, kind)()
    if table is not None:
        options.Init(table.Bytes, table.Pos)
    return options


def _activated(rebuild: _Rebuild, name: str, value: str, function: int) -> str:
    """``value`` through a fused activation (the op's ``FusedActivationFunction``)."""
    if function == 0:
        return value
    if function == 2:  # RELU_N1_TO_1
        return rebuild.node(name + "/relu_n1_to_1", "ClipByValue", [
            value, rebuild.constant(name + "/minus_one", np.float32(-1)),
            rebuild.constant(name + "/one", np.float32(1))], T=AttrValue(type=FLOAT))
    if function not in _ACTIVATIONS:
        raise ModelReadError(f"{rebuild.path}: fused activation {function} (SIGN_BIT) is not rebuilt")
    return rebuild.node(f"{name}/{_ACTIVATIONS[function]}", _ACTIVATIONS[function], [value], T=AttrValue(type=FLOAT))


def _named(rebuild: _Rebuild, output: int) -> str:
    return text(rebuild.tensor(output).Name()).split(";")[0]


def _strides(height: int, width: int) -> Any:
    return AttrValue(list=AttrValue.ListValue(i=[1, height, width, 1]))


def _biased(rebuild: _Rebuild, name: str, value: str, inputs: list) -> str:
    if len(inputs) > 2 and inputs[2] >= 0:
        return rebuild.node(name + "/BiasAdd", "BiasAdd", [value, rebuild.input(inputs[2])], T=AttrValue(type=FLOAT))
    return value


def _conv_2d(rebuild: _Rebuild, operator: Any, inputs: list, output: int) -> str:
    filters = _float_value(rebuild, inputs[1]).transpose(1, 2, 3, 0)  # OHWI -> HWIO
    return _convolution(rebuild, "Conv2D", _options(rebuild, operator, "Conv2DOptions"), filters, inputs, output)


def _depthwise_conv_2d(rebuild: _Rebuild, operator: Any, inputs: list, output: int) -> str:
    filters = _float_value(rebuild, inputs[1])[0]  # (1, H, W, C * M) -> (H, W, C, M)
    channels = rebuild.tensor(inputs[0]).ShapeAsNumpy()[-1]
    filters = filters.reshape(filters.shape[0], filters.shape[1], int(channels), -1)
    return _convolution(rebuild, "DepthwiseConv2dNative", _options(rebuild, operator, "DepthwiseConv2DOptions"),
                        filters, inputs, output)


def _convolution(rebuild: _Rebuild, op_type: str, options: Any, filters: Any, inputs: list, output: int) -> str:
    """A convolution of TensorFlow's (its ``filters`` in TensorFlow's layout), biased and activated."""
    name = _named(rebuild, output)
    value = rebuild.node(name, op_type, [rebuild.input(inputs[0]), rebuild.constant(name + "/filter", filters)],
                         T=AttrValue(type=FLOAT), strides=_strides(options.StrideH(), options.StrideW()),
                         padding=AttrValue(s=_PADDING[options.Padding()]),
                         dilations=_strides(options.DilationHFactor(), options.DilationWFactor()),
                         data_format=AttrValue(s=b"NHWC"))
    return _activated(rebuild, name, _biased(rebuild, name, value, inputs), options.FusedActivationFunction())


def _fully_connected(rebuild: _Rebuild, operator: Any, inputs: list, output: int) -> str:
    options = _options(rebuild, operator, "FullyConnectedOptions")
    name = _named(rebuild, output)
    weights = _float_value(rebuild, inputs[1])  # (out, in)
    flat = rebuild.node(name + "/flat", "Reshape", [rebuild.input(inputs[0]), rebuild.constant(
        name + "/flat_shape", np.array([-1, weights.shape[1]], np.int32))], T=AttrValue(type=FLOAT),
                        Tshape=AttrValue(type=3))
    value = rebuild.node(name, "MatMul", [flat, rebuild.constant(name + "/weights", weights.T.copy())],
                         T=AttrValue(type=FLOAT), transpose_a=AttrValue(b=False), transpose_b=AttrValue(b=False))
    value = _activated(rebuild, name, _biased(rebuild, name, value, inputs), options.FusedActivationFunction())
    return _reshaped_to(rebuild, name, value, output) if options.KeepNumDims() else value


def _reshaped_to(rebuild: _Rebuild, name: str, value: str, output: int) -> str:
    """``value`` reshaped to tensor ``output``'s shape (its signature: -1 where any)."""
    tensor = rebuild.tensor(output)
    shape = tensor.ShapeSignatureAsNumpy() if tensor.ShapeSignatureLength() else tensor.ShapeAsNumpy()
    return rebuild.node(name + "/Reshape", "Reshape", [value, rebuild.constant(
        name + "/shape", np.asarray(shape, np.int32))], T=AttrValue(type=FLOAT), Tshape=AttrValue(type=3))


def _reshape(rebuild: _Rebuild, operator: Any, inputs: list, output: int) -> str:
    return _reshaped_to(rebuild, _named(rebuild, output), rebuild.input(inputs[0]), output)


def _float_value(rebuild: _Rebuild, index: int) -> Any:
    value = rebuild.value(index)
    if value is None:
        raise ModelReadError(f"{rebuild.path}: the weights {text(rebuild.tensor(index).Name())} are computed in "
                             "the graph; graphgrad rebuilds stored weights")
    return np.asarray(value, dtype=np.float32)


def _dequantize(rebuild: _Rebuild, operator: Any, inputs: list, output: int) -> None:
    """Stored float16 weights, dequantised: folded into the float32 constant they make."""
    stored = rebuild.value(inputs[0])
    if stored is None or stored.dtype != np.float16:
        raise ModelReadError(f"{rebuild.path}: DEQUANTIZE of {text(rebuild.tensor(inputs[0]).Name())}, not of "
                             "stored float16 weights: integer arithmetic is not rebuilt yet")
    rebuild.folded[output] = stored.astype(np.float32)


def _binary(op_type: str, kind: str) -> Callable:
    def rebuild_binary(rebuild: _Rebuild, operator: Any, inputs: list, output: int) -> str:
        options = _options(rebuild, operator, kind)
        name = _named(rebuild, output)
        value = rebuild.node(name, op_type, [rebuild.input(inputs[0]), rebuild.input(inputs[1])],
                             T=AttrValue(type=FLOAT))
        return _activated(rebuild, name, value, options.FusedActivationFunction())
    return rebuild_binary


def _unary(op_type: str) -> Callable:
    def rebuild_unary(rebuild: _Rebuild, operator: Any, inputs: list, output: int) -> str:
        return rebuild.node(_named(rebuild, output), op_type, [rebuild.input(inputs[0])], T=AttrValue(type=FLOAT))
    return rebuild_unary


def _pool(op_type: str) -> Callable:
    def rebuild_pool(rebuild: _Rebuild, operator: Any, inputs: list, output: int) -> str:
        options = _options(rebuild, operator, "Pool2DOptions")
        name = _named(rebuild, output)
        value = rebuild.node(name, op_type, [rebuild.input(inputs[0])], T=AttrValue(type=FLOAT),
                             ksize=_strides(options.FilterHeight(), options.FilterWidth()),
                             strides=_strides(options.StrideH(), options.StrideW()),
                             padding=AttrValue(s=_PADDING[options.Padding()]), data_format=AttrValue(s=b"NHWC"))
        return _activated(rebuild, name, value, options.FusedActivationFunction())
    return rebuild_pool


def _softmax(rebuild: _Rebuild, operator: Any, inputs: list, output: int) -> str:
    beta = _options(rebuild, operator, "SoftmaxOptions").Beta()
    name = _named(rebuild, output)
    logits = rebuild.input(inputs[0])
    if beta != 1.0:
        logits = rebuild.node(name + "/beta", "Mul", [logits, rebuild.constant(name + "/beta_value",
                                                                                np.float32(beta))],
                              T=AttrValue(type=FLOAT))
    return rebuild.node(name, "Softmax", [logits], T=AttrValue(type=FLOAT))


def _concatenation(rebuild: _Rebuild, operator: Any, inputs: list, output: int) -> str:
    options = _options(rebuild, operator, "ConcatenationOptions")
    name = _named(rebuild, output)
    value = rebuild.node(name, "ConcatV2", [rebuild.input(i) for i in inputs] + [
        rebuild.constant(name + "/axis", np.int32(options.Axis()))], T=AttrValue(type=FLOAT),
                         N=AttrValue(i=len(inputs)), Tidx=AttrValue(type=3))
    return _activated(rebuild, name, value, options.FusedActivationFunction())


def _pad(rebuild: _Rebuild, operator: Any, inputs: list, output: int) -> str:
    padding = rebuild.value(inputs[1])
    name = _named(rebuild, output)
    given = [rebuild.input(inputs[0]), rebuild.constant(name + "/paddings", np.asarray(padding, np.int32))]
    if len(inputs) > 2:  # PADV2: the value padded with
        return rebuild.node(name, "PadV2", given + [rebuild.input(inputs[2])], T=AttrValue(type=FLOAT),
                            Tpaddings=AttrValue(type=3))
    return rebuild.node(name, "Pad", given, T=AttrValue(type=FLOAT), Tpaddings=AttrValue(type=3))


def _reduce(op_type: str) -> Callable:
    def rebuild_reduce(rebuild: _Rebuild, operator: Any, inputs: list, output: int) -> str:
        keep = _options(rebuild, operator, "ReducerOptions").KeepDims()
        return rebuild.node(_named(rebuild, output), op_type, [rebuild.input(inputs[0]), rebuild.input(inputs[1])],
                            T=AttrValue(type=FLOAT), Tidx=_dtype(rebuild, inputs[1]), keep_dims=AttrValue(b=bool(keep)))
    return rebuild_reduce


def _unary_pair(op_type: str) -> Callable:
    """An elementwise op of two inputs without options (MAXIMUM, MINIMUM)."""
    def rebuild_pair(rebuild: _Rebuild, operator: Any, inputs: list, output: int) -> str:
        return rebuild.node(_named(rebuild, output), op_type, [rebuild.input(inputs[0]), rebuild.input(inputs[1])],
                            T=_dtype(rebuild, inputs[0]))
    return rebuild_pair


def _hard_swish(rebuild: _Rebuild, operator: Any, inputs: list, output: int) -> str:
    """x * relu6(x + 3) / 6, as TensorFlow Lite defines it."""
    name = _named(rebuild, output)
    x = rebuild.input(inputs[0])
    shifted = rebuild.node(name + "/plus_three", "AddV2", [x, rebuild.constant(name + "/three", np.float32(3))],
                           T=AttrValue(type=FLOAT))
    gate = rebuild.node(name + "/Relu6", "Relu6", [shifted], T=AttrValue(type=FLOAT))
    scaled = rebuild.node(name + "/sixth", "Mul", [gate, rebuild.constant(name + "/one_sixth",
                                                                          np.float32(1 / 6))],
                          T=AttrValue(type=FLOAT))
    return rebuild.node(name, "Mul", [x, scaled], T=AttrValue(type=FLOAT))


def _leaky_relu(rebuild: _Rebuild, operator: Any, inputs: list, output: int) -> str:
    alpha = _options(rebuild, operator, "LeakyReluOptions").Alpha()
    return rebuild.node(_named(rebuild, output), "LeakyRelu", [rebuild.input(inputs[0])], T=AttrValue(type=FLOAT),
                        alpha=AttrValue(f=alpha))


def _dtype(rebuild: _Rebuild, index: int) -> Any:
    return AttrValue(type=_TYPES[rebuild.tensor(index).Type()][1])


def _shape(rebuild: _Rebuild, operator: Any, inputs: list, output: int) -> str:
    return rebuild.node(_named(rebuild, output), "Shape", [rebuild.input(inputs[0])], T=_dtype(rebuild, inputs[0]),
                        out_type=_dtype(rebuild, output))


def _strided_slice(rebuild: _Rebuild, operator: Any, inputs: list, output: int) -> str:
    options = _options(rebuild, operator, "StridedSliceOptions")
    if options.Offset():
        raise ModelReadError(f"{rebuild.path}: STRIDED_SLICE with offset is not rebuilt")
    masks = {name: AttrValue(i=getattr(options, kind)()) for name, kind in (
        ("begin_mask", "BeginMask"), ("end_mask", "EndMask"), ("ellipsis_mask", "EllipsisMask"),
        ("new_axis_mask", "NewAxisMask"), ("shrink_axis_mask", "ShrinkAxisMask"))}
    return rebuild.node(_named(rebuild, output), "StridedSlice", [rebuild.input(i) for i in inputs[:4]],
                        T=_dtype(rebuild, inputs[0]), Index=_dtype(rebuild, inputs[1]), **masks)


def _pack(rebuild: _Rebuild, operator: Any, inputs: list, output: int) -> str:
    axis = _options(rebuild, operator, "PackOptions").Axis()
    return rebuild.node(_named(rebuild, output), "Pack", [rebuild.input(i) for i in inputs],
                        T=_dtype(rebuild, inputs[0]), N=AttrValue(i=len(inputs)), axis=AttrValue(i=axis))


def _transpose(rebuild: _Rebuild, operator: Any, inputs: list, output: int) -> str:
    return rebuild.node(_named(rebuild, output), "Transpose", [rebuild.input(inputs[0]), rebuild.input(inputs[1])],
                        T=_dtype(rebuild, inputs[0]), Tperm=_dtype(rebuild, inputs[1]))


def _squeeze(rebuild: _Rebuild, operator: Any, inputs: list, output: int) -> str:
    dims = _options(rebuild, operator, "SqueezeOptions").SqueezeDimsAsNumpy()
    dims = [] if isinstance(dims, int) else [int(d) for d in dims]
    return rebuild.node(_named(rebuild, output), "Squeeze", [rebuild.input(inputs[0])], T=_dtype(rebuild, inputs[0]),
                        squeeze_dims=AttrValue(list=AttrValue.ListValue(i=dims)))


def _resize(op_type: str, kind: str) -> Callable:
    def rebuild_resize(rebuild: _Rebuild, operator: Any, inputs: list, output: int) -> str:
        options = _options(rebuild, operator, kind)
        return rebuild.node(_named(rebuild, output), op_type, [rebuild.input(inputs[0]), rebuild.input(inputs[1])],
                            T=AttrValue(type=FLOAT), align_corners=AttrValue(b=bool(options.AlignCorners())),
                            half_pixel_centers=AttrValue(b=bool(options.HalfPixelCenters())))
    return rebuild_resize


def _gather(rebuild: _Rebuild, operator: Any, inputs: list, output: int) -> str:
    options = _options(rebuild, operator, "GatherOptions")
    name = _named(rebuild, output)
    return rebuild.node(name, "GatherV2", [rebuild.input(inputs[0]), rebuild.input(inputs[1]),
                                           rebuild.constant(name + "/axis", np.int32(options.Axis()))],
                        Tparams=_dtype(rebuild, inputs[0]), Tindices=_dtype(rebuild, inputs[1]),
                        Taxis=AttrValue(type=3), batch_dims=AttrValue(i=options.BatchDims()))


_REBUILDS: dict[str, Callable] = {
    "CONV_2D": _conv_2d, "DEPTHWISE_CONV_2D": _depthwise_conv_2d, "FULLY_CONNECTED": _fully_connected,
    "ADD": _binary("AddV2", "AddOptions"), "SUB": _binary("Sub", "SubOptions"),
    "MUL": _binary("Mul", "MulOptions"), "DIV": _binary("RealDiv", "DivOptions"),
    "AVERAGE_POOL_2D": _pool("AvgPool"), "MAX_POOL_2D": _pool("MaxPool"), "RESHAPE": _reshape,
    "SOFTMAX": _softmax, "LOGISTIC": _unary("Sigmoid"), "TANH": _unary("Tanh"), "RELU": _unary("Relu"),
    "RELU6": _unary("Relu6"), "CONCATENATION": _concatenation, "PAD": _pad, "PADV2": _pad,
    "DEQUANTIZE": _dequantize, "HARD_SWISH": _hard_swish, "LEAKY_RELU": _leaky_relu, "SHAPE": _shape,
    "STRIDED_SLICE": _strided_slice, "PACK": _pack, "TRANSPOSE": _transpose, "SQUEEZE": _squeeze,
    "RESIZE_BILINEAR": _resize("ResizeBilinear", "ResizeBilinearOptions"),
    "RESIZE_NEAREST_NEIGHBOR": _resize("ResizeNearestNeighbor", "ResizeNearestNeighborOptions"), "GATHER": _gather,
    "MAXIMUM": _unary_pair("Maximum"), "MINIMUM": _unary_pair("Minimum"), "SUM": _reduce("Sum"),
    "MEAN": _reduce("Mean"),
}
