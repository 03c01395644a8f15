"""PAIR's saliency library (``saliency.core``, 0.2.1) on a frozen graph: integrated
gradients as its users run it, row by row, its call_model_function a TF1 session's
gradient of the target's logit:

    python bench/saliency_route.py GRAPH.pb X Y TARGET ROWS.npy OUT.npy [SALIENCY_PATH]

SALIENCY_PATH: where ``pip install --target`` put saliency, if it is not installed.
"""

from peer_route import arguments, imported

graph_path, x_name, y_name, target, rows_path, out_path = arguments()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import saliency.core as saliency  # noqa: E402

x, y = imported(graph_path, x_name, y_name)
[gradient] = tf.compat.v1.gradients(y[:, target], [x])
rows = np.load(rows_path)
with tf.compat.v1.Session() as session:
    def call_model(batch, call_model_args=None, expected_keys=None):
        return {saliency.INPUT_OUTPUT_GRADIENTS: session.run(gradient, {x: batch})}

    method = saliency.IntegratedGradients()
    masks = [method.GetMask(row, call_model, x_baseline=np.zeros_like(row), x_steps=50, batch_size=50) for row in rows]
np.save(out_path, np.asarray(masks, dtype=np.float32))
