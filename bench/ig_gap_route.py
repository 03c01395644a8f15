"""PAIR's saliency library (``saliency.core``, 0.2.1): how many gradient evaluations
its integrated gradients need for each row's completeness gap (|sum of the
attributions - (f(x) - f(baseline))| over |f(x) - f(baseline)|) to fall under a
tolerance: the fewest power-of-two ``x_steps`` that do, searched from START_STEPS
(saliency has no error bound of its own: its user can only try; only that count's
evaluations are counted, the cost of a user who knew it); each row's gap measured against f
from the same session. Prints one JSON line: the steps, the gradient evaluations in
all rows, the largest gap.

    python bench/ig_gap_route.py GRAPH.pb X Y TARGET ROWS.npy TOLERANCE START_STEPS MAX_STEPS [SALIENCY_PATH]
"""

import json
import sys

from peer_route import fewest_steps, imported

graph_path, x_name, y_name, target, rows_path, tolerance, start_steps, max_steps = sys.argv[1:9]
if len(sys.argv) > 9:
    sys.path.append(sys.argv[9])

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import saliency.core as saliency  # noqa: E402

x, y = imported(graph_path, x_name, y_name)
logit = y[:, int(target)]
[gradient] = tf.compat.v1.gradients(logit, [x])
rows = np.load(rows_path)
with tf.compat.v1.Session() as session:
    def call_model(batch, call_model_args=None, expected_keys=None):
        return {saliency.INPUT_OUTPUT_GRADIENTS: session.run(gradient, {x: batch})}

    differences = session.run(logit, {x: rows}) - session.run(logit, {x: np.zeros_like(rows)})
    method = saliency.IntegratedGradients()

    def largest_gap(steps):
        masks = [method.GetMask(row, call_model, x_baseline=np.zeros_like(row), x_steps=steps, batch_size=32)
                 for row in rows]
        return max(abs(float(mask.sum()) - difference) / abs(difference)
                   for mask, difference in zip(masks, differences))

    steps, gap = fewest_steps(largest_gap, int(start_steps), int(max_steps), float(tolerance))
print(json.dumps({"steps": steps, "evaluations": steps * len(rows), "gap": float(gap),
                  "met": bool(gap <= float(tolerance))}))
