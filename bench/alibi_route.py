"""alibi 0.9.6's IntegratedGradients on the bench's digits CNN, run by the Python of
the virtualenv the bench makes for the peers that need TensorFlow below 2.15 (alibi
pins numpy below 2, and its TensorFlow explainers TensorFlow below 2.15):

    VENV/bin/python bench/alibi_route.py CNN.npz ROWS.npy OUT_FOLDER

On the CNN rebuilt as innvestigate_route.py rebuilds it, with the midpoint rule
(``method="riemann_middle"``, graphgrad's quadrature) over 50 steps from a zero
baseline, all rows' steps in one batch, attributed to x and, with ``layer=``, to
the first pooling layer's values; OUT_FOLDER/alibi_<graphgrad's method>.npy gets the
attributions of logits[:, 0]; prints one JSON line: graphgrad's method (``@LAYER``:
at that Keras layer) -> the median seconds of a warm call.
"""

import json
import os
import statistics
import sys
import time

from innvestigate_route import rebuilt

METHOD = "integrated_gradients(steps=50)"
LAYER = "pool1"
WARM_CALLS = 5


def main():
    weights_path, rows_path, out = sys.argv[1:4]
    import numpy as np
    from alibi.explainers import IntegratedGradients

    rows, model = np.load(rows_path), rebuilt(weights_path)
    warm = {}
    for method, layer in ((METHOD, None), (f"{METHOD}@{LAYER}", model.get_layer(LAYER))):
        explainer = IntegratedGradients(model, layer=layer, n_steps=50, method="riemann_middle",
                                        internal_batch_size=len(rows) * 50)
        np.save(os.path.join(out, f"alibi_{method}.npy"), explainer.explain(rows, target=0).attributions[0])
        calls = []
        for _ in range(WARM_CALLS):
            started = time.perf_counter()
            explainer.explain(rows, target=0)
            calls.append(time.perf_counter() - started)
        warm[method] = statistics.median(calls)
    print(json.dumps(warm))


if __name__ == "__main__":
    main()
