"""graphgrad gradients: the gradients specs can name."""

import click

from ..gradients import REGISTRY
from ..gradients.user_modules import load_gradient_module
from . import options
from .render import echo, echo_json


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

    \b
    Examples:
      graphgrad gradients
      graphgrad gradients --gradients my_gradients.py --json
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
    echo(*_fitted([(e["signature"], e["kind"], _description(e)) for e in entries]))


def _description(entry: dict) -> str:
    text = entry["formula"]
    if entry["op_types"]:
        text += f"  [only {', '.join(entry['op_types'])}]"
    if entry["aliases"]:
        text += f"  (alias: {'; '.join(entry['aliases'])})"
    return text


NAME_COLUMN = 25  # the widest name beside its formula; a longer one takes a line of its own


def _fitted(rows) -> list[str]:
    """The listing as columns, its last one wrapped to the terminal's width (80 when
    not a terminal); --json keeps every word on one line."""
    import shutil
    import sys
    import textwrap

    rows = [("gradient", "kind", "formula")] + rows
    widths = [max(len(row[0]) for row in rows if len(row[0]) <= NAME_COLUMN), max(len(row[1]) for row in rows)]
    columns = shutil.get_terminal_size().columns if sys.stdout.isatty() else 80
    room = max(30, columns - sum(widths) - 4)
    lines = []
    for name, kind, text in rows:
        wrapped = textwrap.wrap(text, room) or [""]
        if len(name) > widths[0]:  # a long name (its defaults spelt out) on a line of its own
            lines.append(name)
            name = ""
        lines.append(f"{name.ljust(widths[0])}  {kind.ljust(widths[1])}  {wrapped[0]}".rstrip())
        lines += [" " * (sum(widths) + 4) + more for more in wrapped[1:]]
    return lines
