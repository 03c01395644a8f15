"""graphgrad diff: what differs between two graph files."""


import click

from ..jobs.api import diff_files
from . import options
from .render import echo, echo_json


@click.command("diff")
@click.argument("a", type=click.Path())
@click.argument("b", type=click.Path())
@options.format_option
@options.json_option
@options.debug_option
def diff_command(a, b, kind, as_json):
    """Nodes added, removed, rewired and changed attributes between A and B.

    Top level and function bodies are compared.

    Exit 0 when equal, 1 when they differ, 2 when a file cannot be read (like diff).

    \b
    Examples:
      graphgrad diff model.pb patched.pb
      graphgrad diff model.pb patched.pb --json
    """
    difference = diff_files(a, b, kind)  # a file that cannot be read: exit 2 (see exits.for_error)
    if as_json:
        echo_json({"a": a, "b": b, "equal": difference.equal, "difference": difference})
    else:
        lines = [f"--- {a}", f"+++ {b}"]
        marks = {"added": "+", "removed": "-", "changed": "~"}
        for node in difference.nodes:
            where = f"{node.graph}: " if node.graph else ""
            lines.append(f"{marks[node.kind]} {where}{node.node} ({node.op_type})")
            lines += [f"    {detail}" for detail in node.details]
        lines += [f"! {other}" for other in difference.other]
        if difference.equal:
            lines.append("no differences")
        echo(*lines)  # one write: a diff of 100k nodes has 200k lines
    return difference.equal
