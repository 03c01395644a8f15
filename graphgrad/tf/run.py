"""The one way a command runs a model: :func:`open_run` reads it, refuses what is
unsafe (what the file alone decides first, before TensorFlow is imported: names,
feeds, the files it names; then the gate of :mod:`graphgrad.tf.effects` over the
path and what loading runs), loads it, and finds x, y and the feeds;
:meth:`Run.evaluate` is the one place a job's session runs, stopped by TensorFlow
at the run's deadline. ``check``, ``attribute`` and ``attack`` take their model
from here, and nothing else runs their sessions (a test parses the sources).

The command line also runs each job in a child process that it ends at the
deadline (:mod:`graphgrad.jobs.deadline`): TensorFlow's own deadline holds for
``session.run`` only.
"""

import os
import time
from dataclasses import dataclass, field
from typing import Any

from ..errors import GraphgradError
from ..files.confined import refuse_escaping_assets, refuse_escaping_shards
from ..files.reading import read_model
from ..graph.functions import call_cycle, function_bodies, functions_also_run
from ..graph.model import GRAPHDEF, SAVEDMODEL, Model
from ..methods.options import RunOptions
from ..edits.surgery import region_surrogate
from ..names import BYPASS, EMBED_SPEC, SOURCE
from .effects import refused_phrase, unsafe_ops_in
from .loading import (
    CheckUsageError,
    asset_filenames,
    checkpoint_beside,
    chosen_tags,
    feed_value,
    float_placeholders,
    load_graph,
    loaded_graph_def,
    meta_graph_with,
    only_output,
    refuse_irregular_checkpoint,
    refuse_misshapen_feeds,
    refuse_unfed_pipelines,
    refuse_unknown_names,
    same_tensor,
    signature_names,
    signatures_hint,
    tensor_named,
    tensorflow_says,
)
from .paths import ancestors, floating
from .runtime import tensorflow


class RunStopped(GraphgradError):
    """A run reached its deadline and TensorFlow stopped it."""


@dataclass(frozen=True)
class Deadline:
    """When runs must have ended (a ``time.monotonic()``), and what to say when one did not."""

    at: float
    stopped: str

    @classmethod
    def after(cls, seconds: float, stopped: str) -> "Deadline":
        return cls(time.monotonic() + seconds, stopped)


_V2_CONTROL_FLOW = frozenset({"While", "StatelessWhile", "If", "StatelessIf", "Case", "StatelessCase"})
_VARIABLES = frozenset({"VarHandleOp", "VariableV2", "Variable"})


@dataclass
class Run:
    """A model loaded to run in graph mode: the file, the MetaGraphDef chosen, the
    tf.Graph and Session, x and y, and the deadline of its runs, counted from its
    opening (a long-lived user such as the Explainer passes each call's own). Close
    it (or use it as a context manager) to release the session."""

    model: Model
    tags: list | None
    checkpoint: str | None
    graph: Any
    session: Any
    unresolved: set
    routed: list
    deadline: Deadline
    y: str = ""
    y_name: str = ""  # y's name in the model's signatures, if it has one
    y_tensor: Any = None
    xs: list = field(default_factory=list)
    x_tensors: list = field(default_factory=list)
    moved: dict = field(default_factory=dict)  # x or y -> the graphgrad node's output that stands in for it

    def evaluate(self, fetch: Any, feed: dict, deadline: Deadline | None = None) -> Any:
        """``session.run(fetch, feed)``, stopped at ``deadline`` (default: the run's),
        TensorFlow's errors one line naming the model."""
        tf = tensorflow()
        try:
            return run_session(self.session, fetch, feed, deadline or self.deadline)
        except (ValueError, tf.errors.OpError) as error:
            raise GraphgradError(f"{self.model.path}: TensorFlow says: {tensorflow_says(error)}") from None

    def close(self) -> None:
        self.session.close()

    def renew_session_if_stale(self) -> None:
        """After a gradient was built: a new session of a frozen graph with TF2 loops
        or branches on its top level, whose forward ops the gradient changed
        (while_v2 and cond_v2 add outputs to them, which a session that has run the
        graph cannot see: "invalid output"). A frozen graph has nothing to restore."""
        tf = tensorflow()
        if self.model.kind != GRAPHDEF or not any(op.type in _V2_CONTROL_FLOW for op in self.graph.get_operations()):
            return
        if any(op.type in _VARIABLES for op in self.graph.get_operations()):  # their values live in the session
            return
        stale, self.session = self.session, tf.compat.v1.Session(graph=self.graph)
        stale.close()

    def __enter__(self) -> "Run":
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def moved_notes(self) -> list[str]:
        """One line for each x or y taken at the node that stands in for it."""
        return [f"{tensor} has a gradient written into the graph (--embed or insert) at {stand_in}, which its "
                f"consumers read: differentiated there, as an override on its node would apply at {tensor}"
                for tensor, stand_in in self.moved.items()]


def run_session(session: Any, fetch: Any, feed: dict, deadline: Deadline) -> Any:
    """``session.run(fetch, feed)``, stopped by TensorFlow itself at ``deadline``
    (:class:`RunStopped`); its other errors are TensorFlow's."""
    tf = tensorflow()
    remaining = deadline.at - time.monotonic()
    try:
        if remaining <= 0:
            raise tf.errors.DeadlineExceededError(None, None, "")
        return session.run(fetch, feed, options=tf.compat.v1.RunOptions(timeout_in_ms=max(1, int(remaining * 1000))))
    except tf.errors.DeadlineExceededError:
        raise RunStopped(deadline.stopped) from None


def open_run(source: "str | Model", options: RunOptions, command: str = "check", fed_are_not_x: bool = False) -> Run:
    """The model at ``source`` (a path, or a read :class:`Model`) loaded to run, x
    and y found as ``check`` finds them: signature names taken; without y, the one
    floating-point output; without xs, the floating-point placeholders y depends
    on (but those ``options.feeds`` gives, if ``fed_are_not_x``). Names, feeds and
    the files the model names that do not fit are refused before TensorFlow is
    imported; ops the gate does not let run, on the path and in loading, before
    anything runs, unless ``options.allow_effects``."""
    model = source if isinstance(source, Model) else read_model(source, options.kind)
    chosen, prefix = _refuse_from_the_file(model, options)
    graph, session, unresolved, routed = load_graph(model, chosen, prefix, options.allow_effects, command)
    stopped = (f"{model.path}: running it took over {options.timeout:g} s and was stopped; give it longer with "
               "--timeout SECONDS")
    run = Run(model, chosen, prefix, graph, session, unresolved, routed, Deadline.after(options.timeout, stopped))
    _refuse_misshapen_bypasses(run)
    _find_x_and_y(run, options, command, fed_are_not_x)
    return run


def _refuse_misshapen_bypasses(run: Run) -> None:
    """A bypass whose surrogate gives another shape than its end, as TensorFlow infers
    them once the graph is built (a file may not say): the identity cannot carry a
    thermometer encoding's [n, h, w, 16] back to [n, h, w, 1], and every run would
    fail on a reshape; refused before anything runs, with the surrogate that fits."""
    for op in run.graph.get_operations():
        if BYPASS not in op.node_def.attr:
            continue
        source = op.node_def.attr[BYPASS].s.decode("utf-8", "replace")
        try:
            start = tensor_named(run.graph, source)
        except CheckUsageError:
            continue  # a bypass inside a function body: its ends are not in the graph
        group, end = op.name.rpartition("/")[0], op.outputs[0]
        surrogate = run.graph.get_operation_by_name(f"{group}/stop_h").inputs[0]
        sizes = _row_size(surrogate.shape), _row_size(end.shape)  # equal sizes reshape into one another
        if None in sizes or sizes[0] == sizes[1]:
            continue
        spec = op.node_def.attr[EMBED_SPEC].s.decode("utf-8", "replace")
        fits = region_surrogate(_listed(start.shape), _listed(end.shape))
        advice = (f"reset this bypass (graphgrad reset) and bypass again with --surrogate '{fits}'" if fits else
                  "bypass between tensors of one shape (the part of the defence that keeps it), or reset this "
                  "bypass (graphgrad reset) and choose other ends")
        raise GraphgradError(
            f"{run.model.path}: the bypass {op.name} carries the gradient from a tensor of shape "
            f"{_listed(end.shape) or 'unknown'} back to {source}, of shape {_listed(start.shape) or 'unknown'}, "
            f"through {spec}, which gives shape {_listed(surrogate.shape) or 'unknown'}: its surrogate must give "
            f"the shape of the bypass's end; {advice}")


def _listed(shape: Any) -> list | None:
    """A static shape as the file-side shape checks write it (-1: unknown), or None."""
    return None if shape.rank is None else [-1 if d is None else d for d in shape.as_list()]


def _refuse_from_the_file(model: Model, options: RunOptions) -> tuple[list | None, str | None]:
    """What the file alone refuses (before TensorFlow): the MetaGraphDef chosen and
    the checkpoint prefix to restore, or a one-line error."""
    chosen = chosen_tags(model, options.tags)
    cycle = call_cycle(function_bodies(loaded_graph_def(model, chosen)))
    if cycle:
        raise GraphgradError(
            f"{model.path}: its functions call themselves ({' -> '.join(cycle)}), which TensorFlow cannot import "
            "(it recurses until the process crashes); no model TensorFlow wrote holds such a library"
        )
    names = options.names
    refuse_unknown_names(model, chosen, options.xs, options.y, options.feeds, (names.x, names.y, names.feeds))
    refuse_misshapen_feeds(model, chosen, {name: feed_value(text) for name, text in options.feeds.items()})
    prefix = options.checkpoint or checkpoint_beside(model)
    if prefix:
        refuse_irregular_checkpoint(prefix)
        refuse_escaping_shards(prefix, os.path.dirname(os.path.abspath(prefix)))
    if model.kind == SAVEDMODEL and model.root:
        refuse_irregular_checkpoint(os.path.join(model.root, "variables", "variables"))
        refuse_escaping_shards(os.path.join(model.root, "variables", "variables"), model.root)
        refuse_escaping_assets(model.root, asset_filenames(meta_graph_with(model, chosen)))
    return chosen, prefix


def _find_x_and_y(run: Run, options: RunOptions, command: str, fed_are_not_x: bool) -> None:
    """x and y of ``run`` (see :func:`open_run`), and the gate over what running them runs."""
    model, graph, chosen, feeds = run.model, run.graph, run.tags, options.feeds
    named = signature_names(model, chosen)  # signature input and output names, to their tensors
    run.y = named.get(options.y, options.y) if options.y else only_output(graph, model, chosen)
    run.y_name = next((name for name, tensor in named.items() if same_tensor(tensor, run.y)), "")
    stand_ins = _stand_ins(graph)
    with graph.as_default():
        run.y_tensor = _stood_in(run, tensor_named(graph, run.y), stand_ins)
        if not floating(run.y_tensor.dtype):
            raise CheckUsageError(
                f"--y {run.y} is {run.y_tensor.dtype.name}: {command} differentiates a floating-point tensor"
                + signatures_hint(model, chosen)
            )
        given = {name.removesuffix(":0") for name in feeds} if fed_are_not_x else set()
        run.xs = ([named.get(x, x) for x in options.xs]
                  or [x for x in float_placeholders(run.y_tensor) if x not in given])
        run.x_tensors = [_stood_in(run, tensor_named(graph, x), stand_ins) for x in run.xs]
        # what runs: y's ancestors, cut where x and the --feed tensors are fed
        fed = set(run.x_tensors) | {tensor_named(graph, name) for name in feeds}
        graph_def = loaded_graph_def(model, chosen)
        unsafe = unsafe_ops_in([op.node_def for op in ancestors([run.y_tensor], fed=fed)], function_bodies(graph_def),
                               functions_also_run(graph_def))
    if unsafe and not options.allow_effects:
        refuse_unfed_pipelines([run.y_tensor, *run.x_tensors], fed)  # the refusal with the feed that fixes it
        raise GraphgradError(
            f"{model.path}: {command} runs the graph, and its path holds {refused_phrase(unsafe)}; to run it "
            "anyway, add --allow-effects"
        )


def _row_size(shape: Any) -> int | None:
    """The entries of one row of a batch-first shape, where the shape says."""
    import math

    if shape.rank is None or shape.rank == 0 or None in shape.as_list()[1:]:
        return None
    return math.prod(shape.as_list()[1:])


def _stand_ins(graph: Any) -> dict:
    """``{tensor name: the tensor of the graphgrad node that stands in for it}``: an
    ``--embed`` surrogate or an inserted gradient, which the tensor's consumers read."""
    found = {}
    for op in graph.get_operations():
        if SOURCE in op.node_def.attr:
            ref = op.node_def.attr[SOURCE].s.decode()
            found[ref if ":" in ref else ref + ":0"] = op.outputs[0]
    return found


def _stood_in(run: Run, tensor: Any, stand_ins: dict) -> Any:
    """``tensor``, or the graphgrad node's output that stands in for it: its gradient
    (embedded or inserted) applies there, as an override on its node would apply
    at the tensor itself; ``run.moved`` records the move."""
    stand_in = stand_ins.get(tensor.name)
    if stand_in is None:
        return tensor
    run.moved[tensor.name] = stand_in.name
    return stand_in
