"""TensorFlow Lite's schema, read with the ``tflite`` package's code generated from
it (never a copy of the schema here): the package imported where a ``.tflite`` is
read, the builtin operators' names, and a damaged flatbuffer said in one line.
NumPy-free, so that ``graphgrad rewrite`` and ``ops`` start without it."""

from collections.abc import Callable
from typing import Any

from ..errors import ModelReadError


def with_schema(read: Callable, path: str, data: bytes) -> Any:
    """``read(tflite, path, data)``: the TensorFlow Lite model ``data`` read with the
    tflite package's schema; a flatbuffer that does not read is one line."""
    try:
        import tflite
    except ImportError:
        raise ModelReadError(f"{path} is a TensorFlow Lite model; reading one needs the tflite package (TensorFlow "
                             "Lite's schema), which graphgrad installs: pip install tflite") from None
    try:
        return read(tflite, path, data)
    except ModelReadError:
        raise
    except Exception as error:  # noqa: BLE001  a flatbuffer that lies about its offsets fails anywhere inside
        raise ModelReadError(f"{path} starts as a TensorFlow Lite model but its flatbuffer does not read "
                             f"({type(error).__name__}): a truncated or damaged file") from None


def op_name(tflite: Any, code: Any) -> str:
    """A builtin op's name (the larger of the two code fields: schema 3a moved it), or CUSTOM:its code."""
    builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
    name = tflite.BUILTIN_OPCODE2NAME.get(builtin, f"BUILTIN_{builtin}")
    return f"CUSTOM:{text(code.CustomCode())}" if name == "CUSTOM" else name


def text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else (value or "")


def served_subgraph(model: Any, path: str) -> int:
    """The subgraph the model serves: its serving_default signature's, its one
    signature's, or (without signatures) its first; several others are refused."""
    signatures = {text(model.SignatureDefs(i).SignatureKey()): model.SignatureDefs(i).SubgraphIndex()
                  for i in range(model.SignatureDefsLength())}
    if not signatures:
        return 0
    chosen = signatures.get("serving_default", next(iter(signatures.values())) if len(signatures) == 1 else None)
    if chosen is None:
        raise ModelReadError(f"{path}: {len(signatures)} signatures ({', '.join(sorted(signatures))}) and none "
                             "is serving_default; graphgrad rebuilds the one the model serves")
    if not 0 <= chosen < model.SubgraphsLength():
        raise ModelReadError(f"{path}: its signature names subgraph {chosen}, which it does not have")
    return chosen
