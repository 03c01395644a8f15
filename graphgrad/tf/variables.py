"""The variables of a bare GraphDef (a graph exported with ``as_graph_def`` before
freezing, such as a VGG16 GraphDef): no Saver and no collections say how to give
them values, so ``check`` and ``attribute`` restore them by name from a checkpoint
the user names, or run the initializers the graph holds for them.

TensorFlow is passed in; nothing here imports it.
"""

from typing import Any

from ..errors import GraphgradError

VARIABLE_OPS = frozenset({"VariableV2", "Variable", "VarHandleOp"})
_INITIALIZERS = {"VariableV2": "Assign", "Variable": "Assign", "VarHandleOp": "AssignVariableOp"}


def graph_variables(graph: Any) -> list:
    """The variable ops of a built graph, in graph order."""
    return [op for op in graph.get_operations() if op.type in VARIABLE_OPS]


def initializers_of(variables: list) -> list:
    """The ops that give each of ``variables`` its initial value: the ``Assign``
    (``AssignVariableOp`` for a resource variable) named ``VARIABLE/Assign``, as
    ``tf.Variable`` writes it. A variable without one is left out."""
    found = []
    for variable in variables:
        wanted = _INITIALIZERS[variable.type]
        found += [op for op in variable.outputs[0].consumers()
                  if op.type == wanted and op.name == f"{variable.name}/Assign"]
    return found


def restore_variables(tf: Any, session: Any, variables: list, prefix: str) -> None:
    """Give each of ``variables`` the value the checkpoint at ``prefix`` holds under
    its name; a variable the checkpoint lacks, or holds in another shape, is refused
    in one line, naming it."""
    try:
        reader = tf.train.load_checkpoint(prefix)
    except (ValueError, tf.errors.OpError) as error:
        raise GraphgradError(f"cannot read the checkpoint {prefix}: {str(error).splitlines()[0]}") from None
    missing = [op.name for op in variables if not reader.has_tensor(op.name)]
    if missing:
        raise GraphgradError(
            f"the checkpoint {prefix} holds no value for {len(missing)} of the graph's variables "
            f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}); name the checkpoint the graph was "
            "saved with"
        )
    values, assigns = {}, []
    for op in variables:
        value = reader.get_tensor(op.name)
        dtype = op.get_attr("dtype")
        fed = tf.compat.v1.placeholder(dtype, value.shape, name=f"graphgrad_restore/{op.name}")
        if op.type == "VarHandleOp":
            assigns.append(tf.raw_ops.AssignVariableOp(resource=op.outputs[0], value=fed))
        else:
            assigns.append(tf.compat.v1.assign(op.outputs[0], fed, validate_shape=True))
        values[fed] = value
    try:
        session.run(assigns, values)
    except (ValueError, tf.errors.OpError) as error:
        raise GraphgradError(f"cannot restore the graph's variables from {prefix}: "
                             f"{str(error).splitlines()[0][:300]}") from None
