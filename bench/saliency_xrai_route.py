"""PAIR's saliency library (``saliency.core``, 0.2.1) on a frozen graph: XRAI with
its defaults (integrated gradients of 100 steps from each row's min and max, six
Felzenszwalb scales, the full algorithm), 100 points a call (``batch_size=100``:
each baseline's path in one run), row by row, its call_model_function a TF1
session's gradient of the target's logit:

    python bench/saliency_xrai_route.py GRAPH.pb X Y TARGET ROWS.npy OUT.npy [SALIENCY_PATH]

SALIENCY_PATH: where ``pip install --target`` put saliency, if it is not installed.
Its maps (H, W) are saved as graphgrad writes them, (N, H, W, 1).
"""

from peer_route import saliency_masks

saliency_masks("XRAI", baseline=False, image_maps=True, batch_size=100)
