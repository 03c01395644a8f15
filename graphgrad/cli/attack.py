"""graphgrad attack: accuracy under an L-infinity PGD attack, from the graph file (needs TensorFlow)."""


import click

from ..errors import UsageError
from ..files.arrays import load_array, save_array
from ..files.outputs import Output, checkpoint_files, model_files, refuse_outputs_over_inputs
from ..jobs.deadline import run_until
from ..methods.options import RunOptions
from ..methods.pgd import DECIDING, KEEPS, MASKED_SHARE, Budget
from . import exits, options
from .render import echo, echo_json, tensorflow_quiet


@click.command("attack")
@click.argument("model", type=click.Path())
@click.option("--input", "input_path", required=True, metavar="IMAGES.npy", type=click.Path(),
              help="The images to attack, an array of x's shape (rows first), in --range.")
@click.option("--labels", "labels_path", required=True, metavar="LABELS.npy", type=click.Path(),
              help="Each image's true class, one integer a row.")
@click.option("--eps", type=float, required=True, help="The L-infinity radius of the perturbation (e.g. 0.03).")
@click.option("--steps", type=click.IntRange(1), default=100, show_default=True, help="PGD's steps.")
@click.option("--step-size", type=float, help="Each step's size (default: 2.5 eps / steps).")
@click.option("--eot", type=click.IntRange(1), default=1, show_default=True,
              help="Average each step's gradient over N runs: expectation over transformation, for randomised "
              "defences.")
@click.option("--eval-runs", type=click.IntRange(1), metavar="N",
              help="Judge each image by its class probabilities averaged over N runs (default: --eot's).")
@click.option("--range", "valid_range", default="0,1", show_default=True, metavar="LOW,HIGH",
              help="The valid pixel values: images are kept inside them.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random start.")
@click.option("--keep", type=click.Choice(KEEPS), default="best", show_default=True,
              help="Judge each image at its most adversarial step (best), or at its last step (last: what ART's and "
              "foolbox's PGD return, to compare with them).")
@click.option("--x", metavar="TENSOR", help="The input to perturb (default: as check finds it).")
@click.option("--y", metavar="TENSOR", help="The logits, of shape [rows, classes] (default: as check finds it).")
@click.option("-o", "--output", "out", metavar="ADVERSARIAL.npy", type=click.Path(),
              help="Write the adversarial images there.")
@options.run_options
def attack_command(model, input_path, labels_path, eps, steps, step_size, eot, eval_runs, valid_range, seed, keep, x,
                   y, out, feeds, tags, checkpoint, allow_effects, timeout, kind, as_json):
    """Accuracy under an L-infinity PGD attack, BPDA and EOT included (needs TensorFlow).

    PGD with a random start, on the graph's own gradients of the cross-entropy of
    y (the logits) against each image's label.

    Where the gradient from x to y is blocked (a defence's Round, a cast to
    integers), the attack says where, with the fix, and cannot move: rewrite the
    graph with graphgrad bypass (BPDA) and attack that. --eot averages the gradient
    of randomised defences over several runs.

    \b
    Examples:
      graphgrad attack defended.pb --input images.npy --labels labels.npy --eps 0.1 -o adversarial.npy
      graphgrad bypass defended.pb --from x:0 --to defence/squeezed:0 -o bpda.pb
      graphgrad attack bpda.pb --input images.npy --labels labels.npy --eps 0.1 --eot 10
    """
    from ..tf.attack import attack_model

    low, high = _range(valid_range)
    budget = Budget(eps, steps, step_size, eot, low, high, seed, eval_runs, keep)
    if out and not out.endswith(".npy"):
        raise UsageError(f"-o {out}: adversarial images are written as .npy; name a file ending in .npy")
    refuse_outputs_over_inputs(
        {f"the model {model}": model_files(model) + (checkpoint_files(checkpoint) if checkpoint else []),
         f"--input {input_path}": [input_path], f"--labels {labels_path}": [labels_path]},
        [Output("-o", out)] if out else [])
    images, labels = load_array(input_path, "--input"), load_array(labels_path, "--labels")
    attack_options = RunOptions((x,) if x else (), y, feeds, tags, checkpoint, kind, allow_effects, timeout)
    with tensorflow_quiet():
        adversarial, report = run_until(timeout, attack_model, model, images, labels, budget, attack_options,
                                        what=f"attack of {model}")
    if out:
        save_array(out, adversarial)
    if as_json:
        echo_json({"output": out, **report.__dict__, "valid": report.valid})
        return exits.for_verdict(report.valid)
    echo(f"{model}: d {report.y} / d {report.x}, L-infinity PGD, eps {report.eps:g}, {report.steps} steps of "
         f"{report.step_size:.4g}" + (f", EOT over {report.eot} runs" if report.eot > 1 else "")
         + (f", judged over {report.judge_runs} runs" if report.judge_runs > 1 else "")
         + (", each image at its last step" if report.keep == "last" else "")
         + (f" -> {out}" if out else ""),
         f"  clean accuracy          {report.clean_accuracy:7.1%}  ({report.rows} images)",
         f"  accuracy under attack   {report.attacked_accuracy:7.1%}",
         f"  {report.gradient_runs} gradient runs")
    rescored = report.interpreter
    if rescored is not None and rescored.why_not:
        echo(f"  not re-scored on TensorFlow Lite's interpreter: {rescored.why_not}")
    elif rescored is not None:
        echo(f"  on TensorFlow Lite's interpreter, running {model} as deployed (the class: {rescored.output}'s "
             f"largest entry): clean accuracy {rescored.clean:.1%}, under attack {rescored.attacked:.1%}")
    if report.checklist:
        echo("evaluation checklist:", *[f"  {'pass' if item['passed'] else 'FAIL'}  {item['name']:<11} {item['said']}"
                                        for item in report.checklist])
    if report.random:
        echo(f"the model draws other random numbers at every run ({', '.join(report.random[:3])}"
             + (", ..." if len(report.random) > 3 else "") + "): "
             + (f"give --eot N (e.g. --eot 10) to average the gradient over draws (EOT); each image was judged over "
                f"{report.judge_runs} runs" if report.eot == 1 else
                f"the gradient was averaged over {report.eot} runs (EOT)"))
    if report.blockers:
        echo("the gradient is blocked, so the attack could not move (its accuracy means nothing of the defence):",
             *[f"  {blocker}" for blocker in report.blockers],
             f"  or bypass the region: {report.fix}" if report.fix else
             f"  or bypass the region: graphgrad bypass {model} --from {report.x} --to TENSOR -o BPDA.pb "
             "(TENSOR: the defence's output), then attack that (BPDA)")
    elif report.masked_images > MASKED_SHARE:
        echo(f"not valid: the gradient is masked: at {report.masked_images:.0%} of the images no step's gradient had "
             "a usable entry (all zero, or not finite), so the attack could not move and its accuracy means nothing "
             "of the defence",
             f"  the gradient is usable again at {report.masked_at}; fix: {report.fix}" if report.fix else
             f"  bypass the region that masks it: graphgrad bypass {model} --from {report.x} --to TENSOR -o BPDA.pb "
             "(TENSOR: the defence's output), then attack that (BPDA)")
    elif not report.valid:
        failed = ", ".join(item["name"] for item in report.checklist if not item["passed"] and item["name"] in DECIDING)
        echo(f"not valid: the gradient misleads the attack (the checklist's {failed} failed); its accuracy means "
             "nothing of the defence: bypass the defence (BPDA), or give --eot for a randomised one, and attack that")
    return exits.for_verdict(report.valid)


def _range(text: str) -> tuple[float, float]:
    low, _, high = text.partition(",")
    try:
        return float(low), float(high)
    except ValueError:
        raise UsageError(f"--range {text!r}: give LOW,HIGH, e.g. 0,1") from None
