"""Unfreezing and freezing, the TensorFlow side: a TF1 training checkpoint written
from the constants' values (:mod:`graphgrad.edits.unfreeze` made the graph), and the
trained variables folded back into constants of their old names.

TensorFlow is imported inside functions only, as in the runtime.
"""

import os
from typing import Any

from ..edits.unfreeze import FROZEN_NODES, INITIAL_SUFFIX, UNFROZEN, VARIABLE_SUFFIX, Unfrozen, node_record
from ..errors import GraphgradError
from .loading import LoadGate, restore_op, restores_of
from .runtime import tensorflow

CHECKPOINT = "model"  # OUT_DIR/model.meta, model.index, model.data-*, and the checkpoint file


def write_training_checkpoint(unfrozen: Unfrozen, values: dict, folder: str) -> bytes:
    """Write the checkpoint that holds each weight's value (``values``: name -> the
    constant's TensorProto) to ``folder`` (existing and empty), and return the meta
    graph to write beside it: the variables trainable, a Saver, and the graph's nodes
    as :func:`graphgrad.edits.unfreeze.unfrozen` made them, byte for byte (TensorFlow's
    own export would add the attributes' defaults), then the Saver's."""
    tf = tensorflow()
    from tensorflow.core.framework.tensor_pb2 import TensorProto
    from tensorflow.core.framework.variable_pb2 import VariableDef

    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        try:
            v1.import_graph_def(v1.GraphDef.FromString(unfrozen.graph_def.SerializeToString()), name="")
        except (ValueError, tf.errors.OpError) as error:
            raise GraphgradError(f"TensorFlow cannot load the graph: {str(error).splitlines()[0][:300]}") from None
        variables = []
        for weight in unfrozen.weights:
            definition = VariableDef(variable_name=weight.name + VARIABLE_SUFFIX + ":0",
                                     initializer_name=weight.name + VARIABLE_SUFFIX + "/Assign",
                                     snapshot_name=weight.name + ":0",
                                     initial_value_name=weight.name + INITIAL_SUFFIX + ":0", trainable=True)
            variable = v1.Variable.from_proto(definition)  # a TF1 reference variable, as the graph holds it
            v1.add_to_collection(v1.GraphKeys.GLOBAL_VARIABLES, variable)
            v1.add_to_collection(v1.GraphKeys.TRAINABLE_VARIABLES, variable)
            variables.append(variable)
        saver = v1.train.Saver(variables, save_relative_paths=True)  # its saver_def restores the checkpoint
        meta = v1.train.export_meta_graph(graph=graph, saver_def=saver.as_saver_def())
    arrays = [tf.make_ndarray(TensorProto.FromString(values[weight.name].SerializeToString()))
              for weight in unfrozen.weights]
    _save(tf, os.path.join(folder, CHECKPOINT), [weight.name + VARIABLE_SUFFIX for weight in unfrozen.weights],
          arrays)
    made = v1.GraphDef.FromString(unfrozen.graph_def.SerializeToString())
    made_names = {node.name for node in made.node}
    added = [node for node in meta.graph_def.node if node.name not in made_names]
    del meta.graph_def.node[:]
    meta.graph_def.node.extend(list(made.node) + added)
    meta.collection_def[FROZEN_NODES].bytes_list.value.extend(node_record(made))
    for name in ("versions", "library"):  # as the frozen graph had them (TensorFlow's export sets both)
        if made.HasField(name):
            getattr(meta.graph_def, name).CopyFrom(getattr(made, name))
        else:
            meta.graph_def.ClearField(name)
    return meta.SerializeToString(deterministic=True)


def _save(tf: Any, prefix: str, names: list, arrays: list) -> None:
    """Write ``arrays`` under ``names`` as the checkpoint ``prefix`` (what a Saver's
    save writes, the ``checkpoint`` file included) with one eager SaveV2. A Saver's
    session run, like any run over thousands of variables, takes time quadratic in
    their count (4,000 variables: 4 s; the eager op: 0.2 s)."""
    v1 = tf.compat.v1
    with tf.init_scope():
        if tf.executing_eagerly():
            tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names), tensors=arrays)
        else:  # a process that turned eager execution off: the op in a graph of its own
            with tf.Graph().as_default() as graph, v1.Session(graph=graph) as session:
                fed = [v1.placeholder(array.dtype, array.shape) for array in arrays]
                session.run(tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                                              tensors=fed), dict(zip(fed, arrays)))
    folder, name = os.path.split(prefix)
    v1.train.update_checkpoint_state(folder, name, all_model_checkpoint_paths=[name])


def freeze_checkpoint(meta_path: str, stored: Any, prefix: str, outputs: tuple, record: list | None = None,
                      allow_effects: bool = False) -> Any:
    """The GraphDef of the meta graph at ``meta_path`` (``stored``: its GraphDef as the
    file holds it, which is what is folded) with its unfrozen weights (and, with
    ``outputs``, every other variable those need) folded into constants of their
    values in the checkpoint ``prefix``: a TensorFlow GraphDef message. ``record``:
    the meta graph's :data:`FROZEN_NODES`, which, where given, says which nodes and
    attributes the result holds (what training and re-saving added left out).
    The restore runs only what the gate of every run lets through (the saver's own
    reads of ``prefix`` and ops that compute in memory), unless ``allow_effects``."""
    tf = tensorflow()
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default(), v1.Session(graph=graph) as session:
        try:
            saver = v1.train.import_meta_graph(meta_path, clear_devices=True)
            if saver is None:
                raise GraphgradError(f"{meta_path} has no variables to fold")
            LoadGate(meta_path, "freeze", allow_effects, stored).refuse_what_loading_runs(
                restore_op(graph, saver), restores_of(graph, saver))
            saver.restore(session, prefix)
        except (ValueError, tf.errors.OpError) as error:
            raise GraphgradError(f"cannot restore {prefix}: {str(error).splitlines()[0][:300]}") from None
        graph_def = v1.GraphDef.FromString(stored.SerializeToString())
        unfrozen = [node.name for node in graph_def.node if UNFROZEN in node.attr]
        values = dict(zip(unfrozen, session.run([f"{name}:0" for name in unfrozen]))) if unfrozen else {}
        if record:
            graph_def = _as_recorded(tf, graph_def, record)
        others = [node.name for node in graph_def.node if node.op in ("VariableV2", "VarHandleOp")
                  and not node.name.endswith(VARIABLE_SUFFIX)]
        if others and not outputs:
            raise GraphgradError(f"{meta_path} holds variables graphgrad did not make ({', '.join(others[:3])}); "
                                 "name the tensors the frozen graph must compute with --outputs, and they are "
                                 "folded as TensorFlow folds them")
        folded = _fold(tf, graph_def, values)
        if outputs:
            names = [name.split(":")[0] for name in outputs]
            folded = v1.graph_util.convert_variables_to_constants(session, folded, names) if others else \
                v1.graph_util.extract_sub_graph(folded, names)
        return folded


def _fold(tf: Any, graph_def: Any, values: dict) -> Any:
    """``graph_def`` with each unfrozen weight a constant again, in its place, and the
    nodes unfreezing and saving added gone."""
    dropped = {name + suffix for name in values
               for suffix in (INITIAL_SUFFIX, VARIABLE_SUFFIX, VARIABLE_SUFFIX + "/Assign")}
    saver_scopes = _saver_scopes(graph_def)
    result = tf.compat.v1.GraphDef()
    for name in ("versions", "library"):  # as the meta graph holds them: the frozen graph's
        if graph_def.HasField(name):
            getattr(result, name).CopyFrom(getattr(graph_def, name))
    for node in graph_def.node:
        if node.name in dropped or node.name.split("/")[0] in saver_scopes:
            continue
        if node.name in values:
            constant = result.node.add(name=node.name, op="Const", device=node.device)
            constant.attr["dtype"].type = node.attr["T"].type
            constant.attr["value"].tensor.CopyFrom(tf.compat.v1.make_tensor_proto(values[node.name]))
            continue
        result.node.add().CopyFrom(node)
    return result


def _as_recorded(tf: Any, graph_def: Any, record: list) -> Any:
    """The nodes of ``graph_def`` that the record names, each with only the attributes it names."""
    kept = {}
    for entry in record:
        name, *keys = entry.decode("utf-8", "surrogateescape").split("\0")
        kept[name] = set(keys)
    result = tf.compat.v1.GraphDef()
    result.CopyFrom(graph_def)
    del result.node[:]
    for node in graph_def.node:
        if node.name in kept:
            copy = result.node.add()
            copy.CopyFrom(node)
            for key in [key for key in copy.attr if key not in kept[node.name]]:
                del copy.attr[key]
    return result


def _saver_scopes(graph_def: Any) -> set:
    """The name scopes of the Saver nodes a training checkpoint's meta graph holds (``save``, ``save_1``)."""
    return {node.name.split("/")[0] for node in graph_def.node
            if node.op in ("SaveV2", "RestoreV2", "MergeV2Checkpoints") and "/" in node.name}
