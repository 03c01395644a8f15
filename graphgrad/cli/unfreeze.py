"""graphgrad unfreeze: a frozen graph made trainable (needs TensorFlow to write the checkpoint)."""

import click

from ..edits.unfreeze import FLOATS, UnfreezeOptions
from ..jobs.deadline import run_until
from ..jobs.unfreeze import unfreeze
from . import options
from .render import echo, echo_json, table, tensorflow_quiet


@click.command("unfreeze")
@click.argument("model", type=click.Path())
@click.option("-o", "--output", "out", metavar="OUT_DIR", type=click.Path(),
              help="Write the training checkpoint there: model.meta, model.index, model.data-*, checkpoint.")
@click.option("--min-size", type=click.IntRange(1), default=2, show_default=True,
              help="The fewest entries a weight has (smaller float constants stay constants).")
@click.option("--const", "consts", multiple=True, metavar="GLOB",
              help="Make the constants whose names match GLOB variables, weights or not (repeatable).")
@options.exclude_option
@click.option("--list", "list_only", is_flag=True, help="Show what would become a variable; write nothing.")
@click.option("--force", is_flag=True, help="Replace an OUT_DIR that holds files.")
@options.timeout_option
@options.format_option
@options.json_option
@options.debug_option
def unfreeze_command(model, out, min_size, consts, exclude, list_only, force, timeout, kind, as_json):
    """Make a frozen graph's weights variables and write a TF1 training checkpoint.

    Chosen float constants become variables initialised from their values (by
    default the weights a MatMul, Conv2D, BiasAdd, ... reads); every node keeps its
    name and wiring, overrides and graphgrad's nodes included. Load the result with
    tf.compat.v1.train.import_meta_graph and Saver.restore, train it with any TF1
    optimizer, and fold it back with graphgrad freeze.

    \b
    Examples:
      graphgrad unfreeze binarized.pb --list
      graphgrad unfreeze binarized.pb -o trainable/
    """
    if not list_only and not out:
        raise click.UsageError("say where to write the checkpoint: -o OUT_DIR (or --list)")
    settings = UnfreezeOptions(min_size, tuple(consts), tuple(exclude))
    with tensorflow_quiet():
        result = run_until(timeout, unfreeze, model, None if list_only else out, settings, kind, force,
                           what=f"unfreeze of {model}")
    weights = [{"name": w.name, "dtype": FLOATS[w.dtype], "shape": w.shape, "size": w.size} for w in result.weights]
    if as_json:
        echo_json({"model": model, "output": None if list_only else out, "variables": weights,
                   "parameters": result.parameters, "kept": [{"name": name, "why": why} for name, why in result.kept]})
        return
    rows = [["constant", "dtype", "shape", "entries"]] + [
        [w["name"], w["dtype"], "x".join(map(str, w["shape"])) or "scalar", str(w["size"])] for w in weights]
    echo(f"{model} -> {out if not list_only else '(list)'}: {len(weights)} variable(s), "
               f"{result.parameters} parameter(s)")
    echo(*table(rows))
    for name, why in result.kept:
        echo(f"kept as a constant: {name}: {why}")
