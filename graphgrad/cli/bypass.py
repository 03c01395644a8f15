"""graphgrad bypass: BPDA across a region, written into the graph."""

import click

from ..edits.surgery import BypassOptions
from ..edits.surrogate_graph import read_surrogate_graph
from ..gradients.spec import parse_spec
from ..files.reading import read_model
from ..jobs.api import bypass_file
from ..tf.surrogate_function import traced_surrogate
from . import options
from .render import finish_one, in_graph, tensorflow_quiet


@click.command("bypass")
@click.argument("model", type=click.Path())
@click.option("--from", "source", required=True, metavar="TENSOR",
              help="Where the gradient goes: the float tensor the region reads (e.g. x:0).")
@click.option("--to", "target", required=True, metavar="TENSOR",
              help="Where it comes from: the float tensor the region gives (e.g. the dequantised input).")
@click.option("--surrogate", "spec", default="identity", show_default=True, metavar="SPEC",
              help="The gradient across the region, as a replacement applied to --from (identity, ste, "
                   "thermometer(levels=16), ...).")
@click.option("--surrogate-graph", "graph", type=click.Path(dir_okay=False), metavar="G.pb",
              help="The gradient across the region is that of your own g, a frozen GraphDef whose one placeholder "
                   "takes --from and whose one output has --to's shape (copied into the model).")
@click.option("--surrogate-function", "function", metavar="FILE.py:NAME",
              help="The gradient across the region is that of your Python function NAME(x) in FILE.py, traced "
                   "once with TensorFlow and copied into the model as --surrogate-graph is (runs FILE.py).")
@options.output_options
@options.format_option
@options.json_option
@options.debug_option
def bypass_command(model, source, target, spec, graph, function, out, in_place, dry_run, encoding, kind, as_json):
    """Backpropagate across a region (--from .. --to) as the identity: BPDA.

    The region between --from and --to backpropagates as if it were SURROGATE (the
    identity by default), or your own g (--surrogate-graph): a thermometer encoding,
    which maps [n, h, w, c] to [n, h, w, c * levels], through 'thermometer(levels=L)',
    a soft thermometer (each channel's levels side by side, level k on above k/L).

    Forward values of --to do not change, bit for bit; the gradient that reaches
    --to flows to --from, whatever lies between: casts to integers, Round, JPEG
    encoding and decoding, PyFunc (BPDA, Athalye et al., ICML 2018). Written with
    stop-gradient arithmetic, as --embed writes surrogates: the result loads in
    any TensorFlow without graphgrad. graphgrad reset undoes it.

    \b
    Examples:
      graphgrad bypass defended.pb --from x:0 --to dequantize:0 -o attackable.pb
      graphgrad bypass defended.pb --from x:0 --to jpeg/decoded:0 --surrogate 'identity|scale(0.5)' -o out.pb
      graphgrad bypass defended.pb --from x:0 --to encoded:0 --surrogate 'thermometer(levels=16)' -o out.pb
      graphgrad bypass defended.pb --from x:0 --to squeezed:0 --surrogate-graph g.pb -o out.pb
      graphgrad bypass defended.pb --from x:0 --to squeezed:0 --surrogate-function mine.py:soft_jpeg -o out.pb
    """
    output = options.make_output(out, in_place, dry_run, encoding)
    if graph and function:
        raise click.UsageError("give --surrogate-graph or --surrogate-function, not both")
    surrogate = read_surrogate_graph(graph) if graph else None
    if function:
        with tensorflow_quiet():
            surrogate = traced_surrogate(read_model(model, kind), source, function)
    result = bypass_file(model, BypassOptions(source, target, parse_spec(spec), surrogate), output, kind)
    finish_one(result, as_json, _render_report)


def _render_report(report, dry_run) -> list[str]:
    lines = []
    for bypass in report.bypasses:
        where = in_graph(bypass.graph)
        if bypass.status == "already":
            lines.append(f"  {where}{bypass.node} already bypasses {bypass.target} to {bypass.source}; nothing to do")
        else:
            lines.append(
                f"  {where}{'would bypass' if dry_run else 'bypassed'} {bypass.target} to {bypass.source} "
                f"({bypass.node}), feeding {', '.join(bypass.consumers)}"
            )
    return lines
