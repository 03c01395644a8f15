"""The TensorFlow side: make the names graphgrad writes mean something.

This module (and ``check``, built on it) are the only ones that use TensorFlow,
and only inside functions, so importing graphgrad stays cheap. Gradients are registered with ``tf.RegisterGradient``
under the exact ``_gradient_op_type`` value, once per process.
"""

import logging
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..edits.rewrite import RewriteOptions, apply_rules
from ..edits.select import NODE, OP, Rule
from ..errors import GraphgradError, SpecError, TensorFlowMissingError, UnresolvedGradientsError, UnroutedCallsWarning
from ..files.reading import read_model
from ..gradients import TRANSFORM, USER
from ..gradients.calls import CALL_GRADIENT, ROUTED_COPY_SUFFIX, called_by, routed_copy, saved_gradient
from ..gradients.common import own_gradient
from ..gradients.spec import GradientSpec, TensorRef, parse_spec, spec_from_attr_value
from ..graph.functions import (
    calls_behind_branches,
    carries_override,
    first_names,
    function_bodies,
    function_calls,
    functions_with_overrides,
    rename_function_references,
    rename_in_attr,
    saved_gradient_outputs,
    saved_gradients,
    unrouted_calls_into,
)
from ..graph.model import GRAPHDEF, KINDS, METAGRAPH, SAVEDMODEL, Model, iter_graph_nodes, meta_graphs_of
from ..names import ATTR, CUSTOM_GRADIENT, FUNCTION_CALL_NAME, NAMESPACE, TF1_LOOP_ENTERS
from .function_caches import forget_cached_gradients
from .internals import (
    control_flow_copies_replaceable,
    custom_gradient_name,
    gradient_registry_entries,
    registered_gradient,
    set_op_attr,
)
from .loops import prepare_loops, restore_loop_contexts

_LOCK = threading.Lock()
_MESSAGE_KINDS = {"GraphDef": GRAPHDEF, "MetaGraphDef": METAGRAPH, "SavedModel": SAVEDMODEL}


def tensorflow() -> Any:
    """Import TensorFlow, or say what to install."""
    try:
        import tensorflow as tf
    except ImportError as error:
        raise TensorFlowMissingError(
            f"this needs TensorFlow, which is not installed ({error}). To fix this, install one of "
            "tensorflow, tensorflow-cpu or tf-nightly (only one: they write the same files)"
        ) from None
    return tf


def is_registered(name: str) -> bool:
    """Whether TensorFlow's gradient registry answers for ``name``."""
    tensorflow()
    try:
        registered_gradient(name)
    except LookupError:
        return False
    return True


@dataclass(frozen=True)
class Registration:
    """Names :func:`register_gradients` registered now, those already there, the
    call ops of a ``tf.Graph`` it routed through ``call`` (see :func:`route_calls`),
    and the calls it could not route (``function/node``: calls inside branch or
    loop functions of a finalized graph, which it warns about)."""

    registered: tuple = ()
    already: tuple = ()
    calls: tuple = ()
    unrouted: tuple = ()

    @property
    def names(self) -> tuple:
        return tuple(sorted(self.registered + self.already))


def build_gradient_function(spec: GradientSpec) -> Callable:
    """A ``tf.RegisterGradient``-style function ``(op, *grads) -> grads`` for ``spec``."""
    stages = list(spec.stages)
    replacement = None if stages[0].definition.kind == TRANSFORM else stages.pop(0)
    transforms = [(stage.definition.function, dict(stage.args)) for stage in stages]

    def gradient_function(op, *grads):
        tf = tensorflow()
        refused = spec.refuses(op.type)
        if refused:  # a graph edited by other means than graphgrad's rewrite, which refuses it
            raise ValueError(f"node {op.name!r}: {refused}")
        if replacement is None:
            input_grads = _default_gradient(op, grads)
        elif replacement.definition.kind == USER:
            input_grads = _as_list(op, replacement.definition.function(op, *grads), replacement.name)
        else:
            function = replacement.definition.function
            arguments = _read_tensor_args(tf, op, dict(replacement.args))
            input_grads = _as_list(op, function(tf, op, list(grads), **arguments), replacement.name)
        for function, args in transforms:
            input_grads = function(tf, op, input_grads, **_read_tensor_args(tf, op, args))
        return input_grads

    gradient_function.__name__ = f"graphgrad_{spec.canonical}"
    return gradient_function


def _read_tensor_args(tf, op, args: dict) -> dict:
    """``args`` with each :class:`~graphgrad.gradients.spec.TensorRef` replaced by its
    tensor in ``op``'s graph."""
    return {key: _tensor_of(tf, op, value) if isinstance(value, TensorRef) else value for key, value in args.items()}


def _tensor_of(tf, op, ref: TensorRef):
    """The tensor ``ref`` names, looked up under each name scope that encloses
    ``op``, innermost first, then at the top: an import prefix (``name=`` of
    import_graph_def) puts the graph's tensors under the same scope as its nodes."""
    parts = op.name.split("/")
    candidates = ["/".join(parts[:end] + [ref.tensor]) for end in range(len(parts) - 1, -1, -1)]
    for candidate in candidates:
        try:
            tensor = op.graph.get_tensor_by_name(candidate)
        except (KeyError, ValueError):
            continue
        return tf.reshape(tensor, [])  # a scalar: written so (graphgrad.edits.tensor_params)
    raise ValueError(
        f"node {op.name!r}: its gradient reads {ref} (a tensor parameter), and no tensor {ref.tensor} is in its "
        f"graph (looked for {', '.join(candidates)}). Tensor parameters name tensors of the graph's top level"
    )


def _default_gradient(op, grads):
    tensorflow()
    return _as_list(op, own_gradient(op, grads), op.type)


def _as_list(op, grads, source):
    if grads is None or not isinstance(grads, (list, tuple)):
        grads = [grads]
    grads = list(grads)
    if len(grads) != len(op.inputs):
        raise ValueError(
            f"gradient {source} returned {len(grads)} gradient(s) for node {op.name!r} "
            f"({op.type}), which has {len(op.inputs)} input(s)"
        )
    return grads


def _graph_defs(graph):
    """GraphDefs to scan: from a tf.Graph, a Model, a message of either flavour, or a path."""
    return [graph_def for graph_def, _ in _graphs_with_metas(graph)]


def _graphs_with_metas(graph) -> list:
    """``(GraphDef, its MetaGraphDef or None)`` of what :func:`_graph_defs` takes."""
    if hasattr(graph, "as_graph_def"):
        return [(graph.as_graph_def(), None)]
    if isinstance(graph, (str, bytes)) or hasattr(graph, "__fspath__"):
        graph = read_model(graph)
    kind: str | None
    if isinstance(graph, Model):
        message, kind = graph.message, graph.kind
    else:
        message = graph
        kind = _MESSAGE_KINDS.get(getattr(getattr(graph, "DESCRIPTOR", None), "name", ""))
        if kind not in KINDS:
            raise GraphgradError(
                f"register_gradients takes a tf.Graph, a GraphDef, MetaGraphDef or SavedModel "
                f"message, or a path; got {type(graph).__name__}"
            )
    if kind == GRAPHDEF:
        return [(message, None)]
    return [(meta.graph_def, meta) for _, meta in meta_graphs_of(message, kind)]


def _saved_gradient_entries(graphs_with_metas) -> dict:
    """Override name -> ``(gradient function, outputs)`` of the gradients saved with
    the graphs (see :func:`graphgrad.gradients.calls.saved_gradient`)."""
    return {
        value: (function, saved_gradient_outputs(meta, function) if meta is not None else None)
        for graph_def, meta in graphs_with_metas for value, function in saved_gradients(graph_def).items()
    }


def overrides_in(graph: Any) -> dict[str, list[str]]:
    """Override value -> names of the nodes that carry it (function bodies included)."""
    return _override_uses(_graph_defs(graph))


def _override_uses(graph_defs) -> dict[str, list[str]]:
    uses: dict[str, list[str]] = {}
    for graph_def in graph_defs:
        for node in iter_graph_nodes(graph_def):
            value = node.override
            if value is not None:
                uses.setdefault(value, []).append(node.name)
    return uses


def register_gradients(graph: Any) -> Registration:
    """Register every gradient that ``graph``'s overrides name, once per process.

    ``graph`` is a ``tf.Graph`` (after any loader), a GraphDef / MetaGraphDef /
    SavedModel message of either proto flavour, a :class:`Model`, or a path.
    Idempotent and thread-safe; never collides with names registered by users
    (graphgrad's names live under ``graphgrad/``). Raises
    :class:`UnresolvedGradientsError` listing each name no one can provide, after
    registering the others. On a ``tf.Graph``, routes its call ops (see
    :func:`route_calls`), and warns (:class:`UnroutedCallsWarning`) of calls it
    cannot route (in a finalized graph).

    The gradients of ``tf.custom_gradient`` saved with a model (see
    :func:`graphgrad.graph.functions.saved_gradients`) are registered under their names
    as they stand, for a TF1 loader that keeps them; :func:`import_graph_def`
    gives them names of their own instead, as ``tf.saved_model.load`` does.
    """
    graphs = _graphs_with_metas(graph)
    graph_defs = [graph_def for graph_def, _ in graphs]
    uses = _override_uses(graph_defs)
    saved = _saved_gradient_entries(graphs)
    tf = tensorflow()
    _quiet_import_warnings(graph_defs)
    registered, already, unresolved = [], [], []
    with _LOCK:
        for value in sorted(uses):
            if value in saved:
                outcome = _register_saved(tf, value, saved[value])
                if outcome == "registered":
                    registered.append(value)
                elif outcome == "already":
                    already.append(value)
                else:
                    unresolved.append((value, outcome))
                continue
            try:
                spec = spec_from_attr_value(value)
            except SpecError as error:
                unresolved.append((value, str(error)))
                continue
            if FUNCTION_CALL_NAME.match(value):
                continue  # tf.gradients differentiates call ops through their function
            if is_registered(value):
                already.append(value)
            elif spec is None:
                unresolved.append((value, _external_reason(value)))
            else:
                tf.RegisterGradient(value)(build_gradient_function(spec))
                registered.append(value)
    if unresolved:
        raise UnresolvedGradientsError(_unresolved_message(unresolved, uses))
    if not hasattr(graph, "get_operations"):
        return Registration(tuple(registered), tuple(already))
    routed, unrouted = route_calls(graph, graph_defs[0])
    if unrouted:
        warnings.warn(UnroutedCallsWarning(_unrouted_message(unrouted)), stacklevel=2)
    return Registration(tuple(registered), tuple(already), routed, unrouted)


# What tf.saved_model.load logs for a function whose overrides were not saved with
# it, as if nobody could provide them: wrong for those graphgrad registers.
_UNSAVED_WARNING = "Importing a function (%s) with ops with unsaved custom gradients"
_QUIET_FUNCTIONS: set = set()  # functions whose every override graphgrad provides


class _ProvidedGradientsFilter(logging.Filter):
    """Drops TensorFlow's unsaved-gradients warning for the functions in _QUIET_FUNCTIONS."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.msg, str) and record.msg.startswith(_UNSAVED_WARNING)
                    and isinstance(record.args, tuple) and record.args and record.args[0] in _QUIET_FUNCTIONS)


_FILTER = _ProvidedGradientsFilter()


def _quiet_import_warnings(graph_defs) -> None:
    """Silence the unsaved-gradients warning of ``tf.saved_model.load`` for the
    functions whose overrides are all graphgrad's (their names under ``graphgrad/``)."""
    for graph_def in graph_defs:
        for function in graph_def.library.function:
            values = [node.attr[ATTR].s for node in function.node_def if ATTR in node.attr]
            if values and all(value.startswith(NAMESPACE.encode()) for value in values):
                _QUIET_FUNCTIONS.add(function.signature.name)
    if _QUIET_FUNCTIONS:
        logging.getLogger("absl").addFilter(_FILTER)  # TensorFlow's loader logs through absl; added once


def save(obj: Any, export_dir: str, signatures: Any = None, options: Any = None) -> None:
    """``tf.saved_model.save`` for a model loaded with graphgrad's gradients
    registered (``register_gradients`` then ``tf.saved_model.load``).

    TensorFlow's own call fails there: it traces every registered gradient its
    functions name as ``grad_fn(None, *op.inputs)``, to save it beside them, and
    graphgrad's gradients read the op. So while it saves, graphgrad's names are
    hidden from TensorFlow's gradient registry: the functions keep their
    ``graphgrad/...`` overrides, which ``register_gradients`` provides again in the
    process that loads the result; the model's own ``tf.custom_gradient``
    gradients are saved as TensorFlow always does.
    """
    tf = tensorflow()
    entries = gradient_registry_entries()  # what save.py walks
    with _LOCK:
        hidden = {name: entries.pop(name) for name in list(entries)
                  if isinstance(name, str) and name.startswith(NAMESPACE)}
        try:
            tf.saved_model.save(obj, export_dir, signatures=signatures, options=options)
        finally:
            entries.update(hidden)


# Saved gradients registered under their own names here: name -> (function, outputs).
_SAVED_REGISTERED: dict = {}


def _register_saved(tf, value: str, entry: tuple) -> str:
    """Register the saved gradient ``entry`` (see :func:`_saved_gradient_entries`)
    as ``value``: "registered", "already", or why it cannot be."""
    if _SAVED_REGISTERED.get(value) == entry:
        return "already"
    if is_registered(value):
        return (
            f"it names tf.custom_gradient's gradient saved with the model (function {entry[0]}), but this "
            "process has another gradient of that name (its own tf.custom_gradient's, or another model's)"
        )
    tf.RegisterGradient(value)(saved_gradient(*entry))
    _SAVED_REGISTERED[value] = entry
    return "registered"


def _with_own_saved_names(graph_def, saved: dict):
    """A copy of ``graph_def`` whose nodes that name saved gradients name new ones,
    registered here as those gradients: what ``tf.saved_model.load`` does (with
    TensorFlow's own generator of names), so that they meet no other name."""
    tf = tensorflow()
    renamed = type(graph_def)()
    renamed.CopyFrom(graph_def)
    names = {}
    for node in iter_graph_nodes(renamed):
        value = node.override
        if value in saved:
            if value not in names:
                names[value] = custom_gradient_name()
                tf.RegisterGradient(names[value])(saved_gradient(*saved[value]))
            node.set_override(names[value])
    return renamed


def _unrouted_message(calls) -> str:
    return (
        f"{len(calls)} call op(s) inside branch or loop body functions run functions that hold gradient "
        f"overrides ({first_names(calls)}); the graph is finalized, so graphgrad cannot add the routed copies of those "
        "functions, and tf.gradients will ignore the overrides. To fix this, call "
        "graphgrad.register_gradients(graph) before the graph is finalized, import the GraphDef with "
        "graphgrad.import_graph_def, or write the call gradient into the file, one --node per call: "
        f"graphgrad rewrite MODEL --node '{calls[0]}=call' --force -o OUT"
    )


def route_calls(graph: Any, graph_def: Any) -> tuple[tuple, tuple]:
    """Give the call ops of a built ``tf.Graph`` (``graph_def``: its GraphDef) whose
    functions hold overrides the ``call`` gradient, so that tf.gradients
    differentiates their bodies in Python (graph mode would use SymbolicGradient,
    which ignores every override in them). Calls with an override of their own
    are left alone.

    A call inside a branch or loop function is out of reach where it is:
    TensorFlow builds a branch's graph from the function library, which a built
    graph keeps as it was. So the graph gets marked copies of the functions that
    lead to overrides (:func:`routed_copy` names them), and its ops that name those
    functions are pointed at the copies. Returns the names of the call ops routed
    now, and those of the calls left unrouted (``function/node``: a finalized
    graph takes no new functions)."""
    bodies = function_bodies(graph_def)
    overriding = functions_with_overrides(bodies)
    if not overriding:
        return (), ()
    unrouted = calls_behind_branches(graph_def.node, bodies)
    if unrouted and not graph.finalized:
        overriding |= _add_routed_copies(graph, graph_def, overriding)
        unrouted = []
    routed = []
    for op in graph.get_operations():
        if called_by(op) in overriding and not carries_override(op.node_def):
            _LiveOp(op).set_override(CALL_GRADIENT)
            routed.append(op.name)
    if routed and not is_registered(CALL_GRADIENT):
        with _LOCK:
            if not is_registered(CALL_GRADIENT):
                tensorflow().RegisterGradient(CALL_GRADIENT)(build_gradient_function(parse_spec("call")))
    return tuple(routed), tuple(unrouted)


def _add_routed_copies(graph, graph_def, overriding: set) -> set:
    """Add to ``graph`` a copy of each function in ``overriding`` with its calls
    routed, and point the graph's ops at the copies. Returns the copies' names."""
    tf = tensorflow()
    from tensorflow.core.framework import attr_value_pb2

    names = {name: routed_copy(name) for name in overriding if not name.endswith(ROUTED_COPY_SUFFIX)}
    present = {function.signature.name for function in graph_def.library.function}
    library = tf.compat.v1.GraphDef()
    for function in graph_def.library.function:
        if function.signature.name in names and names[function.signature.name] not in present:
            copy = library.library.function.add()
            copy.CopyFrom(function)
            route_calls_in_nodes(copy.node_def, overriding)
            copy.signature.name = names[function.signature.name]
            rename_function_references(copy.node_def, names)
    with graph.as_default():
        tf.compat.v1.import_graph_def(library, name="")
    for node in graph_def.node:
        for key, value in node.attr.items():
            if any(call.name in names for call in function_calls(value)):
                repointed = attr_value_pb2.AttrValue.FromString(value.SerializeToString())
                rename_in_attr(repointed, names)
                set_op_attr(graph.get_operation_by_name(node.name), key, repointed)
    return set(names.values())


def _external_reason(value: str) -> str:
    if CUSTOM_GRADIENT.match(value):
        return (
            "tf.custom_gradient named it in the process that built the graph; no other "
            "process has it"
        )
    return "no gradient is registered under this name (tf.RegisterGradient) in this process"


def _unresolved_message(unresolved, uses) -> str:
    lines = [f"{len(unresolved)} gradient override name(s) cannot be resolved in this process:"]
    for value, reason in unresolved:
        nodes = uses[value]
        shown = first_names(nodes)
        if CUSTOM_GRADIENT.match(value):
            fix = (
                f"graphgrad rewrite MODEL --node '{nodes[0]}=identity' --force "
                "(or another gradient spec)"
            )
        elif value.startswith("graphgrad/"):
            fix = "import the module that declares this gradient before register_gradients"
        elif reason.startswith("it names tf.custom_gradient's gradient saved"):
            fix = "load the graph with graphgrad.import_graph_def, which gives the saved gradient a name of its own"
        else:
            fix = (
                "register it with tf.RegisterGradient before loading, or give the node a "
                f"graphgrad gradient: graphgrad rewrite MODEL --node '{nodes[0]}=SPEC' --force"
            )
        lines.append(f"  {value!r} on {shown}: {reason}. To fix this, {fix}.")
    return "\n".join(lines)


def import_graph_def(graph_def_or_path: Any, **kwargs: Any) -> Any:
    """Read (if a path), route the graph's calls (:func:`with_routed_calls`),
    register its gradients, then import it into the default graph.

    Accepts a path, a :class:`Model`, or a GraphDef / MetaGraphDef / SavedModel
    (of one graph) message of either flavour; keyword arguments go to
    ``tf.compat.v1.import_graph_def``, which it returns. Gradients saved with
    the model (``tf.custom_gradient``'s) are called under names of their own. A
    MetaGraphDef whose graph holds TF1 control flow is imported as
    ``tf.compat.v1.train.import_meta_graph`` does, which restores the loops' and
    conditionals' contexts that ``tf.gradients`` needs. ``_output_shapes`` hints
    that TensorFlow refuses as stale (old TF1 checkpoints) are dropped, with a warning.
    """
    tf = tensorflow()
    graphs = _graphs_with_metas(graph_def_or_path)
    if len(graphs) != 1:
        raise GraphgradError(
            f"this model holds {len(graphs)} graphs; read it with graphgrad.read_model "
            "and pass the GraphDef of the one to import"
        )
    graph_def, meta = graphs[0]
    saved = _saved_gradient_entries(graphs)
    graph_def = with_routed_calls(graph_def)
    if saved:
        with _LOCK:
            graph_def = _with_own_saved_names(graph_def, saved)
    register_gradients(graph_def)
    if not isinstance(graph_def, tf.compat.v1.GraphDef):
        graph_def = tf.compat.v1.GraphDef.FromString(graph_def.SerializeToString())
    _clear_cluster_devices(graph_def)
    try:
        imported = _import(tf, graph_def, meta, kwargs)
    except ValueError as error:
        if "_output_shapes" not in str(error):
            raise
        warnings.warn(
            "graphgrad.import_graph_def: TensorFlow refused the graph's _output_shapes hints as stale "
            "(old TF1 checkpoints carry them); imported without them", stacklevel=2,
        )
        for node in graph_def.node:
            node.attr.pop("_output_shapes", None)
        imported = _import(tf, graph_def, meta, kwargs)
    _use_building_gradients(tf, tf.compat.v1.get_default_graph())
    return imported


def _clear_cluster_devices(graph_def: Any) -> None:
    """Clear the devices that name a cluster's job (``/job:learner/task:0/...``), at
    the top level and in function bodies: a graph written for a cluster would
    otherwise fail at run time in a process that has no such job. Local devices
    (``/device:GPU:0``) are kept."""
    nodes = list(graph_def.node) + [node for function in graph_def.library.function for node in function.node_def]
    for node in nodes:
        if "/job:" in node.device or node.device.startswith("job:"):
            node.device = ""




def holds_tf1_loops(graph: Any) -> bool:
    """Whether a built ``tf.Graph`` holds TF1 while loops (control flow v1)."""
    return any(op.type in TF1_LOOP_ENTERS for op in graph.get_operations())


@contextmanager
def building_gradients(graph: Any) -> Iterator[None]:
    """Build gradients of ``graph`` while the block runs: with control flow v2 off
    if the graph holds TF1 loops (TensorFlow differentiates their TensorArrays only
    so; with v2 on, tensor_array_grad fails on ``assert handle is None``; the
    process's setting is restored afterwards), and with the copies a TF2 loop's or
    branch's gradient makes of its functions replacing those an earlier gradient of
    the same model made (:func:`~graphgrad.tf.internals.control_flow_copies_replaceable`)."""
    tf = tensorflow()
    with control_flow_copies_replaceable():
        if not (holds_tf1_loops(graph) and tf.compat.v1.control_flow_v2_enabled()):
            yield
            return
        tf.compat.v1.disable_control_flow_v2()
        try:
            yield
        finally:
            tf.compat.v1.enable_control_flow_v2()


def _use_building_gradients(tf, graph) -> None:
    """After importing TF1 loops into ``graph``: turn control flow v2 off for the
    process (the gradients the caller builds next need it), and say so once."""
    if holds_tf1_loops(graph) and tf.compat.v1.control_flow_v2_enabled():
        tf.compat.v1.disable_control_flow_v2()
        warnings.warn(
            "graphgrad.import_graph_def: the graph holds TF1 while loops, whose gradients TensorFlow builds only "
            "with control flow v2 off; it is now off in this process (tf.compat.v1.enable_control_flow_v2() "
            "turns it back on)", stacklevel=3,
        )


# Collections in which a MetaGraphDef keeps its TF1 loops' and conditionals' contexts.
CONTROL_FLOW_COLLECTIONS = ("while_context", "cond_context")


def _import(tf, graph_def, meta, kwargs):
    if meta is None or not any(key in meta.collection_def for key in CONTROL_FLOW_COLLECTIONS):
        return import_tf1_loops(tf, graph_def, **kwargs)
    meta_graph_def = tf.compat.v1.MetaGraphDef.FromString(meta.SerializeToString())
    meta_graph_def.graph_def.CopyFrom(graph_def)
    scope = kwargs.get("name", "import")  # import_graph_def's default scope
    tf.compat.v1.train.import_meta_graph(meta_graph_def, import_scope=scope or None, input_map=kwargs.get("input_map"))
    elements = kwargs.get("return_elements")
    if elements is None:
        return None
    graph = tf.compat.v1.get_default_graph()
    return [graph.as_graph_element(f"{scope}/{name}" if scope else name) for name in elements]


def import_tf1_loops(tf: Any, graph_def: Any, **kwargs: Any) -> Any:
    """``tf.compat.v1.import_graph_def`` of a TensorFlow GraphDef, and, where it holds
    TF1 while loops (a frozen graph's), the loop contexts that freezing lost, rebuilt
    (:mod:`graphgrad.tf.loops`), so that tf.gradients can differentiate them."""
    prepared = prepare_loops(graph_def)
    imported = tf.compat.v1.import_graph_def(prepared, **kwargs)
    if prepared.node and any(node.op in TF1_LOOP_ENTERS for node in prepared.node):
        restore_loop_contexts(tf.compat.v1.get_default_graph(), prepared, kwargs.get("name", "import"))
    return imported


def with_routed_calls(graph_def: Any) -> Any:
    """``graph_def``, or a copy of it whose calls into functions that hold overrides
    (at the top level and in function bodies) carry the ``call`` gradient. Marked
    before the graph is built, a call is routed wherever TensorFlow differentiates
    it, inside branch functions too (compare :func:`route_calls`)."""
    if not functions_with_overrides(function_bodies(graph_def)):
        return graph_def
    routed = type(graph_def)()
    routed.CopyFrom(graph_def)
    route_calls_in(routed)
    return routed


def route_calls_in(graph_def: Any, all_calls: bool = False) -> list[str]:
    """Give the calls of a GraphDef (a message, changed in place) into functions
    that hold overrides the ``call`` gradient, at the top level and in function
    bodies, before a graph is built from it. Returns their names (``function/node``
    in a body). ``all_calls``: every call that carries no override, whatever its
    function holds (graph mode cannot differentiate some calls at all: a Keras
    export's nested StatefulPartitionedCalls)."""
    bodies = function_bodies(graph_def)
    overriding = set(bodies) if all_calls else functions_with_overrides(bodies)
    if not overriding:
        return []
    routed = []
    named_bodies = ((function.signature.name, function.node_def) for function in graph_def.library.function)
    for function, nodes in ((None, graph_def.node), *named_bodies):
        names = route_calls_in_nodes(nodes, overriding)
        routed += names if function is None else [f"{function}/{name}" for name in names]
    return routed


def route_calls_in_nodes(nodes: Iterable, overriding: set) -> list[str]:
    """Give the NodeDefs among ``nodes`` that call one of ``overriding`` (and carry
    no override) the ``call`` gradient, in place; returns their names."""
    calls = unrouted_calls_into(nodes, overriding)
    for node in calls:
        node.attr[ATTR].s = CALL_GRADIENT.encode()
    return [node.name for node in calls]


class _LiveOp:
    """An operation of a built tf.Graph, seen as a node reference."""

    graph = ""

    def __init__(self, op):
        self.op = op
        self.name = op.name
        self.op_type = op.type

    @property
    def override(self) -> str | None:
        if ATTR not in self.op.node_def.attr:
            return None
        return self.op.get_attr(ATTR).decode("utf-8", "replace")

    def set_override(self, value: str) -> None:
        from tensorflow.core.framework import attr_value_pb2

        set_op_attr(self.op, ATTR, attr_value_pb2.AttrValue(s=value.encode("utf-8")))


def _live_graph(graph_or_function: Any) -> Any:
    if hasattr(graph_or_function, "get_operations"):
        return graph_or_function
    graph = getattr(graph_or_function, "graph", None)
    if hasattr(graph, "get_operations"):
        return graph
    kind = type(graph_or_function).__name__
    traceable = hasattr(graph_or_function, "get_concrete_function")
    hint = " (a tf.function: pass f.get_concrete_function(...))" if traceable else ""
    raise GraphgradError(f"override takes a tf.Graph or a traced function; got a {kind}{hint}")


def override(graph: Any, ops: dict | None = None, nodes: dict | None = None, *, match: Sequence[str] = (),
             exclude: Sequence[str] = (), force: bool = False, allow_missing: bool = False) -> Any:
    """Give ops of an already built ``tf.Graph`` (or a traced function's, a
    ``ConcreteFunction`` or its ``.graph``) graphgrad gradients, and register them.

    ``ops`` maps op types to specs (like ``gradient_override_map``), ``nodes``
    maps name globs to specs: ``override(graph, {"Sign": "ste"})``. Same specs,
    names and errors as ``graphgrad rewrite``; function bodies are not touched.
    A traced function's gradients that TensorFlow already built and cached are
    forgotten, so the next gradient goes through the overrides (functions traced
    before, that call it, keep what they built).
    Returns the :class:`~graphgrad.edits.rewrite.RewriteReport`.
    """
    graph = _live_graph(graph)
    rules = tuple(Rule(OP, key, parse_spec(spec)) for key, spec in (ops or {}).items())
    rules += tuple(Rule(NODE, key, parse_spec(spec)) for key, spec in (nodes or {}).items())
    if not rules:
        raise GraphgradError("override needs at least one rule: ops={'Sign': 'ste'} or nodes={...}")
    options = RewriteOptions(
        rules=rules, match=tuple(match), exclude=tuple(exclude), functions=False,
        force=force, allow_missing=allow_missing,
    )
    report = apply_rules([_LiveOp(op) for op in graph.get_operations()], options)
    register_gradients(graph)
    forget_cached_gradients(graph)
    return report
