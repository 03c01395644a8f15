"""The deletion curve of attributions (Petsiuk et al., 2018), one code for every
tool's: for each row, the entries of x are set to zero in the order of their
attributions, largest first, and the target's softmax probability is read after
each of STEPS equal shares; the figure is the area under that curve (the mean of
its trapezoids, on [0, 1]), over the rows. Lower: the attributions found what the
output rests on.

    python bench/deletion_auc.py GRAPH.pb X Y TARGET ROWS.npy ATTRIBUTIONS.npy...

A map of one channel (XRAI's) ranks a pixel's channels together. Also each file's
completeness gap, from the same runs: the largest, over the rows, of
|sum of the attributions - (y(x) - y(0))| / |y(x) - y(0)| for the target's logit
(the property DeepLIFT and integrated gradients promise against a zero baseline).
Prints one JSON object: attributions file -> [area, completeness gap].
"""

import json
import sys

import numpy as np
import tensorflow as tf

STEPS = 16
v1 = tf.compat.v1


def areas(graph_path: str, x_name: str, y_name: str, target: int, rows: np.ndarray, attributions: list) -> dict:
    v1.disable_eager_execution()
    with open(graph_path, "rb") as stream:
        graph_def = v1.GraphDef.FromString(stream.read())
    graph = tf.Graph()
    with graph.as_default():
        v1.import_graph_def(graph_def, name="")
        x = graph.get_tensor_by_name(x_name)
        logit = graph.get_tensor_by_name(y_name)[:, target]
        probability = tf.nn.softmax(graph.get_tensor_by_name(y_name))[:, target]
    flat = rows.reshape(len(rows), -1)
    found = {}
    with v1.Session(graph=graph) as session:
        difference = (session.run(logit, {x: rows}).astype(np.float64)
                      - session.run(logit, {x: np.zeros_like(rows)}).astype(np.float64))
        for path in attributions:
            found_here = np.load(path)
            sums = found_here.reshape(len(rows), -1).astype(np.float64).sum(axis=1)
            gap = float(np.max(np.abs(sums - difference) / np.maximum(np.abs(difference), 1e-12)))
            # a map of one channel (XRAI's, a CAM's) ranks each pixel's channels together
            ranked = np.broadcast_to(found_here, rows.shape)
            order = np.argsort(-ranked.reshape(len(rows), -1), axis=1, kind="stable")
            curve = []
            for step in range(STEPS + 1):
                deleted = flat.copy()
                cut = order[:, : flat.shape[1] * step // STEPS]
                np.put_along_axis(deleted, cut, 0.0, axis=1)
                curve.append(session.run(probability, {x: deleted.reshape(rows.shape)}))
            curve = np.asarray(curve)  # (steps + 1, rows)
            found[path] = [float(((curve[1:] + curve[:-1]) / 2).mean()), gap]
    return found


if __name__ == "__main__":
    graph_path, x_name, y_name, target, rows_path, *attributions = sys.argv[1:]
    print(json.dumps(areas(graph_path, x_name, y_name, int(target), np.load(rows_path), attributions)))
