"""Heat maps of image attributions, as PNG or JPEG (Pillow, imported when called)."""

import os
from typing import Any

from ..errors import UsageError

MIN_SIDE = 128  # pixels: a small image's map is enlarged (nearest neighbour) to about this
PAD = 2  # pixels between the maps of several rows
IMAGE_FORMATS = {".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG"}  # a file's ending -> what is written there


def image_format(path: str) -> str:
    """The format a heat map is written in at ``path``, by its ending; refused
    (before any work) unless graphgrad writes that format."""
    ending = os.path.splitext(path)[1].lower()
    if ending not in IMAGE_FORMATS:
        raise UsageError(f"--image {path}: graphgrad writes .png or .jpg there; name a file ending in one of them")
    return IMAGE_FORMATS[ending]


def heatmap_image(attributions: Any, image_format: str = "PNG") -> bytes:
    """An image (PNG or JPEG) of image-shaped attributions (N, H, W, C): each row's
    sum over its channels, red where it is positive, blue where negative, white at
    zero, on one symmetric scale per row; several rows make a grid."""
    import numpy as np

    try:
        from PIL import Image
    except ImportError:
        raise UsageError("--image needs Pillow: pip install 'graphgrad[image]' (or pip install pillow)") from None
    values = np.asarray(attributions, dtype=np.float64)
    if values.ndim != 4:
        raise UsageError(f"--image draws attributions of images, shaped (N, H, W, C); these are {list(values.shape)}")
    maps = values.sum(axis=3)
    count, height, width = maps.shape
    scale = max(1, MIN_SIDE // max(height, width))
    columns = int(np.ceil(np.sqrt(count)))
    rows = int(np.ceil(count / columns))
    cell_h, cell_w = height * scale, width * scale
    canvas = np.full((rows * (cell_h + PAD) - PAD, columns * (cell_w + PAD) - PAD, 3), 255, np.uint8)
    for index, heat in enumerate(maps):
        peak = np.abs(heat).max()
        level = heat / peak if peak > 0 else heat
        red = np.where(level < 0, 1 + level, 1.0)  # white to blue below zero
        blue = np.where(level > 0, 1 - level, 1.0)  # white to red above
        green = 1 - np.abs(level)
        image = (np.stack([red, green, blue], axis=-1) * 255).round().astype(np.uint8)
        image = image.repeat(scale, axis=0).repeat(scale, axis=1)
        top, left = (index // columns) * (cell_h + PAD), (index % columns) * (cell_w + PAD)
        canvas[top:top + cell_h, left:left + cell_w] = image
    import io

    stream = io.BytesIO()
    Image.fromarray(canvas, "RGB").save(stream, format=image_format)
    return stream.getvalue()
