"""The explainer: a model read, rewritten for one attribution method and imported
once, whose :meth:`Explainer.explain` answers every call from the same session.

It owns TensorFlow: the gradient ops of each kind of target (one class for every
row, one per row, or y summed), the runs, their deadline. What a method makes of
the gradients is :mod:`graphgrad.methods.algorithms`'; which method does what is
:mod:`graphgrad.methods.registry`'s, and the explainer dispatches once on its kind.
"""

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ..edits.apply import rewrite_model
from ..edits.rewrite import RewriteOptions
from ..edits.select import OP, Rule
from ..edits.twin import with_a_twin
from ..errors import GraphgradError, UsageError
from ..files.reading import read_model
from ..graph.functions import first_names
from ..graph.model import GRAPHDEF, Model
from ..gradients.spec import parse_spec
from ..names import TWIN_PREFIX
from ..methods import algorithms
from ..methods.adaptive import adaptive_integral
from ..methods.batching import Batching, in_batches
from ..methods.options import (
    ArgumentNames,
    AttributeOptions,
    AttributionReport,
    Noise,
    RankedTargets,
    Refinement,
    RowCheck,
    RunOptions,
    as_noise,
    checked_rows,
    positive_seconds,
    ranked_targets,
    refuse_not_finite,
)
from ..methods.ranks import class_order, joined
from ..methods.xrai import xrai_maps
from ..methods.registry import (
    CLASS_ACTIVATION,
    GRADIENT_RULE,
    PATH_INTEGRAL,
    PERTURBATION,
    REFERENCE_BASED,
    Method,
    parse_method,
)
from .coverage import PASS_THROUGH, choices, divisions, functions_reached, op_types_run, products
from .batches import adds_its_batch, batching_for, declared_batch_freed, row_shape
from .cam import GRADIENT_CAMS, cam_layer, grad_cam, image_size, integral_layer, path_with_calls_inlined, shown_name
from .loading import given_feeds, refuse_unfed_pipelines, training_flags, unfed_inputs
from .paths import ops_between
from .run import Deadline, RunStopped, open_run
from .runtime import tensorflow, building_gradients
from .targets import summed_softmax, tensor_entry

BACKGROUND = ("deepshap", "expected_gradients")  # reference-based over a background set, not one baseline
BESIDE_BASELINE = ("deeplift", "deepshap")  # each row runs beside its baseline in one batch
BLUR = "blur_ig"  # a path integral whose path blurs x: its baseline is x blurred
# the class activation maps that combine their map with x itself, which must be an image
ON_AN_IMAGE_X = {"guided_gradcam": "multiplies the guided gradient by", "scorecam": "masks x with"}
XRAI = "xrai"  # integrated gradients ranked by image regions: a map of densities, not a sum
GUIDED_IG = "guided_ig"  # a path integral whose path is chosen step by step from the gradients
UNSMOOTHED = BACKGROUND + ("occlusion", "scorecam", XRAI)  # averages of their own, no gradient, regions: no --noise


class Explainer:
    """A model read, rewritten for one attribution method and imported once, whose
    :meth:`explain` answers every call from the same session: the gradient ops are
    built once for each kind of target (one class for all rows, one per row, or the
    sum of y) and kept.

    ``model``: a path or a :class:`~graphgrad.graph.model.Model`; ``method``: a
    :class:`~graphgrad.methods.registry.Method` or its text (``"deeplift"``,
    ``"integrated_gradients(steps=64)"``); ``options``: an
    :class:`~graphgrad.methods.options.AttributeOptions`, or ``settings``, its other
    fields by name (``x``, ``y``, ``target``, ``feeds``, ``layer``, ``noise``,
    ``tolerance``, ...), whose ``target``, ``noise`` and ``timeout`` are each call's
    defaults. ``names``: how errors name the arguments (the command passes its
    options' names).

    One explainer may be called from several threads: building a kind of target's
    gradient ops, which changes the graph, is done by one thread at a time.
    """

    def __init__(self, model: Any, method: "Method | str", options: AttributeOptions | None = None,
                 names: ArgumentNames = ArgumentNames(), **settings: Any):
        if not isinstance(method, (str, Method)):
            raise UsageError(f"method={method!r}: give a method's name, e.g. 'deeplift' or "
                             "'integrated_gradients(steps=64)'")
        if not isinstance(model, (str, os.PathLike, Model)):
            raise UsageError(f"model is a {type(model).__name__}: give the path of a model file (a frozen .pb, a "
                             ".meta, a SavedModel folder) or a graphgrad Model")
        method = parse_method(method, "method") if isinstance(method, str) else method
        _refuse_unknown_settings(settings)
        if options is None:
            options = AttributeOptions(method, **{**settings, "noise": as_noise(settings.get("noise"))})
        elif settings:
            raise UsageError(f"give the options or {', '.join(settings)}, not both")
        self.names, self.options = names, options
        self.model = model if isinstance(model, Model) else read_model(os.fspath(model), options.kind)
        self.path = self.model.path
        _refuse_options_the_kind_does_not_take(method, options, names)
        rules = tuple(Rule(OP, op_type, parse_spec(spec)) for op_types, spec in method.rules for op_type in op_types)
        patched, _ = rewrite_model(self.model, RewriteOptions(rules=rules, force=True, allow_missing=True))
        self.twin_x: Any = None  # DeepLIFT's baselines' x, where they run through a twin of the graph
        self._open(patched)
        if method.entry in BESIDE_BASELINE:
            self._free_a_declared_batch(patched)
            self._twin_for_a_fixed_batch(patched)
        run = self.run
        _refuse_unfed(run, self.x, self.feed, names)
        self._cover(method, options)
        if method.entry in ON_AN_IMAGE_X and self.x.shape.rank != (3 if self.one_example else 4):
            # a map is resized to an image x's height and width, else keeps the layer's
            raise UsageError(f"{method.entry} {ON_AN_IMAGE_X[method.entry]} a map resized to x, and {run.xs[0]} "
                             f"(shape {self.x.shape}) is not an image (N, H, W, C); use gradcam, whose map keeps the "
                             "layer's height and width")
        # guided Grad-CAM: Grad-CAM's map from the graph's own gradients, in an explainer of its own (noise, if
        # any, smooths the guided gradient alone)
        self._cam = (Explainer(self.model, parse_method("gradcam"), _without_noise(options, "gradcam"), names)
                     if method.entry == "guided_gradcam" else None)
        self.tf = tensorflow()
        self._built: dict = {}  # kind of target -> (output, what is differentiated, row targets, layer, flags)
        self._inlined: tuple | None = None  # (y, the path to it) with the path's calls inlined, for a layer
        self._resize: Any = None  # Score-CAM's resize of its maps to x: (placeholder, size, resized)
        self._batchings: dict = {}  # bytes of a row -> its Batching
        self._building = threading.Lock()  # graph changes (a target's ops), one thread at a time

    def _open(self, patched: Model, run_options: RunOptions | None = None) -> None:
        options, names = self.options, self.names
        self.run = run = open_run(patched, replace(run_options or options.run, names=names), "attribute",
                                  fed_are_not_x=True)
        if len(run.x_tensors) != 1:
            raise UsageError(f"attribute differentiates with respect to one x; name it with {names.x} (found "
                             f"{', '.join(run.xs)})")
        self.x = run.x_tensors[0]
        with run.graph.as_default():
            self.feed = given_feeds(run.graph, options.feeds)

    def _free_a_declared_batch(self, patched: Model) -> None:
        """For the methods that run each row beside its baseline in one batch: an x
        that declares an odd batch (a frozen classifier's [1, H, W, C]) is loaded again
        with that dimension free, and kept so if a probe of two rows runs (nothing
        else in the graph fixes the batch); else the declared batch stays, and is
        refused where the batch is decided."""
        x = self.x
        if x.op.type != "Placeholder" or not x.shape.rank or x.shape[0] is None or x.shape[0] % 2 == 0:
            return
        import numpy as np

        declared = self.run
        self._open(declared_batch_freed(patched, declared.tags, x.op.name))
        probe = np.zeros([2, *x.shape.as_list()[1:]], dtype=x.dtype.as_numpy_dtype)
        try:
            self.run.evaluate(self.run.y_tensor, {**self.feed, self.x: probe})
        except GraphgradError:
            self.run.close()
            self.run, self.x = declared, x
            with declared.graph.as_default():
                self.feed = given_feeds(declared.graph, self.options.feeds)
            return
        declared.close()

    def _twin_for_a_fixed_batch(self, patched: Model) -> None:
        """For the methods that run each row beside its baseline: a frozen graph whose
        batch stays fixed to an odd number of rows (after :meth:`_free_a_declared_batch`)
        is loaded again beside a twin of itself that runs the baselines
        (:mod:`graphgrad.edits.twin`), where the rules find each op's reference; a graph
        with functions keeps the refusal (rules inside a body split its batch)."""
        run, x = self.run, self.x
        batching = batching_for(x, ops_between([x], run.y_tensor), 1)
        if not batching.fixed or batching.rows % 2 == 0 or patched.kind != GRAPHDEF or patched.message.library.function:
            return
        names = replace(self.options.run, xs=tuple(run.xs), y=run.y)  # the twin's are other tensors of the graph
        self._open(with_a_twin(patched), names)
        run.close()
        graph = self.run.graph
        self.twin_x = graph.get_tensor_by_name(TWIN_PREFIX + self.x.name)
        self.feed.update({graph.get_tensor_by_name(TWIN_PREFIX + tensor.name): value
                          for tensor, value in list(self.feed.items())})

    def _beside(self, batching: Batching) -> Batching:
        """The batching of rows with their baselines: twice the graph's where a twin runs the baselines."""
        return batching if self.twin_x is None else Batching(2 * batching.rows, True, batching.why)

    def close(self) -> None:
        """Release the session (and guided Grad-CAM's); the explainer answers no call after."""
        self.run.close()
        if self._cam is not None:
            self._cam.close()

    def __enter__(self) -> "Explainer":
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def _cover(self, method: Method, options: AttributeOptions) -> None:
        """The method's rules on the path, and the op types on it that no rule covers
        (refused for the methods that need a rule at every nonlinearity)."""
        run = self.run
        given = {op_type: spec for op_types, spec in method.rules for op_type in op_types}
        self.path_ops = ops_between([self.x], run.y_tensor)
        self.one_example = adds_its_batch(self.x, self.path_ops)  # why x has no batch axis, or None
        reach = functions_reached(run, self.path_ops, self.x)
        on_path = op_types_run(self.path_ops, reach)
        self.rules = {op_type: given[op_type] for op_type in sorted(on_path & set(given))}
        self.uncovered = (sorted(on_path - set(given) - PASS_THROUGH - set(method.kept))
                          + products(self.path_ops, self.x, given, reach) + divisions(self.path_ops, self.x, reach)
                          + choices(self.path_ops, self.x, reach)
                          if method.rules else [])
        if self.uncovered and method.complete and not options.allow_uncovered:
            raise GraphgradError(
                f"{self.path}: {method.name} has no rule for {', '.join(self.uncovered)} on the path from "
                f"{run.xs[0]} to {run.y}, so its attributions would not mean what it says; to compute them anyway, "
                "add --allow-uncovered"
            )

    def _ops_for(self, target: Any) -> tuple:
        """The output, the gradient (Grad-CAM's map for ``gradcam``), the placeholder of
        per-row targets (or None), the layer and the training flags left on, for
        ``target``: built once per kind."""
        by_row = target is not None and not isinstance(target, int)
        key = "rows" if by_row else target
        with self._building:
            if key not in self._built:
                self._built[key] = self._build(target, by_row)
                self.run.renew_session_if_stale()
        return self._built[key]

    def _build(self, target: Any, by_row: bool) -> tuple:
        tf, run, method = self.tf, self.run, self.options.method
        self._refuse_row_targets(target, by_row)
        with run.graph.as_default(), building_gradients(run.graph):
            row_targets = tf.compat.v1.placeholder(tf.int32, [None], name="graphgrad_targets") if by_row else None
            y, path_ops = run.y_tensor, self.path_ops
            if method.kind == CLASS_ACTIVATION or self.options.layer:  # a layer inside a call must be fetchable
                y, path_ops = self._inlined_path()
            output = (tf.gather(y, row_targets, axis=1, batch_dims=1) if by_row
                      else tensor_entry(y, target, self.names.target))
            layer = None
            if method.kind == PERTURBATION:
                gradient = output  # no gradient: the output itself, run on occluded copies
            elif method.entry == "scorecam":  # no gradient: the layer, and the score of masked copies of x
                layer = cam_layer(run, self.x, path_ops, self.options.layer, self.names)
                probabilities = tf.nn.softmax(y)
                output = (tf.gather(probabilities, row_targets, axis=1, batch_dims=1) if by_row
                          else tensor_entry(probabilities, target, self.names.target))
                size = image_size(tf, self.x, self.one_example)
                gradient = (layer, tf.image.resize(layer, tf.shape(self.x)[1:3] if size is None else size,
                                                   method="bilinear"))
            elif method.entry in GRADIENT_CAMS:
                layer = cam_layer(run, self.x, path_ops, self.options.layer, self.names)
                gradient = grad_cam(tf, output, layer, image_size(tf, self.x, self.one_example), method.entry)
            elif method.kind == PATH_INTEGRAL and self.options.layer:  # alibi's layer=: the path in the layer's values
                if self.one_example:
                    raise UsageError(f"{self.names.layer} {self.options.layer}: integrated gradients at a layer feed "
                                     f"it a batch of points, and {self.one_example}; attribute to x (drop the layer)")
                layer = integral_layer(run, self.x, path_ops, self.options.layer, self.names)
                [gradient] = tf.compat.v1.gradients(output, [layer])
            else:
                try:
                    [gradient] = tf.compat.v1.gradients(output, [self.x])
                except (LookupError, ValueError) as error:  # an op TensorFlow cannot differentiate (_SwitchN), a
                    # rule whose batch of rows and baselines a function's body does not hold (a map over rows)
                    raise GraphgradError(f"{self.path}: TensorFlow cannot differentiate the path from "
                                         f"{run.xs[0]} to {run.y} with {method.name}'s rules: "
                                         f"{str(error).splitlines()[0].split('. ')[0][:300]}") from None
        if gradient is None:
            raise GraphgradError(
                f"{self.path}: {run.y} does not depend on {run.xs[0]} through floats: no attribution; "
                f"graphgrad check {self.path} --x {run.xs[0]} --y {run.y} says why")
        flags = training_flags(run.graph, unfed_inputs([output], self.feed)[1])
        return output, gradient, row_targets, layer, flags

    def _inlined_path(self) -> tuple:
        """y and the path to it, computed again with the path's calls inlined (once)."""
        if self._inlined is None:
            self._inlined = path_with_calls_inlined(self.tf, self.run, self.x, self.path_ops)
        return self._inlined

    def _refuse_row_targets(self, target: Any, by_row: bool) -> None:
        if not by_row:
            return
        run = self.run
        given = f"{self.names.target} {target if isinstance(target, (str, RankedTargets)) else '(a class per row)'}"
        chooses = "its classes" if isinstance(target, RankedTargets) else "one class"
        if self.one_example:
            raise UsageError(f"{given} chooses {chooses} per example, and {self.one_example}, so y's rows are not "
                             f"examples; give {self.names.target} INDEX")
        if run.y_tensor.shape.rank != 2:
            raise UsageError(f"{given} chooses {chooses} per row of y of shape [rows, classes]; {run.y} has shape "
                             f"{run.y_tensor.shape.as_list() if run.y_tensor.shape.rank is not None else 'unknown'}")

    def _resized(self, maps: Any, size: tuple, until: Deadline) -> Any:
        """``maps`` (N, h, w, 1) resized bilinearly to ``size``, as Grad-CAM's are."""
        tf, run = self.tf, self.run
        if self._resize is None:
            with run.graph.as_default():
                given = tf.compat.v1.placeholder(tf.float32, [None, None, None, 1])
                to = tf.compat.v1.placeholder(tf.int32, [2])
                self._resize = given, to, tf.image.resize(given, to, method="bilinear")
        given, to, resized = self._resize
        return run.evaluate(resized, {given: maps, to: list(size)}, until).astype(maps.dtype)

    def explain(self, inputs: Any, target: Any = None, baseline: Any = None, noise: "Noise | tuple | None" = None,
                timeout: float | None = None) -> tuple[Any, AttributionReport]:
        """Attributions of ``y[..., target]`` (``target``: an index; one per row, as an
        array or ``"predicted"``; several a row, ``"top:K"`` or ``"all"``, which
        give attributions of shape (rows, K, *row); None: the default given) to x
        for every row of ``inputs``, against ``baseline`` (x's shape, or one row;
        None: zeros) for the methods that take one, smoothed by ``noise`` if given
        (a :class:`Noise`, or ``(samples, sigma)``), its runs stopped after
        ``timeout`` seconds (None: the default given). Returns ``(attributions,
        report)``."""
        options, method = self.options, self.options.method
        target = _checked_target(options.target if target is None else target, self.names)
        noise = options.noise if noise is None else as_noise(noise)
        timeout = options.timeout if timeout is None else positive_seconds(timeout)
        _refuse_noise(method, noise, options)
        if isinstance(target, RankedTargets):
            return self._explain_ranked(inputs, target, baseline, noise, timeout)
        report = AttributionReport(self.path, method.name, self.run.xs[0], self.run.y,
                                   target if isinstance(target, int) else None, rules=dict(self.rules),
                                   uncovered=list(self.uncovered), notes=self.run.moved_notes(),
                                   feeds={tensor.name: "given" for tensor in self.feed})
        inputs, single = self._rows(inputs, target, report.x)
        base, background = self._references(baseline, inputs)
        batching = self._batching(inputs, report)
        runs = self._runs(target, inputs, batching, timeout, report)
        attributions = self._attributions(inputs, base, background, noise, batching, runs, report)
        if self._cam is not None:  # times Grad-CAM's map (N, H, W, 1), over x's channels
            cam, cam_report = self._cam.explain(inputs, target, timeout=timeout)
            attributions = attributions * cam
            report.layer = cam_report.layer
        if method.kind in (PATH_INTEGRAL, REFERENCE_BASED) and noise is None and report.refinement is None \
                and method.entry != XRAI:
            sums, differences = algorithms.row_sums(attributions), self._differences(inputs, base, background,
                                                                                      batching, runs)
            report.completeness = [RowCheck(row, float(s), float(d)) for row, (s, d) in enumerate(zip(sums,
                                                                                                      differences))]
        attributions = attributions[0] if single else attributions
        report.shape = tuple(attributions.shape)
        return attributions, report

    def _explain_ranked(self, inputs: Any, ranked: RankedTargets, baseline: Any, noise: Noise | None,
                        timeout: float) -> tuple[Any, AttributionReport]:
        """Each row's classes (the K y scores highest, or all), each rank a pass of
        :meth:`explain` with one class per row, joined on a second axis; one
        deadline for them all."""
        self._refuse_row_targets(ranked, True)
        rows, _ = self._rows(inputs, "predicted", self.run.xs[0])
        scratch = AttributionReport(self.path, self.options.method.name, self.run.xs[0], self.run.y, None)
        runs = Runs(self, None, None, None, time.monotonic() + timeout, timeout)
        scores = in_batches(lambda value, _: runs.evaluate(self.run.y_tensor, value), rows,
                            self._batching(rows, scratch))
        order = class_order(scores, ranked, self.names.target)
        passes = []
        for rank in range(order.shape[1]):
            left = runs.deadline - time.monotonic()
            try:
                if left <= 0:
                    raise RunStopped(runs.until.stopped)
                passes.append(self.explain(rows, order[:, rank], baseline, noise, left))
            except RunStopped:  # say the whole call's time, and how far the classes got
                raise RunStopped(f"{runs.until.stopped} (after {rank} of the {order.shape[1]} classes a row of "
                                 f"{ranked}, each a pass of its own)") from None
        return joined(passes, order, ranked)

    def _rows(self, inputs: Any, target: Any, x_name: str) -> tuple[Any, bool]:
        """The rows as an array of x's dtype (an x without a batch axis: one example
        of x's shape is made a batch of one, and ``single`` says so), checked."""
        names = self.names
        inputs = checked_rows(inputs, self.x.dtype.as_numpy_dtype, names.inputs)
        single = bool(self.one_example) and inputs.ndim == self.x.shape.rank
        if single:
            inputs = inputs[None]
        # rows run in the batches the graph takes (padded to a fixed batch): only a row's shape must fit
        if not row_shape(self.x, self.one_example).is_compatible_with(inputs.shape[1:]):
            wanted = self.x.shape.as_list() if self.x.shape.rank is not None else "any shape"
            several = (f"; {self.one_example}: give one example of that shape, or several stacked on a first axis"
                       if self.one_example else "")
            raise UsageError(f"{names.inputs} has shape {list(inputs.shape)}, and {x_name} takes {wanted} (None: "
                             f"any size){several}")
        if not len(inputs):
            raise UsageError(f"{names.inputs} has no rows (shape {list(inputs.shape)}): give at least one")
        if target is None:  # after the shapes: a misshapen input is said as such, not as this
            softmax = summed_softmax(self.run.y_tensor)
            if softmax is not None:
                raise UsageError(softmax.describe().replace("\n ", ";"))
        return inputs, single

    def _references(self, baseline: Any, inputs: Any) -> tuple[Any, Any]:
        """The baseline of each row (zeros where none is given) and, for the methods
        over a background set, that set (else None)."""
        import numpy as np

        names, method = self.names, self.options.method
        if baseline is not None and method.kind not in (PATH_INTEGRAL, REFERENCE_BASED):
            raise UsageError(f"{names.baseline}: {method.entry} is {method.kind} and takes no baseline; drop it, or "
                             "use a method that does (integrated_gradients, deeplift)")
        if method.entry in BACKGROUND:
            return np.zeros_like(inputs), algorithms.background_set(baseline, inputs, names.baseline)
        if method.entry == XRAI and inputs.ndim != 4:
            raise UsageError(f"xrai ranks regions of images, rows of shape (N, H, W, C); these are "
                             f"{list(inputs.shape)}: use integrated_gradients")
        if method.entry == BLUR:
            if baseline is not None:
                raise UsageError(f"{names.baseline}: blur_ig's path ends at the row blurred by max_sigma, its own "
                                 "baseline; drop it, or use integrated_gradients for a path to a baseline")
            if inputs.ndim != 4:
                raise UsageError(f"blur_ig blurs images, rows of shape (N, H, W, C); these are {list(inputs.shape)}: "
                                 "use integrated_gradients")
            return algorithms.gaussian_blur(inputs, method.value("max_sigma")), None
        # the input's shape or one row's, exactly: a baseline of (8, 8, 1) for rows of (8, 8, 3) is a mistake, which
        # broadcasting over the channels would hide
        if baseline is not None and np.shape(baseline) not in (inputs.shape, inputs.shape[1:], (1, *inputs.shape[1:])):
            raise UsageError(f"{names.baseline} has shape {list(np.shape(baseline))}: give one of the input's shape "
                             f"{list(inputs.shape)}, or of one row {list(inputs.shape[1:])}")
        if method.entry == XRAI and baseline is None:  # its own two: each row's min and max
            return None, None
        base = np.zeros_like(inputs) if baseline is None else np.broadcast_to(
            np.asarray(baseline, dtype=inputs.dtype), inputs.shape).copy()
        refuse_not_finite(base, names.baseline)
        return base, None

    def _batching(self, inputs: Any, report: AttributionReport) -> Batching:
        """The rows a run takes, from the graph (kept per size of a row); refused for
        DeepLIFT where a row cannot run beside its baseline."""
        row_bytes = inputs[:1].nbytes
        if row_bytes not in self._batchings:
            self._batchings[row_bytes] = (Batching(1, True, self.one_example) if self.one_example
                                          else batching_for(self.x, self.path_ops, row_bytes))
        batching = self._batchings[row_bytes]
        report.batch = batching.rows if batching.fixed and not self.one_example else None
        beside = self.options.method.entry in BESIDE_BASELINE
        if self.one_example:
            report.notes.append(f"{self.one_example}: each example runs alone")
            if beside:
                raise GraphgradError(f"{self.path}: deeplift runs each example beside its baseline in one batch, and "
                                     f"{self.one_example}; use integrated_gradients")
        if beside and batching.fixed and batching.rows % 2 and self.twin_x is None:
            name = self.options.method.entry
            raise GraphgradError(
                f"{self.path}: {name} runs each row beside its baseline in one batch, and the graph takes batches "
                f"of exactly {batching.rows} rows ({batching.why}), an odd number; use integrated_gradients, or a "
                "graph whose batch is free"
            )
        return batching

    def _runs(self, target: Any, inputs: Any, batching: Batching, timeout: float,
              report: AttributionReport) -> "Runs":
        """The graph's runs for this call: its ops for ``target``, its deadline, each
        row's class where there is one per row."""
        output, gradient, row_targets, layer, flags = self._ops_for(target)
        report.layer = shown_name(layer) if layer is not None else ""
        report.training_flags = list(flags)
        runs = Runs(self, output, gradient, row_targets, time.monotonic() + timeout, timeout, layer)
        if row_targets is not None:
            runs.targets = _row_targets(target, inputs, batching, lambda value, _: runs.evaluate(
                self.run.y_tensor, value), self.run.y_tensor.shape[-1], self.names)
            report.targets = runs.targets.tolist()
        return runs

    def _attributions(self, inputs: Any, base: Any, background: Any, noise: Noise | None, batching: Batching,
                      runs: "Runs", report: AttributionReport) -> Any:
        """The method's attributions, by its kind (smoothed where ``noise`` is given)."""
        import numpy as np

        method, options = self.options.method, self.options
        if method.kind == PATH_INTEGRAL and options.tolerance is not None:
            return self._refined(inputs, base, batching, runs, report)
        if background is not None:
            sampling = dict(method.values)
            paired = self._beside(batching) if method.entry == "deepshap" else batching
            return algorithms.over_background(method.entry == "deepshap", sampling.get("samples", 0),
                                              sampling.get("seed", 0), inputs, background, paired, runs.gradient_at)
        if method.kind == PERTURBATION:
            return algorithms.occluded(inputs, method.value("window"), method.value("stride"), method.value("value"),
                                       batching, runs.output_at)
        if method.entry == "scorecam":
            layer_values, upsampled = (in_batches(lambda value, origins, at=at: runs.evaluate(
                runs.gradient[at], value, origins), inputs, batching) for at in (0, 1))
            cams = algorithms.score_cam(inputs, layer_values, upsampled, batching, runs.output_at)
            return self._resized(cams, inputs.shape[1:3], runs.until)
        compute = self._by_kind(batching, runs)
        if noise is None:
            return compute(inputs, base, np.arange(len(inputs)))
        report.noise = noise.describe()
        return algorithms.smoothed(compute, inputs, base, noise)

    def _by_kind(self, batching: Batching, runs: "Runs") -> Callable:
        """``compute(rows, bases, origin)``: the attributions of the method's kind."""
        method = self.options.method
        if method.entry == BLUR:
            return lambda rows, bases, origin: algorithms.blur_integral(
                rows, method.value("max_sigma"), method.value("steps"), method.value("grad_step"), batching,
                runs.gradient_at, origin)
        if method.entry == XRAI:
            return lambda rows, bases, origin: xrai_maps(rows, bases, method.value("steps"),
                                                         method.value("area_threshold"), batching, runs.gradient_at,
                                                         origin)
        if method.entry == GUIDED_IG:
            return lambda rows, bases, origin: algorithms.guided_integral(
                rows, bases, method.value("steps"), method.value("fraction"), method.value("max_dist"), batching,
                runs.gradient_at, origin)
        if method.kind == PATH_INTEGRAL and self.options.layer:
            return lambda rows, bases, origin: self._integral_at_layer(rows, bases, origin, batching, runs)
        if method.kind == PATH_INTEGRAL:
            return lambda rows, bases, origin: algorithms.midpoint_integral(
                rows, bases, method.value("steps"), batching, runs.gradient_at, origin)
        if method.kind == REFERENCE_BASED:  # deeplift: the other two are over a background set
            paired = self._beside(batching)
            return lambda rows, bases, origin: algorithms.deeplift(rows, bases, paired, runs.gradient_at, origin)
        times_input = method.times_input and method.kind == GRADIENT_RULE
        return lambda rows, bases, origin: algorithms.gradient_rule(rows, batching, runs.gradient_at, origin,
                                                                    times_input)

    def _integral_at_layer(self, rows: Any, bases: Any, origin: Any, batching: Batching, runs: "Runs") -> Any:
        """Integrated gradients at the layer, as alibi's ``layer=`` computes them: the
        path runs from the layer's values at the baseline to its values at the row,
        fed to the layer with x held at the row, so other paths from x see the row."""
        import numpy as np

        layer = runs.layer
        values, references = (in_batches(lambda value, origins: runs.evaluate(layer, value, origins), each, batching,
                                         origin) for each in (rows, bases))

        def gradient_at(points: Any, slots: Any) -> Any:
            return runs.evaluate(runs.gradient, rows[slots], origin[slots], {layer: points})

        return algorithms.midpoint_integral(values, references, self.options.method.value("steps"), batching,
                                            gradient_at, np.arange(len(rows)))

    def _refined(self, inputs: Any, base: Any, batching: Batching, runs: "Runs", report: AttributionReport) -> Any:
        """Integrated gradients refined to the tolerance by adaptive quadrature (each row within its budget)."""
        import numpy as np

        options, tolerance = self.options, self.options.tolerance
        assert tolerance is not None, "refined only to a tolerance"
        differences = self._differences(inputs, base, None, batching, runs)
        try:
            refined = adaptive_integral(inputs, base, differences, options.method.value("steps"), tolerance,
                                        options.budget, batching, runs.gradient_and_output_at, _origins(inputs))
        except RunStopped as stopped:  # say what took the time: the refinement, up to max-steps gradients a row
            raise RunStopped(f"{stopped} (refining {len(inputs)} row(s) to the tolerance {tolerance:g}, each up to "
                             f"{options.budget} gradient evaluations: give a larger tolerance, a smaller "
                             "max-steps, or more time)") from None
        sums = algorithms.row_sums(refined.attributions)
        errors = refined.error.reshape(len(inputs), -1).max(axis=1) if refined.error.size else np.zeros(len(inputs))
        report.completeness = [RowCheck(row, float(s), float(d), int(n), float(e)) for row, (s, d, n, e) in enumerate(
            zip(sums, differences, refined.steps, errors))]
        report.refinement = Refinement(tolerance, options.budget, refined.met, refined.evaluations)
        return refined.attributions

    def _differences(self, inputs: Any, base: Any, background: Any, batching: Batching, runs: "Runs") -> Any:
        """f(x) - f(baseline) for each row: against the background's mean output, each
        row with its target, for the methods over a background set."""
        import numpy as np

        if runs.layer is not None and self.options.method.kind == PATH_INTEGRAL:  # y with the layer at its baseline
            references = in_batches(lambda value, origins: runs.evaluate(runs.layer, value, origins), base, batching)
            return in_batches(runs.output_at, inputs, batching) - in_batches(
                lambda value, origins: runs.output_at(inputs[origins], origins, {runs.layer: value}), references,
                batching)
        if background is not None:
            origin = np.repeat(np.arange(len(inputs)), len(background))
            repeated = np.tile(background, (len(inputs),) + (1,) * (inputs.ndim - 1))
            reference = in_batches(runs.output_at, repeated, batching, origin).reshape(len(inputs), -1).mean(axis=1)
        else:
            reference = in_batches(runs.output_at, base, batching)
        return in_batches(runs.output_at, inputs, batching) - reference


@dataclass
class Runs:
    """One call's runs of the graph: the fetches, each point's target, the deadline."""

    explainer: Explainer
    output: Any
    gradient: Any
    row_targets: Any
    deadline: float
    timeout: float
    layer: Any = None  # the layer a class activation map or a layer's integrated gradients are taken at
    targets: Any = None

    @property
    def until(self) -> Deadline:
        """This call's deadline, and what to say when a run reaches it."""
        return Deadline(self.deadline, f"{self.explainer.path}: the runs took over {self.timeout:g} s and were "
                                       "stopped; give them longer with --timeout SECONDS")

    def evaluate(self, fetch: Any, value: Any, origins: Any = None, more: dict | None = None) -> Any:
        explainer = self.explainer
        fed = {**explainer.feed, explainer.x: value[0] if explainer.one_example else value, **(more or {})}
        if self.targets is not None and origins is not None:
            fed[self.row_targets] = self.targets[origins]
        return explainer.run.evaluate(fetch, fed, self.until)

    def gradient_and_output_at(self, value: Any, origins: Any) -> tuple[Any, Any]:
        """Each point's gradient and its output (summed per row), from one run."""
        import numpy as np

        gradient, output = self.evaluate([self.gradient, self.output], value, origins)
        gradient = gradient[None] if self.explainer.one_example else gradient  # an example: x's shape
        values = np.asarray(output, dtype=np.float64)
        return gradient, values.reshape(len(value), -1).sum(axis=1) if values.ndim else np.full(len(value), values)

    def gradient_at(self, value: Any, origins: Any) -> Any:
        twin = self.explainer.twin_x
        if twin is not None:  # rows, then their baselines: the baselines through the twin
            half = len(value) // 2
            return self.evaluate(self.gradient, value[:half], origins[:half], {twin: value[half:]})
        found = self.evaluate(self.gradient, value, origins)
        # dy/dx of an example has x's shape; a class activation map has its layer's batch of one
        cam = self.explainer.options.method.entry in GRADIENT_CAMS
        return found[None] if self.explainer.one_example and not cam else found

    def output_at(self, value: Any, origins: Any, more: dict | None = None) -> Any:
        import numpy as np

        values = np.asarray(self.evaluate(self.output, value, origins, more), dtype=np.float64)
        return values.reshape(len(value), -1).sum(axis=1) if values.ndim else np.full(len(value), values)


def _origins(inputs: Any) -> Any:
    import numpy as np

    return np.arange(len(inputs))


def _without_noise(options: AttributeOptions, method: str) -> AttributeOptions:
    from dataclasses import replace

    return replace(options, method=parse_method(method), noise=None)


def _refuse_unknown_settings(settings: dict) -> None:
    """One line for a keyword the Explainer does not take, with the close one."""
    import dataclasses
    import difflib

    known = sorted(field.name for field in dataclasses.fields(AttributeOptions) if field.name != "method")
    for name in settings:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise UsageError(f"Explainer takes no keyword {name!r}{hint} (it takes {', '.join(known)})")


def _checked_target(target: Any, names: ArgumentNames) -> Any:
    """``target`` as explain takes it: None, a class index from 0, ``"predicted"``,
    one index per row (an array of integers), or several a row (``"top:K"``,
    ``"all"``, a :class:`RankedTargets`); anything else refused in one line."""
    import numpy as np

    if target is None or (isinstance(target, str) and target == "predicted") or isinstance(target, RankedTargets):
        return target
    if isinstance(target, str) and (ranked := ranked_targets(target, names.target)) is not None:
        return ranked
    if isinstance(target, (int, np.integer)) and not isinstance(target, bool):
        if target < 0:
            raise UsageError(f"{names.target} {target}: give a class index from 0")
        return int(target)
    if not isinstance(target, (str, bool)):
        targets = np.asarray(target)
        if targets.dtype.kind in "iu" and targets.ndim == 1:
            return targets
    raise UsageError(f"{names.target} {target!r}: give a class index, one index per row (an array of integers), "
                     "'predicted', 'top:K' or 'all'")


def _refuse_options_the_kind_does_not_take(method: Method, options: AttributeOptions, names: ArgumentNames) -> None:
    if options.layer and method.kind not in (CLASS_ACTIVATION, PATH_INTEGRAL):
        raise UsageError(f"{names.layer} {options.layer}: {method.entry} is {method.kind} and attributes to x; a "
                         "layer is taken by the class activation maps (gradcam, ...) and by integrated_gradients")
    if method.entry in (BLUR, GUIDED_IG, XRAI) and (options.layer or options.tolerance is not None):
        given = names.layer if options.layer else names.tolerance
        raise UsageError(f"{given}: {method.entry} integrates at x over its own path, in its own steps; drop "
                         f"{given}, or use integrated_gradients")
    if options.layer and options.tolerance is not None:
        raise UsageError(f"{names.layer} and {names.tolerance}: the path is refined to a tolerance at x only; drop "
                         "one, or give integrated_gradients more steps at the layer")
    if options.tolerance is not None and method.kind != PATH_INTEGRAL:
        raise UsageError(f"{names.tolerance} refines a path integral's steps; {method.entry} is {method.kind} and "
                         "takes none (integrated_gradients does)")


def _refuse_noise(method: Method, noise: Noise | None, options: AttributeOptions) -> None:
    if noise is None:
        return
    if method.entry in UNSMOOTHED:
        why = ("it averages over its background set already" if method.entry in BACKGROUND
               else "its map ranks regions, which noise would move" if method.entry == XRAI
               else "it takes no gradient")
        raise UsageError(f"noise: {method.entry} is not smoothed ({why}); drop the noise, or use a method such as "
                         "gradient or integrated_gradients")
    if options.tolerance is not None:
        raise UsageError("noise and a tolerance: each noisy sample has its own f(x), so there is no one gap to "
                         "refine to; give one or the other")


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
