"""graphgrad gradients: the gradients specs can name."""

import click

from ..gradients import REGISTRY
from ..io import load_gradient_module
from . import options
from .render import echo_json, table


@click.command("gradients")
@options.gradients_module_option
@options.json_option
@options.debug_option
def gradients_command(gradient_modules, as_json):
    """List gradients: name, kind, parameters with defaults, formula, aliases.

    Notation: x = the op's first input, y = its first output, dy = the upstream
    gradient, g = the op's own TensorFlow gradient. Replacements that speak of x
    alone give None to the op's other inputs; on tf.custom_gradient's IdentityN,
    x is argument i and dy that of result i. [only ...]: the op types a gradient
    is meant for; rewrite refuses it on others. Chain stages with |: one
    replacement first, then transforms, e.g. 'identity|clip_norm(1.0)'.
    """
    for module in gradient_modules:
        load_gradient_module(module)
    entries = [
        {
            "name": entry.name,
            "kind": entry.kind,
            "signature": entry.signature(),
            "parameters": [
                {"name": p.name, "type": p.type.__name__, "default": None if p.required else p.default,
                 "required": p.required}
                for p in entry.params
            ],
            "formula": entry.formula,
            "op_types": list(entry.op_types),
            "aliases": [f"{alias} = {spec}" for alias, spec in REGISTRY.aliases_of(entry.name)],
        }
        for entry in REGISTRY.entries()
    ]
    if as_json:
        echo_json({"gradients": entries})
        return
    rows = [["gradient", "kind", "formula", "aliases"]]
    rows += [[e["signature"], e["kind"], e["formula"] + _meant_for(e["op_types"]), "; ".join(e["aliases"])]
             for e in entries]
    click.echo(table(rows, indent=""))


def _meant_for(op_types: list) -> str:
    return f"  [only {', '.join(op_types)}]" if op_types else ""
