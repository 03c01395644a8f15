"""Warm calls on one CNN, one tool per process (bench/run.py's warm case):

    python bench/warm_route.py TOOL MODEL.keras MODEL.pb CAM_LAYER ROWS.npy OUT.npy [PEER_PATH]

MODEL.pb is MODEL.keras frozen (x: ``x``, logits: ``logits``); CAM_LAYER names the
Keras layer whose output graphgrad's Grad-CAM takes by default (the last 4-D tensor
after a convolution). TOOL is one of
  session               a bare session.run of tf.gradients(logits[:, 0], x) on the frozen graph
  graphgrad             graphgrad.Explainer(MODEL.pb, "gradient").explain(rows, 0)
  graphgrad-gradcam     the same with "gradcam", each row's predicted class (found
                        in each call); graphgrad-layercam: with "layercam"
  graphgrad=METHOD      the same with METHOD (innvestigate's counterparts); METHOD@LAYER:
                        attributed to the frozen graph's tensor of that Keras layer
  tf-keras-vis          tf_keras_vis.saliency.Saliency on the Keras model
  tf-keras-vis-gradcam  tf_keras_vis.gradcam.Gradcam on CAM_LAYER, the same classes
                        (found once, before the calls); tf-keras-vis-layercam:
                        tf_keras_vis.layercam.Layercam, the same way

Prints one JSON line: the first call's seconds (loading and building included,
from the process start) and the median of the warm calls. OUT.npy gets the first
call's attributions (tf-keras-vis' saliency: the largest |dy/dx| over the
channels, scaled to [0, 1] per row; its CAMs: the map before its own resizing
and scaling, resized bilinearly by TensorFlow as graphgrad resizes, to compare;
the others: what they return).
"""

import json
import statistics
import sys
import time

START = time.perf_counter()
WARM_CALLS = 50
CAMS = ("gradcam", "layercam")


def timed(call, compared=None) -> dict:
    """The first call of ``call`` (timed from the process start), and the median of
    the warm ones; OUT.npy gets the first call's result, or ``compared()``'s."""
    import numpy as np

    first = call()
    first_seconds = time.perf_counter() - START
    warm = []
    for _ in range(WARM_CALLS):
        started = time.perf_counter()
        call()
        warm.append(time.perf_counter() - started)
    np.save(sys.argv[6], np.asarray(first if compared is None else compared()))
    return {"first": first_seconds, "warm": statistics.median(warm)}


def session_route(graph_path: str, rows):
    import tensorflow as tf

    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        with open(graph_path, "rb") as stream:
            v1.import_graph_def(v1.GraphDef.FromString(stream.read()), name="")
        x = graph.get_tensor_by_name("x:0")
        [gradient] = v1.gradients(graph.get_tensor_by_name("logits:0")[:, 0], [x])
    session = v1.Session(graph=graph)
    return lambda: session.run(gradient, {x: rows})


def frozen_layer(graph_path: str, layer: str) -> str:
    """The frozen graph's op of the Keras layer ``layer``: the last one in its name
    scope (which Keras 3's tracing may suffix, ``pool1_1``)."""
    import re

    import graphgrad

    scope = re.compile(rf"(^|/){re.escape(layer)}(_\d+)?/")
    return [node.name for node in graphgrad.iter_nodes(graphgrad.read_model(graph_path))
            if scope.search(node.name)][-1]


def graphgrad_route(graph_path: str, rows, method: str):
    import graphgrad

    method, _, layer = method.partition("@")
    explainer = graphgrad.Explainer(graph_path, method, x="x", y="logits",
                                    **({"layer": frozen_layer(graph_path, layer)} if layer else {}))
    target = "predicted" if method in CAMS else 0
    return lambda: explainer.explain(rows, target)[0]


def keras_vis_route(keras_path: str, rows, cam: str | None, layer: str):
    import keras
    from tf_keras_vis.gradcam import Gradcam
    from tf_keras_vis.layercam import Layercam
    from tf_keras_vis.saliency import Saliency
    from tf_keras_vis.utils.scores import CategoricalScore

    model = keras.models.load_model(keras_path)
    if cam:  # each row's predicted class (a random net's class 0 has no positive evidence in most rows)
        kind = {"gradcam": Gradcam, "layercam": Layercam}[cam]
        explainer, score = kind(model, clone=False), CategoricalScore(list(model.predict(rows).argmax(axis=1)))

        def raw_cam_resized():  # its map before its own resizing (scipy's zoom) and scaling, resized as graphgrad's
            import tensorflow as tf

            cam = explainer(score, rows, penultimate_layer=layer, seek_penultimate_conv_layer=False,
                            expand_cam=False, normalize_cam=False)
            return tf.image.resize(cam[..., None], rows.shape[1:3], method="bilinear").numpy()

        # the layer itself (tf-keras-vis would otherwise step back to the convolution before it)
        return lambda: explainer(score, rows, penultimate_layer=layer, seek_penultimate_conv_layer=False), \
            raw_cam_resized
    explainer, score = Saliency(model, clone=False), CategoricalScore([0] * len(rows))
    return lambda: explainer(score, rows), None


def main():
    tool, keras_path, graph_path, layer, rows_path = sys.argv[1:6]
    if len(sys.argv) > 7:
        sys.path.append(sys.argv[7])
    import numpy as np

    rows = np.load(rows_path)
    compared = None
    if tool == "session":
        call = session_route(graph_path, rows)
    elif tool.startswith("graphgrad="):
        call = graphgrad_route(graph_path, rows, tool.split("=", 1)[1])
    elif tool.startswith("graphgrad"):
        call = graphgrad_route(graph_path, rows, tool.split("-")[1] if "-" in tool else "gradient")
    else:
        call, compared = keras_vis_route(keras_path, rows, tool.split("-")[-1] if tool.endswith(CAMS) else None, layer)
    print(json.dumps(timed(call, compared)))


if __name__ == "__main__":
    main()
