"""Function calls: differentiate a call op through its function body in Python.

In graph mode TensorFlow computes a call's gradient in C++, and every override
inside the called function is silently ignored (see :mod:`graphgrad.graph.functions`).
TF2's ``tf.saved_model.load`` does not have the problem; it rebuilds the
functions in Python.

``call`` imports a copy of the body next to the call, its inputs wired to the
call's, and differentiates the copy with ``tf.gradients``. The calls the body makes
are inlined into the copy too, recursively (each becomes its own body's nodes and
an IdentityN of what it returns, under the call's name): kept as call ops, every
level of the copy would instantiate the functions below it again, and TensorFlow's
first run of a gradient grew exponentially with the depth of nested calls (18 s
at depth 12). A call that carries a gradient of its own stays a call. The copy
recomputes the body's forward values; a body with side effects (variable
assignments) would repeat them.
"""

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import GraphgradError
from ..graph.functions import carries_override, functions_with_overrides, unrouted_calls_into
from ..names import ATTR, CALL_OPS
from .registry import REPLACEMENT, builtin

CALL_GRADIENT = "graphgrad/call"  # what ``call`` is written as: the canonical name of the spec


@builtin(
    REPLACEMENT,
    formula="dy through the called function's body, differentiated in Python: overrides inside apply (call ops)",
)
def call(tf, op, grads):
    function_name = called_by(op)
    if routed_copy(function_name) in _functions(op.graph):  # a call by op type cannot be pointed at it
        function_name = routed_copy(function_name)
    if function_name not in _functions(op.graph):
        raise ValueError(
            f"call on node {op.name!r} ({op.type}): it calls no function of the graph; call is for "
            f"{', '.join(CALL_OPS)} and ops that are functions"
        )
    wanted = [index for index, grad in enumerate(grads) if grad is not None]
    if not wanted:
        return [None] * len(op.inputs)
    inputs, outputs = inline_function(tf, op.graph, function_name, op.inputs, wanted)
    return tf.compat.v1.gradients(outputs, inputs, grad_ys=[grads[index] for index in wanted], name="body_grad")


def inline_function(tf: Any, graph: Any, function_name: str, inputs: Sequence,
                    wanted: Sequence[int] | None = None) -> tuple[list, list]:
    """Import a copy of the body of ``graph``'s function ``function_name`` into the
    default graph, its arguments wired to ``inputs``, its nested calls into
    functions that hold overrides routed through ``call``. Returns ``(inputs as
    wired, the outputs)``: those at the positions ``wanted``, or all of them."""
    from ..tf.internals import function_def_to_graph_def  # TensorFlow's private API, in one place

    definition = function_definition(graph, function_name)
    body, flat_names = function_def_to_graph_def(definition)
    body = with_calls_inlined(graph, body, {function_name})
    overriding = overriding_functions(graph)
    for node in unrouted_calls_into(body.node, overriding):
        node.attr[ATTR].s = CALL_GRADIENT.encode()
    returns = [flat_names[definition.ret[arg.name]] for arg in definition.signature.output_arg]
    # Under a GradientTape the gradient is built in a graph of its own, and
    # import_graph_def maps inputs only onto that graph's tensors: an Identity captures them.
    here = tf.compat.v1.get_default_graph()
    inputs = [tensor if tensor.graph is here else tf.identity(tensor) for tensor in inputs]
    arguments = [arg.name for arg in definition.signature.input_arg]
    if len(arguments) != len(inputs):
        raise ValueError(f"function {function_name} takes {len(arguments)} argument(s), given {len(inputs)}")
    outputs = tf.compat.v1.import_graph_def(
        body,
        input_map={f"{argument}:0": tensor for argument, tensor in zip(arguments, inputs)},
        return_elements=[returns[index] for index in (range(len(returns)) if wanted is None else wanted)],
        name="body",
    )
    return inputs, outputs


def with_calls_inlined(graph: Any, body: Any, active: set) -> Any:
    """``body`` (a GraphDef of a function's body) with each call op into a function of
    ``graph`` that carries no gradient of its own replaced by that function's body,
    recursively: its nodes under ``CALL/inlined/``, its arguments Identities of the
    call's inputs, and the call itself an IdentityN of what the body returns, so the
    call's outputs keep their names. ``active``: the functions being inlined (a
    function that calls itself stays a call)."""
    from ..tf.internals import function_def_to_graph_def

    functions = _functions(graph)
    inlined = type(body)()
    inlined.versions.CopyFrom(body.versions)
    for node in body.node:
        callee = called_by_node(node)
        own = node.attr[ATTR].s.decode("utf-8", "replace") if ATTR in node.attr else ""
        if callee not in functions or callee in active or (own and own != CALL_GRADIENT
                                                            and carries_override(node)):
            inlined.node.add().CopyFrom(node)
            continue
        definition = function_definition(graph, callee)
        inner, flat_names = function_def_to_graph_def(definition)
        inner = with_calls_inlined(graph, inner, active | {callee})
        arguments = [arg.name for arg in definition.signature.input_arg]
        data = [ref for ref in node.input if not ref.startswith("^")]
        controls = [ref for ref in node.input if ref.startswith("^")]
        prefix = f"{node.name}/inlined/"
        names = {inner_node.name for inner_node in inner.node}
        for inner_node in inner.node:
            copy = inlined.node.add()
            copy.CopyFrom(inner_node)
            copy.name = prefix + inner_node.name
            if inner_node.name in arguments:  # the argument: what the call was given
                copy.op = "Identity"
                copy.ClearField("attr")
                copy.attr["T"].type = inner_node.attr["dtype"].type
                del copy.input[:]
                copy.input.extend([data[arguments.index(inner_node.name)]] + controls)
                continue
            del copy.input[:]
            copy.input.extend(_prefixed(ref, prefix, names) for ref in inner_node.input)
        returned = inlined.node.add(name=node.name, op="IdentityN", device=node.device)
        returned.input.extend(prefix + flat_names[definition.ret[arg.name]]
                              for arg in definition.signature.output_arg)
        returned.attr["T"].list.type.extend(node.attr["Tout"].list.type)
    return inlined


def _prefixed(ref: str, prefix: str, names: set) -> str:
    """``ref`` (``name``, ``name:i`` or ``^name``) renamed into the inlined body when it names one of its nodes."""
    control = ref.startswith("^")
    bare = ref.lstrip("^")
    return ("^" if control else "") + (prefix + bare if bare.split(":")[0] in names else bare)


def called_by_node(node: Any) -> str:
    """What a NodeDef calls (the ``f`` of a call op), or "" for any other node."""
    return node.attr["f"].func.name if node.op in CALL_OPS and "f" in node.attr else ""


def saved_gradient(function_name: str, outputs: tuple | None) -> Callable:
    """The gradient of a ``tf.custom_gradient`` saved with its model as the graph's
    function ``function_name``, as ``tf.saved_model.load`` restores it: called on
    the upstream gradients (zeros where there are none), its outputs given to the
    op's inputs. ``outputs`` says, per input of the op, whether the function
    returns its gradient (True) or None (False), as the model's saved signature
    of the function does; without it, the function's outputs go to the op's last
    inputs (``tf.custom_gradient``'s ``[None] * len(results) + grads``)."""

    def gradient(op, *grads):
        import tensorflow as tf

        if function_name not in _functions(op.graph):
            raise ValueError(
                f"node {op.name!r}: its saved gradient function {function_name} is not in the graph; "
                "load the graph from the file that holds both"
            )
        upstream = [tf.zeros_like(output) if grad is None else grad for grad, output in zip(grads, op.outputs)]
        taken = len(function_definition(op.graph, function_name).signature.input_arg)
        if taken != len(upstream):
            # tf.saved_model.load binds such a function's captures (its forward values) when it restores the
            # function; a graph loaded in graph mode holds no such binding to give it
            raise GraphgradError(
                f"node {op.name!r}: its saved gradient function {function_name} takes {taken - len(upstream)} "
                "value(s) captured from the forward pass beside the upstream gradients, which a graph loaded in "
                f"graph mode does not hold; replace it with one of graphgrad's (graphgrad rewrite MODEL --node "
                f"'*/{op.name.rpartition('/')[2]}=SPEC' --force -o OUT), or run the model with tf.saved_model.load"
            )
        _, results = inline_function(tf, op.graph, function_name, upstream)
        given = outputs or (False,) * (len(op.inputs) - len(results)) + (True,) * len(results)
        if len(given) != len(op.inputs) or sum(given) != len(results):
            raise ValueError(
                f"node {op.name!r}: its saved gradient function {function_name} returns {len(results)} "
                f"gradient(s), which do not fit its {len(op.inputs)} input(s)"
            )
        returned = iter(results)
        return [next(returned) if has else None for has in given]

    gradient.__name__ = f"graphgrad_saved_{function_name}"
    return gradient


def called_by(op: Any) -> str:
    """What a live operation calls (as :func:`graphgrad.graph.functions.called_function`), without its NodeDef."""
    return op.get_attr("f").name if op.type in CALL_OPS else op.type


ROUTED_COPY_SUFFIX = "_graphgrad_routed"


def routed_copy(name: str) -> str:
    """The name of the copy of function ``name`` whose calls are routed, which
    ``register_gradients`` adds to a built graph (see ``runtime.route_calls``)."""
    return name + ROUTED_COPY_SUFFIX


def function_definition(graph: Any, name: str) -> Any:
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
    functions: dict = {}
    for outer_first in reversed(graphs):
        functions.update(getattr(outer_first, "_functions", None) or {})
    return functions


def overriding_functions(graph: Any) -> set:
    """The names of ``graph``'s functions whose bodies, or the functions those run
    (calls, branches and loop bodies), carry a gradient override."""
    return functions_with_overrides({name: function_definition(graph, name).node_def for name in _functions(graph)})
