"""Every command-line option, defined once; commands pick what they need."""

from collections.abc import Callable

import click

from ..graph.model import ENCODINGS, KINDS
from ..jobs.api import OutputOptions

models_argument = click.argument("models", nargs=-1, required=True, type=click.Path(dir_okay=True))

format_option = click.option(
    "--format", "kind", type=click.Choice(KINDS),
    help="Read every MODEL as this kind instead of detecting it from the content.",
)
def _set_json(ctx, _param, value):
    if value:
        ctx.find_root().meta["graphgrad.json"] = True
    return value


json_option = click.option(
    "--json", "as_json", is_flag=True, is_eager=True, callback=_set_json,
    help='Print one JSON document for scripts, on every path: a failure of the whole command is '
    '{"error": MESSAGE, "exit_code": N}, a failure of one file an "error" beside its "input".',
)
functions_option = click.option(
    "--functions/--no-functions", default=True, show_default=True,
    help="Include nodes inside function bodies (library.function), named FUNCTION/NODE.",
)
op_rule_option = click.option(
    "--op", "op_rules", multiple=True, metavar="TYPE=GRADIENT",
    help="Give every node of op type TYPE (e.g. Sign, Pack, PyFunc) the gradient GRADIENT.",
)
node_rule_option = click.option(
    "--node", "node_rules", multiple=True, metavar="GLOB=GRADIENT",
    help="Give nodes whose full name matches GLOB the gradient GRADIENT.",
)
match_option = click.option(
    "--match", multiple=True, metavar="GLOB", help="Only nodes whose name matches GLOB (any of them).",
)
exclude_option = click.option(
    "--exclude", multiple=True, metavar="GLOB", help="Never nodes whose name matches GLOB.",
)
encoding_option = click.option(
    "--output-encoding", "encoding", type=click.Choice(ENCODINGS),
    help="Write binary or text protobuf instead of the input's encoding.",
)
# click.Path types make shell completion offer paths there.
output_option = click.option("-o", "--output", "out", metavar="OUT", type=click.Path(), help="Write the result to OUT.")
in_place_option = click.option("--in-place", is_flag=True, help="Overwrite each MODEL (atomically).")
dry_run_option = click.option("--dry-run", is_flag=True, help="Report what would change; write nothing.")
embed_option = click.option(
    "--embed", is_flag=True,
    help="Write the surrogate into the graph (StopGradient arithmetic) instead of an override: "
    "loads anywhere without graphgrad.",
)
repair_option = click.option(
    "--repair-dangling", "repair", metavar="GRADIENT",
    help="Give every node with a dangling CustomGradient-<n> override GRADIENT (e.g. identity).",
)
at_option = click.option("--at", "tensor", required=True, metavar="TENSOR",
                         help="NODE:INDEX, or FUNCTION/NODE:OUTPUT_ARG:INDEX in a function body.")
grad_option = click.option("--grad", "spec", required=True, metavar="GRADIENT", help="The gradient spec to put there.")
consumer_option = click.option(
    "--consumer", "consumers", multiple=True, metavar="NODE",
    help="Reroute only this consumer of TENSOR (repeatable); default: all of them.",
)
dtype_option = click.option("--dtype", metavar="DTYPE", help="TENSOR's dtype, when its producer does not say.")
reset_op_option = click.option("--op", "op_types", multiple=True, metavar="TYPE", help="Only nodes of op type TYPE.")
reset_node_option = click.option(
    "--node", "globs", multiple=True, metavar="GLOB", help="Only nodes whose name matches GLOB."
)
force_option = click.option(
    "--force", is_flag=True, help="Replace overrides that nodes already carry.",
)
allow_missing_option = click.option(
    "--allow-missing", is_flag=True,
    help="A rule that selects nothing is a note, not an error (for batches).",
)
gradients_module_option = click.option(
    "--gradients", "gradient_modules", multiple=True, type=click.Path(dir_okay=False), metavar="FILE.py",
    help="Import FILE.py, whose @graphgrad.gradient functions become usable names (runs its code).",
)


recursive_option = click.option("-r", "--recursive", is_flag=True, help="Search directories for models recursively.")
out_dir_option = click.option(
    "--out-dir", metavar="DIR", type=click.Path(file_okay=False),
    help="Write each result under DIR, mirroring the input tree.",
)
backup_option = click.option(
    "--backup", metavar="SUFFIX", help="With --in-place: keep each original as FILE+SUFFIX (e.g. .orig).",
)
jobs_option = click.option(
    "-j", "--jobs", type=click.IntRange(1), default=1, show_default=True,
    help="Worker processes; the results are those of -j 1.",
)
rules_file_option = click.option(
    "--rules", "rules_files", multiple=True, type=click.Path(dir_okay=False), metavar="FILE.toml",
    help="Rules from a TOML file: [[rule]] tables with op or node, gradient, and optional match/exclude.",
)


verify_option = click.option(
    "--verify", is_flag=True, help="Of a .tflite: run its rebuilt graph and TensorFlow Lite's interpreter on the "
    "same inputs, and print each output's largest difference.")
quiet_option = click.option("-q", "--quiet", is_flag=True, help="Print errors only (the exit code says the rest).")


def output_options(command: Callable) -> Callable:
    """-o / --in-place / --dry-run / --output-encoding, for commands that write a model."""
    for option in reversed((output_option, in_place_option, dry_run_option, encoding_option)):
        command = option(command)
    return command


def batch_output_options(command: Callable) -> Callable:
    """output_options plus --out-dir, --backup, -r and -j, for commands over many models."""
    for option in reversed((out_dir_option, backup_option, recursive_option, jobs_option, quiet_option)):
        command = option(command)
    return output_options(command)


def make_output(out: str | None, in_place: bool, dry_run: bool, encoding: str | None, out_dir: str | None = None,
                backup: str | None = None) -> OutputOptions:
    """Check that exactly one destination is given; usage errors exit with 2."""
    if sum(bool(x) for x in (out, out_dir, in_place, dry_run)) != 1:
        context = click.get_current_context(silent=True)
        batches = context is None or any(param.name == "out_dir" for param in context.command.params)
        choices = ["-o OUT"] + (["--out-dir DIR"] if batches else []) + ["--in-place", "--dry-run"]
        raise click.UsageError(f"say where to write: exactly one of {', '.join(choices)}")
    if backup and not in_place:
        raise click.UsageError("--backup goes with --in-place")
    if out == "-":
        raise click.UsageError("-o - : graphgrad writes models to files, not to standard output; name a file")
    return OutputOptions(out=out, in_place=in_place, dry_run=dry_run, encoding=encoding, backup=backup)


def _set_debug(ctx, _param, value):
    if value:
        ctx.meta["graphgrad.debug"] = True


debug_option = click.option(
    "--debug", is_flag=True, expose_value=False, is_eager=True, callback=_set_debug,
    help="Show a traceback on errors.",
)

# What check and attribute share (the graph they run).
y_option = click.option("--y", metavar="TENSOR",
              help="The tensor to differentiate: the sum of its entries, as tf.gradients does (see --target). "
              "Default: the model's one floating-point output (of its serving_default signature, else of all "
              "its signatures, else of the nodes no node reads).")
target_option = click.option("--target", type=click.IntRange(0), metavar="INDEX",
              help="Differentiate y[..., INDEX] instead, one class of a classifier's output (a softmax's entries "
              "sum to 1, so its sum has a zero gradient).")
tag_option = click.option("--tag", "tags", metavar="TAGS",
              help="The MetaGraphDef of a SavedModel to load, by its tag set (e.g. serve, or serve,gpu); "
              "needed when the SavedModel holds several.")
allow_effects_option = click.option("--allow-effects", is_flag=True,
              help="Run ops that are not known to compute only on tensors in memory (they may read or write files, "
              "connect, wait on queues, run Python code), on the path or in loading; refused otherwise, naming them.")
def _parse_feeds(_ctx, _param, values) -> dict:
    given = {}
    for text in values:
        name, separator, value = text.partition("=")
        if not separator or not name:
            raise click.BadParameter(f"{text!r}: expected NAME=VALUE, e.g. training=false or x=rows.npy")
        given[name] = value
    return given


feed_option = click.option("--feed", "feeds", multiple=True, metavar="NAME=VALUE", callback=_parse_feeds,
              help="A value for a placeholder (repeatable): a number, a JSON list in quotes, or a .npy file, "
              "e.g. --feed training=false.")
timeout_option = click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=300,
              show_default=True, metavar="SECONDS", help="Stop runs that take longer in all, and say so.")
checkpoint_option = click.option("--checkpoint", metavar="PREFIX", type=click.Path(),
              help="Restore a .meta's variables from the checkpoint PREFIX (default: the one beside the file, "
              "model.ckpt-N for model.ckpt-N.meta; else their initializers).")


def run_options(command: Callable) -> Callable:
    """--feed, --tag, --checkpoint, --allow-effects, --timeout, --format, --json and
    --debug, for the commands that run a model with TensorFlow on rows of it
    (attribute, attack)."""
    for option in reversed((feed_option, tag_option, checkpoint_option, allow_effects_option, timeout_option,
                            format_option, json_option, debug_option)):
        command = option(command)
    return command
