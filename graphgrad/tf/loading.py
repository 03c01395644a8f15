"""A model loaded to run in graph mode, as check and attribute share it: the
MetaGraphDef chosen, names and feeds checked from the file before TensorFlow is
imported, what loading runs (initializers, the restore, init ops) scanned for
effects outside the graph before it runs, variables given values, and x and y
found (signature names, stand-ins of graphgrad's own nodes, input pipelines).

TensorFlow is imported inside functions only, as in the runtime.
"""

import json
import os
import re
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..edits.summary import graph_ends
from ..readings.bodies import bodies_of
from ..errors import GraphgradError, UnresolvedGradientsError, UsageError
from ..files.arrays import load_array
from ..files.descriptors import kind_of_file
from ..graph.functions import first_names, function_bodies, functions_also_run, functions_run
from ..graph.hints import close_names
from ..graph.tensors import placeholder_shape, shape_mismatch, unknown_tensor
from ..graph.model import GRAPHDEF, KIND_NAMES, METAGRAPH, SAVEDMODEL, Model, signatures_of
from ..methods.options import given
from ..names import CALL_OPS, SERVING_DEFAULT
from .effects import refused_phrase, unsafe_ops_in
from .variables import graph_variables, initializers_of, restore_variables
from .internals import (
    saved_model_init_op,
    saved_model_loader_class,
)
from .runtime import (
    import_tf1_loops,
    is_registered,
    overrides_in,
    register_gradients,
    route_calls_in,
    tensorflow,
)

from .paths import ancestors, ancestors_of_ops, floating




class CheckUsageError(UsageError):
    """A tensor, feed or tag set given on the command line does not fit the model (a usage error)."""


def refuse_unknown_names(model: Model, tags: list | None, xs: Sequence[str], y: str | None,
                         fed: Iterable[str] = (), names: Sequence[str] = ("--x", "--y", "--feed")) -> None:
    """Refuse, from the file alone (before TensorFlow is imported), an x, y or feed
    name that names no tensor of the graph to load; signature names count as the
    tensors they stand for. ``names``: what the caller calls x, y and the feeds."""
    named = signature_names(model, tags)
    nodes = {node.name: node for node in loaded_graph_def(model, tags).node}
    x_name, y_name, feed_name = names
    asked: list[tuple[str, str]] = [(y_name, y)] if y else []
    asked += [(x_name, x) for x in xs] + [(feed_name, name) for name in fed]
    for option, name in asked:
        wrong = unknown_tensor(nodes, named.get(name, name))
        if wrong:
            raise CheckUsageError(f"{given(option, name)}: {wrong}")


def refuse_misshapen_feeds(model: Model, tags: list | None, values: dict, option: str = "--feed",
                           rows: bool = False) -> None:
    """Refuse a feed (name -> array) whose shape the placeholder it feeds does not
    take, naming the shape it wants (from the file, before anything runs);
    ``option`` names where the array came from. ``rows``: the array's first axis is
    rows, which run in the batches the graph takes (a fixed batch of 1 takes 16
    rows in 16 runs), so only the shape of a row must fit."""
    named = signature_names(model, tags)
    nodes = {node.name: node for node in loaded_graph_def(model, tags).node}
    for name, value in values.items():
        node = nodes.get(named.get(name, name).removesuffix(":0"))
        wanted = placeholder_shape(node) if node is not None else None
        if rows and wanted and value.ndim == len(wanted):
            wanted = [None, *wanted[1:]]
        if node is not None and wanted is not None and shape_mismatch(wanted, value.shape):
            given = f"{option} {name}" if option == "--feed" else option
            raise CheckUsageError(f"{given} has shape {list(value.shape)}, and {node.name} takes "
                                  f"{wanted} (None: any size)")


DEFAULTED = "PlaceholderWithDefault"




LISTED_OUTPUTS = 5  # a learner graph has hundreds of unread float tensors


def only_output(graph: Any, model: Model, tags: list | None) -> str:
    """The model's one floating-point output, for a check without ``--y``: among the
    outputs of its ``serving_default`` signature, else of all its signatures, else of
    the nodes no node reads (as ``graphgrad ops`` lists them)."""
    meta = _chosen_meta_graph(model, tags)
    signatures = signatures_of(meta) if meta else []
    serving = [signature for signature in signatures if signature[0] == SERVING_DEFAULT]
    signed = [tensor for _, _, outputs in serving or signatures for _, tensor in outputs]
    if signed:
        candidates = [tensor_named(graph, tensor) for tensor in signed]
    else:
        _, ends = graph_ends(bodies_of(loaded_graph_def(model, tags), functions=False)[0])
        candidates = [tensor for node, _ in ends for tensor in graph.get_operation_by_name(node).outputs]
    outputs = list(dict.fromkeys(t.name.removesuffix(":0") for t in candidates if floating(t.dtype)))
    if len(outputs) != 1:
        listed = f": {first_names(outputs, LISTED_OUTPUTS)}" if outputs else ""
        every = f"; to list them all: graphgrad ops {model.path} --json" if len(outputs) > LISTED_OUTPUTS else ""
        raise CheckUsageError(f"name the tensor to differentiate with --y; the model has {len(outputs)} "
                              f"floating-point outputs{listed}{every}")
    return outputs[0]


def float_placeholders(y: Any) -> list[str]:
    """The floating-point placeholders ``y`` depends on, in graph order, for a check
    without ``--x``."""
    computed_from = ancestors([y])
    found = [op.name for op in y.graph.get_operations()
             if op.type == "Placeholder" and op in computed_from and floating(op.outputs[0].dtype)]
    if not found:
        pipeline = _pipeline_outputs(computed_from)
        if pipeline:
            raise CheckUsageError(
                f"{y.name} reads its input from {_pipeline_phrase(pipeline)}; name x and feed it, e.g. "
                f"--x {pipeline[0]} --feed {pipeline[0]}=FILE.npy"
            )
        raise CheckUsageError(f"{y.name} depends on no floating-point placeholder; name x with --x")
    return found


# Ops that hand out what an input pipeline produced: nothing fills a queue or an
# iterator when check runs the graph, so a run that reaches one waits forever.
_PIPELINE = re.compile(r"(QueueDequeue\w*|IteratorGetNext\w*|ReaderRead\w*|Unstage|StagePeek|MapUnstage\w*|"
                       r"OrderedMapUnstage\w*|MapPeek|OrderedMapPeek)\Z")


def _pipeline_outputs(ops) -> list[str]:
    """The floating-point outputs of the queue and iterator ops among ``ops``."""
    return [t.name for op in sorted(ops, key=lambda op: op.name) if _PIPELINE.match(op.type)
            for t in op.outputs if floating(t.dtype)]


def _pipeline_phrase(outputs: list) -> str:
    return f"an input pipeline (a queue or an iterator, which nothing fills here: {first_names(outputs)})"


def refuse_unfed_pipelines(fetched: Iterable, feed: Iterable) -> None:
    """Refuse a run that would wait forever on a queue or an iterator: one among
    what ``fetched`` computes, upstream of no fed tensor."""
    fed = {tensor.op for tensor in feed}
    seen, stack = set(), [t.op for t in fetched]
    while stack:
        op = stack.pop()
        if op in seen or op in fed:
            continue
        seen.add(op)
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    waiting = [op.name for op in seen if _PIPELINE.match(op.type)]
    if waiting:
        outputs = _pipeline_outputs(op for op in seen if _PIPELINE.match(op.type))
        example = outputs[0] if outputs else f"{sorted(waiting)[0]}:0"
        raise CheckUsageError(
            f"the run would wait on {_pipeline_phrase(outputs or sorted(waiting))}; feed what it hands out, "
            f"e.g. --feed {example}=FILE.npy"
        )


def chosen_tags(model: Model, tags: str | None) -> list | None:
    """The tags of the MetaGraphDef to load: the SavedModel's only one, or the one
    whose tag set is ``tags``; None for other kinds."""
    if model.kind != SAVEDMODEL:
        if tags is not None:
            raise CheckUsageError(
                f"--tag chooses a MetaGraphDef of a SavedModel; {model.path} is a {KIND_NAMES[model.kind]}"
            )
        return None
    available = [list(meta.meta_info_def.tags) for meta in model.message.meta_graphs]
    listed = "; ".join(",".join(tag_set) for tag_set in available)
    if tags is None:
        if len(available) == 1:
            return available[0]
        raise CheckUsageError(
            f"{model.path} holds {len(available)} MetaGraphDefs (tag sets: {listed}). "
            f"To fix this, choose one with --tag, e.g. --tag {','.join(available[0])}"
        )
    wanted = {tag.strip() for tag in tags.split(",") if tag.strip()}
    for tag_set in available:
        if set(tag_set) == wanted:
            return tag_set
    raise CheckUsageError(f"no MetaGraphDef of {model.path} has the tag set {tags!r}; its tag sets: {listed}")


def refuse_irregular_checkpoint(prefix: str) -> None:
    """Refuse a checkpoint whose index or data shards are not regular files (a FIFO
    would block the restore forever), before TensorFlow opens them."""
    import glob

    for path in [prefix + ".index"] + glob.glob(glob.escape(prefix) + ".data-*"):
        try:
            what = kind_of_file(os.stat(path).st_mode)
        except OSError:
            continue
        if what:
            raise GraphgradError(f"checkpoint file {path} is {what}, not a regular file: restoring from it could "
                                 "wait forever; give a checkpoint of regular files")


def checkpoint_beside(model: Model) -> str | None:
    """The checkpoint prefix a ``.meta`` file was written with (``PREFIX.meta``
    beside ``PREFIX.index``), or None."""
    if model.kind != METAGRAPH or not model.path.endswith(".meta"):
        return None
    prefix = model.path[: -len(".meta")]
    return prefix if os.path.isfile(prefix + ".index") else None


@dataclass
class LoadGate:
    """The refusal of ops with effects outside the graph among what loading runs
    (initializers, the restore op, a SavedModel's init op, their inputs), before
    any of it runs; ``--allow-effects`` (``allowed``) lets them run."""

    path: str
    command: str
    allowed: bool
    graph_def: Any

    def refuse_what_loading_runs(self, ops: Sequence, restores: Iterable = ()) -> None:
        """Refuse ``ops`` if any of them, or what they are computed from, acts outside
        the graph; ``restores``: the restore ops that read the checkpoint being loaded."""
        if self.allowed or not ops:
            return
        restores = set(restores)
        # TF2's saver restores in a function it calls with the file name: the call is scanned (its body may
        # hold anything), and only the body's reads of that file name are the restore
        calls = {op for op in restores if op.type in CALL_OPS}
        reached = [op.node_def for op in ancestors_of_ops(ops) if op not in restores or op in calls]
        bodies = function_bodies(self.graph_def)
        own = _reads_of_the_file_given(self.graph_def, functions_run([op.node_def for op in calls], bodies))
        found = [unsafe for unsafe in unsafe_ops_in(reached, bodies, functions_also_run(self.graph_def))
                 if unsafe.partition(" (")[0] not in own]
        if found:
            raise GraphgradError(
                f"{self.path}: loading it would run {refused_phrase(found)} as its initializers, restore or init "
                f"ops, before {self.command} computes anything; to run them anyway, add --allow-effects"
            )


def _reads_of_the_file_given(graph_def: Any, functions: set) -> set:
    """``FUNCTION/NODE`` of the checkpoint reads in ``functions`` whose file name is
    the function's first argument (directly or through Identity nodes): the restore
    of the checkpoint its caller hands it, and no other file."""
    own = set()
    for function in graph_def.library.function:
        name = function.signature.name
        if name not in functions or not function.signature.input_arg:
            continue
        nodes = {node.name: node for node in function.node_def}
        argument = function.signature.input_arg[0].name
        for node in function.node_def:
            if node.op not in _RESTORES or not node.input:
                continue
            source, passed = node.input[0], set()
            while source.split(":")[0] in nodes and nodes[source.split(":")[0]].op == "Identity" and \
                    source not in passed:  # a hostile body's loop of Identities ends the walk
                passed.add(source)
                source = nodes[source.split(":")[0]].input[0]
            if source == argument:
                own.add(f"{name}/{node.name}")
    return own


def restore_op(graph: Any, saver: Any) -> list:
    """The op a Saver runs to restore, in ``graph``."""
    return [graph.get_operation_by_name(saver.saver_def.restore_op_name)] if saver is not None else []


_RESTORES = ("RestoreV2", "Restore", "RestoreSlice")


def restores_of(graph: Any, saver: Any) -> set:
    """The checkpoint reads of ``saver``'s restore: those whose file name is the one
    the saver feeds (the checkpoint being loaded), and no other file; and TF2's
    restore, a call op that takes that file name first (the variables after it)."""
    if saver is None:
        return set()
    filename = saver.saver_def.filename_tensor_name
    reads = {op for op in graph.get_operations()
             if op.type in _RESTORES and op.inputs and op.inputs[0].name == filename}
    restore = graph.get_operation_by_name(saver.saver_def.restore_op_name)
    if restore.type in CALL_OPS and restore.inputs and restore.inputs[0].name == filename:
        reads.add(restore)
    return reads


def _load_graph_variables(tf, session, model: Model, checkpoint: str | None, effects: "LoadGate") -> None:
    """Give the variables of a bare GraphDef values: from ``checkpoint`` by name, else
    by the initializers the graph holds for them (scanned for effects first)."""
    variables = graph_variables(session.graph)
    if checkpoint:
        if not variables:
            raise GraphgradError(f"{model.path} has no variables to restore from {checkpoint}")
        restore_variables(tf, session, variables, checkpoint)
    elif variables:
        initializers = initializers_of(variables)
        effects.refuse_what_loading_runs(initializers)
        if initializers:
            session.run(initializers)


def load_graph(model: Model, tags: list | None, checkpoint: str | None = None, allow_effects: bool = False,
               command: str = "check") -> tuple:
    """A tf.Graph and Session with the model in it (for a SavedModel, the
    MetaGraphDef with ``tags``); unresolved override names; the call ops routed
    through the ``call`` gradient, those into functions that hold overrides first
    (a list of two)."""
    tf = tensorflow()
    graph = tf.Graph()
    unresolved = set()
    effects = LoadGate(model.path, command, allow_effects, loaded_graph_def(model, tags))
    # Marked before the graph is built, calls inside branch functions are routed too.
    # The other calls too: graph mode cannot differentiate some at all (nested Keras calls).
    graph_def = loaded_graph_def(model, tags)
    routed = [route_calls_in(graph_def), route_calls_in(graph_def, all_calls=True)]
    try:
        register_gradients(model)
    except UnresolvedGradientsError:
        unresolved = {value for value in overrides_in(model) if not is_registered(value)}
    session = tf.compat.v1.Session(graph=graph)
    with graph.as_default():
        try:
            # Devices are cleared, as import_meta_graph(clear_devices=True) does: a graph
            # written for a cluster (/job:learner/...) names devices this process has not.
            # Nothing runs until what loading runs has been scanned for effects.
            if model.kind == GRAPHDEF:
                graph_def = tf_message(tf.compat.v1.GraphDef, model.message)
                for node in graph_def.node:
                    node.device = ""
                import_tf1_loops(tf, graph_def, name="")
                _load_graph_variables(tf, session, model, checkpoint, effects)
            elif model.kind == METAGRAPH:
                saver = _import_meta_graph(tf, tf_message(tf.compat.v1.MetaGraphDef, model.message))
                if checkpoint and saver is None:
                    raise GraphgradError(f"{model.path} has no variables to restore from {checkpoint}")
                initializers = [variable.initializer for variable in graph.get_collection("variables")]
                restore = restore_op(graph, saver) if checkpoint else []
                effects.refuse_what_loading_runs(initializers + restore, restores_of(graph, saver))
                session.run(initializers)
                if checkpoint:
                    saver.restore(session, checkpoint)
            else:
                _load_saved_model(tf, session, model, tags, effects)
        except (ValueError, tf.errors.OpError) as error:
            raise GraphgradError(f"TensorFlow cannot load {model.path}: {tensorflow_says(error)}") from None
    return graph, session, unresolved, routed


# Lines of TensorFlow's errors that say where, not what: its own header, and the
# Python stack of the op's definition it embeds.
_TF_NOISE = re.compile(r"(Graph execution error:|Detected at node .* defined at|File \"|\[\[|Traceback|Original stack)")


# Messages that quote the values they failed on (an Assert's data, a string that did
# not parse): cut where the values start, since they may be a file's bytes.
_QUOTED_VALUES = re.compile(r"(assertion failed:|could not (?:correctly )?convert string|"
                            r"StringToNumberOp could not)(.*)", re.IGNORECASE)


def tensorflow_says(error: Exception, limit: int = 400) -> str:
    """TensorFlow's reason for ``error`` in one line: the node and what is wrong,
    without the header and the stack it embeds ("Graph execution error:" alone
    says nothing), and without the tensor values some messages quote."""
    text = (getattr(error, "message", None) or str(error)).strip()
    lines = [line.strip() for line in text.splitlines()]
    # The first sentence of each line: the rest is TensorFlow's general advice.
    kept = [_QUOTED_VALUES.sub(r"\1 [values not shown]", line.split(". ")[0])
            for line in lines if line and not _TF_NOISE.match(line)]
    said = "; ".join(kept) or (lines[0] if lines else type(error).__name__)
    return said if len(said) <= limit else said[:limit - 3] + "..."


def _import_meta_graph(tf, meta_graph_def):
    """``import_meta_graph`` with devices cleared; the ``_output_shapes`` hints old TF1
    checkpoints carry dropped when TensorFlow refuses them as stale. Returns the saver."""
    try:
        return tf.compat.v1.train.import_meta_graph(meta_graph_def, clear_devices=True)
    except ValueError as error:
        if "_output_shapes" not in str(error):
            raise
    for node in meta_graph_def.graph_def.node:  # TensorFlow refused the graph whole: nothing was added
        node.attr.pop("_output_shapes", None)
    return tf.compat.v1.train.import_meta_graph(meta_graph_def, clear_devices=True)


def _load_saved_model(tf, session, model: Model, tags: list | None, effects: LoadGate) -> None:
    """TensorFlow's TF1 loader (variables, assets, init ops) on the MetaGraphDef
    with ``tags`` as ``model`` holds it in memory, which need not be the file's:
    the comparison without overrides loads the reset graph beside the files. Its
    steps one by one (as ``SavedModelLoader.load`` takes them), so that the restore
    and the init op are scanned for effects before either runs."""
    meta_graph_def = tf_message(tf.compat.v1.MetaGraphDef, meta_graph_with(model, tags))

    class InMemoryLoader(saved_model_loader_class()):  # type: ignore[misc]  # TensorFlow's class, found at run time
        def get_meta_graph_def_from_tags(self, _tags):
            return meta_graph_def

    loader = InMemoryLoader(model.root)
    saver, _ = loader.load_graph(session.graph, tags, clear_devices=True)
    init_op = saved_model_init_op(meta_graph_def)
    init = [init_op if hasattr(init_op, "type") else init_op.op] if init_op is not None else []
    # the model's own files: its checkpoint, and the vocabularies it ships as assets
    assets = _asset_tensors(meta_graph_def)
    own = restores_of(session.graph, saver) | {
        op for op in session.graph.get_operations()
        if op.type.startswith("InitializeTableFromTextFile") and op.inputs[1].name in assets}
    effects.refuse_what_loading_runs(restore_op(session.graph, saver) + init, own)
    loader.restore_variables(session, saver)
    loader.run_init_ops(session, tags)


def _asset_tensors(meta_graph_def) -> set:
    """The tensors a SavedModel's loader feeds with the paths of its own asset files:
    its ``asset_file_def``, and the ``saved_model_assets`` collection TF1's builder writes."""
    from tensorflow.core.protobuf.meta_graph_pb2 import AssetFileDef

    assets = {asset.tensor_info.name for asset in meta_graph_def.asset_file_def}
    collection = meta_graph_def.collection_def.get("saved_model_assets")
    for packed in collection.any_list.value if collection is not None else []:
        assets.add(AssetFileDef.FromString(packed.value).tensor_info.name)
    return assets


def asset_filenames(meta_graph_def: Any) -> list[str]:
    """The file names of a MetaGraphDef's assets (graphgrad's proto, read before
    TensorFlow is imported): its ``asset_file_def``, and the ``saved_model_assets``
    collection TF1's builder writes."""
    from tensorboard.compat.proto.meta_graph_pb2 import AssetFileDef

    names = [asset.filename for asset in meta_graph_def.asset_file_def]
    collection = meta_graph_def.collection_def.get("saved_model_assets")
    for packed in collection.any_list.value if collection is not None else []:
        names.append(AssetFileDef.FromString(packed.value).filename)
    return names


def meta_graph_with(model: Model, tags: list | None) -> Any:
    """The MetaGraphDef of a SavedModel with ``tags``."""
    [meta] = [meta for meta in model.message.meta_graphs if list(meta.meta_info_def.tags) == tags]
    return meta


def _chosen_meta_graph(model: Model, tags: list | None):
    """The MetaGraphDef that :func:`load_graph` loads; None for a GraphDef."""
    if model.kind == GRAPHDEF:
        return None
    return model.message if model.kind == METAGRAPH else meta_graph_with(model, tags)


def loaded_graph_def(model: Model, tags: list | None) -> Any:
    """The GraphDef that :func:`load_graph` loads."""
    meta = _chosen_meta_graph(model, tags)
    return model.message if meta is None else meta.graph_def


def tf_message(message_type: Any, message: Any) -> Any:
    return message_type.FromString(message.SerializeToString())


def signatures_hint(model: Model, tags: list | None) -> str:
    """The signatures' tensors of a MetaGraphDef, as a hint ("" where there are none)."""
    meta = _chosen_meta_graph(model, tags)
    if meta is None:
        return ""
    listed = [
        f"{key}: " + ", ".join(f"{name} = {tensor}" for name, tensor in [*inputs, *outputs])
        for key, inputs, outputs in signatures_of(meta)
    ]
    return f". Its signatures: {'; '.join(listed)}" if listed else ""


def signature_names(model: Model, tags: list | None) -> dict:
    """The input and output names of the chosen MetaGraphDef's signatures, each to
    its tensor (``note`` -> ``StatefulPartitionedCall:1``), where no two signatures
    use one name for different tensors."""
    meta = _chosen_meta_graph(model, tags)
    names: dict = {}
    for _, inputs, outputs in signatures_of(meta) if meta else []:
        for name, tensor in inputs + outputs:
            names.setdefault(name, set()).add(tensor)
    return {name: tensors.pop() for name, tensors in names.items() if len(tensors) == 1}


def same_tensor(a: str, b: str) -> bool:
    return (a if ":" in a else a + ":0") == (b if ":" in b else b + ":0")


def tensor_named(graph: Any, name: str) -> Any:
    full = name if ":" in name else name + ":0"
    try:
        return graph.get_tensor_by_name(full)
    except (KeyError, ValueError):
        try:
            op = graph.get_operation_by_name(full.rpartition(":")[0])
        except (KeyError, ValueError):
            op = None
        if op is not None and not op.outputs:
            raise CheckUsageError(f"{name} is a {op.type} op, which has no output tensor to differentiate") from None
        names = [t.name for op in graph.get_operations() for t in op.outputs]
        close = close_names(full, names, cutoff=0.5)
        hint = f"; close ones: {', '.join(close)}" if close else ""
        raise CheckUsageError(f"no tensor {name!r} in the graph{hint}") from None


def given_feeds(graph: Any, given: dict) -> dict:
    """``--feed`` values (name -> a number, a JSON list or a .npy path) as a feed
    dict of ``graph``'s tensors, each in its tensor's dtype."""
    feed = {}
    for name, text in given.items():
        tensor = tensor_named(graph, name)
        feed[tensor] = feed_value(text, tensor.dtype.as_numpy_dtype)
    return feed


def unfed_inputs(fetched: Iterable, feed: Container) -> tuple[list, list]:
    """What a run of ``fetched`` with ``feed`` would read from the caller: the
    placeholders nobody feeds (TensorFlow would refuse the run), and the
    ``PlaceholderWithDefault`` inputs left at their defaults."""
    computed = ancestors(fetched, fed=feed)
    placeholders = sorted(op.name for op in computed if op.type == "Placeholder")
    defaults = sorted(op.name for op in computed if op.type == DEFAULTED)
    return placeholders, defaults


def training_flags(graph: Any, defaults: list) -> list[str]:
    """The boolean ``PlaceholderWithDefault`` inputs among ``defaults`` whose default is
    a constant True: a training flag left on keeps dropout and batch normalisation in
    training mode (read from the constant, nothing runs)."""
    import numpy as np

    tf = tensorflow()
    flags = [graph.get_operation_by_name(name) for name in defaults]
    flags = [op for op in flags if op.outputs[0].dtype.name == "bool" and op.inputs[0].op.type == "Const"]
    return [op.name for op in flags if np.all(tf.make_ndarray(op.inputs[0].op.get_attr("value")))]


def feed_value(text: str, dtype: Any = None) -> Any:
    """A ``--feed`` value as an array (of ``dtype``, where given)."""
    import numpy as np

    if text.endswith(".npy"):
        array = load_array(text, "--feed")
        return array if dtype is None else array.astype(dtype)
    try:
        return np.asarray(json.loads(text), dtype=dtype)
    except RecursionError:
        raise CheckUsageError(f"--feed value {text[:20]!r}...: nested too deeply; give a .npy file") from None
    except MemoryError:
        raise CheckUsageError(f"--feed value {text[:20]!r}...: too large to hold; give a smaller one") from None
    except (ValueError, TypeError) as error:
        raise CheckUsageError(
            f"--feed value {text!r}: expected a number, a JSON list or a .npy file ({error})"
        ) from None
