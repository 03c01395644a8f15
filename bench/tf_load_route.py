"""What TensorFlow takes to load a frozen graph: parse the GraphDef and import it."""

import sys

import tensorflow as tf

graph_def = tf.compat.v1.GraphDef.FromString(open(sys.argv[1], "rb").read())
with tf.Graph().as_default():
    tf.compat.v1.import_graph_def(graph_def, name="")
