"""PAIR's saliency library (``saliency.core``, 0.2.1) on a frozen graph: Guided IG
with its defaults (200 steps, fraction 0.25, max_dist 0.02) from a zero baseline,
row by row (each step needs the last one's gradient: one row's gradient a call),
its call_model_function a TF1 session's gradient of the target's logit:

    python bench/saliency_guided_route.py GRAPH.pb X Y TARGET ROWS.npy OUT.npy [SALIENCY_PATH]

SALIENCY_PATH: where ``pip install --target`` put saliency, if it is not installed.
saliency 0.2.1 calls ``np.quantile(..., interpolation=)``, which numpy 2.4 no
longer takes: the route passes it on as ``method=``, the same quantile.
"""

import numpy as np

from peer_route import saliency_masks

_quantile = np.quantile
np.quantile = lambda a, q, interpolation="linear", **rest: _quantile(a, q, method=interpolation, **rest)
saliency_masks("GuidedIG", baseline=True)
