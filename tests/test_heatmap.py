"""attribute --image's picture as a person sees it, by its pixels: the input, the map,
the overlay and a colour bar with the row's scale, one line of panels per row."""

import io

import numpy as np
import pytest

from graphgrad.jobs.heatmap import BAR_WIDTH, LABEL_WIDTH, MIN_SIDE, PAD, TITLE_HEIGHT, heatmap_image

Image = pytest.importorskip("PIL.Image", reason="--image needs Pillow: pip install 'graphgrad[image]'")


def _picture(attributions, inputs=None):
    return np.asarray(Image.open(io.BytesIO(heatmap_image(attributions, "PNG", inputs))).convert("RGB")).astype(int)


def test_each_row_shows_the_input_the_map_the_overlay_and_its_scale():
    inputs = np.zeros((2, 8, 8, 1))
    inputs[:, 2:6, 3:5] = 1.0  # a bright bar in a dark image
    attributions = np.zeros((2, 8, 8, 1))
    attributions[0, 0, 0] = 2.0  # row 0: one positive corner
    attributions[1, 7, 7] = -0.5  # row 1: one negative corner
    pixels = _picture(attributions, inputs)
    side = MIN_SIDE // 8 * 8
    assert pixels.shape == (TITLE_HEIGHT + 2 * (side + PAD), 3 * (side + PAD) + BAR_WIDTH + LABEL_WIDTH, 3)
    top, step = TITLE_HEIGHT, side + PAD
    centre = lambda row, column, y, x: tuple(pixels[top + row * step + y, column * step + x])  # noqa: E731
    assert centre(0, 0, side // 2, side // 2) == (255, 255, 255) and centre(0, 0, 2, 2) == (0, 0, 0)  # the input
    assert centre(0, 1, 2, 2) == (255, 0, 0) and centre(0, 1, side // 2, side // 2) == (255, 255, 255)  # the map
    assert centre(1, 1, side - 2, side - 2) == (0, 0, 255)  # row 1's own scale: its -0.5 is full blue
    assert centre(0, 2, 2, 2) == (255, 0, 0) and centre(0, 2, side // 2, side // 2) == (255, 255, 255)  # overlay
    bar = 3 * step + BAR_WIDTH // 2
    near = lambda pixel, colour: np.abs(pixel - np.array(colour)).max() <= 8  # noqa: E731
    assert near(pixels[top + 1, bar], (255, 0, 0)) and near(pixels[top + side - 2, bar], (0, 0, 255))
    assert near(pixels[top + side // 2, bar], (255, 255, 255))
    labels = pixels[top:top + side, bar + BAR_WIDTH:]
    assert (labels < 128).any()  # the scale's numbers are written beside the bar


def test_without_image_inputs_the_map_and_its_bar_alone():
    pixels = _picture(np.ones((1, 4, 4, 2)), np.ones((1, 4, 4, 2)))  # two channels: not an image to show
    side = MIN_SIDE // 4 * 4
    assert pixels.shape == (TITLE_HEIGHT + side + PAD, side + PAD + BAR_WIDTH + LABEL_WIDTH, 3)
    assert tuple(pixels[TITLE_HEIGHT + 5, 5]) == (255, 0, 0)
