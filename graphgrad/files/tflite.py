"""TensorFlow Lite models read without TensorFlow: a ``.tflite`` flatbuffer (found by
its content, ``TFL3`` at bytes 4-8) summarised as ``ops`` shows it, through the
``tflite`` package's code generated from TensorFlow Lite's schema (never a copy of
the schema here). Nothing in the file is run.
"""

from collections import Counter
from dataclasses import dataclass, field

from ..errors import ModelReadError
from ..graph.model import TFLITE
from ..names import ATTR
from .reading import SourceFile, is_tflite, read_file
from .tflite_schema import op_name, served_subgraph, text, with_schema

@dataclass(frozen=True)
class LiteTensor:
    """A subgraph's input or output: its name, dtype, shape (-1: any) and quantisation."""

    name: str
    dtype: str
    shape: list
    quantised: str = ""  # "int8, per-tensor" / "uint8, per-channel (axis 3)" / ""


@dataclass
class LiteSummary:
    """What ``graphgrad ops`` says of a TensorFlow Lite model."""

    path: str
    version: int
    subgraphs: int
    operators: int
    inputs: list = field(default_factory=list)  # LiteTensor, of the subgraph it serves (tflite_schema)
    outputs: list = field(default_factory=list)
    signatures: list = field(default_factory=list)  # (key, [(name, tensor)], [(name, tensor)])
    op_types: dict = field(default_factory=dict)  # builtin op name (or CUSTOM:code) -> count, all subgraphs
    tensor_types: dict = field(default_factory=dict)  # dtype -> tensors of it, all subgraphs
    quantised_tensors: int = 0
    per_channel_tensors: int = 0
    kind: str = TFLITE
    rebuilt: str = ""  # how the TensorFlow graph graphgrad reads it as is rebuilt, or why it is not
    overrides: dict = field(default_factory=dict)  # op type -> {gradient override: nodes}, in the rebuilt graph


def is_tflite_file(path: str) -> bool:
    """Whether ``path`` is a file that holds a TensorFlow Lite model (by its content)."""
    import os

    if not os.path.isfile(path):
        return False
    with SourceFile(path) as source:
        return is_tflite(source.read(0, min(8, source.size)))


def tflite_summary_of(path: str) -> "LiteSummary | None":
    """The summary of the TensorFlow Lite model at ``path``, or None where the file is
    none (a directory, or another kind of file)."""
    return summarize_tflite(path, read_file(path)) if is_tflite_file(path) else None


def summarize_tflite(path: str, data: bytes) -> LiteSummary:
    """The summary of the TensorFlow Lite model ``data`` read from ``path``."""
    summary = with_schema(_summary, path, data)
    _describe_rebuild(summary, path, data)
    return summary


def served_signature(path: str, data: bytes) -> "tuple[str, list, list] | None":
    """The signature the model serves (serving_default, or its one), as (key, [(name,
    tensor)] of its inputs, of its outputs); None for a model without signatures."""
    signatures = with_schema(_summary, path, data).signatures
    chosen = [s for s in signatures if s[0] == "serving_default"] or (signatures if len(signatures) == 1 else [])
    return chosen[0] if chosen else None


def _describe_rebuild(summary: LiteSummary, path: str, data: bytes) -> None:
    """What the rebuilt TensorFlow graph is (its nodes, ends and overrides), or why there is none."""
    from .tflite_graph import rebuilt_ends, rebuilt_graph_def

    try:
        graph_def = rebuilt_graph_def(path, data)
    except ModelReadError as error:
        summary.rebuilt = f"not rebuilt: {str(error).removeprefix(path + ': ')}"
        return
    inputs, outputs = rebuilt_ends(graph_def)
    summary.rebuilt = (f"rebuilt as a TensorFlow graph of {len(graph_def.node)} nodes (x: {', '.join(inputs)}; "
                       f"y: {', '.join(outputs)}), which every command reads it as; graphgrad convert writes it")
    for node in graph_def.node:
        if ATTR in node.attr:
            spec = node.attr[ATTR].s.decode()
            counts = summary.overrides.setdefault(node.op, {})
            counts[spec] = counts.get(spec, 0) + 1


def _summary(tflite, path: str, data: bytes) -> LiteSummary:
    model = tflite.Model.GetRootAs(data, 0)
    names = {value: name for name, value in vars(tflite.TensorType).items() if not name.startswith("_")}
    codes = [op_name(tflite, model.OperatorCodes(index)) for index in range(model.OperatorCodesLength())]
    op_types: Counter = Counter()
    tensor_types: Counter = Counter()
    quantised = per_channel = operators = 0
    for index in range(model.SubgraphsLength()):
        graph = model.Subgraphs(index)
        operators += graph.OperatorsLength()
        op_types.update(codes[graph.Operators(op).OpcodeIndex()] for op in range(graph.OperatorsLength()))
        for position in range(graph.TensorsLength()):
            tensor = graph.Tensors(position)
            tensor_types[names.get(tensor.Type(), str(tensor.Type()))] += 1
            scales = tensor.Quantization().ScaleLength() if tensor.Quantization() is not None else 0
            quantised += scales > 0
            per_channel += scales > 1
    summary = LiteSummary(path, model.Version(), model.SubgraphsLength(), operators, op_types=dict(op_types),
                          tensor_types=dict(tensor_types), quantised_tensors=quantised,
                          per_channel_tensors=per_channel)
    if model.SubgraphsLength():
        graph = model.Subgraphs(served_subgraph(model, path))
        summary.inputs = [_tensor(graph.Tensors(i), names) for i in graph.InputsAsNumpy()]
        summary.outputs = [_tensor(graph.Tensors(i), names) for i in graph.OutputsAsNumpy()]
    for index in range(model.SignatureDefsLength()):
        signature = model.SignatureDefs(index)
        graph = model.Subgraphs(signature.SubgraphIndex())
        ends = [[(text(end.Name()), text(graph.Tensors(end.TensorIndex()).Name())) for end in
                 (pick(i) for i in range(count))] for pick, count in
                ((signature.Inputs, signature.InputsLength()), (signature.Outputs, signature.OutputsLength()))]
        summary.signatures.append((text(signature.SignatureKey()), ends[0], ends[1]))
    return summary


def _tensor(tensor, names: dict) -> LiteTensor:
    signature = tensor.ShapeSignatureAsNumpy() if tensor.ShapeSignatureLength() else tensor.ShapeAsNumpy()
    shape = [int(d) for d in signature] if not isinstance(signature, int) else []
    quantisation = tensor.Quantization()
    scales = quantisation.ScaleLength() if quantisation is not None else 0
    dtype = names.get(tensor.Type(), str(tensor.Type())).lower()
    described = ("" if not scales else f"{dtype}, per-tensor" if scales == 1 else
                 f"{dtype}, per-channel (axis {quantisation.QuantizedDimension()})")
    return LiteTensor(text(tensor.Name()), dtype, shape, described)
