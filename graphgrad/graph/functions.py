"""A graph's functions: which functions a node runs, and which hold gradient overrides.

Pure functions over NodeDefs of either proto flavour (graphgrad's or TensorFlow's),
shared by the file side (``ops``, ``rewrite``) and the runtime's ``call`` gradient.

Why it matters: in graph mode (TF1 loaders, a GraphDef imported into a
``tf.Graph``) TensorFlow differentiates a *call* (a ``PartitionedCall`` or
``StatefulPartitionedCall``, or a node whose op type is a function of the graph)
with a ``SymbolicGradient`` op, computed by its C++ runtime, which knows no
gradient registered from Python: every override inside the called function is
ignored unless the call is routed through graphgrad's ``call`` gradient.
"""

from collections.abc import Container, Iterable, Sequence
from typing import Any

from ..names import ATTR, CALL_OPS, FUNCTION_CALL_NAME


def saved_gradients(graph_def: Any) -> dict:
    """Override name -> gradient function, for the ``tf.custom_gradient`` gradients
    saved with the graph: ``FunctionDefLibrary.registered_gradients``, which
    ``tf.saved_model.save`` writes by default since TF 2.13 and
    ``tf.saved_model.load`` registers again (under new names)."""
    return {entry.registered_op_type: entry.gradient_func for entry in graph_def.library.registered_gradients}


def saved_gradient_outputs(meta_graph_def: Any, function: str) -> tuple | None:
    """Per input of the op, whether the saved gradient ``function`` returns a
    gradient for it (False where it returns None), as the SavedModel's signature
    of the function says (its ``output_signature``, a list with None in places);
    None when the model does not say."""
    concrete = meta_graph_def.object_graph_def.concrete_functions
    if function not in concrete:
        return None
    signature = concrete[function].output_signature
    kind = signature.WhichOneof("kind")
    if kind not in ("list_value", "tuple_value"):
        return None
    values = getattr(signature, kind).values
    if any(value.WhichOneof("kind") in ("list_value", "tuple_value", "dict_value") for value in values):
        return None  # nested: flattened by TensorFlow in an order not worth guessing
    return tuple(value.WhichOneof("kind") != "none_value" for value in values)


def function_calls(value: Any) -> list:
    """The functions an AttrValue names (``func``, or a ``list`` of them), each a
    NameAttrList: the function's name and its attributes, which may name more."""
    calls = [value.func] if value.HasField("func") else []
    if value.HasField("list"):
        calls += value.list.func
    return calls


def named_functions(value: Any) -> set:
    """The names of every function an AttrValue names, those named inside the
    attributes of a function it names too (``f {name: "Outer" attr {g: Evil}}``
    runs Evil where Outer's body calls its ``g``)."""
    names = set()
    for call in function_calls(value):
        names.add(call.name)
        for nested in call.attr.values():
            names |= named_functions(nested)
    return names


def functions_also_run(graph_def: Any) -> dict:
    """What a GraphDef's library may run beyond what its nodes name: function ->
    its gradient function (``library.gradient``, which a SymbolicGradient of it
    runs), the functions its signature's attributes default to, and the other
    implementations of its ``api_implements`` (grappler's implementation selector
    swaps a call for the one of the device it runs on, as Keras' LSTM picks cuDNN);
    under ``""``, the gradients the library registers for op types
    (``registered_gradients``, which differentiating runs wherever a node carries
    their name)."""
    found: dict = {}
    for gradient in graph_def.library.gradient:
        found.setdefault(gradient.function_name, set()).add(gradient.gradient_func)
    implementations: dict = {}
    for function in graph_def.library.function:
        name = function.signature.name
        for attr in function.signature.attr:
            if attr.HasField("default_value"):
                found.setdefault(name, set()).update(named_functions(attr.default_value))
        for value in function.attr.values():
            found.setdefault(name, set()).update(named_functions(value))
        if "api_implements" in function.attr:
            implementations.setdefault(function.attr["api_implements"].s, set()).add(name)
    for group in implementations.values():
        for name in group:
            found.setdefault(name, set()).update(group - {name})
    found[""] = {entry.gradient_func for entry in graph_def.library.registered_gradients}
    return found


def rename_function_references(nodes: Iterable, names: dict) -> None:
    """Point the NodeDefs ``nodes`` (changed in place) at the functions ``names``
    maps to: op types that name a function, and function-valued attributes."""
    for node in nodes:
        if node.op in names:
            node.op = names[node.op]
        for value in node.attr.values():
            rename_in_attr(value, names)


def rename_in_attr(value: Any, names: dict) -> None:
    """Rename the functions an AttrValue names, nested ones too, as ``names`` maps them."""
    for call in function_calls(value):
        call.name = names.get(call.name, call.name)
        for nested in call.attr.values():
            rename_in_attr(nested, names)


def called_function(op_type: str, attrs: Any) -> str:
    """What a node calls: the ``f`` attribute of a call op, else its op type (which
    names a function when the node calls one directly)."""
    if op_type in CALL_OPS:
        return attrs["f"].func.name if "f" in attrs else ""
    return op_type


def functions_with_overrides(bodies: dict) -> set:
    """The names of the functions whose bodies (``bodies``: name -> NodeDefs), or
    the functions those run (calls, branches, loop bodies), carry a gradient override."""
    overriding = {name for name, nodes in bodies.items() if any(map(carries_override, nodes))}
    if not overriding:  # the common case: the function attributes are never read
        return overriding
    callers: dict = {}  # function -> the functions that run it: walked back from the overriding ones, once
    for name, nodes in bodies.items():
        for called in functions_run(nodes, bodies):
            callers.setdefault(called, set()).add(name)
    pending = list(overriding)
    while pending:  # linear in the calls, however deep the nesting (10,000 levels took quadratic time)
        for caller in callers.get(pending.pop(), ()):
            if caller not in overriding:
                overriding.add(caller)
                pending.append(caller)
    return overriding


def carries_override(node: Any) -> bool:
    """Whether a NodeDef has a gradient override of its own (tf.function's names for
    its call ops are none: the loading process does not have them)."""
    if ATTR not in node.attr:
        return False
    value = node.attr[ATTR].s.decode("utf-8", "replace")
    return bool(value) and not FUNCTION_CALL_NAME.match(value)


def functions_run(nodes: Iterable, functions: Container[str]) -> set:
    """The names of the ``functions`` that ``nodes`` run: by op type, or named in an attribute."""
    names = {node.op for node in nodes if node.op in functions}
    for node in nodes:
        for value in node.attr.values():
            names |= named_functions(value)
    return names


def unrouted_calls_into(nodes: Iterable, functions: set) -> list:
    """The nodes among ``nodes`` that call one of ``functions`` (see
    :func:`called_function`) and carry no override: graph mode differentiates those
    with SymbolicGradient."""
    return [node for node in nodes if called_function(node.op, node.attr) in functions and not carries_override(node)]


def calls_into_overrides(top_level: Iterable, bodies: dict) -> list[str]:
    """The calls whose gradients graph mode computes in C++ although the called
    function holds an override: the names of those among the ``top_level``
    NodeDefs (any that may call will do), then of those in the function
    ``bodies`` (name -> NodeDefs) as ``function/node``."""
    overriding = functions_with_overrides(bodies)
    if not overriding:
        return []
    return [node.name for node in unrouted_calls_into(top_level, overriding)] + [
        f"{name}/{node.name}" for name, nodes in bodies.items() for node in unrouted_calls_into(nodes, overriding)
    ]


def calls_behind_branches(top_level: Iterable, bodies: dict) -> list[str]:
    """Those of :func:`calls_into_overrides` that sit in functions reached through
    a branch or loop attribute (``If``, ``While``, ``Case``), from the top level or
    from any function, as ``function/node``. TensorFlow builds such a function's
    graph from the library when it differentiates the branch, so a call in it can
    be routed only by marking it in the library before the graph is built."""
    overriding = functions_with_overrides(bodies)
    if not overriding:
        return []
    branches = {name for nodes in (top_level, *bodies.values()) for name in _branches(nodes)} & overriding
    while True:  # a branch inside a branch function is built from the library too
        more = {name for function in branches for name in _branches(bodies[function])} & overriding - branches
        if not more:
            break
        branches |= more
    return [
        f"{name}/{node.name}" for name, nodes in bodies.items() if name in branches
        for node in unrouted_calls_into(nodes, overriding)
    ]


def _branches(nodes) -> set:
    """The functions ``nodes`` name in attributes other than a call op's ``f``."""
    return {
        call.name for node in nodes for key, value in node.attr.items()
        if not (key == "f" and node.op in CALL_OPS) for call in function_calls(value)
    }


def function_bodies(graph_def: Any) -> dict:
    """A GraphDef's functions: name -> NodeDefs."""
    return {function.signature.name: function.node_def for function in graph_def.library.function}


def call_cycle(bodies: dict) -> list[str]:
    """A chain of functions that calls its own start (``[f, g, f]``), or [] where
    the library holds none (TensorFlow's importer recurses on such a library until
    the process crashes)."""
    calls = {name: sorted(functions_run(nodes, bodies)) for name, nodes in bodies.items()}
    done: set = set()
    for start in sorted(calls):
        if start in done:
            continue
        path, on_path, pending = [start], {start}, [iter(calls[start])]
        while pending:
            callee = next(pending[-1], None)
            if callee is None:  # every call of the function on top looked at
                finished = path.pop()
                on_path.discard(finished)
                done.add(finished)
                pending.pop()
                continue
            if callee in on_path:
                return path[path.index(callee):] + [callee]
            if callee in done or callee not in calls:
                continue
            path.append(callee)
            on_path.add(callee)
            pending.append(iter(calls[callee]))
    return []


def graph_calls_into_overrides(graph_def: Any) -> list[str]:
    """:func:`calls_into_overrides` of a GraphDef."""
    return calls_into_overrides(graph_def.node, function_bodies(graph_def))


def first_names(names: Sequence[str], shown: int = 3) -> str:
    """``names`` for a one-line message: the first ``shown``, then how many more."""
    return ", ".join(names[:shown]) + (f" (+{len(names) - shown} more)" if len(names) > shown else "")


def unrouted_calls_note(calls: list[str]) -> str:
    """What to do about :func:`calls_into_overrides`'s ``calls``, in one line."""
    return (
        f"{len(calls)} call op(s) run functions that hold gradient overrides ({first_names(calls)}): graph-mode "
        "tf.gradients (TF1 loaders, tf.import_graph_def) differentiates them in C++ and ignores those "
        "overrides. To apply them, import with graphgrad.import_graph_def, or run "
        "graphgrad.register_gradients(graph) on the tf.Graph a TF1 loader built: both route them through "
        "graphgrad's call gradient; tf.saved_model.load needs nothing"
    )
