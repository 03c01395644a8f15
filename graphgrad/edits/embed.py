"""Embedded gradients: the surrogate written into the graph itself.

For a node y = f(x) and a spec whose gradient is the derivative of a known
function h, the node's consumers are moved to

    y' = StopGradient(y) - (StopGradient(h) - h)

Forward, y' = y - 0 = y, bit for bit (the more familiar h + StopGradient(y - h)
rounds); where h overflows, the difference is replaced by 0, so the forward value
stays y there too. Backward, dy'/dx = dh/dx wherever h is finite. No gradient
registration is needed at load time, so TF Serving, C++, TF2 loaders and
processes that never import graphgrad get the custom gradient.
"""

import struct
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..errors import GraphgradError, SpecError
from ..files.protos import AttrValue, DataType, TensorProto
from ..gradients.spec import GradientSpec
from ..names import BYPASS, EMBED_SPEC
from ..readings.protocol import EditScope
from .surrogate_graph import SurrogateGraph
from .templates import NodeTemplate, Recorder
from .tensors import dtype_attr, dtype_name

REPLACEMENTS = ("identity", "ste", "approx_sign", "swish_sign", "triangle", "thermometer", "zero")
# Replacements whose h(x) has another shape than x: the difference is reshaped to y's.
RESHAPING = ("thermometer",)
TRANSFORMS = ("scale", "reverse")
EMBEDDABLE = REPLACEMENTS + TRANSFORMS


def _half_bits(value: float) -> int:
    return struct.unpack("<H", struct.pack("<e", value))[0]


def _float32(value: float) -> float:
    """``value`` as float32 stores it; OverflowError past float32's range (protobuf would store inf)."""
    return struct.unpack("<f", struct.pack("<f", value))[0]


def _bfloat16_bits(value: float) -> int:
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # the upper half, rounded to nearest even


# dtype -> (its name, TensorProto field, encoding of a Python float); float16 and
# bfloat16 values are their bit patterns in half_val, as TensorFlow stores them.
_FLOATS: dict[int, tuple[str, str, Callable[[float], Any]]] = {
    DataType.Value("DT_FLOAT"): ("float32", "float_val", _float32),
    DataType.Value("DT_DOUBLE"): ("float64", "double_val", float),
    DataType.Value("DT_HALF"): ("float16", "half_val", _half_bits),
    DataType.Value("DT_BFLOAT16"): ("bfloat16", "half_val", _bfloat16_bits),
}


@dataclass(frozen=True)
class Surrogate:
    """What to build: a replacement h(x) (or None: h = y itself), times a factor."""

    replacement: Any  # spec Stage or None
    factor: float


@lru_cache(maxsize=256)  # asked for each node a rule selects
def surrogate_for(spec: GradientSpec) -> Surrogate:
    """The surrogate of ``spec``, or a SpecError naming the specs that can be embedded."""
    if spec.tensor_refs:
        raise SpecError(
            f"{spec} cannot be embedded: it reads {spec.tensor_refs[0]} at run time, and a surrogate's constants "
            "are fixed in the file. To fix this, drop --embed (graphgrad.register_gradients reads the tensor)"
        )
    stages = list(spec.stages)
    refused = spec.tf_name is not None or any(stage.name not in EMBEDDABLE for stage in stages)
    if refused:
        raise SpecError(
            f"{spec} cannot be embedded: only these have a forward surrogate: "
            f"{', '.join(EMBEDDABLE)} (replacement first, then scale/reverse). "
            "To fix this, drop --embed and register gradients at load time (graphgrad.register_gradients)"
        )
    replacement = stages.pop(0) if stages and stages[0].name in REPLACEMENTS else None
    factor = 1.0
    for stage in stages:
        args = dict(stage.args)
        factor *= args["factor"] if stage.name == "scale" else -args["strength"]
    return Surrogate(replacement, factor)


# The slots of a surrogate's template (graphgrad.edits.templates.NodeTemplate): its
# group's name, x, y and the device. NUL never occurs in the labels around them.
GROUP_SLOT, X_SLOT, Y_SLOT, DEVICE_SLOT = "\0group\0", "\0x\0", "\0y\0", "\0device\0"


class _Builder:
    """Adds the surrogate's nodes, all in one group, to a Recorder."""

    def __init__(self, recorder: Recorder, base: str, dtype: int, device: str):
        self.recorder, self.base, self.dtype, self.device = recorder, base, dtype, device
        self.bypass = False  # whether it builds a bypass (for its errors)
        self.nodes: list = []
        self._labels: set = set()

    def node(self, op: str, label: str, *inputs: str, attrs: dict | None = None) -> str:
        # The group's name is new and opens no name scope yet: only this builder's
        # own names can be taken under it (unique_name's rule: label, label_1, ...).
        name, number = label, 0
        while name in self._labels:
            number += 1
            name = f"{label}_{number}"
        self._labels.add(name)
        attrs = attrs if attrs is not None else _type_attrs(self.dtype)
        node = self.recorder.add(op, f"{GROUP_SLOT}/{name}", inputs, attrs, device=self.device)
        self.nodes.append(node)
        return self.recorder.output_ref(node)

    def const(self, value: float | tuple) -> str:
        """A Const of the surrogate's dtype: a scalar, or a vector of a tuple's values."""
        try:
            attrs = _const_attrs(self.dtype, value)
        except OverflowError:
            what, way = (("the bypass at", "") if self.bypass else ("--embed on", ", or drop --embed"))
            raise GraphgradError(
                f"{what} {self.base}: the constant {value} of the gradient spec does not fit "
                f"{_FLOATS[self.dtype][0]}. To fix this, choose a smaller parameter{way}"
            ) from None
        return self.node("Const", "const", attrs=attrs)


_INT32 = DataType.Value("DT_INT32")


# Every surrogate of a rewrite has the same few attributes: made once (add copies them).
@lru_cache(maxsize=None)
def _type_attrs(dtype: int) -> dict:
    return {"T": dtype_attr(dtype)}


@lru_cache(maxsize=256)
def _const_attrs(dtype: int, value: float | tuple) -> dict:
    """A scalar (or, of a tuple, vector) Const's attributes; OverflowError if a value
    does not fit ``dtype``."""
    tensor = TensorProto(dtype=dtype)
    tensor.tensor_shape.SetInParent()
    values = value if isinstance(value, tuple) else (value,)
    if isinstance(value, tuple):
        tensor.tensor_shape.dim.add(size=len(values))
    _, field, encode = _FLOATS[dtype]
    getattr(tensor, field).extend(encode(v) for v in values)
    return {"value": AttrValue(tensor=tensor), "dtype": dtype_attr(dtype)}


def _last_axis_attrs() -> dict:
    """An int32 Const -1: ExpandDims's axis."""
    tensor = TensorProto(dtype=_INT32, int_val=[-1])
    tensor.tensor_shape.SetInParent()
    return {"value": AttrValue(tensor=tensor), "dtype": dtype_attr(_INT32)}


def build_embedded(scope: EditScope, x_ref: str, y_ref: str, dtype: int | None, spec: GradientSpec, base: str,
                   device: str = "", bypass: bool = False, graph: SurrogateGraph | None = None
                   ) -> tuple[str, str]:
    """Add the surrogate for ``spec`` on y = f(x) under a new group ``<base>/graphgrad_embed``;
    returns the name of its output node and the output's ref.

    ``bypass``: x is not y's input but the start of a region that ends at y
    (:func:`graphgrad.edits.surgery.bypass_region`); the nodes are named
    ``graphgrad_bypass``, and the term that carries h(x)'s gradient is reshaped
    to y's shape, so that the forward value keeps y's shape whatever x's is;
    ``graph``: h is the user's surrogate graph on x (a bypass's), not ``spec``'s.
    The surrogate of one spec and dtype is recorded once per scope, and added
    as a template with these names in its slots.
    """
    if dtype not in _FLOATS:
        raise GraphgradError(
            f"--embed builds {'/'.join(name for name, _, _ in _FLOATS.values())} arithmetic; {base} is "
            f"{dtype_name(dtype)}. To fix this, drop --embed and register the gradient at load time"
        )
    template = scope.template(  # an empty device is no field at all: no slot then
        ("bypass" if bypass else "embed", graph.label if graph else spec.canonical, dtype, bool(device)),
        lambda: _record(spec, dtype, base, bypass, scope.function is not None, bool(device), graph),
    )
    group = scope.unique_name(f"{base}/graphgrad_{'bypass' if bypass else 'embed'}")
    values = {GROUP_SLOT: group, X_SLOT: x_ref, Y_SLOT: y_ref}
    return scope.add_group(template, {**values, DEVICE_SLOT: device} if device else values)


def _record(spec: GradientSpec, dtype: int, base: str, bypass: bool, in_function: bool,
            on_device: bool, graph: SurrogateGraph | None = None) -> NodeTemplate:
    """The surrogate's nodes over the slots (``base``: the node named in errors)."""
    surrogate = surrogate_for(spec)
    slots = (GROUP_SLOT, X_SLOT, Y_SLOT) + ((DEVICE_SLOT,) if on_device else ())
    builder = _Builder(recorder := Recorder(slots, in_function), base, dtype, DEVICE_SLOT if on_device else "")
    builder.bypass = bypass
    stopped_y = builder.node("StopGradient", "stop_y", Y_SLOT)
    replacement = surrogate.replacement
    if replacement is None or replacement.name != "zero":  # zero: stop_y is the output
        if graph is not None:
            h = _copied(builder, graph, X_SLOT)
        else:
            h = Y_SLOT if replacement is None else _surrogate_function(builder, replacement, X_SLOT)
        if surrogate.factor != 1.0:
            h = builder.node("Mul", "scaled", h, builder.const(surrogate.factor))
        stopped_h = builder.node("StopGradient", "stop_h", h)
        difference = builder.node("Sub", "difference", stopped_h, h)
        # inf - inf is NaN: where h overflows (sooner in float16) the difference is
        # not 0 and would change the forward value, so it becomes 0 there (h has
        # no usable gradient there anyway). Select, not SelectV2: older loaders
        # have it too.
        finite = builder.node("IsFinite", "finite", difference)
        zero = builder.node("Select", "zero", finite, difference, builder.node("ZerosLike", "zeros", difference))
        # 0 everywhere, in y's shape: d/dx reshapes dy back to h's (equal sizes; else a clear error)
        if bypass or (replacement is not None and replacement.name in RESHAPING):  # (a graph's only in a bypass)
            int32 = {"out_type": dtype_attr(_INT32), "T": dtype_attr(dtype)}
            shape = builder.node("Shape", "shape_y", stopped_y, attrs=int32)
            zero = builder.node("Reshape", "zero_like_y", zero, shape,
                                attrs={"T": dtype_attr(dtype), "Tshape": dtype_attr(_INT32)})
        builder.node("Sub", "output", stopped_y, zero)
    output_node = builder.nodes[-1]
    recorder.mark(output_node, EMBED_SPEC, f"graph {graph.label}" if graph else spec.canonical)
    if bypass:
        recorder.mark(output_node, BYPASS, X_SLOT)
    return recorder.template(output_node, Y_SLOT)


def _copied(builder: _Builder, graph: SurrogateGraph, x: str) -> str:
    """The surrogate graph's nodes under the group (as ``g/<name>``), its placeholder x: h's ref."""
    refs = {graph.placeholder: x}

    def ref(text: str) -> str:
        control, name = text.startswith("^"), text.lstrip("^")
        node, _, index = name.partition(":")
        mapped = refs[node] if not index or index == "0" else f"{refs[node]}:{index}"
        return "^" + refs[node] if control else mapped

    for node in graph.nodes:
        attrs = {key: value for key, value in node.attr.items() if key != "_output_shapes"}
        refs[node.name] = builder.node(node.op, f"g/{node.name}", *map(ref, node.input), attrs=attrs)
    return refs[graph.output]


def _surrogate_function(builder: _Builder, stage, x: str) -> str:
    """h(x) whose derivative is the stage's gradient formula."""
    args = dict(stage.args)
    if stage.name == "identity":
        return builder.node("Identity", "x", x)
    if stage.name == "thermometer":  # sigmoid((x - k/levels) / temperature), level k on a new last axis
        levels, temperature = args["levels"], args["temperature"]
        axis = builder.node("Const", "last_axis", attrs=_last_axis_attrs())
        expanded = builder.node("ExpandDims", "by_level", x, axis,
                                attrs={"T": dtype_attr(builder.dtype), "Tdim": dtype_attr(_INT32)})
        above = builder.node("Sub", "above", expanded, builder.const(tuple(k / levels for k in range(levels))))
        return builder.node("Sigmoid", "soft_thermometer", builder.node("Mul", "sharpened", above,
                                                                        builder.const(1.0 / temperature)))
    if stage.name == "ste":  # d/dx clip(x, -c, c) = 1{|x| <= c}
        return builder.node("ClipByValue", "clip", x, builder.const(-args["clip"]), builder.const(args["clip"]))
    if stage.name in ("triangle", "approx_sign"):  # c - c|c|/2, c = clip(x, -1, 1): d/dx = max(0, 1 - |x|)
        clipped = builder.node("ClipByValue", "clip", x, builder.const(-1.0), builder.const(1.0))
        square = builder.node("Mul", "c_abs_c", clipped, builder.node("Abs", "abs", clipped))
        h = builder.node("Sub", "triangle", clipped, builder.node("Mul", "half", square, builder.const(0.5)))
        return h if stage.name == "triangle" else builder.node("Mul", "double", h, builder.const(2.0))
    # swish_sign (SignSwish, BNN+): h(x) = 2 s (1 + bx (1 - s)) - 1, s = sigmoid(bx), odd
    # in x, so built on each side from t = sigmoid(-b|x|): where bx > 7, s rounds
    # towards 1 and 1 - s, autodiff's too, loses a tenth of a percent of the slope.
    nonnegative = builder.node("GreaterEqual", "x_nonnegative", x, builder.const(0.0),
                               attrs=_type_attrs(builder.dtype))
    right = _swish_sign_side(builder, x, args["beta"])
    left = builder.node("Neg", "odd", _swish_sign_side(builder, builder.node("Neg", "minus_x", x), args["beta"]))
    return builder.node("SelectV2", "swish_sign", nonnegative, right, left)


def _swish_sign_side(builder: _Builder, v: str, beta: float) -> str:
    """swish_sign's h at v >= 0: 2 (1 - t) (1 + bv t) - 1, t = sigmoid(-bv) small and exact."""
    t = builder.node("Sigmoid", "t", builder.node("Mul", "minus_bv", v, builder.const(-beta)))
    one = builder.const(1.0)
    inner = builder.node("AddV2", "inner", one,
                         builder.node("Mul", "bv_t", builder.node("Mul", "bv", v, builder.const(beta)), t))
    doubled = builder.node("Mul", "two_s", builder.node("Sub", "s", one, t), builder.const(2.0))
    return builder.node("Sub", "side", builder.node("Mul", "two_s_inner", doubled, inner), one)
