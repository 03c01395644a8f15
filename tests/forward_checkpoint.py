"""Run a checkpoint that ``graphgrad unfreeze`` wrote, in a process of its own, as a
TF1 user loads it (import_meta_graph, register_gradients, Saver.restore), and save
the tensors it computes.

    python tests/forward_checkpoint.py CHECKPOINT_FOLDER FEEDS.npz OUT.npz TENSOR...
"""

import sys

import numpy as np
import tensorflow as tf

import graphgrad

v1 = tf.compat.v1


def main(folder: str, feeds: str, out: str, *fetches: str) -> None:
    v1.disable_eager_execution()
    given = np.load(feeds)
    graph = tf.Graph()
    with graph.as_default():
        saver = v1.train.import_meta_graph(f"{folder}/model.meta")
        graphgrad.register_gradients(graph)
        with v1.Session(graph=graph) as session:
            saver.restore(session, f"{folder}/model")
            values = session.run(list(fetches), {name: given[name] for name in given})
    np.savez(out, *values)


if __name__ == "__main__":
    main(*sys.argv[1:])
