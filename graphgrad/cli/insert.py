"""graphgrad insert: a gradient on one edge (tensor) of a graph."""

import click

from ..edits.tensors import parse_dtype
from ..edits.surgery import InsertOptions
from ..gradients.spec import parse_spec
from ..gradients.user_modules import load_gradient_module
from ..jobs.api import insert_file
from . import options
from .render import finish_one, in_graph


@click.command("insert")
@click.argument("model", type=click.Path())
@options.at_option
@options.grad_option
@options.consumer_option
@options.output_options
@options.embed_option
@options.dtype_option
@options.format_option
@options.gradients_module_option
@options.json_option
@options.debug_option
def insert_command(model, tensor, spec, consumers, out, in_place, dry_run, encoding, embed, dtype, kind,
                   gradient_modules, as_json):
    """Put an Identity carrying GRADIENT on TENSOR and move its consumers to it.

    Forward values do not change. New nodes are named NODE/graphgrad_<n>;
    control inputs stay where they are. Inserting the same gradient at the
    same place again changes nothing; a different one there is an error.

    \b
    Examples:
      graphgrad insert model.pb --at features/Relu:0 --grad reverse -o dann.pb
      graphgrad insert model.pb --at l1_dense/BiasAdd:0 --grad 'scale(0.8)' --consumer l2_dense/MatMul -o out.pb
    """
    output = options.make_output(out, in_place, dry_run, encoding)
    for module in gradient_modules:
        load_gradient_module(module)
    insert_options = InsertOptions(
        tensor=tensor, spec=parse_spec(spec), consumers=consumers, embed=embed,
        dtype=parse_dtype(dtype) if dtype else None,
    )
    result = insert_file(model, insert_options, output, kind)
    finish_one(result, as_json, _render_report)


def _render_report(report, dry_run) -> list[str]:
    lines = []
    for insertion in report.insertions:
        where = in_graph(insertion.graph)
        if insertion.status == "already":
            lines.append(
                f"  {where}{insertion.node} already carries this gradient at {insertion.tensor}; nothing to do"
            )
        else:
            lines.append(
                f"  {where}{'would insert' if dry_run else 'inserted'} {insertion.node} at {insertion.tensor}, "
                f"feeding {', '.join(insertion.consumers)}"
            )
    return lines
