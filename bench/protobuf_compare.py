"""The floor for `graphgrad diff`: parse both binary GraphDefs with protobuf and compare them."""

import sys

from tensorboard.compat.proto import graph_pb2

first, second = (graph_pb2.GraphDef.FromString(open(path, "rb").read()) for path in sys.argv[1:3])
print(first == second)
