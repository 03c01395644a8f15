"""graphgrad attribute: attributions of a graph file's output, by gradient overrides.

A method is a set of rules of the gradient library on op types (guided
backpropagation: ``guided_relu`` on the Relu family; epsilon-LRP: ``eps_lrp`` on
the elementwise nonlinearities; ...), applied to a copy of the graph in memory,
then tf.gradients of ``y[..., target]`` with respect to x, times the input for the
methods that say so. Linear and structural ops keep their own gradient; any other
op type on the x -> y paths that the method has no rule for is named before the
graph runs (and refused for the methods whose meaning depends on a rule at every
nonlinearity). The graph runs as ``check`` runs it (:func:`graphgrad.tf.loading.prepare_run`).
"""

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ..edits.apply import rewrite_model
from ..edits.rewrite import RewriteOptions
from ..edits.select import OP, Rule
from ..errors import GraphgradError, UsageError
from ..files.reading import read_model
from ..graph.model import Model
from ..gradients.attribution import DEEPLIFT_OPS, LINEAR_LAYERS, MAX_POOLS, NONLINEARITIES, PRODUCTS, gate_factor
from ..gradients.masking import RELU_FAMILY
from ..gradients.spec import parse_spec, parse_stages
from ..graph.functions import first_names, function_bodies, functions_run
from ..graph.loops import EXITS, MERGES, SWITCHES
from ..names import CALL_OPS, TF1_LOOP_ENTERS
from .batches import Batching, adds_its_batch, batching_for, in_batches, padded
from .check import summed_softmax, tensor_entry
from .internals import in_while_loop
from .loading import (
    DEFAULT_TIMEOUT,
    chosen_tags,
    given_feeds,
    prepare_run,
    refuse_misshapen_feeds,
    refuse_unfed_pipelines,
    tensor_named,
    tensorflow_says,
    training_flags,
    unfed_inputs,
)
from .paths import ops_between
from .runtime import tensorflow, tf1_control_flow

# Op types whose own gradient every method keeps: linear in their data input, or
# only moving entries around (so the rules at the nonlinearities decide).
PASS_THROUGH = frozenset({
    "Placeholder", "PlaceholderWithDefault", "Const", "Identity", "IdentityN", "StopGradient", "Snapshot",
    "MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Conv1D", "Conv2D", "Conv3D",
    "DepthwiseConv2dNative", "Conv2DBackpropInput", "Conv3DBackpropInputV2", "BiasAdd", "Add", "AddV2", "AddN",
    "Sub", "Neg", "Mul",
    "RealDiv", "Reshape", "Squeeze", "ExpandDims", "Transpose", "ConcatV2", "Pack", "Unpack", "Split", "SplitV",
    "Slice", "StridedSlice", "Pad", "PadV2", "MirrorPad", "Tile", "GatherV2", "MaxPool", "AvgPool", "MaxPool3D",
    "AvgPool3D", "Mean", "Sum", "FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3", "Cast", "Shape",
    "Fill", "ZerosLike", "OnesLike", "Select", "SelectV2", "ResizeBilinear", "ResizeNearestNeighbor",
    # control flow and TensorArrays (TF1 loops, dynamic_rnn): they route values unchanged
    "Enter", "RefEnter", "Exit", "RefExit", "Merge", "RefMerge", "Switch", "RefSwitch", "NextIteration",
    "LoopCond", "TensorArrayV3", "TensorArrayReadV3", "TensorArrayWriteV3", "TensorArrayScatterV3",
    "TensorArrayGatherV3", "TensorArraySizeV3", "TensorArrayConcatV3", "TensorArraySplitV3", "Gather", "GatherNd",
    # no float output, or no data at all: never on a path a gradient takes
    "NoOp", "Assert", "ReadVariableOp", "VarHandleOp", "Size", "Rank", "Range", "Equal", "NotEqual", "Less",
    "LessEqual", "Greater", "GreaterEqual", "All", "Any", "LogicalAnd", "LogicalOr", "LogicalNot",
})


@dataclass(frozen=True)
class Method:
    """An attribution method: rules by op type, and what multiplies the gradient."""

    name: str
    rules: tuple = ()  # (op types, spec text)
    times_input: bool = False  # times x (gradient x input, LRP), or x - baseline (DeepLIFT, IG)
    baseline: bool = False  # takes a baseline (x - baseline; DeepLIFT's batch, IG's path)
    steps: int = 0  # integrated gradients' steps
    complete: bool = False  # needs a rule at every nonlinearity (refuses uncovered op types)
    cam: bool = False  # Grad-CAM: a layer's activations weighted by their mean gradient, not dy/dx
    plus: bool = False  # Grad-CAM++'s weights (Chattopadhay et al.) instead of the mean gradient
    samples: int = 0  # over a background set: expected gradients' draws per row (0: DeepSHAP, every row of it)
    background: bool = False  # the baseline is a background set of any number of rows, averaged over
    seed: int = 0  # of expected gradients' draws
    occlusion: tuple = ()  # (window, stride, value): y's drop when a window of x is set to value, no gradient
    kept: tuple = ()  # op types whose own gradient is the method's rule (LRP: Relu passes relevance on)
    guided_cam: bool = False  # guided Grad-CAM: these rules' gradient times Grad-CAM's map, resized to x
    score_cam: bool = False  # Score-CAM: a layer's maps weighted by the score of x masked with each, no gradient


PASS_ON_EPS = 1e-9  # eps_lrp_layers' rule at a nonlinearity: y / x, kept finite at x = 0
SIGNAL_TAKE_ALL = "signal_take_all"
GATED_PRODUCTS = (PRODUCTS, SIGNAL_TAKE_ALL)  # LRP's rule for gates: a product of two x-dependent tensors needs one


def _methods(name: str, args: dict) -> Method:
    """The method ``name`` with its arguments (as the spec grammar parsed them)."""
    def take(key: str, default, kind=float):
        value = args.pop(key, default)
        wrong = not isinstance(value, int if kind is int else (int, float)) or isinstance(value, bool)
        if wrong:
            raise UsageError(f"--method {name}: {key} must be a number, got {value!r}")
        return kind(value)

    if name == "gradient":
        method = Method(name)
    elif name == "grad_x_input":
        method = Method(name, times_input=True)
    elif name == "integrated_gradients":
        steps = take("steps", 50, int)
        if steps < 1:
            raise UsageError(f"--method integrated_gradients: steps must be at least 1, got {steps}")
        method = Method(f"integrated_gradients(steps={steps})", times_input=True, baseline=True, steps=steps)
    elif name == "guided_backprop":
        method = Method(name, rules=((RELU_FAMILY, "guided_relu"),))
    elif name == "deconvnet":
        method = Method(name, rules=((RELU_FAMILY, "deconvnet"),))
    elif name == "eps_lrp":
        eps = take("eps", 1e-4)
        spec = parse_spec(f"eps_lrp(eps={eps!r})")  # the gradient's own check of eps
        method = Method(f"eps_lrp(eps={eps!r})", rules=((NONLINEARITIES + ("Softmax",), spec.canonical),
                                                        GATED_PRODUCTS), times_input=True, complete=True)
    elif name == "deeplift":
        method = Method(name, rules=((DEEPLIFT_OPS, "deeplift"),), times_input=True,
                        baseline=True, complete=True)
    elif name == "eps_lrp_layers":
        eps = take("eps", 1e-4)
        # the nonlinearities pass the relevance on (y / x): eps is the layers' alone
        nonlinear, linear = parse_spec(f"eps_lrp(eps={PASS_ON_EPS!r})"), parse_spec(f"eps_lrp_linear(eps={eps!r})")
        method = Method(f"eps_lrp_layers(eps={eps!r})", rules=((NONLINEARITIES + ("Softmax",), nonlinear.canonical),
                                                               (LINEAR_LAYERS + ("DepthwiseConv2dNative",),
                                                                linear.canonical), GATED_PRODUCTS),
                        times_input=True, complete=True)
    elif name in ("lrp_alpha_beta", "lrp_zplus"):
        alpha, beta = (take("alpha", 1.0), take("beta", 0.0)) if name == "lrp_alpha_beta" else (1.0, 0.0)
        spec = parse_spec(f"lrp_alpha_beta(alpha={alpha!r},beta={beta!r})")  # the gradient's own check
        label = name if name == "lrp_zplus" else f"lrp_alpha_beta(alpha={alpha!r},beta={beta!r})"
        method = Method(label, rules=((LINEAR_LAYERS, spec.canonical),), times_input=True, complete=True,
                        kept=("Relu",) + MAX_POOLS)
    elif name == "gradcam":
        method = Method(name, cam=True)
    elif name == "gradcam_pp":
        method = Method(name, cam=True, plus=True)
    elif name == "scorecam":
        method = Method(name, score_cam=True)
    elif name == "guided_gradcam":
        method = Method(name, rules=((RELU_FAMILY, "guided_relu"),), guided_cam=True)
    elif name == "expected_gradients":
        samples, seed = take("samples", 200, int), take("seed", 0, int)
        if samples < 1:
            raise UsageError(f"--method expected_gradients: samples must be at least 1, got {samples}")
        method = Method(f"expected_gradients(samples={samples},seed={seed})", times_input=True, baseline=True,
                        samples=samples, background=True, seed=seed)
    elif name == "deepshap":
        method = Method(name, rules=((DEEPLIFT_OPS, "deeplift"),), times_input=True,
                        baseline=True, complete=True, background=True)
    elif name == "occlusion":
        window, stride, value = take("window", 4, int), take("stride", 0, int), take("value", 0.0)
        stride = stride or window
        if window < 1 or stride < 1:
            raise UsageError(f"--method occlusion: window and stride must be at least 1, got {window} and {stride}")
        method = Method(f"occlusion(window={window},stride={stride},value={value!r})",
                        occlusion=(window, stride, value))
    else:
        raise UsageError(f"--method {name}: no such method; the methods are {', '.join(METHODS)}")
    if args:
        raise UsageError(f"--method {name}: no parameter {', '.join(args)}")
    return method


METHODS = ("gradient", "grad_x_input", "integrated_gradients(steps=50)", "guided_backprop", "deconvnet",
           "eps_lrp(eps=0.0001)", "eps_lrp_layers(eps=0.0001)", "lrp_alpha_beta(alpha=1.0,beta=0.0)", "lrp_zplus",
           "deeplift", "deepshap", "expected_gradients(samples=200,seed=0)", "gradcam", "gradcam_pp",
           "guided_gradcam", "scorecam",
           "occlusion(window=4,stride=4,value=0.0)")


def parse_method(text: str) -> Method:
    """A method as ``--method`` spells it: ``deeplift``, ``eps_lrp(eps=0.01)``,
    ``integrated_gradients(steps=100)`` (the spec grammar; nothing is evaluated)."""
    stages = parse_stages(text)
    if len(stages) != 1:
        raise UsageError(f"--method {text!r}: one method, e.g. {METHODS[0]} or {METHODS[-1]}")
    name, positional, keywords = stages[0]
    if positional:
        raise UsageError(f"--method {text!r}: name its parameters, e.g. eps_lrp(eps=0.01)")
    return _methods(name, dict(keywords))


# Linear in each input alone: of two tensors that both depend on x, a product (an
# LSTM's or GRU's gate times its state) is not linear; deeplift's rule for Mul
# covers it, LRP's signal-take-all rule only where one factor is a gate.
_BILINEAR = ("Mul", "RealDiv", "Div", "MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")


def _products(path_ops: set, x, rules: dict) -> list:
    """``"Mul (of two tensors computed from x)"`` for each op type on the path with
    such a product that no rule of ``rules`` (op type -> spec) takes."""
    found = set()
    for op in path_ops:
        if op.type in _BILINEAR and sum(t.op in path_ops or t is x for t in op.inputs) >= 2:
            spec = rules.get(op.type)
            if spec is None or (spec == SIGNAL_TAKE_ALL and gate_factor(op) is None):
                found.add(op.type)
    return [f"{op_type} (of two tensors computed from x{'' if rules.get(op_type) is None else ', neither a gate'})"
            for op_type in sorted(found)]


def _op_types_run(run, ops) -> set:
    """The op types of ``ops``, with those of the functions they call (call ops,
    If branches, While bodies; transitively) in place of the calls."""
    bodies = function_bodies(run.graph.as_graph_def())
    types = {op.type for op in ops if op.type not in bodies}
    pending = functions_run([op.node_def for op in ops], bodies)
    seen: set = set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        nodes = bodies[name]
        types |= {node.op for node in nodes if node.op not in bodies}
        pending |= functions_run(nodes, bodies)
    return types - ({"PartitionedCall", "StatefulPartitionedCall"} if seen else set())


@dataclass
class RowCheck:
    """Completeness of one row: the attributions' sum against f(x) - f(baseline)."""

    row: int
    attribution_sum: float
    output_difference: float


@dataclass
class AttributionReport:
    model: str
    method: str
    x: str
    y: str
    target: int | None
    shape: tuple = ()
    targets: list = field(default_factory=list)  # one class per row (--target FILE.npy or predicted)
    noise: str = ""  # SmoothGrad's samples, sigma and aggregate, when the method is smoothed
    layer: str = ""  # Grad-CAM's layer
    rules: dict = field(default_factory=dict)  # op type -> the spec the method gives it, for those on the path
    uncovered: list = field(default_factory=list)  # op types on the path with neither a rule nor a pass-through
    completeness: list = field(default_factory=list)  # RowCheck, for methods with a baseline
    feeds: dict = field(default_factory=dict)  # --feed: tensor -> "given"
    training_flags: list = field(default_factory=list)  # boolean inputs left at a default of True
    batch: int | None = None  # the rows each run takes, where the graph fixes it
    notes: list = field(default_factory=list)  # x or y taken where a gradient written into the graph applies


@dataclass(frozen=True)
class ArgumentNames:
    """How errors name what the caller gave: :meth:`Explainer.explain`'s arguments,
    or the command's options (:data:`COMMAND_NAMES`)."""

    inputs: str = "inputs"
    target: str = "target"
    baseline: str = "baseline"
    x: str = "x"
    layer: str = "layer"
    feed: str = "feeds={{'{name}': {value}}}"  # formatted with a placeholder's name and value


COMMAND_NAMES = ArgumentNames("--input", "--target", "--baseline", "--x", "--layer", "--feed {name}={value}")


@dataclass(frozen=True)
class AttributeOptions:
    """What ``graphgrad attribute`` takes besides the model and the input."""

    method: Method
    x: str | None = None
    y: str | None = None
    target: Any = None  # an index for every row, "predicted", or an array of one index per row
    allow_uncovered: bool = False
    allow_effects: bool = False
    kind: str | None = None
    tags: str | None = None
    checkpoint: str | None = None
    feeds: dict = field(default_factory=dict)  # placeholder name -> a number, a JSON list or a .npy path
    timeout: float = DEFAULT_TIMEOUT  # seconds all runs may take together
    noise: "Noise | None" = None  # SmoothGrad over the method
    layer: str | None = None  # Grad-CAM's layer (default: the last 4-D tensor on the path with a spatial size)


def attribute_model(path: str, inputs: Any, baseline: Any, options: AttributeOptions) -> tuple[Any, AttributionReport]:
    """Attributions of ``y[..., target]`` to x for every row of ``inputs`` (an
    array of x's shape), as ``options.method`` computes them; ``baseline`` (an
    array of x's shape, or of one row) for the methods that take one, None: zeros.
    Every placeholder y reads besides x must be fed (``options.feeds``); rows run
    in batches the graph accepts (:mod:`graphgrad.tf.batches`). Returns
    ``(attributions, report)``; the file is not changed. One :class:`Explainer`,
    used once."""
    import numpy as np

    model = read_model(path, options.kind)
    if options.x:  # the rows against x's declared shape, from the file, before TensorFlow
        tags, inputs = chosen_tags(model, options.tags), np.asarray(inputs)
        try:
            refuse_misshapen_feeds(model, tags, {options.x: inputs}, "--input")
        except UsageError as misshapen:
            try:  # unless it is several examples of an x without a batch axis, stacked (the explainer tells)
                if not inputs.ndim:
                    raise
                refuse_misshapen_feeds(model, tags, {options.x: inputs[0]}, "--input")
            except UsageError:
                raise misshapen from None
    settings = {f.name: getattr(options, f.name) for f in fields(options) if f.name != "method"}
    return Explainer(model, options.method, names=COMMAND_NAMES, **settings).explain(inputs, baseline=baseline)


class Explainer:
    """A model read, rewritten for one attribution method and imported once, whose
    :meth:`explain` answers every call from the same session: the gradient ops are
    built once for each kind of target (one class for all rows, one per row, or the
    sum of y) and kept.

    ``model``: a path or a :class:`~graphgrad.graph.model.Model`; ``method``: a
    :class:`Method` or its text (``"deeplift"``, ``"integrated_gradients(steps=64)"``);
    ``settings``: the other fields of :class:`AttributeOptions` (``x``, ``y``,
    ``target``, ``feeds``, ``layer``, ``noise``, ...), whose ``target``, ``noise``
    and ``timeout`` are each call's defaults. ``names``: how errors name the
    arguments (the command passes its options' names).

    One explainer may be called from several threads: building a kind of target's
    gradient ops, which changes the graph, is done by one thread at a time.
    """

    def __init__(self, model: Any, method: "Method | str", names: ArgumentNames = ArgumentNames(),
                 **settings: Any):
        method = parse_method(method) if isinstance(method, str) else method
        if "noise" in settings:
            settings["noise"] = as_noise(settings["noise"])
        self.names = names
        self.options = options = AttributeOptions(method, **settings)
        self.model = model if isinstance(model, Model) else read_model(model, options.kind)
        self.path = self.model.path
        rules = tuple(Rule(OP, op_type, parse_spec(spec)) for op_types, spec in method.rules for op_type in op_types)
        patched, _ = rewrite_model(self.model, RewriteOptions(rules=rules, force=True, allow_missing=True))
        self.run = run = prepare_run(patched, [options.x] if options.x else [], options.y, options.tags,
                                     options.checkpoint, options.allow_effects, command="attribute",
                                     feeds=options.feeds, fed_are_not_x=True)
        if len(run.x_tensors) != 1:
            raise UsageError(
                f"attribute differentiates with respect to one x; name it with {names.x} (found {', '.join(run.xs)})"
            )
        self.x = run.x_tensors[0]
        with run.graph.as_default():
            self.feed = given_feeds(run.graph, options.feeds)
        # guided Grad-CAM: Grad-CAM's map from the graph's own gradients, in an explainer of its own (noise, if
        # any, smooths the guided gradient alone)
        self._cam = (Explainer(self.model, Method("gradcam", cam=True), names,
                               **{f.name: getattr(options, f.name) for f in fields(options)
                                  if f.name not in ("method", "noise")})
                     if method.guided_cam else None)
        _refuse_unfed(run, self.x, self.feed, names)
        given = {op_type: spec for op_types, spec in method.rules for op_type in op_types}
        self.path_ops = ops_between([self.x], run.y_tensor)
        self.one_example = adds_its_batch(self.x, self.path_ops)  # why x has no batch axis, or None
        on_path = _op_types_run(run, self.path_ops)
        self.rules = {op_type: given[op_type] for op_type in sorted(on_path & set(given))}
        self.uncovered = (sorted(on_path - set(given) - PASS_THROUGH - set(method.kept))
                          + _products(self.path_ops, self.x, given) if method.rules else [])
        if self.uncovered and method.complete and not options.allow_uncovered:
            raise GraphgradError(
                f"{self.path}: {method.name} has no rule for {', '.join(self.uncovered)} on the path from "
                f"{run.xs[0]} to {run.y}, so its attributions would not mean what it says; to compute them anyway, "
                "add --allow-uncovered"
            )
        self.tf = tensorflow()
        self._built: dict = {}  # kind of target -> (output, what is differentiated, row targets, layer, flags)
        self._resize: Any = None  # Score-CAM's resize of its maps to x: (placeholder, size, resized)
        self._batchings: dict = {}  # bytes of a row -> its Batching
        self._building = threading.Lock()  # graph changes (a target's ops), one thread at a time

    def _ops_for(self, target: Any) -> tuple:
        """The output, the gradient (Grad-CAM's map for ``gradcam``), the placeholder of
        per-row targets (or None), the layer and the training flags left on, for
        ``target``: built once per kind."""
        by_row = target is not None and not isinstance(target, int)
        key = "rows" if by_row else target
        with self._building:
            if key not in self._built:
                self._built[key] = self._build(target, by_row)
        return self._built[key]

    def _build(self, target: Any, by_row: bool) -> tuple:
        tf, run = self.tf, self.run
        given = f"{self.names.target} {'predicted' if isinstance(target, str) else '(a class per row)'}"
        if by_row and self.one_example:
            raise UsageError(f"{given} chooses one class per example, and {self.one_example}, so y's rows are not "
                             f"examples; give {self.names.target} INDEX")
        if by_row and run.y_tensor.shape.rank != 2:
            raise UsageError(f"{given} chooses one class "
                             f"per row of y of shape [rows, classes]; {run.y} has shape "
                             f"{run.y_tensor.shape.as_list() if run.y_tensor.shape.rank is not None else 'unknown'}")
        with run.graph.as_default(), tf1_control_flow(run.graph):
            row_targets = tf.compat.v1.placeholder(tf.int32, [None], name="graphgrad_targets") if by_row else None
            output = (tf.gather(run.y_tensor, row_targets, axis=1, batch_dims=1) if by_row
                      else tensor_entry(run.y_tensor, target))
            layer = None
            if self.options.method.occlusion:
                gradient = output  # no gradient: the output itself, run on occluded copies
            elif self.options.method.score_cam:  # no gradient: the layer, and the score of masked copies of x
                layer = _cam_layer(run, self.x, self.path_ops, self.options.layer, self.names)
                probabilities = tf.nn.softmax(run.y_tensor)
                output = (tf.gather(probabilities, row_targets, axis=1, batch_dims=1) if by_row
                          else tensor_entry(probabilities, target))
                size = _image_size(tf, self.x, self.one_example)
                gradient = (layer, tf.image.resize(layer, tf.shape(self.x)[1:3] if size is None else size,
                                                   method="bilinear"))
            elif self.options.method.cam:
                layer = _cam_layer(run, self.x, self.path_ops, self.options.layer, self.names)
                gradient = _grad_cam(tf, output, layer, _image_size(tf, self.x, self.one_example),
                                     self.options.method.plus)
            else:
                [gradient] = tf.compat.v1.gradients(output, [self.x])
        if gradient is None:
            raise GraphgradError(
                f"{self.path}: {run.y} does not depend on {run.xs[0]} through floats: no attribution; "
                f"graphgrad check {self.path} --x {run.xs[0]} --y {run.y} says why")
        flags = training_flags(run.session, run.graph, unfed_inputs([output], self.feed)[1])
        return output, gradient, row_targets, layer, flags

    def _resized(self, maps: Any, size: tuple) -> Any:
        """``maps`` (N, h, w, 1) resized bilinearly to ``size``, as Grad-CAM's are."""
        tf, run = self.tf, self.run
        if self._resize is None:
            with run.graph.as_default():
                given = tf.compat.v1.placeholder(tf.float32, [None, None, None, 1])
                to = tf.compat.v1.placeholder(tf.int32, [2])
                self._resize = given, to, tf.image.resize(given, to, method="bilinear")
        given, to, resized = self._resize
        return run.session.run(resized, {given: maps, to: list(size)}).astype(maps.dtype)

    def explain(self, inputs: Any, target: Any = None, baseline: Any = None, noise: "Noise | tuple | None" = None,
                timeout: float | None = None) -> tuple[Any, AttributionReport]:
        """Attributions of ``y[..., target]`` (``target``: an index; one per row, as an
        array or ``"predicted"``; None: the default given) to x for every row of
        ``inputs``, against ``baseline`` (x's shape, or one row; None: zeros) for the
        methods that take one, smoothed by ``noise`` if given (a :class:`Noise`, or
        ``(samples, sigma)``), its runs stopped after ``timeout`` seconds (None: the
        default given). Returns ``(attributions, report)``."""
        import numpy as np

        tf, run, options, method, names = self.tf, self.run, self.options, self.options.method, self.names
        target = options.target if target is None else target
        noise = options.noise if noise is None else as_noise(noise)
        timeout = options.timeout if timeout is None else _positive_seconds(timeout)
        one_target = target if isinstance(target, int) else None
        report = AttributionReport(self.path, method.name, run.xs[0], run.y, one_target, rules=dict(self.rules),
                                   uncovered=list(self.uncovered), notes=run.moved_notes())
        report.feeds = {tensor.name: "given" for tensor in self.feed}
        inputs = _rows(inputs, self.x.dtype.as_numpy_dtype, names.inputs)
        # x without a batch axis: the input is one example of x's shape, or several in a batch of them
        single = bool(self.one_example) and inputs.ndim == self.x.shape.rank
        if single:
            inputs = inputs[None]
        if not self.x.shape.is_compatible_with(inputs.shape[1:] if self.one_example else inputs.shape):
            wanted = self.x.shape.as_list() if self.x.shape.rank is not None else "any shape"
            several = (f"; {self.one_example}: give one example of that shape, or several stacked on a first axis"
                       if self.one_example else "")
            raise UsageError(f"{names.inputs} has shape {list(inputs.shape)}, and {report.x} takes {wanted} (None: "
                             f"any size){several}")
        if not len(inputs):
            raise UsageError(f"{names.inputs} has no rows (shape {list(inputs.shape)}): give at least one")
        if target is None:  # after the shapes: a misshapen input is said as such, not as this
            softmax = summed_softmax(run.y_tensor)
            if softmax is not None:
                raise UsageError(softmax.describe().replace("\n ", ";"))
        background = _background(baseline, inputs, names) if method.background else None
        try:
            base = np.zeros_like(inputs) if baseline is None or method.background else np.broadcast_to(
                np.asarray(baseline, dtype=inputs.dtype), inputs.shape).copy()
        except ValueError:
            raise UsageError(f"{names.baseline} has shape {list(np.shape(baseline))}: give one of the input's shape "
                             f"{list(inputs.shape)}, or of one row") from None
        _refuse_not_finite(base, names.baseline)
        row_bytes = inputs[:1].nbytes
        if row_bytes not in self._batchings:
            self._batchings[row_bytes] = (Batching(1, True, self.one_example) if self.one_example
                                          else batching_for(self.x, self.path_ops, row_bytes))
        batching = self._batchings[row_bytes]
        report.batch = batching.rows if batching.fixed and not self.one_example else None
        if self.one_example:
            report.notes.append(f"{self.one_example}: each example runs alone")
            if method.name in ("deeplift", "deepshap"):
                raise GraphgradError(f"{self.path}: deeplift runs each example beside its baseline in one batch, and "
                                     f"{self.one_example}; use integrated_gradients")
        if method.name in ("deeplift", "deepshap") and batching.fixed and batching.rows % 2:
            raise GraphgradError(
                f"{self.path}: deeplift runs each row beside its baseline in one batch, and the graph takes batches "
                f"of exactly {batching.rows} rows ({batching.why}), an odd number; use integrated_gradients, or a "
                "graph whose batch is free"
            )
        output, gradient, row_targets, layer, flags = self._ops_for(target)
        report.layer = layer.name if layer is not None else ""
        report.training_flags = list(flags)
        deadline = time.monotonic() + timeout
        targets = None

        def evaluate(fetch, value, origins=None):
            remaining = deadline - time.monotonic()
            run_options = tf.compat.v1.RunOptions(timeout_in_ms=max(1, int(remaining * 1000)))
            fed = {**self.feed, self.x: value[0] if self.one_example else value}
            if targets is not None and origins is not None:
                fed[row_targets] = targets[origins]
            try:
                if remaining <= 0:
                    raise tf.errors.DeadlineExceededError(None, None, "")
                return run.session.run(fetch, fed, options=run_options)
            except tf.errors.DeadlineExceededError:
                raise GraphgradError(f"{self.path}: the runs took over {timeout:g} s and were stopped; give "
                                     "them longer with --timeout SECONDS") from None
            except (ValueError, tf.errors.OpError) as error:
                raise GraphgradError(f"{self.path}: TensorFlow says: {tensorflow_says(error)}") from None

        if row_targets is not None:
            targets = _row_targets(target, inputs, batching, lambda value, _: evaluate(run.y_tensor, value),
                                   run.y_tensor.shape[-1], names)
            report.targets = targets.tolist()

        def gradient_at(value, origins):
            found = evaluate(gradient, value, origins)
            # dy/dx of an example has x's shape; a class activation map has its layer's batch of one
            return found[None] if self.one_example and not method.cam else found

        def output_at(value, origins):
            values = np.asarray(evaluate(output, value, origins), dtype=np.float64)
            return values.reshape(len(value), -1).sum(axis=1) if values.ndim else np.full(len(value), values)

        if method.occlusion:
            attributions = _occluded(inputs, method.occlusion, batching, output_at)
        elif method.score_cam:
            layer_values, upsampled = (in_batches(lambda value, origins, at=at: evaluate(gradient[at], value, origins),
                                                  inputs, batching) for at in (0, 1))
            cams = _score_cam(inputs, layer_values, upsampled, batching, output_at)
            attributions = self._resized(cams, inputs.shape[1:3])
        elif background is not None:
            attributions = _over_background(method, inputs, background, batching, gradient_at)
        elif noise is not None:
            attributions = _smoothed(method, inputs, base, batching, gradient_at, noise)
            report.noise = f"{noise.samples} samples, sigma {noise.sigma:g} of each row's range, {noise.aggregate}"
        else:
            attributions = _attributions(method, inputs, base, batching, gradient_at, np.arange(len(inputs)))
        if self._cam is not None:  # times Grad-CAM's map (N, H, W, 1), over x's channels
            cam, cam_report = self._cam.explain(inputs, target)
            attributions = attributions * cam
            report.layer = cam_report.layer
        if method.baseline and noise is None:
            if background is not None:  # against the background's mean output, each row with its target
                origin = np.repeat(np.arange(len(inputs)), len(background))
                repeated = np.tile(background, (len(inputs),) + (1,) * (inputs.ndim - 1))
                reference = in_batches(output_at, repeated, batching, origin).reshape(len(inputs), -1).mean(axis=1)
            else:
                reference = in_batches(output_at, base, batching)
            differences = in_batches(output_at, inputs, batching) - reference
            sums = np.asarray(attributions, dtype=np.float64).reshape(len(inputs), -1).sum(axis=1)
            report.completeness = [RowCheck(row, float(s), float(d))
                                   for row, (s, d) in enumerate(zip(sums, differences))]
        attributions = attributions[0] if single else attributions
        report.shape = tuple(attributions.shape)
        return attributions, report


def _score_cam(inputs: Any, layer: Any, upsampled: Any, batching: Batching, output_at: Callable) -> Any:
    """Score-CAM (Wang et al., 2020, as tf-keras-vis computes it): each channel k of
    the layer, resized to x and scaled to [0, 1], masks x; its weight is the target's
    softmax probability on that masked x; the map is ReLU(sum_k w_k A_k), (N, h, w, 1)."""
    import numpy as np

    low = upsampled.min(axis=(1, 2), keepdims=True)
    high = upsampled.max(axis=(1, 2), keepdims=True)
    masks = (upsampled - low) / np.where(high > low, high - low, 1.0)  # a flat map masks x to zeros
    channels = masks.shape[-1]
    cams = []
    for row in range(len(inputs)):
        masked = inputs[row][None] * np.moveaxis(masks[row], -1, 0)[..., None]  # (channels, H, W, C)
        weights = in_batches(output_at, masked.astype(inputs.dtype), batching, np.full(channels, row))
        cams.append(np.maximum((layer[row] * weights).sum(axis=-1, keepdims=True), 0))
    return np.asarray(cams, dtype=inputs.dtype)


CONVOLUTIONS = ("Conv2D", "DepthwiseConv2dNative", "Conv2DBackpropInput", "FusedConv2D", "_FusedConv2D")


def _cam_layer(run: Any, x: Any, path_ops: set, name: str | None, names: ArgumentNames) -> Any:
    """Grad-CAM's layer: the tensor ``name``, else the last 4-D floating-point tensor
    (NHWC) on the path from x to y after a convolution whose height and width are
    over 1 (or unknown), of those a run can fetch (outside TF1 loops and conditionals)."""
    ordered = [op for op in run.graph.get_operations() if op in path_ops]  # graph order: producers first
    inside = _in_branches(ordered)
    if name:
        layer = tensor_named(run.graph, name)
        if layer.shape.rank != 4 or layer.op not in path_ops:
            raise UsageError(f"{names.layer} {name}: a class activation map (Grad-CAM, Score-CAM) needs a 4-D "
                             f"(N, H, W, C) tensor on the path from {x.name} to {run.y}; it has shape {layer.shape}")
        if in_while_loop(layer.op) or layer.op in inside:
            raise UsageError(f"{names.layer} {name}: a class activation map needs a layer a run can fetch, and "
                             f"{name} is inside a while loop or a conditional; name one outside them")
        return layer
    convolved: set = set()  # the ops on the path at or after a convolution: a layer's activations, not x's pixels
    for op in ordered:
        if op.type in CONVOLUTIONS or any(source.op in convolved for source in op.inputs):
            convolved.add(op)
    layers = [t for op in ordered if op in convolved for t in op.outputs
              if t.shape.rank == 4 and t.dtype.is_floating and all(d is None or d > 1 for d in t.shape.as_list()[1:3])]
    fetchable = [t for t in layers if t.op not in inside and not in_while_loop(t.op)]
    if not fetchable:
        if layers:
            why = "those on it are inside while loops or conditionals, whose values a run cannot fetch"
        elif any(op.type in CALL_OPS for op in path_ops):
            why = "the path runs through function calls, whose layers a run cannot fetch"
        else:
            why = f"the path has none; name one with {names.layer}"
        raise UsageError(f"a class activation map (Grad-CAM, Score-CAM) needs a 4-D (N, H, W, C) layer with a "
                         f"spatial size between {x.name} and {run.y}, and {why}")
    return fetchable[-1]


def _in_branches(ordered: list) -> set:
    """The ops of ``ordered`` (the path, producers first) that a conditional's branch
    or a TF1 loop holds: those after a Switch (or an Enter) on the path before a Merge
    (or an Exit) joins them again; a run cannot fetch their values."""
    inside: set = set()
    for op in ordered:
        if op.type in SWITCHES + TF1_LOOP_ENTERS:
            inside.add(op)
        elif op.type not in MERGES + EXITS and any(
                source.op in inside for source in op.inputs):
            inside.add(op)
    return inside


def _image_size(tf: Any, x: Any, one_example: str | None) -> Any:
    """x's height and width where x is an image (N, H, W, C; or H, W, C without a
    batch axis), else None."""
    if x.shape.rank == (3 if one_example else 4):
        return tf.shape(x)[0:2] if one_example else tf.shape(x)[1:3]
    return None


def _grad_cam(tf: Any, output: Any, layer: Any, size: Any, plus: bool = False) -> Any:
    """ReLU(sum_k alpha_k A_k), alpha_k the spatial mean of d output / d A_k (Selvaraju
    et al., 2017), resized bilinearly to ``size`` (x's height and width; None: the
    layer's): (N, H, W, 1). With
    ``plus``, Grad-CAM++'s weights (Chattopadhay et al., 2018, with the exponential
    of the score as tf-keras-vis takes it): the positive gradients of exp(S) at each
    position, weighted by g^2 / (2 g^2 + g^3 sum(A)) normalised over the positions."""
    [slope] = tf.compat.v1.gradients(output, [layer])
    if slope is None:
        raise UsageError(f"Grad-CAM: y does not depend on the layer {layer.name}")
    if plus:
        score = tf.reduce_sum(tf.reshape(output, [tf.shape(layer)[0], -1]), axis=1)  # one per row of the layer
        first = tf.reshape(tf.exp(score), [-1, 1, 1, 1]) * slope
        second, third = first * slope, first * slope * slope
        denominator = 2.0 * second + third * tf.reduce_sum(layer, axis=[1, 2], keepdims=True)
        alphas = second / (denominator + tf.cast(tf.equal(second, 0.0), second.dtype))
        total = tf.reduce_sum(alphas, axis=[1, 2], keepdims=True)
        alphas = alphas / (total + tf.cast(tf.equal(total, 0.0), total.dtype))
        weights = tf.reduce_sum(tf.nn.relu(first) * alphas, axis=[1, 2], keepdims=True)
    else:
        weights = tf.reduce_mean(slope, axis=[1, 2], keepdims=True)
    cam = tf.nn.relu(tf.reduce_sum(weights * layer, axis=-1, keepdims=True))
    return tf.image.resize(cam, tf.shape(layer)[1:3] if size is None else size, method="bilinear")


def _row_targets(target: Any, inputs: Any, batching: Batching, y_at: Callable, classes: int | None,
                 names: ArgumentNames) -> Any:
    """One class index per row: ``target`` as given (an array), or, for
    ``"predicted"``, the class y scores highest for each row."""
    import numpy as np

    if isinstance(target, str):
        return np.asarray(in_batches(y_at, inputs, batching)).argmax(axis=-1).astype(np.int32)
    targets = np.asarray(target)
    if targets.shape != (len(inputs),):
        raise UsageError(f"{names.target} holds shape {list(targets.shape)}: give one class index per row of "
                         f"{names.inputs} ({len(inputs)})")
    if classes is not None and (targets.min() < 0 or targets.max() >= classes):
        raise UsageError(f"{names.target} holds indices {int(targets.min())} to {int(targets.max())}; y has "
                         f"{classes} classes (0 to {classes - 1})")
    return targets.astype(np.int32)


def _refuse_unfed(run, x_tensor, feed: dict, names: ArgumentNames) -> None:
    """Refuse, before anything runs, a y that reads placeholders nobody feeds, or
    an input pipeline (a queue or an iterator that nothing fills here)."""
    refuse_unfed_pipelines([run.y_tensor], {**feed, x_tensor: None})
    placeholders, _ = unfed_inputs([run.y_tensor], {**feed, x_tensor: None})
    if placeholders:
        raise UsageError(
            f"{run.y} also reads {first_names(placeholders)}, which {names.inputs} does not feed; give each a value "
            f"with {names.feed.format(name='NAME', value='VALUE')} (a number, a JSON list or a .npy file), e.g. "
            f"{names.feed.format(name=placeholders[0], value=0)}"
        )


def _attributions(method: Method, inputs: Any, base: Any, batching: Batching, gradient_at: Callable,
                  origin: Any) -> Any:
    """The method's attributions for ``inputs`` against ``base``, the gradient
    evaluated by ``gradient_at(points, origins)`` in batches of ``batching``;
    ``origin``: for each row, the input row it stands for (its target's)."""
    import numpy as np

    if method.name == "deeplift":  # each run: rows, then their baselines (SHAP's convention)
        pairs = batching.rows // 2 if batching.fixed else max(1, batching.rows // 2)
        half = Batching(pairs, batching.fixed)
        chunks = []
        for start in range(0, len(inputs), pairs):
            rows, references = inputs[start:start + pairs], base[start:start + pairs]
            origins = padded(origin[start:start + pairs], half)
            both = np.concatenate([padded(rows, half), padded(references, half)])
            chunks.append(np.asarray(gradient_at(both, np.concatenate([origins, origins])))[:len(rows)])
        return np.concatenate(chunks) * (inputs - base)
    if method.steps:  # the midpoint rule, steps of every row run together, a batch at a time
        alphas = (np.arange(method.steps) + 0.5) / method.steps
        total = np.zeros(inputs.shape, dtype=np.float64)
        count = len(inputs) * method.steps
        for start in range(0, count, batching.rows):
            index = np.arange(start, min(start + batching.rows, count))
            rows, alpha = index % len(inputs), alphas[index // len(inputs)].reshape((-1,) + (1,) * (inputs.ndim - 1))
            points = base[rows] + (alpha * (inputs[rows] - base[rows])).astype(inputs.dtype)
            gradients = gradient_at(padded(points, batching), padded(origin[rows], batching))
            gradients = np.asarray(gradients)[:len(index)]
            for row in np.unique(rows):  # np.add.at, unbuffered, took 3 of MobileNetV2's 16 s
                total[row] += gradients[rows == row].sum(axis=0, dtype=np.float64)
        return (total / method.steps * (inputs - base)).astype(inputs.dtype)
    gradients = in_batches(gradient_at, inputs, batching, origin)
    return gradients * (inputs if method.times_input else 1)


def _occluded(inputs: Any, occlusion: tuple, batching: Batching, output_at: Callable) -> Any:
    """Occlusion (Zeiler and Fergus, 2014): for each window of x (its height and width
    for an image, N H W C, across channels; else its features after the batch), y's
    drop when the window is set to ``value``, each entry the mean drop of the windows
    that cover it. Copies of every row for several windows run together."""
    import numpy as np

    import itertools

    window, stride, value = occlusion
    spatial = inputs.shape[1:3] if inputs.ndim == 4 else inputs.shape[1:2]
    positions = list(itertools.product(*(_window_starts(size, window, stride) for size in spatial)))
    plain = in_batches(output_at, inputs, batching)
    drops = np.zeros(inputs.shape, dtype=np.float64)
    covered = np.zeros(inputs.shape, dtype=np.float64)
    group = max(1, batching.rows // max(1, len(inputs)))  # windows per chunk of rows
    for first in range(0, len(positions), group):
        chosen = positions[first:first + group]
        copies = np.repeat(inputs[None], len(chosen), axis=0)
        for index, position in enumerate(chosen):
            where = (index, slice(None)) + tuple(slice(start, start + window) for start in position)
            copies[where] = value
        flat = copies.reshape((-1,) + inputs.shape[1:])
        origin = np.tile(np.arange(len(inputs)), len(chosen))
        drop = (np.tile(plain, len(chosen)) - in_batches(output_at, flat, batching, origin)).reshape(len(chosen), -1)
        for index, position in enumerate(chosen):
            where = (slice(None),) + tuple(slice(start, start + window) for start in position)
            shape = (-1,) + (1,) * (inputs.ndim - 1)
            drops[where] += drop[index].reshape(shape)
            covered[where] += 1
    return (drops / np.maximum(covered, 1)).astype(inputs.dtype)


def _background(baseline: Any, inputs: Any, names: ArgumentNames) -> Any:
    """The background set of expected gradients and DeepSHAP: rows of x's shape
    (one row without its batch axis too), zeros (one row) when none is given."""
    import numpy as np

    if baseline is None:
        return np.zeros((1,) + inputs.shape[1:], dtype=inputs.dtype)
    background = np.asarray(baseline, dtype=inputs.dtype)
    if background.shape == inputs.shape[1:]:
        background = background[None]
    if background.shape[1:] != inputs.shape[1:] or not len(background):
        raise UsageError(f"{names.baseline} has shape {list(background.shape)}: a background set is rows of x's shape "
                         f"{['rows'] + list(inputs.shape[1:])}")
    return background


def _over_background(method: Method, inputs: Any, background: Any, batching: Batching, gradient_at: Callable) -> Any:
    """Attributions averaged over a background set, as SHAP averages them. DeepSHAP:
    DeepLIFT against every background row, the mean. Expected gradients (Erion et
    al., 2021): the mean of (x - x') dy/dx at x' + a (x - x'), for ``method.samples``
    draws of a background row x' and a in [0, 1) per row, seeded."""
    import numpy as np

    count = len(background)
    if not method.samples:  # DeepSHAP: each row beside each background row
        rows = np.repeat(inputs, count, axis=0)
        references = np.tile(background, (len(inputs),) + (1,) * (inputs.ndim - 1))
        origin = np.repeat(np.arange(len(inputs)), count)
        each = _attributions(replace(method, name="deeplift"), rows, references, batching, gradient_at, origin)
        return each.reshape((len(inputs), count) + inputs.shape[1:]).mean(axis=1).astype(inputs.dtype)
    rng = np.random.default_rng(method.seed)
    chosen = rng.integers(0, count, (len(inputs), method.samples))
    alphas = rng.random((len(inputs), method.samples))
    origin = np.repeat(np.arange(len(inputs)), method.samples)
    references = background[chosen.reshape(-1)]
    differences = inputs[origin] - references
    shape = (-1,) + (1,) * (inputs.ndim - 1)
    points = (references + alphas.reshape(shape) * differences).astype(inputs.dtype)
    gradients = in_batches(gradient_at, points, batching, origin)
    each = (np.asarray(gradients, dtype=np.float64) * differences).reshape((len(inputs), method.samples)
                                                                           + inputs.shape[1:])
    return each.mean(axis=1).astype(inputs.dtype)


def _window_starts(size: int, window: int, stride: int) -> list[int]:
    """Where windows start along an axis of ``size``: every ``stride``, and the last one at the edge."""
    starts = list(range(0, max(size - window, 0) + 1, stride))
    if starts[-1] + window < size:
        starts.append(size - window)
    return starts


@dataclass(frozen=True)
class Noise:
    """SmoothGrad over any method: the attributions of ``samples`` copies of each
    row with Gaussian noise of ``sigma`` times the row's range (max - min), as the
    SmoothGrad paper and the saliency library scale it, joined by ``aggregate``:
    ``mean`` (SmoothGrad), ``squared`` (the mean of squares, SmoothGrad-squared) or
    ``variance`` (VarGrad). ``seed`` makes them repeat bit for bit."""

    samples: int
    sigma: float
    aggregate: str = "mean"
    seed: int = 0

    def __post_init__(self) -> None:
        import math

        if isinstance(self.samples, bool) or not isinstance(self.samples, int) or self.samples < 1:
            raise UsageError(f"Noise(samples={self.samples!r}): give a whole number of samples, at least 1")
        if not isinstance(self.sigma, (int, float)) or not 0 <= self.sigma < math.inf:
            raise UsageError(f"Noise(sigma={self.sigma!r}): give a scale of at least 0 (a fraction of each row's "
                             "range, e.g. 0.15)")
        if self.aggregate not in AGGREGATES:
            raise UsageError(f"Noise(aggregate={self.aggregate!r}): give one of {', '.join(AGGREGATES)}")


AGGREGATES = ("mean", "squared", "variance")


def as_noise(noise: Any) -> "Noise | None":
    """``noise`` as a :class:`Noise`: one already, ``(samples, sigma)``, or None."""
    if noise is None or isinstance(noise, Noise):
        return noise
    if isinstance(noise, (tuple, list)) and len(noise) == 2:
        return Noise(*noise)
    raise UsageError(f"noise={noise!r}: give graphgrad.Noise(samples, sigma) or a pair (samples, sigma), e.g. "
                     "(50, 0.15)")


def _positive_seconds(timeout: Any) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
        raise UsageError(f"timeout={timeout!r}: give a number of seconds above 0")
    return float(timeout)


def _rows(inputs: Any, dtype: Any, name: str) -> Any:
    """``inputs`` as an array of x's dtype, refused in one line if it is not one of
    numbers or holds NaN or infinity (every attribution of such a row is NaN)."""
    import numpy as np

    try:
        rows = np.asarray(inputs, dtype=dtype)
    except (TypeError, ValueError) as error:
        raise UsageError(f"{name} is not an array of numbers: {error}") from None
    _refuse_not_finite(rows, name)
    return rows


def _refuse_not_finite(array: Any, name: str) -> None:
    import numpy as np

    if array.dtype.kind in "fc" and not np.isfinite(array).all():
        where = np.argwhere(~np.isfinite(array))[0]
        raise UsageError(f"{name} holds NaN or infinity (first at index {where.tolist()}): every attribution of "
                         "its row would be NaN; give finite values")


def _smoothed(method: Method, inputs: Any, base: Any, batching: Batching, gradient_at: Callable,
              noise: Noise) -> Any:
    """:func:`_attributions` of ``noise.samples`` noisy copies of the inputs, run
    together in batches, joined as ``noise.aggregate`` says."""
    import numpy as np

    rng = np.random.default_rng(noise.seed)
    flat = inputs.reshape(len(inputs), -1)
    scale = (flat.max(axis=1) - flat.min(axis=1)).reshape((-1,) + (1,) * (inputs.ndim - 1)) * noise.sigma
    noisy = np.concatenate([inputs + (rng.standard_normal(inputs.shape) * scale).astype(inputs.dtype)
                            for _ in range(noise.samples)])
    origin = np.tile(np.arange(len(inputs)), noise.samples)
    each = _attributions(method, noisy, np.tile(base, (noise.samples,) + (1,) * (inputs.ndim - 1)), batching,
                         gradient_at, origin).reshape((noise.samples,) + inputs.shape).astype(np.float64)
    if noise.aggregate == "squared":
        joined = (each ** 2).mean(axis=0)
    elif noise.aggregate == "variance":
        joined = each.var(axis=0)
    else:
        joined = each.mean(axis=0)
    return joined.astype(inputs.dtype)
