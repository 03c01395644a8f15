"""Each TensorFlow Lite builtin operator rebuilt as the TensorFlow ops that compute
the same thing (:mod:`graphgrad.files.tflite_graph` drives them): weights in
TensorFlow's layouts, fused activations applied, each operator's options read from
its flatbuffer table. ``REBUILDS`` maps an operator's name to its rebuild, which
returns the node of its output (a list, for operators of several outputs), or None
for a value folded into a constant."""

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import ModelReadError
from .protos import AttrValue
from .tflite_schema import text
from .tflite_types import FLOAT, TYPES

_ACTIVATIONS = {1: "Relu", 3: "Relu6", 4: "Tanh"}  # NONE (0) is none; RELU_N1_TO_1 (2) a clip: see _activated
_PADDING = {0: b"SAME", 1: b"VALID"}


def reads_its_shape(graph: Any, operator: Any, kind: str) -> bool:
    """Whether a RESHAPE's new shape must be computed: its output's own shape has
    more than one size left open (a Reshape takes one -1)."""
    if kind != "RESHAPE" or operator.InputsLength() < 2:
        return False
    return list(shape_signature(graph.Tensors(int(operator.OutputsAsNumpy()[0])))).count(-1) > 1


def shape_signature(tensor: Any) -> Any:
    """A tensor's shape, -1 where any size goes."""
    return tensor.ShapeSignatureAsNumpy() if tensor.ShapeSignatureLength() else tensor.ShapeAsNumpy()


def options_of(rebuild: Any, operator: Any, kind: str) -> Any:
    table = operator.BuiltinOptions()
    options = getattr(rebuild.tflite, kind)()
    if table is not None:
        options.Init(table.Bytes, table.Pos)
    return options


def _activated(rebuild: Any, name: str, value: str, function: int) -> str:
    """``value`` through a fused activation (the op's ``FusedActivationFunction``)."""
    if function == 0:
        return value
    if function == 2:  # RELU_N1_TO_1
        return rebuild.node(name + "/relu_n1_to_1", "ClipByValue", [
            value, rebuild.constant(name + "/minus_one", np.float32(-1)),
            rebuild.constant(name + "/one", np.float32(1))], T=AttrValue(type=FLOAT))
    if function not in _ACTIVATIONS:
        raise ModelReadError(f"{rebuild.path}: fused activation {function} of {name} is not rebuilt "
                             "(graphgrad rebuilds NONE, RELU, RELU_N1_TO_1, RELU6 and TANH)")
    return rebuild.node(f"{name}/{_ACTIVATIONS[function]}", _ACTIVATIONS[function], [value], T=AttrValue(type=FLOAT))


def named(rebuild: Any, output: int) -> str:
    return text(rebuild.tensor(output).Name()).split(";")[0]


def _strides(height: int, width: int) -> Any:
    return AttrValue(list=AttrValue.ListValue(i=[1, height, width, 1]))


def _windowed(rebuild: Any, name: str, **sizes: int) -> None:
    """Refuses a window operator whose strides, dilations or window sizes are not positive."""
    wrong = {key: size for key, size in sizes.items() if size < 1}
    if wrong:
        raise ModelReadError(f"{rebuild.path}: {name} has {', '.join(f'{k} {v}' for k, v in wrong.items())}; "
                             "each must be at least 1")


def _biased(rebuild: Any, name: str, value: str, inputs: list) -> str:
    if len(inputs) > 2 and inputs[2] >= 0:
        return rebuild.node(name + "/BiasAdd", "BiasAdd", [value, rebuild.input(inputs[2])], T=AttrValue(type=FLOAT))
    return value


def _conv_2d(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
    filters = _float_value(rebuild, inputs[1]).transpose(1, 2, 3, 0)  # OHWI -> HWIO
    return _convolution(rebuild, "Conv2D", options_of(rebuild, operator, "Conv2DOptions"), filters, inputs, output)


def _depthwise_conv_2d(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
    filters = _float_value(rebuild, inputs[1])[0]  # (1, H, W, C * M) -> (H, W, C, M)
    channels = rebuild.tensor(inputs[0]).ShapeAsNumpy()[-1]
    filters = filters.reshape(filters.shape[0], filters.shape[1], int(channels), -1)
    return _convolution(rebuild, "DepthwiseConv2dNative", options_of(rebuild, operator, "DepthwiseConv2DOptions"),
                        filters, inputs, output)


def _convolution(rebuild: Any, op_type: str, options: Any, filters: Any, inputs: list, output: int) -> str:
    """A convolution of TensorFlow's (its ``filters`` in TensorFlow's layout), biased and activated."""
    name = named(rebuild, output)
    _windowed(rebuild, name, stride_h=options.StrideH(), stride_w=options.StrideW(),
              dilation_h=options.DilationHFactor(), dilation_w=options.DilationWFactor())
    value = rebuild.node(name, op_type, [rebuild.input(inputs[0]), rebuild.constant(name + "/filter", filters)],
                         T=AttrValue(type=FLOAT), strides=_strides(options.StrideH(), options.StrideW()),
                         padding=AttrValue(s=_PADDING[options.Padding()]),
                         dilations=_strides(options.DilationHFactor(), options.DilationWFactor()),
                         data_format=AttrValue(s=b"NHWC"))
    return _activated(rebuild, name, _biased(rebuild, name, value, inputs), options.FusedActivationFunction())


def _fully_connected(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
    options = options_of(rebuild, operator, "FullyConnectedOptions")
    name = named(rebuild, output)
    weights = _float_value(rebuild, inputs[1])  # (out, in)
    flat = rebuild.node(name + "/flat", "Reshape", [rebuild.input(inputs[0]), rebuild.constant(
        name + "/flat_shape", np.array([-1, weights.shape[1]], np.int32))], T=AttrValue(type=FLOAT),
                        Tshape=AttrValue(type=3))
    value = rebuild.node(name, "MatMul", [flat, rebuild.constant(name + "/weights", weights.T.copy())],
                         T=AttrValue(type=FLOAT), transpose_a=AttrValue(b=False), transpose_b=AttrValue(b=False))
    value = _activated(rebuild, name, _biased(rebuild, name, value, inputs), options.FusedActivationFunction())
    return _reshaped_to(rebuild, name, value, output) if options.KeepNumDims() else value


def _reshaped_to(rebuild: Any, name: str, value: str, output: int) -> str:
    """``value`` reshaped to tensor ``output``'s shape (its signature: -1 where any)."""
    shape = shape_signature(rebuild.tensor(output))
    return rebuild.node(name + "/Reshape", "Reshape", [value, rebuild.constant(
        name + "/shape", np.asarray(shape, np.int32))], T=held_type(rebuild, output), Tshape=AttrValue(type=3))


def _reshape(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
    name = named(rebuild, output)
    if reads_its_shape(rebuild.graph, operator, "RESHAPE"):  # the shape the model computes
        return rebuild.node(name, "Reshape", [rebuild.input(inputs[0]), rebuild.input(inputs[1])],
                            T=held_type(rebuild, inputs[0]), Tshape=held_type(rebuild, inputs[1]))
    return _reshaped_to(rebuild, name, rebuild.input(inputs[0]), output)


def _float_value(rebuild: Any, index: int) -> Any:
    value = rebuild.value(index)
    if value is None:
        raise ModelReadError(f"{rebuild.path}: the weights {text(rebuild.tensor(index).Name())} are computed in "
                             "the graph; graphgrad rebuilds stored weights")
    return np.asarray(rebuild.real(index, value), dtype=np.float32)


def _dequantize(rebuild: Any, operator: Any, inputs: list, output: int) -> "str | None":
    """Stored weights (float16 or integers) dequantised are folded into the float32
    constant they make (None); a computed tensor is already held as its real values."""
    stored = rebuild.value(inputs[0])
    if stored is None:
        return rebuild.input(inputs[0])
    rebuild.folded[output] = rebuild.real(inputs[0], stored)
    return None


def _quantize(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
    """The real input, which is quantised to the output's steps as every quantised output is."""
    return rebuild.input(inputs[0])


def _binary(op_type: str, kind: str) -> Callable:
    def rebuild_binary(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
        options = options_of(rebuild, operator, kind)
        name = named(rebuild, output)
        value = rebuild.node(name, op_type, [rebuild.input(inputs[0]), rebuild.input(inputs[1])],
                             T=_computed_type(rebuild, inputs[0]))
        return _activated(rebuild, name, value, options.FusedActivationFunction())
    return rebuild_binary


def _unary(op_type: str) -> Callable:
    def rebuild_unary(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
        return rebuild.node(named(rebuild, output), op_type, [rebuild.input(inputs[0])],
                            T=_computed_type(rebuild, inputs[0]))
    return rebuild_unary


def _pool(op_type: str) -> Callable:
    def rebuild_pool(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
        options = options_of(rebuild, operator, "Pool2DOptions")
        name = named(rebuild, output)
        _windowed(rebuild, name, stride_h=options.StrideH(), stride_w=options.StrideW(),
                  filter_h=options.FilterHeight(), filter_w=options.FilterWidth())
        value = rebuild.node(name, op_type, [rebuild.input(inputs[0])], T=AttrValue(type=FLOAT),
                             ksize=_strides(options.FilterHeight(), options.FilterWidth()),
                             strides=_strides(options.StrideH(), options.StrideW()),
                             padding=AttrValue(s=_PADDING[options.Padding()]), data_format=AttrValue(s=b"NHWC"))
        return _activated(rebuild, name, value, options.FusedActivationFunction())
    return rebuild_pool


def _softmax(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
    beta = options_of(rebuild, operator, "SoftmaxOptions").Beta()
    name = named(rebuild, output)
    logits = rebuild.input(inputs[0])
    if beta != 1.0:
        logits = rebuild.node(name + "/beta", "Mul", [logits, rebuild.constant(name + "/beta_value",
                                                                                np.float32(beta))],
                              T=AttrValue(type=FLOAT))
    return rebuild.node(name, "Softmax", [logits], T=AttrValue(type=FLOAT))


def _concatenation(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
    options = options_of(rebuild, operator, "ConcatenationOptions")
    name = named(rebuild, output)
    value = rebuild.node(name, "ConcatV2", [rebuild.input(i) for i in inputs] + [
        rebuild.constant(name + "/axis", np.int32(options.Axis()))], T=held_type(rebuild, inputs[0]),
                         N=AttrValue(i=len(inputs)), Tidx=AttrValue(type=3))
    return _activated(rebuild, name, value, options.FusedActivationFunction())


def _pad(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
    padding = rebuild.value(inputs[1])
    name = named(rebuild, output)
    given = [rebuild.input(inputs[0]), rebuild.constant(name + "/paddings", np.asarray(padding, np.int32))]
    if len(inputs) > 2:  # PADV2: the value padded with
        return rebuild.node(name, "PadV2", given + [rebuild.input(inputs[2])], T=held_type(rebuild, inputs[0]),
                            Tpaddings=AttrValue(type=3))
    return rebuild.node(name, "Pad", given, T=held_type(rebuild, inputs[0]), Tpaddings=AttrValue(type=3))


def _reduce(op_type: str) -> Callable:
    def rebuild_reduce(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
        keep = options_of(rebuild, operator, "ReducerOptions").KeepDims()
        return rebuild.node(named(rebuild, output), op_type, [rebuild.input(inputs[0]), rebuild.input(inputs[1])],
                            T=_computed_type(rebuild, inputs[0]), Tidx=held_type(rebuild, inputs[1]),
                            keep_dims=AttrValue(b=bool(keep)))
    return rebuild_reduce


def _unary_pair(op_type: str) -> Callable:
    """An elementwise op of two inputs without options (MAXIMUM, MINIMUM)."""
    def rebuild_pair(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
        return rebuild.node(named(rebuild, output), op_type, [rebuild.input(inputs[0]), rebuild.input(inputs[1])],
                            T=held_type(rebuild, inputs[0]))
    return rebuild_pair


def _hard_swish(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
    """x * relu6(x + 3) / 6, as TensorFlow Lite defines it."""
    name = named(rebuild, output)
    x = rebuild.input(inputs[0])
    shifted = rebuild.node(name + "/plus_three", "AddV2", [x, rebuild.constant(name + "/three", np.float32(3))],
                           T=AttrValue(type=FLOAT))
    gate = rebuild.node(name + "/Relu6", "Relu6", [shifted], T=AttrValue(type=FLOAT))
    scaled = rebuild.node(name + "/sixth", "Mul", [gate, rebuild.constant(name + "/one_sixth",
                                                                          np.float32(1 / 6))],
                          T=AttrValue(type=FLOAT))
    return rebuild.node(name, "Mul", [x, scaled], T=AttrValue(type=FLOAT))


def _leaky_relu(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
    """max(x, alpha x); quantised, as LiteRT's interpreter runs it by default (XNNPACK),
    whose integer kernel rescales each side by a multiplier of 8 fractional bits,
    round(256 * ratio) / 256: measured, not a rounding of the exact ratio's."""
    alpha = options_of(rebuild, operator, "LeakyReluOptions").Alpha()
    name, x = named(rebuild, output), rebuild.input(inputs[0])
    given, wanted = rebuild.quantisation(inputs[0]), rebuild.quantisation(output)
    if given is None or wanted is None:
        return rebuild.node(name, "LeakyRelu", [x], T=AttrValue(type=FLOAT), alpha=AttrValue(f=alpha))
    ratio = float(given.scale[0]) / float(wanted.scale[0])
    positive, negative = round(256 * ratio), round(256 * alpha * ratio)
    if not positive:
        raise ModelReadError(f"{rebuild.path}: LEAKY_RELU {name} rescales by {ratio:.3g}, below XNNPACK's "
                             "multipliers' resolution (1/256); graphgrad does not rebuild it")
    scaled = rebuild.node(name + "/rescaled", "Mul", [x, rebuild.constant(
        name + "/multiplier", np.float32(positive / 256 / ratio))], T=AttrValue(type=FLOAT))
    return rebuild.node(name, "LeakyRelu", [scaled], T=AttrValue(type=FLOAT), alpha=AttrValue(f=negative / positive))


def held_type(rebuild: Any, index: int) -> Any:
    """The TensorFlow type a tensor is held in: float32 for float16 weights and quantised integers."""
    kind = rebuild.tensor(index).Type()
    if kind == 1 or rebuild.quantisation(index) is not None:
        return AttrValue(type=FLOAT)
    if kind not in TYPES:
        raise ModelReadError(f"{rebuild.path}: tensor {text(rebuild.tensor(index).Name())} is of TensorFlow Lite "
                             f"type {kind}, which graphgrad does not rebuild")
    return AttrValue(type=TYPES[kind][1])


def _computed_type(rebuild: Any, index: int) -> Any:
    """The type an arithmetic operator computes in: its input's, where TensorFlow has it (float, int32, int64)."""
    dtype = held_type(rebuild, index)
    if dtype.type not in (FLOAT, 2, 3, 9):
        raise ModelReadError(f"{rebuild.path}: arithmetic on {text(rebuild.tensor(index).Name())} of TensorFlow "
                             f"type {dtype.type} is not rebuilt")
    return dtype


def _shape(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
    return rebuild.node(named(rebuild, output), "Shape", [rebuild.input(inputs[0])], T=held_type(rebuild, inputs[0]),
                        out_type=held_type(rebuild, output))


def _strided_slice(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
    options = options_of(rebuild, operator, "StridedSliceOptions")
    if options.Offset():
        raise ModelReadError(f"{rebuild.path}: STRIDED_SLICE with offset is not rebuilt")
    masks = {name: AttrValue(i=getattr(options, kind)()) for name, kind in (
        ("begin_mask", "BeginMask"), ("end_mask", "EndMask"), ("ellipsis_mask", "EllipsisMask"),
        ("new_axis_mask", "NewAxisMask"), ("shrink_axis_mask", "ShrinkAxisMask"))}
    return rebuild.node(named(rebuild, output), "StridedSlice", [rebuild.input(i) for i in inputs[:4]],
                        T=held_type(rebuild, inputs[0]), Index=held_type(rebuild, inputs[1]), **masks)


def _pack(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
    axis = options_of(rebuild, operator, "PackOptions").Axis()
    return rebuild.node(named(rebuild, output), "Pack", [rebuild.input(i) for i in inputs],
                        T=held_type(rebuild, inputs[0]), N=AttrValue(i=len(inputs)), axis=AttrValue(i=axis))


def _transpose(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
    return rebuild.node(named(rebuild, output), "Transpose", [rebuild.input(inputs[0]), rebuild.input(inputs[1])],
                        T=held_type(rebuild, inputs[0]), Tperm=held_type(rebuild, inputs[1]))


def _squeeze(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
    dims = options_of(rebuild, operator, "SqueezeOptions").SqueezeDimsAsNumpy()
    dims = [] if isinstance(dims, int) else [int(d) for d in dims]
    return rebuild.node(named(rebuild, output), "Squeeze", [rebuild.input(inputs[0])], T=held_type(rebuild, inputs[0]),
                        squeeze_dims=AttrValue(list=AttrValue.ListValue(i=dims)))


def _resize(op_type: str, kind: str) -> Callable:
    def rebuild_resize(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
        options = options_of(rebuild, operator, kind)
        return rebuild.node(named(rebuild, output), op_type, [rebuild.input(inputs[0]), rebuild.input(inputs[1])],
                            T=AttrValue(type=FLOAT), align_corners=AttrValue(b=bool(options.AlignCorners())),
                            half_pixel_centers=AttrValue(b=bool(options.HalfPixelCenters())))
    return rebuild_resize


def _gather(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
    options = options_of(rebuild, operator, "GatherOptions")
    name = named(rebuild, output)
    return rebuild.node(name, "GatherV2", [rebuild.input(inputs[0]), rebuild.input(inputs[1]),
                                           rebuild.constant(name + "/axis", np.int32(options.Axis()))],
                        Tparams=held_type(rebuild, inputs[0]), Tindices=held_type(rebuild, inputs[1]),
                        Taxis=AttrValue(type=3), batch_dims=AttrValue(i=options.BatchDims()))


def _prelu(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
    """max(x, 0) + alpha min(x, 0), alpha per channel (broadcast as stored)."""
    name, x = named(rebuild, output), rebuild.input(inputs[0])
    zero = rebuild.constant(name + "/zero", np.float32(0))
    positive = rebuild.node(name + "/positive", "Maximum", [x, zero], T=AttrValue(type=FLOAT))
    negative = rebuild.node(name + "/negative", "Minimum", [x, zero], T=AttrValue(type=FLOAT))
    scaled = rebuild.node(name + "/alpha_negative", "Mul", [rebuild.input(inputs[1]), negative],
                          T=AttrValue(type=FLOAT))
    return rebuild.node(name, "AddV2", [positive, scaled], T=AttrValue(type=FLOAT))


def _typed(op_type: str, **types: int) -> Callable:
    """An operator that is one TensorFlow op of the same inputs: each type attribute
    from the tensor at its position (``T=0``: input 0's type; ``-1``: the output's)."""
    def rebuild_typed(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
        attrs = {key: held_type(rebuild, output if place < 0 else inputs[place]) for key, place in types.items()}
        return rebuild.node(named(rebuild, output), op_type, [rebuild.input(i) for i in inputs], **attrs)
    return rebuild_typed


def _mirror_pad(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
    mode = (b"REFLECT", b"SYMMETRIC")[options_of(rebuild, operator, "MirrorPadOptions").Mode()]
    return rebuild.node(named(rebuild, output), "MirrorPad", [rebuild.input(i) for i in inputs[:2]],
                        T=held_type(rebuild, inputs[0]), Tpaddings=held_type(rebuild, inputs[1]),
                        mode=AttrValue(s=mode))


def _blocks(op_type: str, kind: str) -> Callable:
    """DEPTH_TO_SPACE and SPACE_TO_DEPTH."""
    def rebuild_blocks(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
        size = options_of(rebuild, operator, kind).BlockSize()
        if size < 2:
            raise ModelReadError(f"{rebuild.path}: {named(rebuild, output)} has block size {size}; "
                                 "it must be at least 2")
        return rebuild.node(named(rebuild, output), op_type, [rebuild.input(inputs[0])],
                            T=held_type(rebuild, inputs[0]), block_size=AttrValue(i=size),
                            data_format=AttrValue(s=b"NHWC"))
    return rebuild_blocks


def _cast(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
    return rebuild.node(named(rebuild, output), "Cast", [rebuild.input(inputs[0])],
                        SrcT=held_type(rebuild, inputs[0]), DstT=held_type(rebuild, output),
                        Truncate=AttrValue(b=False))


def _arg_max(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
    return rebuild.node(named(rebuild, output), "ArgMax", [rebuild.input(i) for i in inputs[:2]],
                        T=held_type(rebuild, inputs[0]), Tidx=held_type(rebuild, inputs[1]),
                        output_type=held_type(rebuild, output))


def _split(rebuild: Any, operator: Any, inputs: list, output: int) -> list:
    """SPLIT (axis, value) and its outputs."""
    count = options_of(rebuild, operator, "SplitOptions").NumSplits()
    name = rebuild.node(named(rebuild, output), "Split", [rebuild.input(inputs[0]), rebuild.input(inputs[1])],
                        T=held_type(rebuild, inputs[1]), num_split=AttrValue(i=count))
    return [f"{name}:{i}" if i else name for i in range(count)]


def _split_v(rebuild: Any, operator: Any, inputs: list, output: int) -> list:
    """SPLIT_V (value, sizes, axis) and its outputs."""
    count = options_of(rebuild, operator, "SplitVOptions").NumSplits()
    name = rebuild.node(named(rebuild, output), "SplitV", [rebuild.input(i) for i in inputs[:3]],
                        T=held_type(rebuild, inputs[0]), Tlen=held_type(rebuild, inputs[1]),
                        num_split=AttrValue(i=count))
    return [f"{name}:{i}" if i else name for i in range(count)]


def _unpack(rebuild: Any, operator: Any, inputs: list, output: int) -> list:
    options = options_of(rebuild, operator, "UnpackOptions")
    name = rebuild.node(named(rebuild, output), "Unpack", [rebuild.input(inputs[0])],
                        T=held_type(rebuild, inputs[0]), num=AttrValue(i=options.Num()),
                        axis=AttrValue(i=options.Axis()))
    return [f"{name}:{i}" if i else name for i in range(options.Num())]


def _transpose_conv(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
    """TRANSPOSE_CONV (output shape, weights OHWI, input, bias): Conv2DBackpropInput's
    filter is HWOI."""
    options = options_of(rebuild, operator, "TransposeConvOptions")
    name = named(rebuild, output)
    _windowed(rebuild, name, stride_h=options.StrideH(), stride_w=options.StrideW())
    filters = _float_value(rebuild, inputs[1]).transpose(1, 2, 0, 3)
    value = rebuild.node(name, "Conv2DBackpropInput", [
        rebuild.input(inputs[0]), rebuild.constant(name + "/filter", filters.copy()), rebuild.input(inputs[2])],
        T=AttrValue(type=FLOAT), strides=_strides(options.StrideH(), options.StrideW()),
        padding=AttrValue(s=_PADDING[options.Padding()]), dilations=_strides(1, 1), data_format=AttrValue(s=b"NHWC"))
    biased = _biased(rebuild, name, value, [-1, -1, inputs[3]] if len(inputs) > 3 else [])  # the bias is input 3
    return _activated(rebuild, name, biased, options.FusedActivationFunction())


def _gelu(rebuild: Any, operator: Any, inputs: list, output: int) -> str:
    """x Phi(x), exact (erf) or tanh-approximated, as the option says."""
    approximate = options_of(rebuild, operator, "GeluOptions").Approximate()
    name, x = named(rebuild, output), rebuild.input(inputs[0])
    if approximate:  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        cube = rebuild.node(name + "/cube", "Pow", [x, rebuild.constant(name + "/three", np.float32(3))],
                            T=AttrValue(type=FLOAT))
        inner = rebuild.node(name + "/inner", "AddV2", [x, rebuild.node(name + "/cubic", "Mul", [
            cube, rebuild.constant(name + "/coefficient", np.float32(0.044715))], T=AttrValue(type=FLOAT))],
            T=AttrValue(type=FLOAT))
        gate = rebuild.node(name + "/tanh", "Tanh", [rebuild.node(name + "/scaled", "Mul", [
            inner, rebuild.constant(name + "/sqrt_2_over_pi", np.float32(np.sqrt(2 / np.pi)))],
            T=AttrValue(type=FLOAT))], T=AttrValue(type=FLOAT))
    else:  # 0.5 x (1 + erf(x / sqrt 2))
        gate = rebuild.node(name + "/erf", "Erf", [rebuild.node(name + "/scaled", "Mul", [
            x, rebuild.constant(name + "/one_over_sqrt_2", np.float32(1 / np.sqrt(2)))], T=AttrValue(type=FLOAT))],
            T=AttrValue(type=FLOAT))
    opened = rebuild.node(name + "/one_plus", "AddV2", [gate, rebuild.constant(name + "/one", np.float32(1))],
                          T=AttrValue(type=FLOAT))
    half = rebuild.node(name + "/half_x", "Mul", [x, rebuild.constant(name + "/half", np.float32(0.5))],
                        T=AttrValue(type=FLOAT))
    return rebuild.node(name, "Mul", [half, opened], T=AttrValue(type=FLOAT))


_UNARY = {"LOGISTIC": "Sigmoid", "TANH": "Tanh", "RELU": "Relu", "RELU6": "Relu6", "LOG": "Log", "EXP": "Exp",
          "NEG": "Neg", "SQRT": "Sqrt", "RSQRT": "Rsqrt", "SQUARE": "Square", "ABS": "Abs", "SIN": "Sin", "COS": "Cos",
          "FLOOR": "Floor", "CEIL": "Ceil", "ELU": "Elu", "SIGN": "Sign"}
_PAIRS = {"MAXIMUM": "Maximum", "MINIMUM": "Minimum", "SQUARED_DIFFERENCE": "SquaredDifference", "POW": "Pow",
          "FLOOR_DIV": "FloorDiv", "FLOOR_MOD": "FloorMod"}
_COMPARISONS = {"EQUAL": "Equal", "NOT_EQUAL": "NotEqual", "LESS": "Less", "LESS_EQUAL": "LessEqual",
                "GREATER": "Greater", "GREATER_EQUAL": "GreaterEqual"}
_REDUCTIONS = {"SUM": "Sum", "MEAN": "Mean", "REDUCE_MAX": "Max", "REDUCE_MIN": "Min", "REDUCE_PROD": "Prod"}

REBUILDS: dict[str, Callable] = {
    "CONV_2D": _conv_2d, "DEPTHWISE_CONV_2D": _depthwise_conv_2d, "FULLY_CONNECTED": _fully_connected,
    "TRANSPOSE_CONV": _transpose_conv, "ADD": _binary("AddV2", "AddOptions"), "SUB": _binary("Sub", "SubOptions"),
    "MUL": _binary("Mul", "MulOptions"), "DIV": _binary("RealDiv", "DivOptions"),
    "AVERAGE_POOL_2D": _pool("AvgPool"), "MAX_POOL_2D": _pool("MaxPool"), "RESHAPE": _reshape,
    "SOFTMAX": _softmax, "CONCATENATION": _concatenation, "PAD": _pad, "PADV2": _pad, "MIRROR_PAD": _mirror_pad,
    "DEQUANTIZE": _dequantize, "QUANTIZE": _quantize, "HARD_SWISH": _hard_swish, "LEAKY_RELU": _leaky_relu,
    "PRELU": _prelu, "GELU": _gelu, "SHAPE": _shape, "STRIDED_SLICE": _strided_slice, "PACK": _pack,
    "TRANSPOSE": _transpose, "SQUEEZE": _squeeze, "GATHER": _gather, "CAST": _cast, "ARG_MAX": _arg_max,
    "RESIZE_BILINEAR": _resize("ResizeBilinear", "ResizeBilinearOptions"),
    "RESIZE_NEAREST_NEIGHBOR": _resize("ResizeNearestNeighbor", "ResizeNearestNeighborOptions"),
    "DEPTH_TO_SPACE": _blocks("DepthToSpace", "DepthToSpaceOptions"),
    "SPACE_TO_DEPTH": _blocks("SpaceToDepth", "SpaceToDepthOptions"),
    "SPLIT": _split, "SPLIT_V": _split_v, "UNPACK": _unpack,
    "EXPAND_DIMS": _typed("ExpandDims", T=0, Tdim=1), "SLICE": _typed("Slice", T=0, Index=1),
    "TILE": _typed("Tile", T=0, Tmultiples=1), "FILL": _typed("Fill", T=1, index_type=0),
    "SELECT_V2": _typed("SelectV2", T=1), "SELECT": _typed("Select", T=1),
    "SPACE_TO_BATCH_ND": _typed("SpaceToBatchND", T=0, Tblock_shape=1, Tpaddings=2),
    "BATCH_TO_SPACE_ND": _typed("BatchToSpaceND", T=0, Tblock_shape=1, Tcrops=2),
    **{name: _unary(op_type) for name, op_type in _UNARY.items()},
    **{name: _unary_pair(op_type) for name, op_type in _PAIRS.items()},
    **{name: _typed(op_type, T=0) for name, op_type in _COMPARISONS.items()},
    **{name: _reduce(op_type) for name, op_type in _REDUCTIONS.items()},
}
