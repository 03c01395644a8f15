"""graphgrad check: verify and explain the gradients of a graph file (needs TensorFlow)."""


import click

from ..graph.functions import first_names
from ..jobs.deadline import run_until
from ..jobs.show import ShowOptions, findings_of_check, require_output, show_model
from ..methods.options import RunOptions
from ..tf.check import CheckOptions, check_model
from . import options
from .render import echo, echo_json, table, tensorflow_quiet


# The most names a one-line list shows, and the most lines a list of nodes takes:
# a real model has hundreds of call ops and defaults; --json lists them all.
LISTED = 8
LISTED_LINES = 20


def _capped(items: list) -> tuple[list, str]:
    """The first LISTED_LINES of ``items``, and the line that says how many more there are ("" for none)."""
    more = len(items) - LISTED_LINES
    return items[:LISTED_LINES], (f"  (+{more} more; --json lists them all)" if more > 0 else "")


@click.command("check")
@click.argument("model", type=click.Path())
@click.option("--x", "xs", multiple=True, metavar="TENSOR",
              help="Differentiate with respect to TENSOR (repeatable). Default: the floating-point placeholders y "
              "depends on.")
@options.y_option
@options.target_option
@options.feed_option
@click.option("--batch", type=click.IntRange(1), default=1, show_default=True,
              help="Size of unknown dimensions in random feeds.")
@click.option("--shape", "shapes", multiple=True, metavar="NAME=D1,D2,...",
              help="The shape of a placeholder's random feed, e.g. --shape x=1,224,224,3 (default: its known "
              "dimensions, --batch for an unknown first one, 224 for an image's unknown height and width).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random feeds.")
@options.tag_option
@options.allow_effects_option
@options.checkpoint_option
@options.timeout_option
@click.option("--html", "html_out", metavar="OUT.html", type=click.Path(),
              help="Also draw the gradient path from x to y with what check found on it: graphgrad show's page, "
              "its blockers and results from this run (laid out by Graphviz's dot).")
@options.verify_option
@click.option("-v", "--verbose", is_flag=True, help="Show TensorFlow's own log lines (hidden by default).")
@options.format_option
@options.json_option
@options.debug_option
def check_command(model, xs, y, target, feeds, batch, shapes, seed, tags, allow_effects, checkpoint, timeout,
                  html_out, verify, verbose, kind, as_json):
    """Compute dy/dx with TensorFlow and explain it (needs TensorFlow).

    For each x: connected or not, None / zero / finite / NaN, the gradient blockers on the path with a ready fix,
    overrides that cannot take effect, and (for graphs with graphgrad
    overrides) the gradients without them.

    Exit 0 when every x gets a finite, not-all-zero gradient (and a softmax
    y has a --target); 1 otherwise; 2 for usage errors such as unknown tensor
    names.

    \b
    Examples:
      graphgrad check model.pb --x x --y logits
      graphgrad check classifier.pb --y probs --target 3 --feed training=false
      graphgrad check trained/model.ckpt-1000.meta --y logits --html path.html
      graphgrad check detector.tflite --verify
    """
    feed_shapes = {}
    for text in shapes:
        name, separator, dims = text.partition("=")
        try:
            feed_shapes[name.removesuffix(":0")] = [int(d) for d in dims.split(",")] if dims else []
        except ValueError:
            separator = ""
        if not separator or any(d < 0 for d in feed_shapes.get(name.removesuffix(":0"), [])):
            raise click.UsageError(f"--shape {text!r}: expected NAME=D1,D2,... with whole numbers, e.g. x=1,224,224,3")
    if html_out:  # refused before TensorFlow is imported
        require_output(model, html_out, (".html",), "--html")
    with tensorflow_quiet(verbose):
        run_options = RunOptions(tuple(xs), y, feeds, tags, checkpoint, kind, allow_effects, timeout)
        check_options = CheckOptions(target, batch, seed, feed_shapes, verify)
        report = run_until(timeout, check_model, model, run_options, check_options, what=f"check of {model}")
    if html_out:
        show_model(model, html_out, ShowOptions(x=tuple(g.x for g in report.gradients), y=report.y, tags=tags,
                                                kind=kind), findings_of_check(report))
    if as_json:
        echo_json(report)
    else:
        _render(report)
        if html_out:
            echo(f"the gradient path, with what check found: {html_out}")
    return report.ok


def _render(report) -> None:
    tags = f" [{report.tags}]" if report.tags else ""
    entry = "" if report.target is None else f"[..., {report.target}]"
    named = f" ({report.y_name})" if report.y_name else ""
    echo(f"{report.model}{tags}: d {report.y}{named}{entry} / d x")
    rows = [["x", "connected", "gradient", "norm"]]
    plain = {g.x: g for g in report.without_overrides}
    if plain:
        rows[0] += ["without overrides", "norm"]
    for gradient in report.gradients:
        row = [gradient.x, "yes" if gradient.connected else "no", gradient.status,
               "-" if gradient.norm is None else f"{gradient.norm:.6g}"]
        if plain:
            other = plain[gradient.x]
            row += [other.status, "-" if other.norm is None else f"{other.norm:.6g}"]
        rows.append(row)
    echo(*table(rows))
    for gradient in report.gradients:
        if gradient.error or gradient.why:
            echo(f"  {gradient.x}: {gradient.error or gradient.why}")
    if report.summed_softmax:
        echo(*report.summed_softmax.describe().split("\n"))
    if report.blockers:
        echo("gradient blockers on the path:")
        shown, more = _capped(report.blockers)
        for blocker in shown:
            echo(f"  {blocker.node} ({blocker.op_type}): {blocker.reason}")
            echo(f"    fix: {blocker.fix}")
        if more:
            echo(more)
    for masked in report.masked:
        echo(f"the gradient is zero by value (masked) between {masked.x} and {masked.usable_at}, where it is usable "
             f"again: {masked.why}", f"    fix: {masked.fix}")
    if report.intended_stops:
        echo("stopped on purpose, not blockers (tf.nn.moments' StopGradient, as batch normalisation means it): "
                   + first_names(report.intended_stops, LISTED))
    if report.shape_only:
        echo("read only the shape of their input, not its values, so their None gradient is right (no fix): "
                   + first_names(report.shape_only, LISTED))
    if report.embedded:
        echo("embedded gradients on the path (--embed):")
        shown, more = _capped(report.embedded)
        for node, spec in shown:
            echo(f"  {node}: {spec}")
        if more:
            echo(more)
    if report.routed_calls:
        echo("call ops differentiated through their functions' bodies, so the overrides inside apply "
                   f"(graphgrad's call): {first_names(report.routed_calls, LISTED)}")
    if report.idle_overrides:
        echo("overrides that cannot take effect (not on a differentiable path from x to y):")
        shown, more = _capped(report.idle_overrides)
        for node, value in shown:
            echo(f"  {node}: {value}")
        if more:
            echo(more)
    for note in report.notes:
        echo(f"note: {note}")
    if report.variables:
        echo(f"variables: {report.variables}")
    if report.defaults:
        echo(f"inputs left at their defaults (a training flag left at True keeps dropout and batch "
                   f"normalisation in training mode; --feed NAME=VALUE sets one): "
                   f"{first_names(report.defaults, LISTED)}")
    random = {name: how for name, how in report.feeds.items() if how != "given"}
    if random:
        echo("feeds: " + first_names([f"{name} {how}" for name, how in random.items()], LISTED))
    for difference in report.verified:
        echo(difference.describe())
    echo("ok" if report.ok else "not ok: some x gets no usable gradient")
