"""PAIR's saliency library (``saliency.core``, 0.2.1) on a frozen graph: integrated
gradients as its users run it, row by row, its call_model_function a TF1 session's
gradient of the target's logit:

    python bench/saliency_route.py GRAPH.pb X Y TARGET ROWS.npy OUT.npy [SALIENCY_PATH]

SALIENCY_PATH: where ``pip install --target`` put saliency, if it is not installed.
"""

from peer_route import saliency_masks

saliency_masks("IntegratedGradients", baseline=True, x_steps=50, batch_size=50)
