"""Graphs built in tests with protobuf alone (no TensorFlow)."""

from graphgrad.protos import DataType, GraphDef

FLOAT = DataType.Value("DT_FLOAT")


def chain_graph(length: int) -> GraphDef:
    """x -> Sign -> Identity -> Sign -> ... : a long chain, as big as asked."""
    graph_def = GraphDef()
    node = graph_def.node.add(name="x", op="Placeholder")
    node.attr["dtype"].type = FLOAT
    previous = "x"
    for index in range(length):
        node = graph_def.node.add(name=f"layer{index}/{'Sign' if index % 2 else 'Identity'}",
                                  op="Sign" if index % 2 else "Identity", input=[previous])
        node.attr["T"].type = FLOAT
        previous = node.name
    return graph_def
