"""graphgrad attribute: saliency and relevance maps from a graph file (needs TensorFlow)."""


import click

from ..errors import UsageError
from ..files.arrays import load_array, save_array
from ..files.outputs import Output, checkpoint_files, model_files, refuse_outputs_over_inputs
from ..files.writing import write_chunks
from ..jobs.deadline import run_until
from ..jobs.heatmap import each_target_a_row, heatmap_image, image_format
from ..methods.options import AGGREGATES, DEFAULT_MAX_STEPS, AttributeOptions, Noise, ranked_targets
from ..methods.registry import CATALOGUE, PATH_INTEGRAL, parse_method
from . import options
from .render import echo, echo_json, table, tensorflow_quiet



# The methods as the registry lists them: every one, with its kind and what it computes.
METHODS_HELP = "\b\nMethods (METHOD, its kind: what it computes):\n" + "\n".join(
    f"  {line}" for line in CATALOGUE.help_lines())


@click.command("attribute", epilog=METHODS_HELP)
@click.argument("model", type=click.Path())
@click.option("--method", "method_text", required=True, metavar="METHOD",
              help="The attribution method, e.g. deeplift or integrated_gradients(steps=64): every one is listed "
              "below.")
@click.option("--layer", metavar="TENSOR",
              help="integrated_gradients: attribute to this layer's values instead of x's. The class activation "
              "maps' layer, a 4-D (N, H, W, C) tensor (default: the last one on the path with a height "
              "and width over 1).")
@click.option("--input", "input_path", required=True, metavar="FILE.npy", type=click.Path(),
              help="The rows to explain, an array of x's shape (batch first).")
@click.option("--x", metavar="TENSOR", help="The input to attribute to (default: as check finds it).")
@options.y_option
@click.option("--target", "target_text", metavar="INDEX|FILE.npy|predicted|top:K|all",
              help="Attribute y[..., INDEX] for every row; or one class per row, from an .npy of integers or the "
              "class y scores highest (y of shape [rows, classes]); or several a row, the K it scores highest or "
              "every class, written as an array of shape (rows, K, *row).")
@click.option("--baseline", default="zero", show_default=True, metavar="zero|FILE.npy",
              help="The reference of deeplift and integrated_gradients: zeros, or an array of x's shape (or one row).")
@click.option("-o", "--output", "out", required=True, metavar="OUT.npy", type=click.Path(),
              help="Write the attributions there, an array of x's shape.")
@click.option("--image", metavar="OUT.png|OUT.jpg", type=click.Path(),
              help="Also draw the attributions of image inputs (N, H, W, C): for each row the input, the map (red "
              "positive, blue negative), the map over the input, and a colour bar with its scale (needs Pillow).")
@click.option("--allow-uncovered", is_flag=True,
              help="Compute eps_lrp or deeplift even where an op type on the path has no rule (named either way).")
@click.option("--noise", metavar="N,SIGMA",
              help="SmoothGrad over the method: the attributions of N noisy copies of each row, Gaussian noise of "
              "SIGMA times the row's range (e.g. 50,0.15).")
@click.option("--noise-aggregate", type=click.Choice(AGGREGATES), default="mean", show_default=True,
              help="How --noise joins the samples: SmoothGrad, the mean of magnitudes, SmoothGrad-squared or "
              "VarGrad.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of --noise: the same seed, the same bits.")
@click.option("--tolerance", type=click.FloatRange(0, 1, min_open=True, max_open=True), metavar="FRACTION",
              help="Path integrals (integrated_gradients): refine each row's path where its error is largest, "
              "keeping the points computed, until |sum - (f(x) - f(baseline))| is at most FRACTION of "
              "|f(x) - f(baseline)| (e.g. 0.01).")
@click.option("--max-steps", type=click.IntRange(2),
              help="With --tolerance: each row's budget of gradient evaluations, spent as given; a row still over "
                   f"the tolerance is reported.  [default: {DEFAULT_MAX_STEPS}]")
@options.run_options
def attribute_command(model, method_text, layer, input_path, x, y, target_text, baseline, out, image, allow_uncovered,
                      noise, noise_aggregate, seed, tolerance, max_steps, feeds, tags, checkpoint, allow_effects,
                      timeout, kind, as_json):
    """Saliency and relevance maps by gradient rules: DeepLIFT, LRP, ... (needs TensorFlow).

    Attribute y[..., TARGET] to x for every row of --input, by the METHOD's
    gradient rules applied to a copy of the graph in memory (the file is not changed).

    Op types on the path that the method has no rule for are named before the graph
    runs; eps_lrp and deeplift refuse them unless --allow-uncovered. Like check,
    this runs the graph (ops acting outside it are refused unless --allow-effects);
    every other placeholder y reads needs a --feed.

    \b
    Examples:
      graphgrad attribute model.pb --method guided_backprop --input images.npy --target 3 -o saliency.npy
      graphgrad attribute model.pb --method deeplift --input rows.npy --baseline mean.npy -o relevance.npy
      graphgrad attribute model.pb --method gradient --noise 50,0.15 --target predicted --input rows.npy -o s.npy
    """
    from ..tf.attribute import attribute_model

    if not out.endswith(".npy"):
        raise UsageError(f"-o {out}: attributions are written as .npy; name a file ending in .npy")
    if image:
        image_format(image)  # refused before anything runs
    read = {"--input": input_path, "--baseline": None if baseline == "zero" else baseline, "--target": target_text}
    refuse_outputs_over_inputs(
        {f"the model {model}": model_files(model) + (checkpoint_files(checkpoint) if checkpoint else []),
         **{f"{option} {path}": [path] for option, path in read.items() if path and path.endswith(".npy")}},
        [Output("-o", out)] + ([Output("--image", image)] if image else []))
    if tolerance is None and max_steps is not None:
        raise UsageError(f"--max-steps {max_steps} bounds the refinement to a --tolerance, and none is given; add "
                         "--tolerance FRACTION (e.g. 0.01)")
    method = parse_method(method_text)
    inputs = load_array(input_path, "--input")
    reference = None if baseline == "zero" else load_array(baseline, "--baseline")
    smoothing = None if noise is None else Noise(*_noise(noise), noise_aggregate, seed)
    attribute_options = AttributeOptions(method, x, y, _target(target_text), allow_uncovered, allow_effects, kind,
                                         tags, checkpoint, feeds, timeout, smoothing, layer, tolerance, max_steps)
    with tensorflow_quiet():
        attributions, report = run_until(timeout, attribute_model, model, inputs, reference, attribute_options,
                                         what=f"attribute of {model}")
    picture = None
    if image:  # drawn before anything is written: a refusal leaves no output
        drawn, shown = each_target_a_row(attributions, inputs, bool(report.ranked))
        picture = heatmap_image(drawn, image_format(image), shown)
    save_array(out, attributions)
    if picture is not None:
        write_chunks(image, [picture])
    if as_json:
        echo_json({"output": out, "image": image, **report.__dict__})
        return
    _render(report, model, out, image)


def _render(report, model: str, out: str, image: str | None) -> None:
    """The report in text: what was computed, and where it was written."""
    of = (f"{report.y}[..., {report.target}]" if report.target is not None else
          f"{report.y}[row, every class]" if report.ranked == "all" else
          f"{report.y}[row, each of its {report.ranked.removeprefix('top:')} highest classes]" if report.ranked else
          f"{report.y}[row, its target]" if report.targets else report.y)
    to = report.layer if report.layer and parse_method(report.method).kind == PATH_INTEGRAL else report.x
    echo(f"{model}: {report.method} attributions of {of} to {to} -> {out}, shape {list(report.shape)}"
         + (f"; heat map -> {image}" if image else ""))
    if report.noise:
        echo(f"  smoothed: {report.noise}")
    if report.layer and parse_method(report.method).kind == PATH_INTEGRAL:
        echo(f"  layer: {report.layer}, attributed to its values: the path runs from its values at the baseline to "
             "those at the row, with x held at the row")
    elif report.layer:
        echo(f"  layer: {report.layer}, resized to x's height and width")
    if report.rules:
        echo("  rules: " + ", ".join(f"{op_type}={spec}" for op_type, spec in report.rules.items()))
    if report.uncovered:
        echo(f"  no rule for: {', '.join(report.uncovered)} (their own gradients were used)")
    for note in report.notes:
        echo(f"  note: {note}")
    if report.batch:
        echo(f"  run {report.batch} rows at a time: the graph's batch is fixed")
    if report.training_flags:
        echo(f"  warning: {', '.join(report.training_flags)} left at its default, True: a training flag keeps "
             "dropout and batch normalisation in training mode (--feed NAME=false sets it)")
    if report.completeness:
        _render_completeness(report)


def _render_completeness(report) -> None:
    """Each row's sum against f(x) - f(baseline), its gap, and for a refined path
    integral its gradient evaluations and error estimate."""
    refined = report.refinement
    echo("  completeness (attributions sum against f(x) - f(baseline)):")
    ranked = bool(report.ranked)
    rows = [["row"] + (["class"] if ranked else []) + ["sum", "f(x) - f(baseline)", "gap"]
            + (["evaluations", "error"] if refined else [])] + [
        [str(c.row)] + ([str(c.target)] if ranked else [])
        + [f"{c.attribution_sum:.6g}", f"{c.output_difference:.6g}", percent(c.gap)]
        + ([str(c.steps), f"{c.error:.3g}"] if refined else []) for c in report.completeness]
    echo(*table(rows, indent="    "))
    if refined:
        over = [c for c in report.completeness if c.gap > refined.tolerance]
        verdict = ("every row's gap is at most" if refined.met else
                   f"row(s) {', '.join(str(c.row) for c in over)} spent their budget of --max-steps "
                   f"{refined.max_steps} gradient evaluations with a gap over")
        echo(f"  {verdict} {percent(refined.tolerance)}; {refined.evaluations} gradient evaluations in all (error: "
             "the largest change of one attribution in the last refinement; for a row met on its first steps, "
             "from every other step to all of them)")


def percent(fraction: float) -> str:
    """``fraction`` as a percentage to two decimals, and below 0.005% to two
    significant digits (``.2%`` alone shows a tolerance of 1e-5 as 0.00%)."""
    return f"{fraction:.2%}" if fraction == 0 or fraction >= 5e-5 else f"{fraction * 100:.2g}%"


def _target(text: str | None):
    """``--target`` as attribute takes it: None, an index, "predicted", an array of
    one index per row, or several a row (top:K, all)."""
    if text is None or text == "predicted":
        return text
    if text.isdigit():
        return int(text)
    ranked = ranked_targets(text, "--target")
    if ranked is not None:
        return ranked
    if not text.endswith(".npy"):
        raise UsageError(f"--target {text!r}: give a class index (0, 1, ...), predicted, a FILE.npy of indices, "
                         "top:K or all")
    targets = load_array(text, "--target")
    if targets.dtype.kind not in "iu" or targets.ndim != 1:
        raise UsageError(f"--target {text} holds {targets.dtype} of shape {list(targets.shape)}: give one integer "
                         "class index per row")
    return targets


def _noise(text: str) -> tuple[int, float]:
    """``--noise N,SIGMA``: the number of noisy samples and their scale."""
    count, _, sigma = text.partition(",")
    try:
        samples, scale = int(count), float(sigma)
    except ValueError:
        samples, scale = 0, -1.0
    if samples < 1 or not 0 <= scale < float("inf"):
        raise UsageError(f"--noise {text!r}: expected N,SIGMA with N at least 1 and SIGMA at least 0, e.g. 50,0.15")
    return samples, scale
