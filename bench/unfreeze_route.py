"""What a user would write without graphgrad to make a frozen graph's weights
trainable: read the GraphDef, make a variable of each float constant of at least
two entries (graphgrad unfreeze's default weights are a subset of these), import
the graph with the variables in the constants' place, save a TF1 checkpoint. The
leanest such script: the variables' initial values are fed to their initialisers
(placeholders), not held in the graph as constants a second time, and the
constants are cleared from the GraphDef before it is imported.

    python bench/unfreeze_route.py FROZEN.pb OUT_DIR [MIN_SIZE]

MIN_SIZE (default 2): the fewest entries a constant has to become a variable, as
unfreeze's --min-size.
"""

import os
import sys

import tensorflow as tf

v1 = tf.compat.v1


def main(source: str, out_dir: str, min_size: str = "2") -> None:
    v1.disable_eager_execution()
    with open(source, "rb") as stream:
        graph_def = v1.GraphDef.FromString(stream.read())
    constants = {node.name: tf.make_ndarray(node.attr["value"].tensor) for node in graph_def.node
                 if node.op == "Const" and node.attr["dtype"].type == tf.float32.as_datatype_enum}
    weights = {name: value for name, value in constants.items() if value.size >= int(min_size)}
    for node in graph_def.node:  # their values live on in `weights` only; the imported graph reads the variables
        if node.name in weights:
            node.attr["value"].tensor.ClearField("tensor_content")
    with tf.Graph().as_default():
        initial = {name: v1.placeholder(tf.float32, value.shape) for name, value in weights.items()}
        variables = {name: v1.Variable(initial[name], name=f"{name}/variable") for name in weights}
        reads = {f"{name}:0": variable.value() for name, variable in variables.items()}
        tf.import_graph_def(graph_def, input_map=reads, name="")
        with v1.Session() as session:
            session.run(v1.global_variables_initializer(), {initial[name]: value for name, value in weights.items()})
            os.makedirs(out_dir, exist_ok=True)
            v1.train.Saver(list(variables.values())).save(session, os.path.join(out_dir, "model"))


if __name__ == "__main__":
    main(*sys.argv[1:])
