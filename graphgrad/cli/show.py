"""graphgrad show: a picture of the gradient path from x to y."""

import click

from ..jobs.graphviz import GRAPHVIZ_TIMEOUT
from ..jobs.show import ShowOptions, show_model
from . import options
from .render import echo, echo_json


@click.command("show")
@click.argument("model", type=click.Path())
@click.option("--x", "xs", multiple=True, metavar="TENSOR", help="Draw from TENSOR (repeatable; default: the inputs).")
@click.option("--y", metavar="TENSOR", help="Draw up to TENSOR (default: every output).")
@click.option("-o", "--output", "out", required=True, metavar="OUT.html|OUT.svg|OUT.dot", type=click.Path(),
              help="Write the picture there: .dot needs nothing; .svg and .html are laid out by Graphviz's dot.")
@click.option("--max-nodes", type=click.IntRange(1), default=150, show_default=True,
              help="Draw about this many boxes: name scopes and runs of one op type fold into one box each, "
                   "opened level by level while the picture stays under N (a marked node keeps its own box).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=GRAPHVIZ_TIMEOUT, show_default=True,
              metavar="SECONDS", help="Stop Graphviz's layout after this long, and say so.")
@options.tag_option
@options.format_option
@options.json_option
@options.debug_option
def show_command(model, xs, y, out, max_nodes, timeout, tags, kind, as_json):
    """Draw the gradient path from x to y, with its overrides, blockers and surrogates.

    Each node shows its op type and name (the full name on hover); colours mark
    gradient overrides (and whether they resolve), graphgrad's surrogates and
    bypasses, and the nodes where the gradient stops, with a legend. Reads the
    file without TensorFlow; what only a run can tell is check's.

    \b
    Examples:
      graphgrad show model.pb --x x --y logits -o path.html
      graphgrad show model.pb --y logits -o path.dot
    """
    picture = show_model(model, out, ShowOptions(tuple(xs), y, max_nodes, tags, kind, timeout=timeout))
    marks = sorted({mark for _, mark, _ in picture.nodes.values() if mark})
    whole = picture.views[0]
    over = len(whole.nodes) > max_nodes
    note = (f"note: {len(whole.nodes)} boxes, over --max-nodes {max_nodes}: the path's top level holds that many "
            "name scopes and unscoped nodes, which are not folded together; narrow it with --x and --y")
    if as_json:
        echo_json({"model": model, "output": out, "nodes": len(picture.nodes), "marks": marks,
                   "boxes": len(whole.nodes), "folded": whole.folded, "pictures": len(picture.views),
                   "notes": [note] if over else []})
        return
    echo(f"{model}: {len(picture.nodes)} node(s) on the path -> {out}"
         + (f"; marked: {', '.join(marks)}" if marks else "")
         + (f"; drawn as {len(whole.nodes)} boxes, {len(whole.folded)} of them folded" if whole.folded else ""))
    if over:
        echo(note)
