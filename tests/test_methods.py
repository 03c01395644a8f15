"""Attribution methods and the attack loop without TensorFlow: the registry drives
the command's help, the docs' table and the errors; the NumPy algorithms against
closed forms; the attribution code stays in small functions."""

import ast
import os
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import ROOT

from graphgrad.cli import main
from graphgrad.errors import UsageError
from graphgrad.methods import algorithms
from graphgrad.methods.batching import Batching
from graphgrad.methods.adaptive import adaptive_integral
from graphgrad.methods.pgd import Budget, pgd
from graphgrad.methods.registry import CATALOGUE, ENTRIES, KINDS, REGISTRY, parse_method

ATTRIBUTION_CODE = ["graphgrad/methods", "graphgrad/tf/attribute.py", "graphgrad/tf/explainer.py",
                    "graphgrad/tf/cam.py", "graphgrad/tf/coverage.py", "graphgrad/cli/attribute.py"]


def test_the_registry_and_the_algorithms_import_without_tensorflow():
    code = ("import sys, graphgrad.methods.registry, graphgrad.methods.algorithms, graphgrad.methods.options, "
            "graphgrad.cli.attribute; assert 'tensorflow' not in sys.modules, 'tensorflow imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_every_method_has_a_kind_and_parses_from_its_own_signature():
    assert {entry.kind for entry in ENTRIES} == set(KINDS)
    for entry in ENTRIES:
        method = parse_method(entry.signature())
        assert (method.entry, method.kind) == (entry.name, entry.kind)
        assert parse_method(method.name) == method  # the report's name spells the method again


def test_attribute_help_lists_every_method_as_the_registry_does():
    shown = " ".join(CliRunner().invoke(main, ["attribute", "--help"], terminal_width=200).output.split())
    for line in CATALOGUE.help_lines():
        assert " ".join(line.split()) in shown


def test_the_docs_table_of_methods_is_the_registrys():
    docs = " ".join(open(os.path.join(ROOT, "docs", "commands.md")).read().split())
    rows = " ".join(f"| `{entry.signature()}` | {entry.kind} | {entry.summary} |" for entry in ENTRIES)
    assert "| method | kind | computes | |---|---|---| " + rows in docs


@pytest.mark.parametrize("text, words", [
    ("smoothgrad", "not a method: SmoothGrad is --noise N,SIGMA"),
    ("saliency", "no such method; did you mean gradient?"),
    ("integrated_gradient", "did you mean integrated_gradients?"),
    ("integrated_gradients(step=5)", "no parameter step (it takes steps)"),
    ("integrated_gradients(steps=2.5)", "steps must be a whole number"),
    ("occlusion(window=0)", "window must be at least 1"),
    ("deeplift(3)", "name its parameters"),
])
def test_a_wrong_method_says_what_to_give(text, words):
    with pytest.raises(UsageError) as raised:
        parse_method(text)
    assert words in str(raised.value)
    if "no such method" in words:
        assert ", ".join(REGISTRY) in str(raised.value)


def _cubic(rows, weights):
    """f(x) = sum(w x^3) per row, its gradient, as the graph would give them."""
    return (lambda points, origins: 3 * weights * points ** 2,
            lambda points, origins: (weights * points ** 3).reshape(len(points), -1).sum(axis=1))


def test_the_midpoint_rule_integrates_a_polynomial_to_its_rule_error():
    rows, base = np.array([[1.0, -2.0], [0.5, 3.0]]), np.zeros((2, 2))
    gradient_at, output_at = _cubic(rows, np.array([1.0, 0.5]))
    attributions = algorithms.midpoint_integral(rows, base, 100, Batching(7, False), gradient_at, np.arange(2))
    exact = output_at(rows, None) - output_at(base, None)
    np.testing.assert_allclose(attributions.sum(axis=1), exact, rtol=1e-4)


def _both(gradient_at, output_at, calls):
    def both_at(points, origins):
        calls.append(len(points))
        return gradient_at(points, origins), output_at(points, origins)
    return both_at


def test_refining_keeps_every_point_and_meets_the_tolerance_on_a_cubic():
    rows, base = np.array([[1.0, -2.0], [0.1, 0.1]]), np.zeros((2, 2))
    calls = []
    gradient_at, output_at = _cubic(rows, np.array([1.0, 0.5]))
    differences = output_at(rows, None) - output_at(base, None)
    refined = adaptive_integral(rows, base, differences, 2, 1e-3, 1024, Batching(64, False),
                                _both(gradient_at, output_at, calls), np.arange(2))
    sums = refined.attributions.sum(axis=1)
    assert refined.met and (np.abs(sums - differences) / np.abs(differences) <= 1e-3).all()
    # on f = sum(w x^3) the uniform trapezoid rule needs n = 32 intervals (33 gradients) for 1e-3: splitting where
    # the error is needs no more
    assert all(steps <= 33 for steps in refined.steps.tolist())
    assert refined.evaluations == sum(calls) == refined.steps.sum()  # no point computed twice


def _power(power):
    """f(x) = x^power of one entry: nearly all of its change near the end of the path
    from 0 to 1, where the trapezoid rule overestimates it (no error cancels another)."""
    def gradient_at(points, _):
        return power * points ** (power - 1)

    def output_at(points, _):
        return points[:, 0] ** power
    return gradient_at, output_at


def test_refining_spends_the_evaluations_where_the_error_is():
    """A change concentrated at the end of the path: refining where the error is takes
    a fraction of the gradients that doubling every step everywhere takes."""
    rows, base = np.ones((1, 1)), np.zeros((1, 1))
    gradient_at, output_at = _power(30)
    differences = output_at(rows, None) - output_at(base, None)
    refined = adaptive_integral(rows, base, differences, 8, 1e-4, 4096, Batching(64, False),
                                _both(gradient_at, output_at, []), np.arange(1))
    assert refined.met and refined.gaps[0] <= 1e-4
    uniform = 8
    while True:  # the uniform trapezoid rule's steps for the same gap, doubling from the same start
        alphas = np.linspace(0, 1, uniform + 1)[:, None]
        values = gradient_at(alphas, None)[:, 0]
        total = (values[:-1] + values[1:]).sum() / 2 / uniform
        if abs(total - differences[0]) / abs(differences[0]) <= 1e-4:
            break
        uniform *= 2
    assert refined.evaluations < (uniform + 1) / 2, (refined.evaluations, uniform + 1)
    assert refined.error.shape == rows.shape and refined.error[0, 0] < 1e-2


def test_refining_spends_the_budget_as_given_and_says_the_row_is_over():
    rows, base = np.ones((1, 1)), np.zeros((1, 1))
    gradient_at, output_at = _power(300)
    differences = output_at(rows, None) - output_at(base, None)
    calls = []
    refined = adaptive_integral(rows, base, differences, 8, 1e-9, 100, Batching(64, False),
                                _both(gradient_at, output_at, calls), np.arange(1))
    assert not refined.met and refined.gaps[0] > 1e-9
    assert 90 <= refined.evaluations == sum(calls) <= 100  # spent, not stopped at the last power of two


def test_no_function_of_the_attribution_code_is_over_sixty_lines():
    long = []
    for place in ATTRIBUTION_CODE:
        path = os.path.join(ROOT, place)
        files = [os.path.join(path, name) for name in os.listdir(path)] if os.path.isdir(path) else [path]
        for file in (f for f in files if f.endswith(".py")):
            tree = ast.parse(open(file).read())
            long += [f"{os.path.relpath(file, ROOT)}:{node.name} ({node.end_lineno - node.lineno + 1})"
                     for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and node.end_lineno - node.lineno + 1 > 60]
    assert not long
    assert len(open(os.path.join(ROOT, "graphgrad/tf/attribute.py")).read().splitlines()) < 350


def _linear_model(seed: int, rows: int) -> tuple:
    """logits = x W on ``rows`` images of 6 pixels, 3 classes: its weights, images,
    the labels it gives them, and the cross-entropy's gradient written out."""
    rng = np.random.default_rng(seed)
    weights = rng.normal(size=(6, 3))
    images = rng.uniform(0, 1, (rows, 6))

    def gradient_at(points, truth):
        logits = points @ weights
        chances = np.exp(logits - logits.max(1, keepdims=True))
        chances /= chances.sum(1, keepdims=True)
        chances[np.arange(len(points)), truth] -= 1
        return chances @ weights.T

    return weights, images, (images @ weights).argmax(axis=1), gradient_at


def test_pgd_stays_in_the_ball_and_the_range_and_breaks_a_linear_model():
    """Without TensorFlow: logits = x W, the cross-entropy's gradient written out."""
    weights, images, labels, gradient_at = _linear_model(0, 50)
    outcome = pgd(images, labels, Budget(0.3, steps=30), gradient_at, lambda points: points @ weights)
    assert outcome.clean_correct.all() and outcome.attacked_correct.mean() < 0.3
    assert np.abs(outcome.adversarial - images).max() <= 0.3 + 1e-12
    assert outcome.adversarial.min() >= 0 and outcome.adversarial.max() <= 1
    masked = pgd(images, labels, Budget(0.3, steps=30), lambda points, truth: None, lambda points: points @ weights)
    assert np.abs(masked.adversarial - images).max() <= 0.3 and masked.gradient_runs == 30


def test_pgd_keeps_each_rows_most_adversarial_step_or_its_last():
    """keep="last" is the final step, as ART's and foolbox's PGD return it; "best"
    is never weaker."""
    weights, images, labels, gradient_at = _linear_model(1, 200)
    scores = lambda points: points @ weights  # noqa: E731
    best = pgd(images, labels, Budget(0.1, steps=20), gradient_at, scores)
    last = pgd(images, labels, Budget(0.1, steps=20, keep="last"), gradient_at, scores)
    assert best.attacked_correct.mean() <= last.attacked_correct.mean() < 1
    one = pgd(images, labels, Budget(0.1, steps=1, keep="last"), gradient_at, scores)
    low, high = np.maximum(images - 0.1, 0), np.minimum(images + 0.1, 1)
    start = np.clip(images + np.random.default_rng(0).uniform(-0.1, 0.1, images.shape), low, high)
    np.testing.assert_allclose(one.adversarial, np.clip(start + 0.25 * np.sign(gradient_at(start, labels)), low, high))
    with pytest.raises(UsageError, match="--keep first: give one of best, last"):
        Budget(0.1, keep="first")


@pytest.mark.parametrize("arguments, words", [
    ({"eps": -0.1}, "--eps -0.1: give the L-infinity radius, at least 0"),
    ({"eps": 0.1, "steps": 0}, "give at least 1 of each"),
    ({"eps": 0.1, "low": 1.0, "high": 0.0}, "the low end must be below the high end"),
])
def test_a_bad_budget_is_refused(arguments, words):
    with pytest.raises(UsageError, match=words.replace("(", r"\(")):
        Budget(**arguments)


def test_a_row_met_on_its_first_grid_estimates_its_error_from_every_other_point():
    """f(x) = sum(x^3) from a zero baseline: integrated gradients are exactly x^3.
    At a tolerance the first grid meets, no round runs; the row's error estimate is
    then the change from every other point of the grid to all of it (not 0), which
    bounds the attributions' true error (the trapezoid's error falls 4x when the
    steps double, so that change is about 3 times it)."""
    from graphgrad.methods.adaptive import adaptive_integral
    from graphgrad.methods.batching import Batching

    rows = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])

    def both_at(points, origins):
        return 3 * points ** 2, (points ** 3).sum(axis=1)

    differences = (rows ** 3).sum(axis=1)
    refined = adaptive_integral(rows, np.zeros_like(rows), differences, 8, 0.05, 64, Batching(16, False, ""),
                                both_at, np.arange(2))
    assert refined.met and list(refined.steps) == [9, 9]  # the first grid, no round
    true_error = np.abs(refined.attributions - rows ** 3)
    assert (refined.error > 0).all() and (true_error <= refined.error).all()
    np.testing.assert_allclose(refined.error, 3 * true_error, rtol=0.05)
