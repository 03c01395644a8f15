"""Graphs built in tests with protobuf alone (no TensorFlow)."""

from graphgrad.files.protos import DataType, GraphDef

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


def frozen_graph(layers: int = 8, width: int = 32, with_function: bool = True) -> GraphDef:
    """A frozen-model-like graph: big Const kernels, MatMul, Relu; optionally a
    library function with a Sign inside."""
    import numpy as np

    rng = np.random.default_rng(0)
    graph_def = GraphDef()
    graph_def.versions.producer = 1234
    node = graph_def.node.add(name="x", op="Placeholder")
    node.attr["dtype"].type = FLOAT
    previous = "x"
    for index in range(layers):
        kernel = graph_def.node.add(name=f"dense{index}/kernel", op="Const")
        kernel.attr["dtype"].type = FLOAT
        tensor = kernel.attr["value"].tensor
        tensor.dtype = FLOAT
        tensor.tensor_shape.dim.add(size=width)
        tensor.tensor_shape.dim.add(size=width)
        tensor.tensor_content = rng.standard_normal((width, width), dtype=np.float32).tobytes()
        matmul = graph_def.node.add(name=f"dense{index}/MatMul", op="MatMul", input=[previous, kernel.name])
        matmul.attr["T"].type = FLOAT
        relu = graph_def.node.add(name=f"dense{index}/Relu", op="Relu", input=[matmul.name])
        relu.attr["T"].type = FLOAT
        previous = relu.name
    if with_function:
        function = graph_def.library.function.add()
        function.signature.name = "binarize"
        function.signature.input_arg.add(name="a", type=FLOAT)
        function.signature.output_arg.add(name="out", type=FLOAT)
        sign = function.node_def.add(name="Sign", op="Sign", input=["a"])
        sign.attr["T"].type = FLOAT
        function.ret["out"] = "Sign:y:0"
    return graph_def


def many_nodes():
    """A chain of small nodes with a device, debug info (a field the cut-down
    schema does not declare), versions and a function library."""
    graph_def = chain_graph(300)
    graph_def.node[5].device = "/device:CPU:0"
    graph_def.node[7].experimental_debug_info.original_node_names.append("before/Sign")
    graph_def.versions.producer = 1234
    graph_def.library.CopyFrom(frozen_graph(layers=1, width=2).library)
    return graph_def


def calling_graph(frozen: bool = False) -> GraphDef:
    """A TF2-style graph: a top-level PartitionedCall runs ``outer``, whose
    StatefulPartitionedCall runs ``binarize`` (a Sign); a top-level StatelessIf
    branches into ``branch`` (another Sign). ``frozen``: big Const kernels too, as
    in :func:`frozen_graph`, so that the file is scanned rather than parsed."""
    graph_def = frozen_graph(width=256) if frozen else frozen_graph(layers=0)
    outer = graph_def.library.function.add()
    outer.signature.name = "outer"
    outer.signature.input_arg.add(name="a", type=FLOAT)
    outer.signature.output_arg.add(name="out", type=FLOAT)
    nested = outer.node_def.add(name="call_binarize", op="StatefulPartitionedCall", input=["a"])
    nested.attr["f"].func.name = "binarize"
    nested.attr["_gradient_op_type"].s = b"PartitionedCall-7"  # as tf.function leaves it
    outer.ret["out"] = "call_binarize:output:0"
    branch = graph_def.library.function.add()
    branch.CopyFrom(graph_def.library.function[0])
    branch.signature.name = "branch"
    call = graph_def.node.add(name="model/call", op="PartitionedCall", input=["x"])
    call.attr["f"].func.name = "outer"
    cond = graph_def.node.add(name="cond", op="StatelessIf", input=["x", "x"])
    cond.attr["then_branch"].func.name = "branch"
    cond.attr["else_branch"].func.name = "branch"
    return graph_def


def mutated(original: bytes, data, rounds: int = 8, span: int = 16) -> bytes:
    """``original`` after 1 to ``rounds`` random edits drawn from hypothesis's
    ``data``: bit flips (most often), a byte set, truncation, up to ``span`` bytes
    inserted, or up to 4 x ``span`` deleted."""
    from hypothesis import strategies as st

    edited = bytearray(original)
    for _ in range(data.draw(st.integers(1, rounds))):
        operation = data.draw(st.sampled_from(["flip", "flip", "flip", "byte", "truncate", "insert", "delete"]))
        position = data.draw(st.integers(0, max(len(edited) - 1, 0)))
        if operation == "flip" and edited:
            edited[position] ^= 1 << data.draw(st.integers(0, 7))
        elif operation == "byte" and edited:
            edited[position] = data.draw(st.integers(0, 255))
        elif operation == "truncate":
            del edited[position:]
        elif operation == "insert":
            edited[position:position] = data.draw(st.binary(min_size=1, max_size=span))
        elif edited:
            del edited[position:position + data.draw(st.integers(1, 4 * span))]
    return bytes(edited)
