"""graphgrad convert's job: a TensorFlow Lite model written as the frozen GraphDef
graphgrad rebuilds from it (:mod:`graphgrad.files.tflite_graph`), or as a SavedModel
of that graph with the model's signature, TensorFlow-free."""

import os
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from ..files.outputs import Output, refuse_outputs_over_inputs
from ..files.reading import read_model
from ..files.protos import MetaGraphDef, SavedModel
from ..files.reading import read_file
from ..files.tflite import is_tflite_file, served_signature
from ..files.tflite_graph import end_node_name, rebuilt_ends
from ..files.writing import write_model
from ..graph.model import BINARY, SAVEDMODEL, TEXT, Model
from ..names import SERVING_DEFAULT


@dataclass(frozen=True)
class Converted:
    """What convert wrote: the graph's node count and its ends, as the rebuilt graph names them."""

    source: str
    output: str
    nodes: int
    inputs: list
    outputs: list


def convert(source: str, out: str) -> Converted:
    """Write the TensorFlow Lite model ``source`` to ``out`` (a ``.pb``, or a
    ``.pbtxt`` as text) as the frozen GraphDef that computes it; ``out`` a folder
    (no such suffix): as a SavedModel of that graph, tagged serve, whose
    ``serving_default`` signature is the model's (its names for inputs and outputs)."""
    if not os.path.isfile(source):
        raise UsageError(f"{source}: no such file; name a TensorFlow Lite model (.tflite)")
    if not is_tflite_file(source):
        raise UsageError(f"{source} is not a TensorFlow Lite model (by its content): convert rebuilds .tflite "
                         "files; TensorFlow graph files are read by every command as they are")
    folder = not out.endswith((".pb", ".pbtxt"))
    if folder and (os.path.isfile(out) or (os.path.splitext(out)[1] and not os.path.isdir(out))):
        raise UsageError(f"-o {out}: convert writes a frozen GraphDef (a file ending in .pb or .pbtxt) or a "
                         "SavedModel (a folder)")
    refuse_outputs_over_inputs({f"the model {source}": [source]}, [Output("-o", out)])
    model = read_model(source)
    inputs, outputs = rebuilt_ends(model.message)
    if not folder:
        write_model(model, out, TEXT if out.endswith(".pbtxt") else BINARY)
    else:
        signature = served_signature(source, read_file(source))
        write_model(Model(_saved_model(model.message, signature, inputs, outputs), SAVEDMODEL, BINARY, out), out)
    return Converted(source, out, len(model.message.node), inputs, outputs)


def _saved_model(graph_def: Any, signature: "tuple[str, list, list] | None", inputs: list, outputs: list) -> Any:
    """A SavedModel of the frozen ``graph_def`` (no variables), tagged serve, its
    serving_default signature the model's own names for its ends (without a
    signature: the placeholders' names, and output_0, output_1, ...)."""
    if signature is None:
        named_inputs = [(name, name) for name in inputs]
        named_outputs = [(f"output_{position}", name) for position, name in enumerate(outputs)]
    else:
        _, given, wanted = signature
        named_inputs = [(key, end_node_name(tensor)) for key, tensor in given]
        named_outputs = [(key, end_node_name(tensor)) for key, tensor in wanted]
    meta_graph = MetaGraphDef()
    meta_graph.graph_def.CopyFrom(graph_def)
    meta_graph.meta_info_def.tags.append("serve")
    served = meta_graph.signature_def[SERVING_DEFAULT]
    served.method_name = "tensorflow/serving/predict"
    nodes = {node.name: node for node in graph_def.node}
    for ends, named in ((served.inputs, named_inputs), (served.outputs, named_outputs)):
        for key, name in named:
            node, info = nodes[name], ends[key]
            info.name = f"{name}:0"
            info.dtype = node.attr["dtype" if node.op == "Placeholder" else "T"].type
            if node.op == "Placeholder":
                info.tensor_shape.CopyFrom(node.attr["shape"].shape)
            else:
                info.tensor_shape.unknown_rank = True
    saved = SavedModel(saved_model_schema_version=1)
    saved.meta_graphs.add().CopyFrom(meta_graph)
    return saved
