"""graphgrad convert: a TensorFlow Lite model rebuilt as a frozen TensorFlow graph."""

import click

from ..jobs.convert import convert
from . import options
from .render import echo, echo_json


@click.command("convert")
@click.argument("model", type=click.Path())
@click.option("-o", "--output", "out", required=True, metavar="OUT.pb|FOLDER", type=click.Path(),
              help="Write the rebuilt frozen GraphDef there (.pbtxt: as text); a folder: a SavedModel of it, with "
              "the model's signature as serving_default.")
@options.json_option
@options.debug_option
def convert_command(model, out, as_json):
    """Rebuild a TensorFlow Lite model as a frozen TensorFlow graph, which has gradients.

    Each operator becomes the TensorFlow ops that compute the same thing, its
    weights constants (float16 ones dequantised); inputs and outputs are named
    after the model's tensors (serving_default_x:0 is serving_default_x). Every
    other command reads a .tflite so too, without this step; what is not rebuilt
    (dynamic-range or 16-bit quantisation, an operator graphgrad does not know,
    custom operators) is refused by name. Needs no TensorFlow.

    \b
    Examples:
      graphgrad convert model.tflite -o model.pb
      graphgrad convert model.tflite -o saved_model_folder
      graphgrad attribute model.tflite --method gradient --input rows.npy -o saliency.npy
    """
    converted = convert(model, out)
    if as_json:
        echo_json({"model": model, "output": out, "nodes": converted.nodes, "inputs": converted.inputs,
                   "outputs": converted.outputs})
        return
    echo(f"{model} -> {out}: {converted.nodes} node(s)")
    echo(f"  inputs: {', '.join(converted.inputs)}")
    echo(f"  outputs: {', '.join(converted.outputs)}")
