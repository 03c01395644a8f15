"""Tensors named on the command line located in a model's scopes, dtypes by name,
and functions renamed: what the edits share besides the scopes themselves."""

import re

from ..errors import GraphgradError
from ..files.protos import AttrValue, DataType
from ..graph.functions import rename_function_references, rename_in_attr
from ..graph.hints import close_names
from ..graph.model import Model
from ..readings.protocol import EditScope

DTYPES = {
    name.lower().removeprefix("dt_"): value
    for name, value in DataType.items()
    if not name.endswith("_REF") and value
}


_FUNCTION_TENSOR = re.compile(r"(?P<function>[^/]+)/(?P<node>.+):(?P<arg>[A-Za-z_][A-Za-z0-9_]*):(?P<index>\d+)\Z")
_TOP_TENSOR = re.compile(r"(?P<node>[^:]+)(?::(?P<index>\d+))?\Z")


def locate_tensor(every_scope: list[EditScope], tensor: str) -> list:
    """[(scope, canonical ref)] for ``node:index`` (top level) or
    ``function/node:output_arg:index`` (function body), in every graph of
    ``every_scope`` (a model's scopes) that has it."""
    found = []
    function_match = _FUNCTION_TENSOR.match(tensor)
    top_match = _TOP_TENSOR.match(tensor)
    for scope in every_scope:
        if scope.function is None and top_match and scope.node(top_match["node"]):
            found.append((scope, scope.canonical(f"{top_match['node']}:{top_match['index'] or 0}")))
        elif (
            scope.function is not None and function_match
            and function_match["function"] == scope.function.signature.name
            and scope.node(function_match["node"])
        ):
            found.append((scope, f"{function_match['node']}:{function_match['arg']}:{function_match['index']}"))
    if not found:
        raise GraphgradError(
            f"no tensor {tensor!r}: name one as NODE:INDEX (top level) or "
            "FUNCTION/NODE:OUTPUT_ARG:INDEX (in a function body, as its consumers spell it)"
            + _function_hint(every_scope, tensor)
        )
    return found


def _function_hint(every_scope: list[EditScope], tensor: str) -> str:
    top_names = [name for scope in every_scope if scope.function is None for name in scope.names()]
    close = close_names(tensor.split(":")[0], top_names)
    if close:
        return f"; close names: {', '.join(close)}"
    function, _, rest = tensor.partition("/")
    node = rest.split(":")[0]
    for scope in every_scope:
        if scope.function is not None and scope.function.signature.name == function and scope.node(node):
            spelled = sorted({
                name for other in scope.names() for name in scope.node(other).input if name.startswith(node + ":")
            })
            if spelled:
                return f"; consumers in {function} use {', '.join(f'{function}/{s}' for s in spelled)}"
    return ""


def rename_functions(model: Model, suffix: str) -> None:
    """Append ``suffix`` to the name of every library function of ``model``, in
    place, and to every reference to one: call ops, function-valued attributes
    (branches, loop bodies, ``f``), nested ones, and gradient definitions."""
    for _, graph_def in model.graphs():
        library = graph_def.library
        names = {function.signature.name: function.signature.name + suffix for function in library.function}
        if not names:
            continue
        rename_function_references(graph_def.node, names)
        for function in library.function:
            function.signature.name = names[function.signature.name]
            rename_function_references(function.node_def, names)
            for value in function.attr.values():
                rename_in_attr(value, names)
        for gradient in library.gradient:
            gradient.function_name = names.get(gradient.function_name, gradient.function_name)
            gradient.gradient_func = names.get(gradient.gradient_func, gradient.gradient_func)



def dtype_name(dtype: int | None) -> str:
    """As NumPy and tf.dtypes name it: float32, uint8, ...; "of unknown dtype"
    (a value TensorFlow does not define, from a hostile file, is named as a number)."""
    if not dtype:
        return "of unknown dtype"
    try:
        name = DataType.Name(dtype).removeprefix("DT_").lower()
    except ValueError:
        return f"of dtype {dtype}, which TensorFlow does not define"
    return {"float": "float32", "double": "float64", "half": "float16"}.get(name, name)


def dtype_attr(dtype: int) -> AttrValue:
    return AttrValue(type=dtype)


def parse_dtype(name: str) -> int:
    """A dtype enum from ``float32``, ``float``, ``DT_FLOAT``, ``float64``, ..."""
    key = name.lower().removeprefix("dt_")
    key = {"float32": "float", "float64": "double", "float16": "half"}.get(key, key)
    if key not in DTYPES:
        raise GraphgradError(f"unknown dtype {name!r}; e.g. float32, float64, half, bfloat16")
    return DTYPES[key]
