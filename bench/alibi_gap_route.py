"""alibi 0.9.6's IntegratedGradients, as its users run it (its default quadrature,
Gauss-Legendre), on the bench's MobileNetV2 rebuilt in the Keras of TensorFlow 2.14
from the weights of ``mobilenet.keras`` (alibi pins TensorFlow below 2.15): how many
steps it needs for each row's completeness gap to fall under a tolerance: the
fewest power-of-two ``n_steps`` that do, searched from START_STEPS (only that
count's evaluations counted).
Prints one JSON line: the steps, the gradient evaluations in all rows, the largest
gap, and f(x) - f(baseline) of each row (to check that the weights carried over).

    VENV/bin/python bench/alibi_gap_route.py WEIGHTS.npz ROWS.npy TARGET TOLERANCE START_STEPS MAX_STEPS
"""

import json
import sys

from peer_route import fewest_steps


def main():
    weights_path, rows_path, target, tolerance, start_steps, max_steps = sys.argv[1:7]
    import numpy as np
    import tensorflow as tf
    from alibi.explainers import IntegratedGradients

    model = tf.keras.applications.MobileNetV2(weights=None, classifier_activation=None)
    with np.load(weights_path) as stored:
        model.set_weights([stored[f"arr_{index}"] for index in range(len(stored.files))])
    rows = np.load(rows_path)
    differences = (model(rows).numpy() - model(np.zeros_like(rows)).numpy())[:, int(target)]

    def largest_gap(steps):
        explainer = IntegratedGradients(model, n_steps=steps, internal_batch_size=64)
        attributions = explainer.explain(rows, target=int(target)).attributions[0]
        return max(abs(float(row.sum()) - float(difference)) / abs(float(difference))
                   for row, difference in zip(attributions, differences))

    steps, gap = fewest_steps(largest_gap, int(start_steps), int(max_steps), float(tolerance))
    print(json.dumps({"steps": steps, "evaluations": steps * len(rows), "gap": gap, "met": gap <= float(tolerance),
                      "differences": [float(d) for d in differences]}))


if __name__ == "__main__":
    main()
