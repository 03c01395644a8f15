"""Function calls: differentiate a call op through its function body in Python.

In graph mode TensorFlow computes a call's gradient in C++, and every override
inside the called function is silently ignored (see :mod:`graphgrad.functions`).
TF2's ``tf.saved_model.load`` does not have the problem; it rebuilds the
functions in Python.

``call`` imports a copy of the body next to the call, its inputs wired to the
call's, marks the nested calls that need it the same way, and differentiates the
copy with ``tf.gradients``. The copy recomputes the body's forward values; a body
with side effects (variable assignments) would repeat them.
"""

from ..functions import CALL_OPS, OVERRIDE_ATTR, functions_with_overrides, unrouted_calls_into
from .registry import REPLACEMENT, builtin

CALL_GRADIENT = "graphgrad/call"  # what ``call`` is written as: the canonical name of the spec


@builtin(
    REPLACEMENT,
    formula="dy through the called function's body, differentiated in Python: overrides inside apply (call ops)",
)
def call(tf, op, grads):
    # TensorFlow turns a FunctionDef into an importable GraphDef only in this internal module.
    from tensorflow.python.framework.function_def_to_graph import function_def_to_graph_def

    graph = op.graph
    function_name = called_by(op)
    if routed_copy(function_name) in _functions(graph):  # a call by op type cannot be pointed at it
        function_name = routed_copy(function_name)
    if function_name not in _functions(graph):
        raise ValueError(
            f"call on node {op.name!r} ({op.type}): it calls no function of the graph; call is for "
            f"{', '.join(CALL_OPS)} and ops that are functions"
        )
    definition = function_definition(graph, function_name)
    body, flat_names = function_def_to_graph_def(definition)
    overriding = overriding_functions(graph)
    for node in unrouted_calls_into(body.node, overriding):
        node.attr[OVERRIDE_ATTR].s = CALL_GRADIENT.encode()
    returns = [flat_names[definition.ret[arg.name]] for arg in definition.signature.output_arg]
    wanted = [(tensor, grad) for tensor, grad in zip(returns, grads) if grad is not None]
    if not wanted:
        return [None] * len(op.inputs)
    # Under a GradientTape the gradient is built in a graph of its own, and
    # import_graph_def maps inputs only onto that graph's tensors: an Identity captures them.
    here = tf.compat.v1.get_default_graph()
    inputs = [tensor if tensor.graph is here else tf.identity(tensor) for tensor in op.inputs]
    arguments = [arg.name for arg in definition.signature.input_arg]
    outputs = tf.compat.v1.import_graph_def(
        body,
        input_map={f"{argument}:0": tensor for argument, tensor in zip(arguments, inputs)},
        return_elements=[tensor for tensor, _ in wanted],
        name="body",
    )
    return tf.compat.v1.gradients(outputs, inputs, grad_ys=[grad for _, grad in wanted], name="body_grad")


def called_by(op) -> str:
    """What a live operation calls (as :func:`graphgrad.functions.called_function`), without its NodeDef."""
    return op.get_attr("f").name if op.type in CALL_OPS else op.type


ROUTED_COPY_SUFFIX = "_graphgrad_routed"


def routed_copy(name: str) -> str:
    """The name of the copy of function ``name`` whose calls are routed, which
    ``register_gradients`` adds to a built graph (see ``runtime.route_calls``)."""
    return name + ROUTED_COPY_SUFFIX


def function_definition(graph, name: str):
    """The FunctionDef of the function ``name`` that ``graph`` can call (TF >= 2.13 caches it)."""
    function = _functions(graph)[name]
    return getattr(function, "cached_definition", None) or function.definition


def _functions(graph) -> dict:
    """TensorFlow's own tables of the functions ``graph`` can call, by name: its
    own and its outer graphs' (a branch or body graph built from an imported
    function holds none; they stay in the graph the GraphDef was imported into)."""
    graphs = []
    while graph is not None:
        graphs.append(graph)
        graph = getattr(graph, "outer_graph", None)
    functions = {}
    for outer_first in reversed(graphs):
        functions.update(getattr(outer_first, "_functions", None) or {})
    return functions


def overriding_functions(graph) -> set:
    """The names of ``graph``'s functions whose bodies, or the functions those run
    (calls, branches and loop bodies), carry a gradient override."""
    return functions_with_overrides({name: function_definition(graph, name).node_def for name in _functions(graph)})
