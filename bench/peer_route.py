"""What the peers' routes (shap_route.py, saliency_route.py, ...) share: their
command line, the peer found where ``pip install --target`` put it, the frozen graph
imported as their users import it, in a TF1 default graph, and the search for the
fewest steps a peer's integrated gradients need.

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
