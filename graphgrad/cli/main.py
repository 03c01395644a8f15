"""The ``graphgrad`` command: a click group over one module per subcommand."""

import traceback

import click

from ..errors import GraphgradError
from .check import check_command
from .diff import diff_command
from .gradients import gradients_command
from .insert import insert_command
from .ops import ops_command
from .render import error
from .reset import reset_command
from .rewrite import rewrite_command

EXIT_CODES = """\b
Exit codes:
  0  success
  1  an error: a file that cannot be read or written, a bad gradient spec,
     a rule that selects nothing, an override that would be replaced without --force
  2  wrong usage (unknown option, missing argument)
  graphgrad diff: 0 equal, 1 different, 2 a file cannot be read
  graphgrad check: 0 every x gets a usable gradient, 1 otherwise, 2 usage errors
"""


class GraphgradGroup(click.Group):
    """Turns graphgrad's own errors into one line and exit code 1 (--debug: traceback)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except GraphgradError as failure:
            if ctx.meta.get("graphgrad.debug"):
                traceback.print_exc()
            error(str(failure))
            ctx.exit(1)


@click.group(cls=GraphgradGroup, epilog=EXIT_CODES, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="graphgrad")
def main():
    """Custom gradients for TensorFlow graphs that already exist.

    Rewrites _gradient_op_type on nodes of frozen GraphDefs, MetaGraphDefs and
    SavedModels without importing TensorFlow; graphgrad.register_gradients(graph)
    makes the names resolve when the graph is loaded.
    """


for command in (ops_command, rewrite_command, insert_command, reset_command, diff_command, check_command,
                gradients_command):
    main.add_command(command)
