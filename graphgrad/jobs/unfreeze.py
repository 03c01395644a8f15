"""graphgrad unfreeze and freeze: a frozen graph made trainable (a TF1 training
checkpoint whose weights are variables), and a trained checkpoint folded back into
a frozen GraphDef. The graph edits are :mod:`graphgrad.edits.unfreeze`'s; the
checkpoint is TensorFlow's (:mod:`graphgrad.tf.unfreeze`)."""

import os

from ..edits.unfreeze import FROZEN_NODES, Unfrozen, UnfreezeOptions, choose_weights, kept_weights, unfrozen
from ..errors import GraphgradError, ModelReadError, UsageError
from ..files.confined import checkpoint_in_folder, refuse_escaping_shards
from ..files.reading import read_model, read_small_file
from ..files.outputs import Output, checkpoint_files, model_files, refuse_outputs_over_inputs
from ..files.writing import replaced_directory, write_chunks
from ..graph.tensors import unknown_tensor
from ..graph.model import Model


def unfreeze(path: str, out_dir: str | None, options: UnfreezeOptions, kind: str | None = None,
             force: bool = False) -> Unfrozen:
    """Make the weights of the model at ``path`` variables and write a training
    checkpoint to ``out_dir`` (None: only say what would become a variable).
    Nothing is written on any failure; an ``out_dir`` that holds files is replaced
    only with ``force``."""
    if out_dir is not None:  # before anything is read
        if os.path.isfile(out_dir):
            raise UsageError(f"-o {out_dir} is a file; unfreeze writes a folder (model.meta, model.index, ...)")
        refuse_outputs_over_inputs({f"the model {path}": model_files(path)}, [Output("-o", out_dir, folder=True)])
        if os.path.isdir(out_dir) and os.listdir(out_dir) and not force:
            raise UsageError(f"-o {out_dir} holds files; to replace them, add --force")
    model = read_model(path, kind)
    graph_def = _one_graph(model)
    result = unfrozen(graph_def, choose_weights(graph_def, options))
    result.kept = kept_weights(graph_def)
    if out_dir is None:
        return result
    from ..tf.unfreeze import write_training_checkpoint

    chosen = {weight.name for weight in result.weights}
    values = {node.name: node.attr["value"].tensor for node in graph_def.node if node.name in chosen}
    with replaced_directory(out_dir) as staging:
        meta = write_training_checkpoint(result, values, staging)
        write_chunks(os.path.join(staging, "model.meta"), [meta], sweep=False)
    return result


def _one_graph(model: Model):
    graphs = model.graphs()
    if len(graphs) != 1:
        raise UsageError(f"{model.path} holds {len(graphs)} graphs; unfreeze takes one (save the one you train)")
    return graphs[0][1]


def freeze(source: str, out: str, outputs: tuple = (), allow_effects: bool = False) -> int:
    """Fold the trained variables of the checkpoint ``source`` (a folder holding a
    ``checkpoint`` file, a ``.meta`` or a checkpoint prefix) into constants and
    write the frozen GraphDef to ``out``; returns its node count. The output and
    ``outputs`` are checked before TensorFlow is imported; the restore runs only ops
    the gate lets through, unless ``allow_effects``."""
    meta, prefix = _checkpoint_files(source)
    refuse_outputs_over_inputs({f"the checkpoint {prefix}": checkpoint_files(prefix)}, [Output("-o", out)])
    stored = read_model(meta).message
    _refuse_unknown_outputs(outputs, stored.graph_def)
    from ..tf.unfreeze import freeze_checkpoint

    record = stored.collection_def[FROZEN_NODES].bytes_list.value if FROZEN_NODES in stored.collection_def else None
    graph_def = freeze_checkpoint(meta, stored.graph_def, prefix, tuple(outputs), list(record or []), allow_effects)
    write_chunks(out, [graph_def.SerializeToString(deterministic=True)])
    return len(graph_def.node)


def _refuse_unknown_outputs(outputs: tuple, graph_def) -> None:
    """``--outputs`` that name no tensor of the graph, refused with the close names
    (the check show, check and attribute make of their tensors)."""
    nodes = {node.name: node for node in graph_def.node}
    for tensor in outputs:
        wrong = unknown_tensor(nodes, tensor)
        if wrong:
            raise UsageError(f"--outputs {tensor}: {wrong} (the checkpoint's)")


def _checkpoint_files(source: str) -> tuple[str, str]:
    """``(meta graph file, checkpoint prefix)`` of ``source``, each checked to be there."""
    if os.path.isdir(source):
        state = os.path.join(source, "checkpoint")
        if not os.path.isfile(state):
            raise ModelReadError(f"{source} holds no checkpoint file; give the checkpoint's .meta or its prefix")
        text = read_small_file(state, 1 << 20, "checkpoint file").decode("utf-8", "replace")
        first = next((line for line in text.splitlines() if line.startswith("model_checkpoint_path:")), "")
        prefix = checkpoint_in_folder(source, first.partition(":")[2].strip().strip('"'))
    elif source.endswith((".pb", ".pbtxt")):
        raise UsageError(f"{source} is a graph, not a checkpoint: give the folder unfreeze wrote (it holds a "
                         "checkpoint file), a .meta beside its checkpoint, or a checkpoint prefix")
    else:
        prefix = source[:-len(".meta")] if source.endswith(".meta") else source
    meta = prefix + ".meta"
    missing = [path for path in (meta, prefix + ".index") if not os.path.isfile(path)]
    if missing:
        raise ModelReadError(f"checkpoint {prefix}: {missing[0]} is missing")
    if not any(name.startswith(os.path.basename(prefix) + ".data-") for name in os.listdir(os.path.dirname(
            os.path.abspath(prefix)))):
        raise GraphgradError(f"checkpoint {prefix}: its data shard (.data-*) is missing")
    refuse_escaping_shards(prefix, os.path.dirname(os.path.abspath(prefix)))
    return meta, prefix
