"""Tensor parameters (``reverse(strength=@grl_lambda)``) checked when written: each
names a floating-point scalar of the graph's top level, which the loading process
reads at every step (see :func:`graphgrad.tf.runtime.build_gradient_function`)."""

from ..errors import SelectionError
from ..files.protos import DataType
from ..gradients.spec import GradientSpec
from ..readings.protocol import EditScope

_FLOATS = {DataType.Value(name) for name in ("DT_FLOAT", "DT_DOUBLE", "DT_HALF", "DT_BFLOAT16")}


def check_tensor_params(every_scope: list[EditScope], spec: GradientSpec) -> None:
    """One line naming the first tensor parameter of ``spec`` that a top level of
    the model (of ``every_scope``, its scopes) lacks, or that is not a floating-point
    scalar there."""
    for ref in spec.tensor_refs:
        for scope in every_scope:
            if scope.function is not None:
                continue
            where = f" (graph {scope.graph})" if scope.graph else ""
            if scope.node(ref.name) is None:
                raise SelectionError(
                    f"{spec}: no tensor {ref.tensor}{where} for {ref}; a tensor parameter names a floating-point "
                    "scalar of the graph's top level, such as a placeholder fed at each step"
                )
            dtype, shape = scope.dtype_of(ref.tensor), scope.shape_of(ref.tensor)
            if dtype is not None and dtype not in _FLOATS:
                raise SelectionError(
                    f"{spec}: {ref.tensor}{where} is not floating-point; {ref} must name a float scalar"
                )
            if shape:
                raise SelectionError(f"{spec}: {ref.tensor}{where} has shape {shape}; {ref} must name a scalar")


def refuse_in_functions(spec: GradientSpec, node: str) -> None:
    """Tensor parameters are top-level tensors: a function body cannot read them."""
    if spec.tensor_refs:
        raise SelectionError(
            f"{spec} on {node}, in a function body: a function cannot read the top-level tensor {spec.tensor_refs[0]}."
            " To fix this, exclude the function bodies (--no-functions) or use a fixed number"
        )
