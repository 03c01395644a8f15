"""The ``graphgrad`` command: a click group over one module per subcommand."""

import importlib
import traceback
from typing import Any

import click

from ..errors import GraphgradError
from . import exits
from .render import error, json_error

# command name -> module in graphgrad.cli; each is imported only when run (or listed).
COMMANDS = {
    "ops": "ops", "rewrite": "rewrite", "insert": "insert", "bypass": "bypass", "reset": "reset",
    "diff": "diff", "check": "check", "attribute": "attribute", "show": "show", "unfreeze": "unfreeze",
    "freeze": "freeze", "attack": "attack", "gradients": "gradients", "convert": "convert",
}
SUMMARIES = {
    "ops": "List op types with node counts, and gradient overrides with their status.",
    "rewrite": "Set the gradient of selected nodes (their _gradient_op_type attribute).",
    "insert": "Put an Identity carrying GRADIENT on TENSOR and move its consumers to it.",
    "bypass": "Backpropagate across a region (--from .. --to) as the identity: BPDA.",
    "reset": "Remove overrides and undo graphgrad's inserted and embedded nodes.",
    "diff": "Nodes added, removed, rewired and changed attributes between A and B.",
    "check": "Compute dy/dx with TensorFlow and explain it (needs TensorFlow).",
    "attribute": "Saliency and relevance maps by gradient rules: DeepLIFT, LRP, ... (needs TensorFlow).",
    "show": "Draw the gradient path from x to y, with its overrides, blockers and surrogates.",
    "unfreeze": "Make a frozen graph's weights variables and write a TF1 training checkpoint.",
    "freeze": "Fold a checkpoint's trained variables back into constants of a frozen GraphDef.",
    "attack": "Accuracy under an L-infinity PGD attack, BPDA and EOT included (needs TensorFlow).",
    "gradients": "List gradients: name, kind, parameters with defaults, formula, aliases.",
    "convert": "Rebuild a TensorFlow Lite model as a frozen TensorFlow graph, which has gradients.",
}

# Words users reach for, and the command that does it.
ALIASES = {
    "inspect": "ops", "draw": "show", "list": "ops", "info": "ops", "patch": "rewrite", "override": "rewrite",
    "undo": "reset", "remove": "reset", "bpda": "bypass", "explain": "attribute", "saliency": "attribute",
    "compare": "diff", "verify": "check", "test": "check", "pgd": "attack", "adversarial": "attack",
}



class GraphgradGroup(click.Group):
    """Loads each subcommand's module on demand (so ``graphgrad ops`` never imports
    what ``check`` needs), and ends every command with its exit code, in one place:
    a command returns its outcome (False: files that differ, a gradient that is not
    usable, a file of a batch that failed; anything else: success), and graphgrad's
    own errors become one line and the code :mod:`graphgrad.cli.exits` gives them
    (--debug: traceback)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module = importlib.import_module(f"{__package__}.{COMMANDS[name]}")
        return getattr(module, f"{COMMANDS[name]}_command")

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple:
        name = args[0] if args else ""
        if name and not name.startswith("-") and name not in COMMANDS:
            import difflib  # only on this error path

            close = [ALIASES[name]] if name in ALIASES else difflib.get_close_matches(name, COMMANDS, n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise click.UsageError(f"no such command {name!r}.{hint} Commands: {', '.join(COMMANDS)}", ctx)
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, SUMMARIES[name]) for name in COMMANDS])

    def invoke(self, ctx: click.Context) -> Any:
        try:
            outcome = super().invoke(ctx)
        except (KeyboardInterrupt, click.Abort):  # Ctrl-C: quiet, and the shell's code for SIGINT
            ctx.exit(exits.INTERRUPTED)
        except GraphgradError as failure:
            if ctx.meta.get("graphgrad.debug"):
                traceback.print_exc()
            code = exits.for_error(failure, ctx.invoked_subcommand)
            error(str(failure))
            json_error(str(failure), code)
            ctx.exit(code)
        except click.UsageError as failure:
            json_error(failure.format_message(), failure.exit_code)
            raise
        except (click.exceptions.Exit, click.ClickException):
            raise
        except Exception as failure:  # a bug: --json still gets its one document, and the traceback is kept
            json_error(f"internal error: {type(failure).__name__}: {failure}", exits.FAILURE)
            raise
        ctx.exit(exits.for_outcome(outcome))


@click.group(cls=GraphgradGroup, epilog=exits.HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="graphgrad", prog_name="graphgrad")
def main():
    """Custom gradients for TensorFlow graphs that already exist.

    Rewrites _gradient_op_type on nodes of frozen GraphDefs, MetaGraphDefs and
    SavedModels without importing TensorFlow; graphgrad.register_gradients(graph)
    makes the names resolve when the graph is loaded.
    """

