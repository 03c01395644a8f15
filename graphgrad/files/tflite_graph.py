"""A TensorFlow Lite model rebuilt as a frozen GraphDef, without TensorFlow: each
builtin operator of the subgraph it serves becomes the TensorFlow ops that compute
the same thing (:mod:`graphgrad.files.tflite_operators`; weights as constants, in
TensorFlow's layouts), so the graph can be differentiated, checked, drawn and
attributed like any frozen graph.

Read with the ``tflite`` package's code generated from TensorFlow Lite's schema.
Float models, float16 weights (dequantised to float32) and full-integer models
(their arithmetic simulated in float: :mod:`graphgrad.files.tflite_quantisation`)
are rebuilt; an operator without a rebuild, a custom operator and dynamic-range
quantisation are refused by name, never guessed. Placeholders and outputs are
named after the model's tensors (``serving_default_x:0`` becomes
``serving_default_x``), as ``graphgrad ops`` lists them.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ModelReadError
from ..names import VALUE_RANGE
from .protos import AttrValue, GraphDef, TensorProto
from .tflite_quantisation import (Quantisation, dequantised, fake_quantised, from_integers,
                                  integer_valued, nudged_fake_quantised, quantisation)
from .tflite_operators import REBUILDS, held_type, named, options_of, reads_its_shape
from .tflite_schema import op_name, served_subgraph, text, with_schema
from .tflite_types import FLOAT, TYPES


@dataclass
class _Rebuild:
    """The GraphDef being written, and what each TensorFlow Lite tensor is in it."""

    tflite: Any
    model: Any
    graph: Any
    path: str
    data: bytes
    graph_def: Any = field(default_factory=GraphDef)
    names: dict = field(default_factory=dict)  # tensor index -> the node name of its value
    folded: dict = field(default_factory=dict)  # tensor index -> its value, computed here (float16 dequantised)
    used: set = field(default_factory=set)
    ends: set = field(default_factory=set)  # the names kept for the model's inputs and outputs, until made

    def node(self, name: str, op: str, inputs: list, end: bool = False, **attrs: Any) -> str:
        """A new node named ``name`` (made unique; an ``end``, an input or output of the
        model, keeps the name reserved for it, as ``graphgrad ops`` lists it)."""
        sanitised = _sanitised(name)
        if end and sanitised in self.ends:
            self.ends.discard(sanitised)
        else:
            sanitised = self._unique(name)
        node = self.graph_def.node.add(name=sanitised, op=op)
        node.input.extend(inputs)
        for key, value in attrs.items():
            node.attr[key].CopyFrom(value)
        return node.name

    def _unique(self, name: str) -> str:
        base = _sanitised(name)
        candidate, count = base, 1
        while candidate in self.used:
            candidate, count = f"{base}_{count}", count + 1
        self.used.add(candidate)
        return candidate

    def constant(self, name: str, value: Any) -> str:
        value = np.asarray(value)
        value = np.ascontiguousarray(value) if value.ndim else value  # (ascontiguousarray makes a scalar 1-D)
        dtype = {np.dtype(numpy): proto for numpy, proto in TYPES.values()}[value.dtype]
        tensor = TensorProto(dtype=dtype, tensor_content=value.tobytes())
        for size in value.shape:
            tensor.tensor_shape.dim.add(size=int(size))
        return self.node(name, "Const", [], value=AttrValue(tensor=tensor), dtype=AttrValue(type=dtype))

    def tensor(self, index: int) -> Any:
        return self.graph.Tensors(int(index))

    def quantisation(self, index: int) -> "Quantisation | None":
        return quantisation(self.tensor(index), self.path, text(self.tensor(index).Name()))

    def value(self, index: int) -> Any:
        """The constant a tensor holds (its buffer, as numpy, or what DEQUANTIZE made of one), or None."""
        if index in self.folded:
            return self.folded[index]
        tensor = self.tensor(index)
        buffer = self.model.Buffers(tensor.Buffer())
        if buffer.Offset() > 1:  # stored after the flatbuffer (models over 2 GB, or converted to be so)
            stored = self.data[buffer.Offset():buffer.Offset() + buffer.Size()]
        else:
            data = buffer.DataAsNumpy()
            stored = b"" if isinstance(data, int) else data.tobytes()
        if not stored:
            return None
        if tensor.Type() not in TYPES:
            raise ModelReadError(f"{self.path}: tensor {text(tensor.Name())} is of TensorFlow Lite type "
                                 f"{tensor.Type()}, which graphgrad does not rebuild")
        shape = [int(d) for d in tensor.ShapeAsNumpy()] if tensor.ShapeLength() else []
        if any(size < 0 for size in shape):
            raise ModelReadError(f"{self.path}: stored tensor {text(tensor.Name())} has shape {shape}")
        return np.frombuffer(stored, dtype=TYPES[tensor.Type()][0]).reshape(shape)

    def real(self, index: int, value: Any) -> Any:
        """A stored value as the model computes with it: quantised integers as the real
        values they stand for, float16 weights as float32 (what DEQUANTIZE does to them)."""
        given = self.quantisation(index) if index not in self.folded else None
        if given is not None:
            return dequantised(value, given, f"{self.path}: tensor {text(self.tensor(index).Name())}")
        return value.astype(np.float32) if value.dtype == np.float16 else value

    def input(self, index: int) -> str:
        """The node name of tensor ``index``'s value: a constant made on first use."""
        if index not in self.names:
            value = self.value(index)
            if value is None:
                raise ModelReadError(f"{self.path}: tensor {text(self.tensor(index).Name())} is read before "
                                     "any operator writes it")
            self.names[index] = self.constant(text(self.tensor(index).Name()), self.real(index, value))
        return self.names[index]


def _sanitised(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-/]", "_", name).lstrip("_./-") or "tensor"


def rebuilt_graph_def(path: str, data: bytes) -> Any:
    """The frozen GraphDef that computes the TensorFlow Lite model ``data``."""
    return with_schema(_rebuilt, path, data)


def _rebuilt(tflite: Any, path: str, data: bytes) -> Any:
    model = tflite.Model.GetRootAs(data, 0)
    if not model.SubgraphsLength():
        raise ModelReadError(f"{path}: a TensorFlow Lite model without a subgraph")
    rebuild = _Rebuild(tflite, model, model.Subgraphs(served_subgraph(model, path)), path, data)
    codes = [op_name(tflite, model.OperatorCodes(index)) for index in range(model.OperatorCodesLength())]
    graph = rebuild.graph
    needed = _needed_operators(graph, codes)
    _refuse_what_is_not_rebuilt(rebuild, codes, needed)
    rebuild.ends = {_end_name(rebuild.tensor(int(i))) for i in [*graph.InputsAsNumpy(), *graph.OutputsAsNumpy()]}
    rebuild.used |= rebuild.ends
    for index in graph.InputsAsNumpy():
        tensor = rebuild.tensor(index)
        shape = tensor.ShapeSignatureAsNumpy() if tensor.ShapeSignatureLength() else tensor.ShapeAsNumpy()
        placeholder = AttrValue()
        for size in shape:
            placeholder.shape.dim.add(size=int(size))
        given = rebuild.quantisation(index)  # fed as its integers, held in float32 so that x has a gradient
        value = rebuild.node(_end_name(tensor), "Placeholder", [], end=True, shape=placeholder,
                             dtype=AttrValue(type=FLOAT if given else TYPES[tensor.Type()][1]))
        taken = _taken_range(rebuild, codes, needed, int(index))
        if taken is not None:
            rebuild.graph_def.node[-1].attr[VALUE_RANGE].list.f.extend(taken)
        rebuild.names[int(index)] = from_integers(rebuild, value, value, given) if given else value
    read = {int(i) for i in graph.OutputsAsNumpy()} | {
        int(i) for position in needed if graph.Operators(position).InputsLength()
        for i in graph.Operators(position).InputsAsNumpy()}
    for position in needed:
        operator = graph.Operators(position)
        name = codes[operator.OpcodeIndex()]
        outputs = [int(i) for i in operator.OutputsAsNumpy()]
        inputs = [int(i) for i in operator.InputsAsNumpy()]
        _refuse_hybrid(rebuild, name, inputs, outputs[0])
        _refuse_unsimulated(rebuild, name, inputs, outputs[0])
        built = REBUILDS[name](rebuild, operator, inputs, outputs[0])
        if built is None:  # a value folded into a constant (a dequantisation of stored weights)
            continue
        for output, value in zip(outputs, built if isinstance(built, list) else [built]):
            # an output nothing reads (a SPLIT's unused part) is left as it is: requantised, it would dangle
            rebuild.names[output] = _requantised(rebuild, name, operator, value, inputs, output) \
                if output in read else value
    for index in graph.OutputsAsNumpy():
        value, given = rebuild.input(int(index)), rebuild.quantisation(index)
        if given is not None:  # given as the model gives it: its integers (in float32)
            value = integer_valued(rebuild, value + "/integers", value, given)
        dtype = AttrValue(type=FLOAT) if given is not None else held_type(rebuild, index)
        rebuild.node(_end_name(rebuild.tensor(index)), "Identity", [value], end=True, T=dtype)
    return rebuild.graph_def


# Operators whose outputs are some of their first input's values: where the two tensors
# are quantised alike, the output is already on the output's steps.
_SELECTING = frozenset({"RESHAPE", "SQUEEZE", "TRANSPOSE", "MAX_POOL_2D", "STRIDED_SLICE", "GATHER", "PAD", "PADV2",
                        "PACK", "CONCATENATION", "MAXIMUM", "MINIMUM", "RESIZE_NEAREST_NEIGHBOR"})


def _taken_range(rebuild: _Rebuild, codes: list, needed: list, index: int) -> "tuple[float, float] | None":
    """The values a quantised input takes before the model clamps them: its integers'
    range, or (a float input quantised first) the real values of its QUANTIZE's range."""
    given = rebuild.quantisation(index)
    if given is not None:
        return float(given.low), float(given.high)
    for position in needed:
        operator = rebuild.graph.Operators(position)
        if codes[operator.OpcodeIndex()] == "QUANTIZE" and int(operator.InputsAsNumpy()[0]) == index:
            quantised = rebuild.quantisation(int(operator.OutputsAsNumpy()[0]))
            if quantised is not None and not quantised.per_channel:
                scale, zero_point = float(quantised.scale[0]), int(quantised.zero_point[0])
                return scale * (quantised.low - zero_point), scale * (quantised.high - zero_point)
    return None


# Quantised operators whose integer kernels compute in a fixed point of their own the float
# simulation does not follow (measured: 82% of RESIZE_BILINEAR's values exact, a step off the rest,
# grown to 4 by a TANH after it): refused rather than promised
_NOT_SIMULATED = {"RESIZE_BILINEAR": "interpolates with fixed-point weights",
                  "SQUARED_DIFFERENCE": "rescales its square in a fixed point of its own"}


def _refuse_unsimulated(rebuild: _Rebuild, kind: str, inputs: list, output: int) -> None:
    """Integer arithmetic the rebuild does not reproduce: int16 activations (16x8
    quantisation), and the operators of ``_NOT_SIMULATED``, quantised."""
    given = rebuild.quantisation(output)
    if given is None:
        return
    if rebuild.tensor(output).Type() == 7:
        raise ModelReadError(f"{rebuild.path}: {kind} {named(rebuild, output)} computes in int16 (16x8 "
                             "quantisation), whose kernels graphgrad does not simulate; convert with int8 "
                             "activations (full-integer) or without quantisation")
    if kind in _NOT_SIMULATED:
        raise ModelReadError(f"{rebuild.path}: {kind} {named(rebuild, output)} is quantised, and its integer kernel "
                             f"{_NOT_SIMULATED[kind]}, which graphgrad does not simulate; convert it in float (keep "
                             "the model float, or float16)")


def _refuse_hybrid(rebuild: _Rebuild, kind: str, inputs: list, output: int) -> None:
    """Integer weights read by an operator of float output (dynamic-range quantisation):
    its kernel quantises the float activations as it runs, per row, which the rebuild
    does not simulate; computing with the weights alone would differ by percents."""
    if kind == "DEQUANTIZE" or rebuild.quantisation(output) is not None:
        return
    for index in inputs:
        if index >= 0 and index not in rebuild.folded and rebuild.quantisation(index) is not None \
                and rebuild.value(index) is not None:
            raise ModelReadError(
                f"{rebuild.path}: {kind} {named(rebuild, output)} computes in float with integer weights "
                f"{text(rebuild.tensor(index).Name())} (dynamic-range quantisation, whose kernels quantise the "
                "activations as they run): graphgrad rebuilds float, float16 and full-integer models; convert with "
                "a representative dataset (full-integer) or without quantisation")


def _requantised(rebuild: _Rebuild, kind: str, operator: Any, value: str, inputs: list, output: int) -> str:
    """The real result ``value`` of an operator of ``kind`` quantised to its output
    tensor's steps, as the integer kernel writes it (where the output is quantised)."""
    given = rebuild.quantisation(output)
    if given is None:
        return value
    name = named(rebuild, output) + "/quantised"
    quantised_inputs = [q for q in (rebuild.quantisation(i) for i in inputs if i >= 0) if q is not None]
    if kind in _SELECTING and all(given.same_as(q) for q in quantised_inputs):
        return value
    if kind in _AVERAGING and given.same_as(rebuild.quantisation(inputs[0])):  # ties half away from zero
        count = _AVERAGING[kind](rebuild, operator, inputs)
        return nudged_fake_quantised(rebuild, name, value, given, 0.25 / count, away_from_zero=True)
    if kind == "LEAKY_RELU":  # (rebuilt on XNNPACK's grid of 1/256: see _leaky_relu) ties half up
        return nudged_fake_quantised(rebuild, name, value, given, 0.25 / 256, away_from_zero=False)
    return fake_quantised(rebuild, name, value, given)


def _pooled_count(rebuild: _Rebuild, operator: Any, inputs: list) -> int:
    options = options_of(rebuild, operator, "Pool2DOptions")
    return max(1, options.FilterHeight() * options.FilterWidth())


def _reduced_count(rebuild: _Rebuild, operator: Any, inputs: list) -> int:
    shape, axes = rebuild.tensor(inputs[0]).ShapeAsNumpy(), rebuild.value(inputs[1])
    return max(1, int(np.prod([shape[int(axis)] for axis in np.ravel(axes)])))


# Averaging operators, whose integer kernels round an average of integers half away from
# zero where input and output are quantised alike, and how many integers they average
_AVERAGING: dict[str, Callable] = {"AVERAGE_POOL_2D": _pooled_count, "MEAN": _reduced_count}


# Inputs a rebuild does not read: RESHAPE's new shape (the output's own shape says it, -1 where any).
_UNREAD = {"RESHAPE": {1}}


def _needed_operators(graph: Any, codes: list) -> list:
    """The positions, in order, of the operators the outputs are computed from (a
    Flatten's shape arithmetic, which the rebuilt Reshape does not read, is not)."""
    writer = {int(output): p for p in range(graph.OperatorsLength()) if graph.Operators(p).OutputsLength()
              for output in graph.Operators(p).OutputsAsNumpy()}
    needed, pending = set(), [int(i) for i in graph.OutputsAsNumpy()]
    while pending:
        position = writer.get(pending.pop())
        if position is None or position in needed:
            continue
        needed.add(position)
        operator = graph.Operators(position)
        kind = codes[operator.OpcodeIndex()]
        unread = _UNREAD.get(kind, set()) if not reads_its_shape(graph, operator, kind) else set()
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
    missing = sorted(used - set(REBUILDS))
    if missing:
        raise ModelReadError(f"{rebuild.path}: graphgrad does not rebuild the TensorFlow Lite operator(s) "
                             f"{', '.join(missing)} as TensorFlow ops yet (graphgrad ops {rebuild.path} lists "
                             "them all)")
    not_float = [text(graph.Tensors(int(i)).Name()) for i in graph.InputsAsNumpy()
                 if graph.Tensors(int(i)).Type() and rebuild.quantisation(int(i)) is None]
    if not_float:
        raise ModelReadError(f"{rebuild.path}: input {not_float[0]} is neither float32 nor quantised; graphgrad "
                             "rebuilds models of real-valued inputs")


def _end_name(tensor: Any) -> str:
    return end_node_name(text(tensor.Name()))


def end_node_name(tensor_name: str) -> str:
    """The node the rebuilt graph names a model's input or output tensor with (less ``:0``)."""
    return _sanitised(re.sub(r":0\Z", "", tensor_name))
