"""TensorFlow Lite's integer quantisation, simulated in float for the rebuilt graph.

A quantised tensor carries integers q standing for the real values s * (q - z). The
rebuilt graph carries the real values themselves: each operator computes in float
on them, and its output is quantised as the integer kernel's is, to its tensor's
scale and zero point: ``round(y / s) + z``, clamped to the type's range, back to
``s * (q - z)``. The rounding is a ``Round`` node whose gradient is the
straight-through estimator ``graphgrad/identity`` (an ordinary override, which
``check``, ``show`` and ``rewrite`` see and can change); the clamp is a
``ClipByValue``, whose gradient is zero outside the range (fake quantisation's
own). Stored integer weights and biases become the float constants they stand
for (per channel where they are quantised per channel).

The integer kernels compute the same products exactly and rescale with a
fixed-point multiplier; the float simulation rounds its sums to float32 and
divides, so a value on the edge between two integers can land on the other one:
outputs agree within one quantisation step, most of them exactly.
"""

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ModelReadError
from ..names import ATTR, NAMESPACE
from .protos import AttrValue

# TensorFlow Lite's integer TensorTypes -> the range of their values
RANGES = {9: (-128, 127), 3: (0, 255), 7: (-32768, 32767), 2: (-2**31, 2**31 - 1), 4: (-2**63, 2**63 - 1)}
STRAIGHT_THROUGH = NAMESPACE + "identity"  # the canonical names of graphgrad's identity gradient
NO_GRADIENT = NAMESPACE + "zero"  # and of its zero one
_FLOAT = 1


@dataclass(frozen=True)
class Quantisation:
    """A tensor's scales and zero points (one each, or one per channel along ``axis``)
    and the range of its integers."""

    scale: Any
    zero_point: Any
    axis: int
    low: int
    high: int

    @property
    def per_channel(self) -> bool:
        return self.scale.size > 1

    def same_as(self, other: "Quantisation | None") -> bool:
        return (other is not None and (self.low, self.high) == (other.low, other.high)
                and np.array_equal(self.scale, other.scale) and np.array_equal(self.zero_point, other.zero_point))


def quantisation(tensor: Any, path: str, name: str) -> "Quantisation | None":
    """What a TensorFlow Lite tensor's integers stand for, or None for a tensor that is not quantised."""
    parameters = tensor.Quantization()
    if tensor.Type() not in RANGES or parameters is None or not parameters.ScaleLength():
        return None
    if parameters.DetailsType():
        raise ModelReadError(f"{path}: tensor {name} is quantised with custom details; graphgrad rebuilds affine "
                             "(scale and zero point) quantisation")
    scale = parameters.ScaleAsNumpy().astype(np.float64)
    zero_point = (parameters.ZeroPointAsNumpy().astype(np.int64) if parameters.ZeroPointLength()
                  else np.zeros_like(scale, np.int64))
    if not np.all(np.isfinite(scale)) or np.any(scale <= 0) or zero_point.size not in (1, scale.size):
        raise ModelReadError(f"{path}: tensor {name} has scales or zero points that do not make a quantisation "
                             "(each scale must be finite and positive, one zero point per scale)")
    low, high = RANGES[tensor.Type()]
    return Quantisation(scale, np.broadcast_to(zero_point, scale.shape), parameters.QuantizedDimension(), low, high)


def dequantised(values: Any, given: Quantisation, what: str) -> Any:
    """The real values ``s * (q - z)`` of stored integers (``what``: the file and tensor), in float32."""
    shape = [1] * values.ndim
    if given.per_channel:
        if values.ndim <= given.axis or values.shape[given.axis] != given.scale.size:
            raise ModelReadError(f"{what} has {given.scale.size} scales along axis {given.axis} and shape "
                                 f"{list(values.shape)}: they do not match")
        shape[given.axis] = given.scale.size
    scale, zero_point = given.scale.reshape(shape), given.zero_point.reshape(shape)
    return (scale * (values.astype(np.float64) - zero_point)).astype(np.float32)


def fake_quantised(rebuild: Any, name: str, value: str, given: Quantisation) -> str:
    """``value`` (real) quantised as an integer kernel writes it, back in real units."""
    integers = integer_valued(rebuild, name, value, given)
    return real_valued(rebuild, name, integers, given)


def nudged_fake_quantised(rebuild: Any, name: str, value: str, given: Quantisation, nudge: float,
                          away_from_zero: bool) -> str:
    """``value`` quantised where the integer kernel's results lie on a grid finer than
    its steps (multiples of 1/count for an average of count integers) and it rounds
    their ties a way of its own: half away from zero, or half up. ``Round`` alone
    rounds half to even; a ``nudge`` (a quarter of the grid) away from zero, or up,
    decides the ties and moves no other value of the grid past a half."""
    scale, zero_point = _per_tensor(rebuild, given, name)
    integers = rebuild.node(name + "/in_steps", "RealDiv", [value, rebuild.constant(
        name + "/scale", np.float32(scale))], T=AttrValue(type=_FLOAT))
    if zero_point:  # the kernels round the integers themselves (zero point included)
        integers = rebuild.node(name + "/plus_zero_point", "AddV2", [integers, rebuild.constant(
            name + "/zero_point", np.float32(zero_point))], T=AttrValue(type=_FLOAT))
    offset = rebuild.constant(name + "/tie_nudge", np.float32(nudge))
    if away_from_zero:
        # which way a tie goes has no gradient, on purpose (said so, so that check finds no blocker there)
        direction = rebuild.node(name + "/sign", "Sign", [integers], T=AttrValue(type=_FLOAT),
                                 **{ATTR: AttrValue(s=NO_GRADIENT.encode())})
        offset = rebuild.node(name + "/away", "Mul", [direction, offset], T=AttrValue(type=_FLOAT))
    nudged = rebuild.node(name + "/ties_decided", "AddV2", [integers, offset], T=AttrValue(type=_FLOAT))
    return real_valued(rebuild, name, _clamped(rebuild, name, _rounded(rebuild, name, nudged), given), given)


def integer_valued(rebuild: Any, name: str, value: str, given: Quantisation) -> str:
    """``clip(round(value / s) + z)``: the integers a real ``value`` is stored as, in float32."""
    scale, zero_point = _per_tensor(rebuild, given, name)
    steps = rebuild.node(name + "/in_steps", "RealDiv", [value, rebuild.constant(
        name + "/scale", np.float32(scale))], T=AttrValue(type=_FLOAT))
    rounded = _rounded(rebuild, name, steps)
    if zero_point:
        rounded = rebuild.node(name + "/plus_zero_point", "AddV2", [rounded, rebuild.constant(
            name + "/zero_point", np.float32(zero_point))], T=AttrValue(type=_FLOAT))
    return _clamped(rebuild, name, rounded, given)


def from_integers(rebuild: Any, name: str, value: str, given: Quantisation) -> str:
    """The real values of a quantised input fed as float32 integers (rounded and
    clamped first, as casting to the model's integer type would)."""
    return real_valued(rebuild, name, _clamped(rebuild, name, _rounded(rebuild, name, value), given), given)


def _rounded(rebuild: Any, name: str, value: str) -> str:
    return rebuild.node(name + "/Round", "Round", [value], T=AttrValue(type=_FLOAT),
                        **{ATTR: AttrValue(s=STRAIGHT_THROUGH.encode())})


def _clamped(rebuild: Any, name: str, value: str, given: Quantisation) -> str:
    return rebuild.node(name + "/clamp", "ClipByValue", [
        value, rebuild.constant(name + "/low", np.float32(given.low)),
        rebuild.constant(name + "/high", np.float32(given.high))], T=AttrValue(type=_FLOAT))


def real_valued(rebuild: Any, name: str, integers: str, given: Quantisation) -> str:
    """``s * (integers - z)``: the real values of integers (held as float32)."""
    scale, zero_point = _per_tensor(rebuild, given, name)
    if zero_point:
        integers = rebuild.node(name + "/minus_zero_point", "Sub", [integers, rebuild.constant(
            name + "/zero_point", np.float32(zero_point))], T=AttrValue(type=_FLOAT))
    return rebuild.node(name + "/real", "Mul", [integers, rebuild.constant(name + "/step", np.float32(scale))],
                        T=AttrValue(type=_FLOAT))


def _per_tensor(rebuild: Any, given: Quantisation, name: str) -> tuple[float, int]:
    if given.per_channel:
        raise ModelReadError(f"{rebuild.path}: {name} is quantised per channel; graphgrad rebuilds per-channel "
                             "quantisation of stored weights, not of computed tensors")
    return float(given.scale[0]), int(given.zero_point[0])
