"""What the peers' routes (shap_route.py, saliency_route.py, ...) share: their
command line, the peer found where ``pip install --target`` put it, the frozen graph
imported as their users import it, in a TF1 default graph, PAIR's saliency run on
it as its users run it, and the search for the fewest steps a peer's integrated
gradients need.

    python bench/PEER_route.py GRAPH.pb X Y TARGET ROWS.npy OUT.npy [PEER_PATH]
"""

import sys


def arguments() -> tuple:
    """``(graph path, x name, y name, target, rows path, out path)``; a PEER_PATH
    goes on ``sys.path`` (after what is installed)."""
    graph_path, x_name, y_name, target, rows_path, out_path = sys.argv[1:7]
    if len(sys.argv) > 7:
        sys.path.append(sys.argv[7])
    return graph_path, x_name, y_name, int(target), rows_path, out_path


def imported(graph_path: str, x_name: str, y_name: str) -> tuple:
    """x and y of the frozen graph, imported into the default graph, graph mode on."""
    import tensorflow as tf

    v1 = tf.compat.v1
    v1.disable_eager_execution()
    with open(graph_path, "rb") as stream:
        v1.import_graph_def(v1.GraphDef.FromString(stream.read()), name="")
    graph = v1.get_default_graph()
    return graph.get_tensor_by_name(x_name), graph.get_tensor_by_name(y_name)


def fewest_steps(largest_gap, start: int, most: int, tolerance: float) -> tuple[int, float]:
    """The fewest power-of-two steps (times ``start``) at which ``largest_gap(steps)``
    is at most ``tolerance``, searched by halving from ``start`` while it is and
    doubling while it is not, up to ``most``: ``(steps, its gap)``."""
    steps, gap = start, largest_gap(start)
    if gap <= tolerance:
        while steps > 1 and (fewer := largest_gap(steps // 2)) <= tolerance:
            steps, gap = steps // 2, fewer
        return steps, gap
    while gap > tolerance and steps < most:
        steps *= 2
        gap = largest_gap(steps)
    return steps, gap


def saliency_masks(method: str, baseline: bool, image_maps: bool = False, **settings) -> None:
    """PAIR's saliency ``method`` (a class of ``saliency.core``) on each row, as its
    users run it: its call_model_function a TF1 session's gradient of the target's
    logit, ``GetMask(row, ..., **settings)`` (and a zero ``x_baseline`` if
    ``baseline``); the masks saved to OUT.npy (maps of (H, W) given a channel axis
    of one if ``image_maps``)."""
    graph_path, x_name, y_name, target, rows_path, out_path = arguments()
    import numpy as np
    import tensorflow as tf

    import saliency.core as saliency

    x, y = imported(graph_path, x_name, y_name)
    [gradient] = tf.compat.v1.gradients(y[:, target], [x])
    rows = np.load(rows_path)
    with tf.compat.v1.Session() as session:
        def call_model(batch, call_model_args=None, expected_keys=None):
            return {saliency.INPUT_OUTPUT_GRADIENTS: session.run(gradient, {x: batch})}

        masker = getattr(saliency, method)()
        masks = [masker.GetMask(row, call_model, **({"x_baseline": np.zeros_like(row)} if baseline else {}),
                                **settings) for row in rows]
    masks = np.asarray(masks, dtype=np.float32)
    np.save(out_path, masks[..., None] if image_maps else masks)
