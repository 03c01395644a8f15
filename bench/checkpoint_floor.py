"""The floor under any unfreeze: a frozen graph's float constants of at least
MIN_SIZE entries written as a TensorFlow checkpoint, and nothing else (eager
variables and tf.train.Checkpoint: no graph imported, no meta graph, so nothing
can train from it).

    python bench/checkpoint_floor.py FROZEN.pb OUT_DIR [MIN_SIZE]
"""

import os
import sys

import tensorflow as tf


def main(source: str, out_dir: str, min_size: str = "2") -> None:
    with open(source, "rb") as stream:
        graph_def = tf.compat.v1.GraphDef.FromString(stream.read())
    variables = {}
    for node in graph_def.node:
        if node.op == "Const" and node.attr["dtype"].type == tf.float32.as_datatype_enum:
            value = tf.make_ndarray(node.attr["value"].tensor)
            if value.size >= int(min_size):
                variables[f"v{len(variables)}"] = tf.Variable(value)
    os.makedirs(out_dir, exist_ok=True)
    tf.train.Checkpoint(**variables).write(os.path.join(out_dir, "model"))


if __name__ == "__main__":
    main(*sys.argv[1:])
