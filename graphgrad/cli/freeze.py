"""graphgrad freeze: a trained checkpoint folded back into a frozen graph (needs TensorFlow)."""

import click

from ..jobs.deadline import run_until
from ..jobs.unfreeze import freeze
from . import options
from .render import echo, echo_json, tensorflow_quiet


@click.command("freeze")
@click.argument("checkpoint", type=click.Path())
@click.option("-o", "--output", "out", required=True, metavar="OUT.pb", type=click.Path(),
              help="Write the frozen GraphDef there.")
@click.option("--outputs", multiple=True, metavar="TENSOR",
              help="Keep only what these tensors need (repeatable); needed to fold variables graphgrad did not make.")
@options.allow_effects_option
@options.timeout_option
@options.json_option
@options.debug_option
def freeze_command(checkpoint, out, outputs, allow_effects, timeout, as_json):
    """Fold a checkpoint's trained variables back into constants of a frozen GraphDef.

    CHECKPOINT is a folder holding a checkpoint file (what unfreeze writes), a .meta
    or a checkpoint prefix. The weights unfreeze made become constants again under
    their old names, with their trained values; overrides and graphgrad's nodes are
    kept, and the nodes the checkpoint's Saver added are left out. The restore
    runs only the checkpoint's own reads and ops that compute in memory (see
    --allow-effects), and is stopped at --timeout.

    \b
    Examples:
      graphgrad freeze trainable/ -o binarized_trained.pb
    """
    with tensorflow_quiet():
        nodes = run_until(timeout, freeze, checkpoint, out, tuple(outputs), allow_effects,
                          what=f"freeze of {checkpoint}")
    if as_json:
        echo_json({"checkpoint": checkpoint, "output": out, "nodes": nodes})
        return
    echo(f"{checkpoint} -> {out}: {nodes} node(s)")
