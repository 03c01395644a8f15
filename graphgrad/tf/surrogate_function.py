"""A user's surrogate g for ``bypass`` written as a Python function
(``--surrogate-function FILE.py:NAME``): imported from the file the user names,
traced once with TensorFlow on a placeholder of the region's input dtype and static
shape, and written into the model as a surrogate graph
(:mod:`graphgrad.edits.surrogate_graph`): the bypassed file then needs neither the
function nor graphgrad to load."""

import os

from ..edits.surrogate_graph import SurrogateGraph, surrogate_graph_of
from ..edits.tensors import locate_tensor
from ..errors import GraphgradError, SelectionError
from ..gradients.user_modules import load_gradient_module
from ..graph.model import Model
from ..readings import open_reading
from .runtime import tensorflow

_INPUT, _OUTPUT = "region_input", "surrogate_output"


def traced_surrogate(model: Model, source: str, spec: str) -> SurrogateGraph:
    """g of ``spec`` (``FILE.py:NAME``; the function takes x, a tensor of ``source``'s
    dtype and shape in ``model``, and returns a tensor of the region's output shape),
    traced into a surrogate graph. Runs the user's file: only for a file the user named."""
    path, _, name = spec.rpartition(":")
    said = f"--surrogate-function {spec}"
    if not path or not name.isidentifier():
        raise SelectionError(f"{said}: name the function as FILE.py:NAME (e.g. surrogates.py:soft_jpeg)")
    function = getattr(load_gradient_module(path), name, None)
    if not callable(function):
        raise SelectionError(f"{said}: {path} defines no function {name}")
    dtype, shape = _input_of(model, source)
    tf = tensorflow()
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.as_dtype(dtype), shape, name=_INPUT)
        try:
            output = tf.identity(tf.convert_to_tensor(function(x)), name=_OUTPUT)
        except Exception as error:  # noqa: BLE001  the user's code: whatever it raises is one line
            raise GraphgradError(f"{said}: calling {name} on a {x.dtype.name} tensor of shape {shape} raised "
                                 f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
                                 ) from None
    if output.dtype != x.dtype:
        raise SelectionError(f"{said}: {name} returns {output.dtype.name} for a {x.dtype.name} x; return x's dtype")
    return surrogate_graph_of(graph.as_graph_def(), f"{os.path.basename(path)}:{name}", said, _OUTPUT)


def _input_of(model: Model, source: str) -> tuple[int, list | None]:
    """``source``'s dtype and static shape (None where unknown, -1 dimensions as None) in the model."""
    with open_reading(model) as reading:
        for scope, ref in locate_tensor(reading.scopes(), source):
            dtype, shape = scope.dtype_of(ref), scope.shape_of(ref)
            if dtype is not None:
                return dtype, None if shape is None else [None if d < 0 else d for d in shape]
    raise SelectionError(f"--from {source}: no tensor of that name with a known dtype in {model.path}")
