"""Arrays users hand to the commands that run a graph (``--input``, ``--baseline``,
``--feed NAME=FILE.npy``), read as numbers and nothing else.

The header is checked against the file before numpy sees the data: a header that
claims more than the file holds would have numpy allocate it first (10^12 rows),
and only plain numeric dtypes are taken (no object arrays, so never a pickle; no
strings, bytes, structured or void records).
"""

import io
import math
from typing import Any

from ..errors import UsageError
from .reading import read_small_file

ARRAY_LIMIT = 1 << 31  # bytes of one array file: protobuf's own limit on a graph
NUMERIC_KINDS = "biufc"  # bool, signed and unsigned integers, floats, complex


def load_array(path: str, what: str, limit: int = ARRAY_LIMIT) -> Any:
    """The array in the ``.npy`` file at ``path`` (``what`` names the option for
    messages), or a UsageError that says in one line what is wrong with it."""
    import numpy as np

    data = read_small_file(path, limit, f"{what} file")
    if not data.startswith(b"\x93NUMPY"):
        raise UsageError(f"{what} {path} is not a .npy file (save the array with numpy.save)")
    stream = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(stream)
        reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran_order, dtype = reader(stream)
    except (ValueError, EOFError, SyntaxError, TypeError) as error:
        raise UsageError(f"{what} {path} is not a usable .npy array (save it with numpy.save): "
                         f"{str(error).splitlines()[0][:200]}") from None
    if dtype.kind not in NUMERIC_KINDS or dtype.names is not None or dtype.subdtype is not None:
        raise UsageError(f"{what} {path} holds {dtype} values; give numbers (bool, integers or floats)")
    expected = math.prod(shape) * dtype.itemsize
    held = len(data) - stream.tell()
    if expected != held:
        raise UsageError(f"{what} {path}: its header says shape {list(shape)} of {dtype} ({expected} bytes), and "
                         f"the file holds {held}; it is truncated or not what numpy wrote")
    array = np.frombuffer(data, dtype=dtype, count=math.prod(shape), offset=stream.tell())
    return array.reshape(shape, order="F" if fortran_order else "C").copy()


def save_array(path: str, array: Any) -> None:
    """Write ``array`` to ``path`` as ``.npy`` (no pickles), atomically."""
    import numpy as np

    from .writing import write_chunks

    stream = io.BytesIO()
    np.save(stream, array, allow_pickle=False)
    write_chunks(path, [stream.getvalue()])
