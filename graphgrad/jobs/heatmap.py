"""Pictures of image attributions, as PNG or JPEG (Pillow, imported when called).

One line of panels per row of the input: the input itself, the attribution map
(the attributions summed over the channels: red positive, blue negative, white at
zero, on a scale symmetric about zero), the map laid over the input (its
strength as opacity, so the input shows where the map is near zero), and the
colour bar with the row's scale. Each row has a scale of its own, written on its bar.
"""

import os
from typing import Any

from ..errors import UsageError

MIN_SIDE = 128  # pixels: a small image's panels are enlarged (nearest neighbour) to about this
PAD = 6  # pixels between panels and between rows
BAR_WIDTH = 14  # the colour bar's strip
LABEL_WIDTH = 64  # room for the bar's numbers
TITLE_HEIGHT = 14  # the panels' titles above the first row
IMAGE_FORMATS = {".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG"}  # a file's ending -> what is written there
TITLES = ("input", "attributions", "overlay")


def image_format(path: str) -> str:
    """The format a picture is written in at ``path``, by its ending; refused
    (before any work) unless graphgrad writes that format."""
    ending = os.path.splitext(path)[1].lower()
    if ending not in IMAGE_FORMATS:
        raise UsageError(f"--image {path}: graphgrad writes .png or .jpg there; name a file ending in one of them")
    return IMAGE_FORMATS[ending]


def each_target_a_row(attributions: Any, inputs: Any, ranked: bool) -> tuple[Any, Any]:
    """Attributions and the inputs they are of, one row of the picture each: with
    several targets a row (shape (rows, K, *row)) each target's map is a row of
    its own, beside its input."""
    import numpy as np

    if not ranked:
        return attributions, inputs
    attributions = np.asarray(attributions)
    return (attributions.reshape((-1,) + attributions.shape[2:]),
            np.repeat(np.asarray(inputs), attributions.shape[1], axis=0))


def heatmap_image(attributions: Any, image_format: str = "PNG", inputs: Any = None) -> bytes:
    """The picture of image-shaped attributions (N, H, W, C) described above; without
    ``inputs`` (or where they are not images of the attributions' height and width),
    the map and its colour bar alone."""
    import io

    import numpy as np

    try:
        from PIL import Image, ImageDraw
    except ImportError:
        raise UsageError("--image needs Pillow: pip install 'graphgrad[image]' (or pip install pillow)") from None
    values = np.asarray(attributions, dtype=np.float64)
    if values.ndim != 4:
        raise UsageError(f"--image draws attributions of images, shaped (N, H, W, C); these are {list(values.shape)}")
    maps = values.sum(axis=3)
    shown = _as_images(inputs, maps.shape)
    count, height, width = maps.shape
    scale = max(1, MIN_SIDE // max(height, width))
    side_h, side_w = height * scale, width * scale
    panels = 3 if shown is not None else 1
    canvas = Image.new("RGB", (panels * (side_w + PAD) + BAR_WIDTH + LABEL_WIDTH,
                               TITLE_HEIGHT + count * (side_h + PAD)), "white")
    draw = ImageDraw.Draw(canvas)
    for column, title in enumerate(TITLES if shown is not None else TITLES[1:2]):
        draw.text((column * (side_w + PAD), 0), title, fill="black")
    for index, heat in enumerate(maps):
        top = TITLE_HEIGHT + index * (side_h + PAD)
        peak = float(np.abs(heat).max())
        level = heat / peak if peak > 0 else heat
        coloured = _diverging(level)
        row = [coloured] if shown is None else [shown[index], coloured, _overlay(shown[index], coloured, level)]
        for column, panel in enumerate(row):
            enlarged = (panel * 255).round().astype(np.uint8).repeat(scale, axis=0).repeat(scale, axis=1)
            canvas.paste(Image.fromarray(enlarged, "RGB"), (column * (side_w + PAD), top))
        _colour_bar(canvas, draw, panels * (side_w + PAD), top, side_h, peak)
    stream = io.BytesIO()
    canvas.save(stream, format=image_format)
    return stream.getvalue()


def _as_images(inputs: Any, shape: tuple) -> Any:
    """The inputs as RGB images in [0, 1], each scaled by its own range (grey for one
    channel), or None where they are not images of the maps' shape."""
    import numpy as np

    if inputs is None:
        return None
    rows = np.asarray(inputs, dtype=np.float64)
    if rows.ndim != 4 or rows.shape[:3] != shape or rows.shape[3] not in (1, 3):
        return None
    low = rows.min(axis=(1, 2, 3), keepdims=True)
    high = rows.max(axis=(1, 2, 3), keepdims=True)
    scaled = (rows - low) / np.where(high > low, high - low, 1.0)
    return np.repeat(scaled, 3, axis=3) if rows.shape[3] == 1 else scaled


def _diverging(level: Any) -> Any:
    """Levels in [-1, 1] as RGB in [0, 1]: blue at -1, white at 0, red at 1."""
    import numpy as np

    red = np.where(level < 0, 1 + level, 1.0)
    blue = np.where(level > 0, 1 - level, 1.0)
    green = 1 - np.abs(level)
    return np.stack([red, green, blue], axis=-1)


def _overlay(image: Any, coloured: Any, level: Any) -> Any:
    """The map over the input in grey: opaque where the map is strongest."""
    import numpy as np

    grey = np.repeat(image.mean(axis=-1, keepdims=True), 3, axis=-1)
    alpha = np.abs(level)[..., None]
    return grey * (1 - alpha) + coloured * alpha


def _colour_bar(canvas: Any, draw: Any, left: int, top: int, height: int, peak: float) -> None:
    """A vertical bar from +peak (red, top) through 0 (white) to -peak (blue), with its numbers."""
    import numpy as np
    from PIL import Image

    levels = np.linspace(1, -1, height)[:, None] * np.ones((1, BAR_WIDTH))
    bar = (_diverging(levels) * 255).round().astype(np.uint8)
    canvas.paste(Image.fromarray(bar, "RGB"), (left, top))
    draw.rectangle([left, top, left + BAR_WIDTH - 1, top + height - 1], outline="black")
    for text, y in ((f"{peak:+.2g}", top), ("0", top + height // 2 - 5), (f"{-peak:+.2g}", top + height - 11)):
        draw.text((left + BAR_WIDTH + 3, y), text, fill="black")
