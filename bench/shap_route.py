"""SHAP's DeepExplainer on a frozen graph (what graphgrad attribute --method deeplift
computes), as its users run it with TensorFlow 1-style graphs:

    python bench/shap_route.py GRAPH.pb X Y TARGET ROWS.npy OUT.npy [SHAP_PATH]

SHAP_PATH: where ``pip install --target`` put shap, if it is not installed.
"""

from peer_route import arguments, imported

graph_path, x_name, y_name, target, rows_path, out_path = arguments()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import shap  # noqa: E402

x, y = imported(graph_path, x_name, y_name)
rows = np.load(rows_path)
with tf.compat.v1.Session() as session:
    explainer = shap.DeepExplainer((x, y[:, target: target + 1]), np.zeros((1,) + rows.shape[1:], rows.dtype),
                                   session=session)
    values = explainer.shap_values(rows, check_additivity=False)
np.save(out_path, np.asarray(values).reshape(rows.shape))
