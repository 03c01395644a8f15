"""PAIR's saliency library (``saliency.core``, 0.2.1) on a frozen graph: Blur IG with
its defaults (max_sigma 50, 100 steps, grad_step 0.01), row by row, each row's 100
steps in one batch, its call_model_function a TF1 session's gradient of the
target's logit:

    python bench/saliency_blur_route.py GRAPH.pb X Y TARGET ROWS.npy OUT.npy [SALIENCY_PATH]

SALIENCY_PATH: where ``pip install --target`` put saliency, if it is not installed.
"""

from peer_route import saliency_masks

saliency_masks("BlurIG", baseline=False, batch_size=100)
