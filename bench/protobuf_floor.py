"""The protobuf floor: parse, set the attribute on the selected nodes, serialize, write.
With only a source argument: parse alone (the floor for `graphgrad ops`)."""

import sys

from tensorboard.compat.proto import graph_pb2

graph_def = graph_pb2.GraphDef.FromString(open(sys.argv[1], "rb").read())
if len(sys.argv) > 2:
    source, op_type, name, target = sys.argv[1:]
    for node in graph_def.node:
        if node.op == op_type:
            node.attr["_gradient_op_type"].s = name.encode()
    with open(target, "wb") as stream:
        stream.write(graph_def.SerializeToString())
