"""XRAI (Kapishnikov et al., 2019) as PAIR's saliency 0.2.1 computes it: integrated
gradients from a black and a white baseline (each row's min and max), averaged and
taken at each pixel's largest channel; the image cut into regions by Felzenszwalb's
graph segmentation at six scales (scikit-image's, on the image scaled to [-1, 1] at
224 x 224), each region dilated by a disk of 5 pixels; then regions are added
greedily, the one whose new pixels hold the densest attribution first, and each
pixel gets the density of the region that added it.

scikit-image is what saliency segments with; it is needed only here, imported when
XRAI runs (``pip install 'graphgrad[xrai]'``).
"""

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import GraphgradError
from .batching import Batching
from .algorithms import summed_gradients

SCALES = (50, 100, 150, 250, 500, 1200)  # saliency's Felzenszwalb scales, sigma and minimum size
SIGMA, MIN_SIZE = 0.8, 150
SEGMENTED_SIZE = (224, 224)  # the size images are segmented at, so the scales mean the same on any image
DILATION = 5
MIN_PIXEL_DIFF = 50  # a region adding fewer new pixels is dropped (saliency's experimental min_pixel_diff)


def xrai_maps(inputs: Any, base: Any, steps: int, area_threshold: float, batching: Batching, gradient_at: Callable,
              origin: Any) -> Any:
    """XRAI's map of each image (N, H, W, 1), against ``base`` (the baseline of each
    row) or, where None, against each row's min and max, averaged."""
    segmentation = _scikit_image()
    bases = [base] if base is not None else [np.broadcast_to(extreme(inputs, axis=tuple(range(1, inputs.ndim)),
                                                                     keepdims=True), inputs.shape).astype(inputs.dtype)
                                             for extreme in (np.min, np.max)]
    alphas = np.linspace(0, 1, steps)  # saliency's rule: both ends, the mean of the gradients
    attributions = np.mean([summed_gradients(inputs, each, np.arange(len(inputs)), alphas, batching, gradient_at,
                                             origin).astype(np.float32) / steps * (inputs - each) for each in bases],
                           axis=0)
    maps = [_ranked(row_attribution.max(axis=-1), _segments(image, segmentation), area_threshold)
            for image, row_attribution in zip(inputs, attributions)]
    return np.stack(maps)[..., None].astype(inputs.dtype)


def _scikit_image() -> Any:
    try:
        import skimage.morphology
        import skimage.segmentation
        import skimage.transform
    except ImportError:
        raise GraphgradError("xrai segments images with scikit-image, which is not installed: "
                             "pip install 'graphgrad[xrai]' (or scikit-image)") from None
    return skimage


def _segments(image: Any, skimage: Any) -> list:
    """The regions of ``image`` (H, W, C): at each scale, each segment as a mask, dilated."""
    low, high = float(np.min(image)), float(np.max(image))
    scaled = (image - low) / (high - low) * 2.0 - 1.0
    resized = skimage.transform.resize(scaled, SEGMENTED_SIZE, order=3, mode="constant", preserve_range=True,
                                       anti_aliasing=True)
    masks = []
    for scale in SCALES:
        segments = skimage.segmentation.felzenszwalb(resized, scale=scale, sigma=SIGMA, min_size=MIN_SIZE)
        segments = skimage.transform.resize(segments, image.shape[:2], order=0, preserve_range=True, mode="constant",
                                            anti_aliasing=False).astype(int)
        masks += [segments == label for label in range(segments.min(), segments.max() + 1)]
    disk = skimage.morphology.disk(DILATION)
    return [skimage.morphology.dilation(mask, footprint=disk) for mask in masks]


def _density(mask: Any, attribution: Any) -> float:
    return float(attribution[mask].mean()) if mask.any() else -np.inf


def _ranked(attribution: Any, masks: list, area_threshold: float) -> Any:
    """Each pixel the attribution density of the new pixels of the region that added
    it, regions added densest first until ``area_threshold`` of the image is covered;
    the pixels no region added, their own density."""
    shown = np.full(attribution.shape, -np.inf)
    covered = np.zeros(attribution.shape, dtype=bool)
    remaining = dict(enumerate(masks))
    while covered.mean() <= area_threshold:
        best, best_gain = None, -np.inf
        for key in list(remaining):
            new = remaining[key] & ~covered
            if new.sum() < MIN_PIXEL_DIFF:
                del remaining[key]
                continue
            gain = _density(new, attribution)
            if gain > best_gain:
                best, best_gain = key, gain
        if best is None:  # no region left adds enough pixels
            break
        new = remaining.pop(best) & ~covered
        shown[new] = best_gain
        covered |= new
    left = shown == -np.inf
    shown[left] = _density(left, attribution)
    return shown
