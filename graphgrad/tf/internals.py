"""TensorFlow's private API, in one place: what graphgrad needs that ``tf`` does
not expose. Each function imports TensorFlow when called (never at import time).

Every use is one TensorFlow itself makes (``gradients_util.py`` reads the gradient
registry so, ``saved_model/save.py`` walks it, ``function_deserialization.py``
names loaded gradients so); when a TensorFlow release moves one, this module is
what changes. It imports nothing of graphgrad, so any layer may call it lazily.
"""

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def gradient_registry() -> Any:
    """The registry ``tf.RegisterGradient`` writes to and ``tf.gradients`` reads
    (``lookup(name)`` raises LookupError for an unknown name)."""
    from tensorflow.python.framework import ops

    return ops.gradient_registry


def registered_gradient(op_type: str) -> Any:
    """The gradient function registered for ``op_type`` (None: declared not
    differentiable); LookupError when there is none."""
    return gradient_registry().lookup(op_type)


def gradient_registry_entries() -> dict:
    """The registry's own ``name -> entry`` map, which ``tf.saved_model.save``
    walks to save custom gradients (the Registry class can neither hide nor remove one)."""
    return gradient_registry()._registry


def in_while_loop(op: Any) -> bool:
    """Whether ``op`` has a TF1 control flow context (a while loop's, as
    ``gradients_util.py`` reads it with ``op._get_control_flow_context()``)."""
    return op._get_control_flow_context() is not None


def custom_gradient_name() -> str:
    """A fresh ``CustomGradient-<n>`` name, from TensorFlow's own generator (as
    ``tf.saved_model.load`` names the gradients it loads)."""
    from tensorflow.python.ops.custom_gradient import generate_name

    return generate_name()


def function_def_to_graph_def(function_def: Any) -> tuple[Any, dict]:
    """TensorFlow's conversion of a FunctionDef to an importable GraphDef:
    ``(graph_def, {argument or node output: tensor name})``."""
    from tensorflow.python.framework.function_def_to_graph import function_def_to_graph_def as convert

    return convert(function_def)


def function_def_to_graph(function_def: Any) -> Any:
    """A FuncGraph rebuilt from a FunctionDef (with ``inputs`` and ``outputs``)."""
    from tensorflow.python.framework.function_def_to_graph import function_def_to_graph as convert

    return convert(function_def)


def saved_model_loader_class() -> type:
    """TensorFlow's TF1 SavedModel loader class (variables, assets, init ops),
    whose ``get_meta_graph_def_from_tags`` a subclass may override."""
    from tensorflow.python.saved_model.loader_impl import SavedModelLoader

    return SavedModelLoader


def saved_model_init_op(meta_graph_def: Any) -> Any:
    """The op a SavedModel's TF1 loader runs after restoring its variables (the
    ``__saved_model_init_op`` signature, else the ``saved_model_main_op`` or
    ``legacy_init_op`` collection), found in the default graph; None where there is none."""
    from tensorflow.python.saved_model.loader_impl import get_init_op

    return get_init_op(meta_graph_def)


def set_op_attr(op: Any, key: str, value: Any) -> None:
    """Set an attribute (a TensorFlow ``AttrValue``) of a built ``tf.Operation``:
    what ``Graph.gradient_override_map`` does while an op is created; ``tf`` has no
    way to do it after."""
    op._set_attr(key, value)


def while_context(definition: dict, import_scope: str | None, outer: Any = None) -> Any:
    """A TF1 ``WhileContext`` rebuilt from the fields of a ``WhileContextDef``
    (``definition``: its field names, ``values`` and ``external_values`` those of
    its ``values_def``), as ``import_meta_graph`` rebuilds one from its collection,
    inside ``outer`` (the context of the loop around it, or None). It sets itself
    on the ops it names. Call it with the graph as the default graph."""
    from tensorflow.core.protobuf import control_flow_pb2
    from tensorflow.python.ops import control_flow_ops

    fields = dict(definition)
    values = control_flow_pb2.ValuesDef(values=sorted(fields.pop("values")),
                                        external_values=fields.pop("external_values"))
    context_def = control_flow_pb2.WhileContextDef(values_def=values, **fields)
    if outer is not None:
        outer.Enter()
    try:
        return control_flow_ops.WhileContext(context_def=context_def, import_scope=import_scope)
    finally:
        if outer is not None:
            outer.Exit()


# One gradient build at a time swaps TensorFlow's function (and puts back what it displaced).
_REPLACING = threading.RLock()


@contextmanager
def control_flow_copies_replaceable() -> Iterator[None]:
    """While the block runs, a gradient of a ``While`` or ``If`` replaces what the
    process's eager context holds under the name of the copies of its functions it
    makes (``<function>_rewritten``, by ``control_flow_util_v2.create_new_tf_function``,
    which registers every function it makes there). Those names come from the
    model's file, so a second gradient of the same model in one process (another
    method, another Explainer) made copies of other definitions under the same
    names, which TensorFlow refused ("a duplicate function ... definitions
    differ"). A graph runs from its own library, never from the eager context's;
    the definitions the block displaced are put back when it ends, so the
    process's own functions (a user's tf.function of the same model) keep theirs."""
    from tensorflow.python.eager import context
    from tensorflow.python.ops import control_flow_util_v2

    with _REPLACING:
        original = control_flow_util_v2.create_new_tf_function
        if getattr(original, "replaces_copies", False):  # nested: already in place
            yield
            return
        displaced: dict = {}  # name -> the definition the process held before the block
        made: set = set()  # the names this block registered

        def create_new_tf_function(func_graph: Any) -> Any:
            eager = context.context()
            if eager.has_function(func_graph.name):
                if func_graph.name not in made and func_graph.name not in displaced:
                    displaced[func_graph.name] = eager.get_function_def(func_graph.name)
                eager.remove_function(func_graph.name)
            made.add(func_graph.name)
            return original(func_graph)

        create_new_tf_function.replaces_copies = True  # type: ignore[attr-defined]
        control_flow_util_v2.create_new_tf_function = create_new_tf_function
        try:
            yield
        finally:
            control_flow_util_v2.create_new_tf_function = original
            eager = context.context()
            for name, definition in displaced.items():
                if eager.has_function(name):
                    eager.remove_function(name)
                eager.add_function_def(definition)
