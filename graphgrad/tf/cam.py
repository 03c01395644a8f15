"""Class activation maps on the TensorFlow side: which layer a map (or a layer's
integrated gradients) is taken at, and Grad-CAM's (Grad-CAM++'s, Layer-CAM's) map
from the layer's gradient, built into the graph."""

from typing import Any

from ..errors import UsageError
from ..gradients.calls import with_calls_inlined
from ..graph.hints import close_names
from ..graph.loops import EXITS, MERGES, SWITCHES
from ..methods.options import ArgumentNames
from ..names import CALL_OPS, TF1_LOOP_ENTERS
from .internals import in_while_loop
from .loading import tensor_named
from .paths import ancestors_of_ops, ops_between

INLINED = "graphgrad_inlined"  # the scope of the path computed again with its calls inlined

CONVOLUTIONS = ("Conv2D", "DepthwiseConv2dNative", "Conv2DBackpropInput", "FusedConv2D", "_FusedConv2D")
GRADIENT_CAMS = ("gradcam", "gradcam_pp", "layercam")  # the maps weighted by the layer's gradient


def cam_layer(run: Any, x: Any, path_ops: set, name: str | None, names: ArgumentNames) -> Any:
    """Grad-CAM's layer: the tensor ``name``, else the last 4-D floating-point tensor
    (NHWC) on the path from x to y after a convolution whose height and width are
    over 1 (or unknown), of those a run can fetch (outside TF1 loops and conditionals)."""
    ordered = [op for op in run.graph.get_operations() if op in path_ops]  # graph order: producers first
    inside = in_branches(ordered)
    if name:
        layer = layer_named(run.graph, name, path_ops)
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
            why = ("the path runs through function calls that carry gradients of their own (kept as calls), whose "
                   "layers a run cannot fetch")
        else:
            why = f"the path has none; name one with {names.layer}"
        raise UsageError(f"a class activation map (Grad-CAM, Score-CAM) needs a 4-D (N, H, W, C) layer with a "
                         f"spatial size between {x.name} and {run.y}, and {why}")
    # The last layer: the one no other layer is computed from. Branches that reach y
    # apart have one each, and graph order would pick one by how the file was written.
    upstream = ancestors_of_ops(source.op for layer in fetchable for source in layer.op.inputs)
    last = [layer for layer in fetchable if layer.op not in upstream]
    if len(last) > 1:
        raise UsageError(f"a class activation map takes one layer, and the path from {x.name} to {run.y} has "
                         f"{len(last)} last ones, on branches that reach y apart: "
                         f"{', '.join(shown_name(layer) for layer in last)}; name one with {names.layer}")
    return last[0]


def path_with_calls_inlined(tf: Any, run: Any, x: Any, path_ops: set) -> tuple[Any, set]:
    """y computed again beside the graph, from x, with every function call on the
    path from x to y inlined (recursively; a call with a gradient of its own stays a
    call), so that the layers inside the functions are tensors a run can fetch and
    feed: a SavedModel's signature is a call into the model's function. The copy
    reads what the path takes from outside it (variables' handles, other inputs)
    from the graph itself, so it computes what y computes. Returns (the copy's y,
    the ops from x to it); (y, ``path_ops``) when the path calls nothing."""
    if not any(op.type in CALL_OPS for op in path_ops):
        return run.y_tensor, path_ops
    path = tf.compat.v1.GraphDef()
    path.versions.CopyFrom(run.graph.graph_def_versions)
    for op in run.graph.get_operations():  # graph order: producers first
        if op in path_ops and op is not x.op:
            path.node.add().CopyFrom(op.node_def)
    inlined = with_calls_inlined(run.graph, path, set())
    copied = {node.name for node in inlined.node}
    outside = {}
    for node in inlined.node:
        # What the session has already run (a restore, an initializer) need not run again.
        kept = [ref for ref in node.input if not (ref.startswith("^") and ref[1:] not in copied)]
        del node.input[:]
        node.input.extend(kept)
        for ref in kept:
            name, _, index = ref.partition(":")
            if not ref.startswith("^") and name not in copied:
                outside[ref] = run.graph.get_tensor_by_name(f"{name}:{index or 0}")
    [y] = tf.compat.v1.import_graph_def(inlined, input_map=outside, return_elements=[run.y_tensor.name],
                                        name=INLINED)
    return y, ops_between([x], y)


def layer_named(graph: Any, name: str, path_ops: set) -> Any:
    """The tensor ``name`` names: on a path computed again with its calls inlined
    (:func:`path_with_calls_inlined`), its copy there, a name inside a called
    function as ``CALL/inlined/NAME`` or NAME alone where one call holds it."""
    full = name if ":" in name else name + ":0"
    on_path = {tensor.name: tensor for op in path_ops for tensor in op.outputs}
    for candidate in (full, f"{INLINED}/{full}"):
        if candidate in on_path:
            return on_path[candidate]
    inside = sorted(found for found in on_path if found.endswith("/inlined/" + full))
    if len(inside) > 1:
        raise UsageError(f"{name} is inside {len(inside)} function calls on the path; name one of "
                         f"{', '.join(shown_name(on_path[found]) for found in inside)}")
    if inside:
        return on_path[inside[0]]
    if any(op.name.startswith(f"{INLINED}/") for op in path_ops):  # the names a user can give: the path's, as shown
        try:
            return tensor_named(graph, name)
        except UsageError:
            by_short: dict = {}  # a name inside a call, alone -> the names it has on the path
            for tensor in on_path.values():
                by_short.setdefault(shown_name(tensor).rpartition("/inlined/")[2], []).append(shown_name(tensor))
            close = [shown for short in close_names(full.rpartition("/inlined/")[2], sorted(by_short), cutoff=0.5)
                     for shown in sorted(by_short[short])]  # the closest first
            hint = f"; close ones on the path: {', '.join(close)}" if close else ""
            raise UsageError(f"no tensor {name!r} on the path, its calls inlined{hint}") from None
    return tensor_named(graph, name)


def shown_name(tensor: Any) -> str:
    """A tensor's name as the model names it (a copy on an inlined path without the copy's scope)."""
    return tensor.name.removeprefix(f"{INLINED}/")


def integral_layer(run: Any, x: Any, path_ops: set, name: str, names: ArgumentNames) -> Any:
    """The internal layer integrated gradients are taken at: ``name``, a
    floating-point tensor on the path from x to y that a run can both fetch and
    feed (outside loops and conditionals)."""
    layer = layer_named(run.graph, name, path_ops)
    ordered = [op for op in run.graph.get_operations() if op in path_ops]
    if layer.op not in path_ops or not layer.dtype.is_floating:
        raise UsageError(f"{names.layer} {name}: integrated gradients at a layer need a floating-point tensor on "
                         f"the path from {x.name} to {run.y}; {name} is {layer.dtype.name} and "
                         f"{'on' if layer.op in path_ops else 'off'} the path")
    if in_while_loop(layer.op) or layer.op in in_branches(ordered) or not run.graph.is_feedable(layer):
        raise UsageError(f"{names.layer} {name}: integrated gradients at a layer feed it the points of the path, "
                         f"and {name} is inside a while loop or a conditional, where a run cannot; name one outside "
                         "them")
    return layer


def in_branches(ordered: list) -> set:
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


def image_size(tf: Any, x: Any, one_example: str | None) -> Any:
    """x's height and width where x is an image (N, H, W, C; or H, W, C without a
    batch axis), else None."""
    if x.shape.rank == (3 if one_example else 4):
        return tf.shape(x)[0:2] if one_example else tf.shape(x)[1:3]
    return None


def grad_cam(tf: Any, output: Any, layer: Any, size: Any, weighting: str = "gradcam") -> Any:
    """ReLU(sum_k alpha_k A_k), alpha_k the spatial mean of d output / d A_k (Selvaraju
    et al., 2017), resized bilinearly to ``size`` (x's height and width; None: the
    layer's): (N, H, W, 1). ``weighting`` ``gradcam_pp``: Grad-CAM++'s weights
    (Chattopadhay et al., 2018, with the exponential of the score as tf-keras-vis
    takes it), the positive gradients of exp(S) at each position, weighted by
    g^2 / (2 g^2 + g^3 sum(A)) normalised over the positions; ``layercam``:
    Layer-CAM's (Jiang et al., 2021), each position's activations weighted by its
    own positive gradient, ReLU(sum_k ReLU(g_k) A_k)."""
    [slope] = tf.compat.v1.gradients(output, [layer])
    if slope is None:
        raise UsageError(f"Grad-CAM: y does not depend on the layer {layer.name}")
    if weighting == "layercam":
        weights = tf.nn.relu(slope)
    elif weighting == "gradcam_pp":
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
