"""The attribution methods' arithmetic, in NumPy, TensorFlow-free: what each kind
makes of the gradients (or outputs) a graph gives at the points it asks for.

Every function takes the graph as ``gradient_at(points, origins)`` or
``output_at(points, origins)`` (``origins``: for each point, the input row whose
target it takes) and runs it in batches of ``batching``, so the explainer
(:mod:`graphgrad.tf.explainer`) owns TensorFlow and these own the methods.
"""

import itertools
from collections.abc import Callable
from typing import Any

import math

import numpy as np

from ..errors import UsageError
from .batching import Batching, in_batches, padded
from .options import Noise


def gradient_rule(inputs: Any, batching: Batching, gradient_at: Callable, origin: Any, times_input: bool) -> Any:
    """dy/dx at each row (under the method's rules), times the row where the method says so."""
    gradients = in_batches(gradient_at, inputs, batching, origin)
    return gradients * (inputs if times_input else 1)


def deeplift(inputs: Any, base: Any, batching: Batching, gradient_at: Callable, origin: Any) -> Any:
    """DeepLIFT's multipliers times x - baseline: each run holds rows, then their
    baselines (SHAP's convention, which the rules' gradients read)."""
    pairs = batching.rows // 2 if batching.fixed else max(1, batching.rows // 2)
    half = Batching(pairs, batching.fixed)
    chunks = []
    for start in range(0, len(inputs), pairs):
        rows, references = inputs[start:start + pairs], base[start:start + pairs]
        origins = padded(origin[start:start + pairs], half)
        both = np.concatenate([padded(rows, half), padded(references, half)])
        chunks.append(np.asarray(gradient_at(both, np.concatenate([origins, origins])))[:len(rows)])
    return np.concatenate(chunks) * (inputs - base)


def summed_gradients(inputs: Any, base: Any, rows: Any, alphas: Any, batching: Batching, gradient_at: Callable,
                     origin: Any) -> Any:
    """For each of ``rows``, the sum over ``alphas`` of the gradient at
    base + alpha (x - base) (float64): every row's points run together, a batch at
    a time."""
    total = np.zeros((len(rows),) + inputs.shape[1:], dtype=np.float64)
    count = len(rows) * len(alphas)
    for start in range(0, count, batching.rows):
        index = np.arange(start, min(start + batching.rows, count))
        slot, alpha = index % len(rows), alphas[index // len(rows)].reshape((-1,) + (1,) * (inputs.ndim - 1))
        row = rows[slot]
        points = base[row] + (alpha * (inputs[row] - base[row])).astype(inputs.dtype)
        gradients = np.asarray(gradient_at(padded(points, batching), padded(origin[row], batching)))[:len(index)]
        for where in np.unique(slot):  # np.add.at, unbuffered, took 3 of MobileNetV2's 16 s
            total[where] += gradients[slot == where].sum(axis=0, dtype=np.float64)
    return total


def midpoint_integral(inputs: Any, base: Any, steps: int, batching: Batching, gradient_at: Callable,
                      origin: Any) -> Any:
    """Integrated gradients by the midpoint rule of ``steps`` (as alibi and the
    integrated-gradients paper's reference code compute it)."""
    alphas = (np.arange(steps) + 0.5) / steps
    total = summed_gradients(inputs, base, np.arange(len(inputs)), alphas, batching, gradient_at, origin)
    return (total / steps * (inputs - base)).astype(inputs.dtype)


def gaussian_blur(images: Any, sigma: float) -> Any:
    """Images (N, H, W, C) blurred over their height and width by a Gaussian of
    standard deviation ``sigma``, zero beyond the edges: scipy.ndimage's
    ``gaussian_filter`` of each image with ``sigma=[sigma, sigma, 0]``,
    ``mode="constant"`` (its kernel cut at 4 sigma), as Blur IG's reference code
    blurs them, bit for bit: each axis a matrix product in float64, rounded to the
    images' type after each axis as scipy rounds (Blur IG divides the difference
    of two blurs by a small step, which magnifies any other rounding 100 times)."""
    if sigma == 0:
        return images
    blurred = images
    for axis in (1, 2):
        size = blurred.shape[axis]
        radius = int(4.0 * sigma + 0.5)
        weights = np.exp(-0.5 / sigma ** 2 * np.arange(-radius, radius + 1, dtype=np.float64) ** 2)
        weights /= weights.sum()
        offsets = np.arange(size)[None, :] - np.arange(size)[:, None]  # column j of output i: input i + (j - i)
        kernel = np.where(np.abs(offsets) <= radius, weights[np.clip(offsets + radius, 0, 2 * radius)], 0.0)
        blurred = np.moveaxis(np.tensordot(np.asarray(blurred, dtype=np.float64), kernel, axes=([axis], [0])), -1,
                              axis).astype(images.dtype)
    return blurred


def blur_integral(inputs: Any, max_sigma: float, steps: int, grad_step: float, batching: Batching,
                  gradient_at: Callable, origin: Any) -> Any:
    """Blur IG (Xu et al., 2020), as PAIR's saliency computes it: the gradient along
    the path from x to x blurred by a Gaussian of ``max_sigma``, at ``steps`` blurs
    of sigma i * max_sigma / steps (i from 0), each times the blur's rate of change
    in sigma (a difference over ``grad_step``) and the step in sigma, summed and
    negated: its sum approaches f(x) - f(x blurred by max_sigma)."""
    sigmas = np.arange(steps + 1, dtype=np.float64) * max_sigma / steps
    total = np.zeros(inputs.shape, dtype=np.float64)
    for sigma, step in zip(sigmas[:-1], np.diff(sigmas)):
        point = gaussian_blur(inputs, sigma)
        rate = (gaussian_blur(inputs, sigma + grad_step).astype(np.float64) - point) / grad_step
        total += step * rate * np.asarray(in_batches(gradient_at, point, batching, origin), dtype=np.float64)
    return (-total).astype(inputs.dtype)


def guided_integral(inputs: Any, base: Any, steps: int, fraction: float, max_dist: float, batching: Batching,
                    gradient_at: Callable, origin: Any) -> Any:
    """Guided IG (Kapishnikov et al., 2021) as PAIR's saliency computes it, every
    row's step run in one batch: at each of ``steps`` steps the path moves the
    ``fraction`` of features of smallest |dy/dx| towards x until its L1 distance
    to x is (1 - step / steps) of the whole, no feature more than ``max_dist``
    (as a fraction of the straight path) ahead of the straight path nor behind it;
    each move times the gradient where it starts, summed."""
    rows, bases = inputs.astype(np.float64), base.astype(np.float64)
    points, total = bases.copy(), np.zeros(rows.shape)
    moving = np.flatnonzero(np.abs(rows - bases).reshape(len(rows), -1).sum(axis=1) > 0)  # a row at its baseline: 0
    for step in range(steps):
        gradients = np.asarray(in_batches(gradient_at, points[moving].astype(inputs.dtype), batching,
                                          origin[moving]), dtype=np.float64)
        for slot, row in enumerate(moving):
            total[row] += _guided_step(points[row], rows[row], bases[row], gradients[slot], step, steps, fraction,
                                       max_dist)
    return total.astype(inputs.dtype)


def _guided_step(point: Any, row: Any, base: Any, gradient: Any, step: int, steps: int, fraction: float,
                 max_dist: float) -> Any:
    """One step of Guided IG for one row: ``point`` moved in place; the step's
    attribution, (the moves) times ``gradient`` (saliency's guided_ig_impl's loop)."""
    alpha = (step + 1.0) / steps
    alpha_min, alpha_max = max(alpha - max_dist, 0.0), min(alpha + max_dist, 1.0)
    x_min, x_max = base + (row - base) * alpha_min, base + (row - base) * alpha_max
    l1_target = np.abs(row - base).sum() * (1 - (step + 1) / steps)
    start, selectable = point.copy(), gradient.copy()
    while True:
        with np.errstate(divide="ignore", invalid="ignore"):
            alphas = np.where(row != base, (point - base) / (row - base), alpha_max)
        behind = alphas < alpha_min
        point[behind] = x_min[behind]
        l1_current = np.abs(point - row).sum()
        if math.isclose(l1_target, l1_current, rel_tol=1e-9, abs_tol=1e-9):
            return (point - start) * gradient
        selectable[point == x_max] = np.inf  # the features at their bound move no further
        threshold = np.quantile(np.abs(selectable), fraction, method="lower")
        chosen = (np.abs(selectable) <= threshold) & (selectable != np.inf)
        room = (np.abs(point - x_max) * chosen).sum()
        if room == 0:  # every feature at its bound: saliency's loop would spin here for ever
            return (point - start) * gradient
        gamma = (l1_current - l1_target) / room
        if gamma > 1.0:
            point[chosen] = x_max[chosen]
        else:
            point[chosen] = (point + (x_max - point) * gamma)[chosen]
            return (point - start) * gradient


def over_background(kind_deeplift: bool, samples: int, seed: int, inputs: Any, background: Any,
                    batching: Batching, gradient_at: Callable) -> Any:
    """Attributions averaged over a background set, as SHAP averages them. DeepSHAP
    (``kind_deeplift``): DeepLIFT against every background row, the mean. Expected
    gradients (Erion et al., 2021): the mean of (x - x') dy/dx at x' + a (x - x'),
    for ``samples`` draws of a background row x' and a in [0, 1) per row, seeded."""
    count = len(background)
    if kind_deeplift:  # DeepSHAP: each row beside each background row
        rows = np.repeat(inputs, count, axis=0)
        references = np.tile(background, (len(inputs),) + (1,) * (inputs.ndim - 1))
        each = deeplift(rows, references, batching, gradient_at, np.repeat(np.arange(len(inputs)), count))
        return each.reshape((len(inputs), count) + inputs.shape[1:]).mean(axis=1).astype(inputs.dtype)
    rng = np.random.default_rng(seed)
    chosen = rng.integers(0, count, (len(inputs), samples))
    alphas = rng.random((len(inputs), samples))
    origin = np.repeat(np.arange(len(inputs)), samples)
    references = background[chosen.reshape(-1)]
    differences = inputs[origin] - references
    shape = (-1,) + (1,) * (inputs.ndim - 1)
    points = (references + alphas.reshape(shape) * differences).astype(inputs.dtype)
    gradients = in_batches(gradient_at, points, batching, origin)
    each = (np.asarray(gradients, dtype=np.float64) * differences).reshape((len(inputs), samples) + inputs.shape[1:])
    return each.mean(axis=1).astype(inputs.dtype)


def occluded(inputs: Any, window: int, stride: int, value: float, batching: Batching, output_at: Callable) -> Any:
    """Occlusion (Zeiler and Fergus, 2014): for each window of x (its height and width
    for an image, N H W C, across channels; else its features after the batch), y's
    drop when the window is set to ``value``, each entry the mean drop of the windows
    that cover it. Copies of every row for several windows run together."""
    spatial = inputs.shape[1:3] if inputs.ndim == 4 else inputs.shape[1:2]
    positions = list(itertools.product(*(window_starts(size, window, stride) for size in spatial)))
    plain = in_batches(output_at, inputs, batching)
    drops = np.zeros(inputs.shape, dtype=np.float64)
    covered = np.zeros(inputs.shape, dtype=np.float64)
    group = max(1, batching.rows // max(1, len(inputs)))  # windows per chunk of rows
    for first in range(0, len(positions), group):
        chosen = positions[first:first + group]
        copies = np.repeat(inputs[None], len(chosen), axis=0)
        for index, position in enumerate(chosen):
            copies[(index, slice(None)) + tuple(slice(start, start + window) for start in position)] = value
        flat = copies.reshape((-1,) + inputs.shape[1:])
        origin = np.tile(np.arange(len(inputs)), len(chosen))
        drop = (np.tile(plain, len(chosen)) - in_batches(output_at, flat, batching, origin)).reshape(len(chosen), -1)
        for index, position in enumerate(chosen):
            where = (slice(None),) + tuple(slice(start, start + window) for start in position)
            drops[where] += drop[index].reshape((-1,) + (1,) * (inputs.ndim - 1))
            covered[where] += 1
    return (drops / np.maximum(covered, 1)).astype(inputs.dtype)


def window_starts(size: int, window: int, stride: int) -> list[int]:
    """Where windows start along an axis of ``size``: every ``stride``, and the last one at the edge."""
    starts = list(range(0, max(size - window, 0) + 1, stride))
    if starts[-1] + window < size:
        starts.append(size - window)
    return starts


def smoothed(attribute: Callable, inputs: Any, base: Any, noise: Noise) -> Any:
    """SmoothGrad over any method: ``attribute(rows, bases, origin)`` of
    ``noise.samples`` noisy copies of the inputs, run together, joined as
    ``noise.aggregate`` says."""
    rng = np.random.default_rng(noise.seed)
    flat = inputs.reshape(len(inputs), -1)
    scale = (flat.max(axis=1) - flat.min(axis=1)).reshape((-1,) + (1,) * (inputs.ndim - 1)) * noise.sigma
    noisy = np.concatenate([inputs + (rng.standard_normal(inputs.shape) * scale).astype(inputs.dtype)
                            for _ in range(noise.samples)])
    origin = np.tile(np.arange(len(inputs)), noise.samples)
    bases = np.tile(base, (noise.samples,) + (1,) * (inputs.ndim - 1))
    found = np.asarray(attribute(noisy, bases, origin))  # x's shape, or a layer's (integrated gradients at a layer)
    each = found.reshape((noise.samples, len(inputs)) + found.shape[1:]).astype(np.float64)
    joined = {"squared": lambda: (each ** 2).mean(axis=0), "variance": lambda: each.var(axis=0),
              "abs": lambda: np.abs(each).mean(axis=0), "mean": lambda: each.mean(axis=0)}[noise.aggregate]()
    return joined.astype(inputs.dtype)


def score_cam(inputs: Any, layer: Any, upsampled: Any, batching: Batching, output_at: Callable) -> Any:
    """Score-CAM (Wang et al., 2020, as tf-keras-vis computes it): each channel k of
    the layer, resized to x and scaled to [0, 1], masks x; its weight is the target's
    softmax probability on that masked x; the map is ReLU(sum_k w_k A_k), (N, h, w, 1)."""
    low = upsampled.min(axis=(1, 2), keepdims=True)
    high = upsampled.max(axis=(1, 2), keepdims=True)
    masks = (upsampled - low) / np.where(high > low, high - low, 1.0)  # a flat map masks x to zeros
    channels = masks.shape[-1]
    cams = []
    for row in range(len(inputs)):
        masked = inputs[row][None] * np.moveaxis(masks[row], -1, 0)[..., None]  # (channels, H, W, C)
        weights = in_batches(output_at, masked.astype(inputs.dtype), batching, np.full(channels, row))
        cams.append(np.maximum((layer[row] * weights).sum(axis=-1, keepdims=True), 0))
    return np.asarray(cams, dtype=inputs.dtype)


def background_set(baseline: Any, inputs: Any, name: str) -> Any:
    """The background set of expected gradients and DeepSHAP: rows of x's shape
    (one row without its batch axis too), zeros (one row) when none is given."""
    if baseline is None:
        return np.zeros((1,) + inputs.shape[1:], dtype=inputs.dtype)
    background = np.asarray(baseline, dtype=inputs.dtype)
    if background.shape == inputs.shape[1:]:
        background = background[None]
    if background.shape[1:] != inputs.shape[1:] or not len(background):
        raise UsageError(f"{name} has shape {list(background.shape)}: a background set is rows of x's shape "
                         f"{['rows'] + list(inputs.shape[1:])}")
    return background


def row_sums(attributions: Any) -> Any:
    """Each row's attributions summed (float64)."""
    return np.asarray(attributions, dtype=np.float64).reshape(len(attributions), -1).sum(axis=1)
