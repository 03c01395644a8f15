"""Train a checkpoint that ``graphgrad unfreeze`` wrote of fixtures/binarized_digits.pb,
in a process of its own, as a TF1 user would: restore it, register the gradients
it names, 300 steps of Adam on the digits' training rows. Prints JSON: test accuracy
before and after, and whether each weight that feeds a Sign moved.

    python tests/train_digits.py CHECKPOINT_FOLDER DIGITS.npz
"""

import json
import sys

import numpy as np
import tensorflow as tf

import graphgrad

v1 = tf.compat.v1
SIGN_WEIGHTS = ["dense1/kernel/graphgrad_variable", "dense2/kernel/graphgrad_variable"]


def main(folder: str, digits: str) -> None:
    v1.disable_eager_execution()
    data = np.load(digits)
    x, y, train, test = data["x"], data["y"], data["train"], data["test"]
    graph = tf.Graph()
    with graph.as_default():
        saver = v1.train.import_meta_graph(f"{folder}/model.meta")
        graphgrad.register_gradients(graph)
        labels = v1.placeholder(tf.int64, [None])
        logits = graph.get_tensor_by_name("logits:0")
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        step = v1.train.AdamOptimizer(0.01).minimize(loss)
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), labels), tf.float32))
        weights = [graph.get_tensor_by_name(f"{name}:0") for name in SIGN_WEIGHTS]
        with v1.Session(graph=graph) as session:
            session.run(v1.global_variables_initializer())  # Adam's slots; the weights come next
            saver.restore(session, f"{folder}/model")
            before, initial = session.run(accuracy, {"x:0": x[test], labels: y[test]}), session.run(weights)
            rng = np.random.default_rng(1)
            for _ in range(300):
                batch = rng.choice(train, 64)
                session.run(step, {"x:0": x[batch], labels: y[batch]})
            after, final = session.run(accuracy, {"x:0": x[test], labels: y[test]}), session.run(weights)
    moved = {name: bool(np.any(a != b)) for name, a, b in zip(SIGN_WEIGHTS, initial, final)}
    print(json.dumps({"before": float(before), "after": float(after), "moved": moved}))


if __name__ == "__main__":
    main(*sys.argv[1:])
