"""graphgrad convert's job: a TensorFlow Lite model written as the frozen GraphDef
graphgrad rebuilds from it (:mod:`graphgrad.files.tflite_graph`), TensorFlow-free."""

import os
from dataclasses import dataclass

from ..errors import UsageError
from ..files.outputs import Output, refuse_outputs_over_inputs
from ..files.reading import read_model
from ..files.tflite import is_tflite_file
from ..files.tflite_graph import rebuilt_ends
from ..files.writing import write_model
from ..graph.model import BINARY, TEXT


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
    ``.pbtxt`` as text) as the frozen GraphDef that computes it."""
    if not os.path.isfile(source):
        raise UsageError(f"{source}: no such file; name a TensorFlow Lite model (.tflite)")
    if not is_tflite_file(source):
        raise UsageError(f"{source} is not a TensorFlow Lite model (by its content): convert rebuilds .tflite "
                         "files; TensorFlow graph files are read by every command as they are")
    if not out.endswith((".pb", ".pbtxt")):
        raise UsageError(f"-o {out}: convert writes a frozen GraphDef; name a file ending in .pb (or .pbtxt)")
    refuse_outputs_over_inputs({f"the model {source}": [source]}, [Output("-o", out)])
    model = read_model(source)
    write_model(model, out, TEXT if out.endswith(".pbtxt") else BINARY)
    inputs, outputs = rebuilt_ends(model.message)
    return Converted(source, out, len(model.message.node), inputs, outputs)
