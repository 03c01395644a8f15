"""Gradients users declare in their own Python files, loaded by name."""

import os
import re
import sys
from types import ModuleType

from ..errors import GraphgradError


def load_gradient_module(path: str) -> ModuleType:
    """Import a user's Python file that declares gradients with ``@graphgrad.gradient``.

    This runs the file's code: call it only for files the user named.
    """
    import importlib.util

    name = "graphgrad_user_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None or not os.path.isfile(path):
        raise GraphgradError(f"cannot load gradients from {path}: no such Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except GraphgradError:
        del sys.modules[name]
        raise
    except SystemExit as end:  # sys.exit() in a module would end the command, saying nothing
        del sys.modules[name]
        raise GraphgradError(f"cannot load gradients from {path}: it calls sys.exit({end.code!r}) on import; "
                             "a gradients module only declares gradients") from None
    except KeyboardInterrupt:
        del sys.modules[name]
        raise
    except BaseException as error:  # noqa: BLE001  the user's code: whatever it raises is one line
        del sys.modules[name]
        raise GraphgradError(
            f"cannot load gradients from {path}: {type(error).__name__}: {error}"
        ) from error
    return module
