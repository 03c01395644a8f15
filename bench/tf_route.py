"""What users would otherwise do: re-import the graph under gradient_override_map."""

import sys

import tensorflow as tf

source, op_type, name, target = sys.argv[1:]
graph_def = tf.compat.v1.GraphDef.FromString(open(source, "rb").read())
graph = tf.Graph()
with graph.as_default(), graph.gradient_override_map({op_type: name}):
    tf.compat.v1.import_graph_def(graph_def, name="")
with open(target, "wb") as stream:
    stream.write(graph.as_graph_def().SerializeToString())
