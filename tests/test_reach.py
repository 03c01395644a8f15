"""What a graph's functions compute from x (graphgrad.graph.reach), TensorFlow-free,
on FunctionDefs written by hand: a loop variable that the body makes from one
computed from x is computed from x; weights, counters and integers are not."""

from graphgrad.files.protos import GraphDef
from graphgrad.graph.reach import reached_in_functions
from graphgrad.names import VALUE_INDEPENDENT

FLOAT, INT32 = 1, 3


def _function(library, name, inputs, outputs, nodes):
    """``nodes``: (name, op, inputs, T); ``outputs``: name -> the value it returns."""
    function = library.function.add()
    function.signature.name = name
    for arg in inputs:
        function.signature.input_arg.add(name=arg, type=FLOAT)
    for arg, ref in outputs.items():
        function.signature.output_arg.add(name=arg, type=FLOAT)
        function.ret[arg] = ref
    for node_name, op, refs, dtype in nodes:
        node = function.node_def.add(name=node_name, op=op)
        node.input.extend(refs)
        node.attr["T"].type = dtype
    return function


def _loop_call(body, inputs=4):
    node = GraphDef().node.add(name="loop", op="While")
    node.input.extend(f"in{i}" for i in range(inputs))
    node.attr["body"].func.name = body
    node.attr["cond"].func.name = "cond"
    return node


def test_a_loop_variable_made_from_one_computed_from_x_is_computed_from_x():
    """(counter, a, b, w): b' = tanh(a) * b, a' = a + w, w passes through. Only a
    starts from x; b is reached on the loop's second turn, w and the counter never."""
    library = GraphDef().library
    _function(library, "body", ["t", "a", "b", "w"], {"t2": "next_t:z:0", "a2": "next_a:z:0",
                                                      "b2": "next_b:z:0", "w2": "w"}, [
        ("next_t", "AddV2", ["t", "one:output:0"], INT32),
        ("one", "Const", [], INT32),
        ("squashed", "Tanh", ["a"], FLOAT),
        ("next_b", "Mul", ["squashed:y:0", "b"], FLOAT),
        ("next_a", "AddV2", ["a", "w"], FLOAT),
        ("scaled_w", "Exp", ["w"], FLOAT),
    ])
    reach = reached_in_functions(library, [(_loop_call("body"), [False, True, False, False])])
    assert sorted(reach.nodes["body"]) == ["next_a", "next_b", "squashed"]
    assert reach.varying_inputs["body"] == {"a", "b"}
    assert reach.varies("body", "b") and not reach.varies("body", "w")
    assert reach.varies("body", "squashed:y:0") and not reach.varies("body", "scaled_w:y:0")


def test_integers_and_shapes_computed_from_x_carry_nothing_on():
    library = GraphDef().library
    _function(library, "f", ["x"], {"out": "exp:y:0"}, [
        ("shape", "Shape", ["x"], FLOAT),
        ("longest", "Max", ["shape:output:0"], INT32),
        ("as_float", "Cast", ["longest:output:0"], FLOAT),
        ("exp", "Exp", ["as_float:y:0"], FLOAT),
    ])
    call = GraphDef().node.add(name="call", op="PartitionedCall", input=["x"])
    call.attr["f"].func.name = "f"
    reach = reached_in_functions(library, [(call, [True])])
    assert "Shape" in VALUE_INDEPENDENT and reach.nodes["f"] == {}


def test_a_call_inside_a_body_reaches_into_its_function_by_argument():
    """outer(x, w) calls inner(w, x) directly by op type: inner's second argument is x."""
    library = GraphDef().library
    _function(library, "inner", ["p", "q"], {"r": "on_p:y:0", "s": "on_q:y:0"}, [
        ("on_p", "Sigmoid", ["p"], FLOAT), ("on_q", "Tanh", ["q"], FLOAT)])
    _function(library, "outer", ["x", "w"], {"y": "after:y:0"}, [
        ("called", "inner", ["w", "x"], FLOAT), ("after", "Softplus", ["called:s:0"], FLOAT),
        ("unused", "Exp", ["called:r:0"], FLOAT)])
    call = GraphDef().node.add(name="call", op="StatefulPartitionedCall", input=["x", "w"])
    call.attr["f"].func.name = "outer"
    reach = reached_in_functions(library, [(call, [True, False])])
    assert sorted(reach.nodes["inner"]) == ["on_q"]
    assert sorted(reach.nodes["outer"]) == ["after", "called"]
