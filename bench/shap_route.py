"""SHAP's DeepExplainer on a frozen graph (what graphgrad attribute --method deeplift
computes), as its users run it with TensorFlow 1-style graphs:

    python bench/shap_route.py GRAPH.pb X Y TARGET ROWS.npy OUT.npy [SHAP_PATH]

SHAP_PATH: where ``pip install --target`` put shap, if it is not installed.
"""

import sys

graph_path, x_name, y_name, target, rows_path, out_path = sys.argv[1:7]
if len(sys.argv) > 7:
    sys.path.append(sys.argv[7])

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import shap  # noqa: E402

v1 = tf.compat.v1
v1.disable_eager_execution()
with open(graph_path, "rb") as stream:
    v1.import_graph_def(v1.GraphDef.FromString(stream.read()), name="")
graph = v1.get_default_graph()
x, y = graph.get_tensor_by_name(x_name), graph.get_tensor_by_name(y_name)
rows = np.load(rows_path)
with v1.Session() as session:
    explainer = shap.DeepExplainer((x, y[:, int(target): int(target) + 1]), np.zeros((1,) + rows.shape[1:],
                                                                                  rows.dtype), session=session)
    values = explainer.shap_values(rows, check_additivity=False)
np.save(out_path, np.asarray(values).reshape(rows.shape))
