"""The one registry of gradients: built-in ones and those users declare.

Entries are plain descriptions plus a function; nothing here imports TensorFlow.
Built-in functions receive the ``tf`` module from the runtime as their first
argument, so a family file can be imported (for listing, validating specs) in a
process that never loads TensorFlow.
"""

import inspect
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..errors import RegistryError, SpecError

REQUIRED = object()
NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

REPLACEMENT = "replacement"
TRANSFORM = "transform"
USER = "user"


@dataclass(frozen=True)
class Param:
    """One parameter of a gradient: its name, type (int or float) and default."""

    name: str
    type: type
    default: object = REQUIRED

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def describe(self) -> str:
        if self.required:
            return self.name
        return f"{self.name}={self.default!r}"


@dataclass(frozen=True)
class GradientDef:
    """A registered gradient.

    ``kind`` is ``replacement`` (ignores the op's own gradient), ``transform``
    (maps the op's own gradient, input by input) or ``user`` (a replacement
    written by a user as ``fn(op, *grads) -> grads``).
    """

    name: str
    kind: str
    function: Callable
    params: tuple = ()
    formula: str = ""
    check: Callable | None = None
    origin: str = ""
    aliases: tuple = field(default=())
    op_types: tuple = ()  # the op types it is meant for; empty: any

    def refuses(self, op_type: str) -> str | None:
        """Why this gradient is wrong for nodes of ``op_type``, or None if it is not."""
        if not self.op_types or op_type in self.op_types:
            return None
        return (
            f"{self.name} is meant for op types {', '.join(self.op_types)} (its formula: {self.formula}), "
            f"not {op_type}"
        )

    def signature(self) -> str:
        if not self.params:
            return self.name
        return f"{self.name}({', '.join(p.describe() for p in self.params)})"


class GradientRegistry:
    """Name -> :class:`GradientDef`, plus aliases that stand for whole specs."""

    def __init__(self):
        self._lock = threading.Lock()
        self._entries: dict[str, GradientDef] = {}
        self._aliases: dict[str, str] = {}

    def add(self, entry: GradientDef) -> GradientDef:
        if not NAME_PATTERN.match(entry.name):
            raise RegistryError(
                f"invalid gradient name {entry.name!r}: use letters, digits and "
                "underscores, not starting with a digit"
            )
        with self._lock:
            if entry.name in self._aliases:
                raise RegistryError(
                    f"gradient name {entry.name!r} is already an alias for "
                    f"{self._aliases[entry.name]!r}; choose another name"
                )
            first = self._entries.get(entry.name)
            # Importing the same user module twice (once by the CLI's --gradients,
            # once by the user's own import) re-registers from the same place.
            if first is not None and first.origin != entry.origin:
                raise RegistryError(
                    f"gradient {entry.name!r} is registered twice: first at "
                    f"{first.origin}, again at {entry.origin}. To fix this, rename "
                    "one of them."
                )
            self._entries[entry.name] = entry
        return entry

    def add_alias(self, alias: str, spec: str) -> None:
        with self._lock:
            if alias in self._entries or alias in self._aliases:
                raise RegistryError(f"alias {alias!r} is already taken")
            self._aliases[alias] = spec

    def alias_target(self, name: str) -> str | None:
        return self._aliases.get(name)

    def aliases_of(self, name: str) -> list[tuple[str, str]]:
        """Aliases whose spec starts with gradient ``name``, as (alias, spec)."""
        return sorted(
            (alias, spec)
            for alias, spec in self._aliases.items()
            if re.match(re.escape(name) + r"(\(|\Z)", spec)
        )

    def get(self, name: str) -> GradientDef:
        try:
            return self._entries[name]
        except KeyError:
            import difflib  # only on this error path

            names = sorted(self._entries) + sorted(self._aliases)
            known = ", ".join(names)
            close = difflib.get_close_matches(name, names, n=1) or [
                n for n in names if n.lower() == name.lower()
            ]
            hint = f" Did you mean {close[0]}?" if close else ""
            if name.startswith(("CustomGradient", "tf")) or name[:1].isupper():
                hint += f" To use a name registered with tf.RegisterGradient, write tf:{name}."
            raise SpecError(
                f"unknown gradient {name!r}. Known gradients: {known}.{hint} "
                "A gradient of your own must be imported first (graphgrad rewrite "
                "--gradients FILE.py)."
            ) from None

    def entries(self) -> list[GradientDef]:
        return sorted(self._entries.values(), key=lambda e: (e.kind, e.name))


REGISTRY = GradientRegistry()


def _origin(function: Callable) -> str:
    code = getattr(function, "__code__", None)
    if code is None:
        return getattr(function, "__module__", "?")
    return f"{code.co_filename}:{code.co_firstlineno}"


def builtin(kind: str, *params: Param, formula: str, check: Callable[[dict], None] | None = None,
            aliases: Sequence[tuple[str, str]] = (), op_types: Sequence[str] = ()) -> Callable:
    """Register a built-in gradient family member (used by graphgrad's own files).
    ``op_types``: the only op types it may be given to (empty: any)."""

    def decorate(function):
        REGISTRY.add(
            GradientDef(
                name=function.__name__.rstrip("_"),
                kind=kind,
                function=function,
                params=params,
                formula=formula,
                check=check,
                origin=_origin(function),
                op_types=tuple(op_types),
            )
        )
        for alias, spec in aliases:
            REGISTRY.add_alias(alias, spec)
        return function

    return decorate


def gradient(name: str) -> Callable:
    """Declare a gradient of your own, usable in specs as ``name``.

    The decorated function is called as ``fn(op, *grads)`` when TensorFlow
    differentiates a node whose override names it, and returns one gradient (or
    None) per input of ``op``, like a ``tf.RegisterGradient`` function. The graph
    stores only the name; the process that loads the graph must import the module
    that defines it before calling :func:`graphgrad.register_gradients`.

    Example::

        import graphgrad

        @graphgrad.gradient("halve")
        def halve(op, grad):
            return [grad * 0.5] + [None] * (len(op.inputs) - 1)
    """

    def decorate(function):
        REGISTRY.add(
            GradientDef(
                name=name,
                kind=USER,
                function=function,
                formula=(inspect.getdoc(function) or "").split("\n")[0],
                origin=_origin(function),
            )
        )
        return function

    return decorate


def _fixed(value) -> bool:
    """Whether a parameter's value is known when written (not read from a tensor)."""
    return isinstance(value, (int, float))


def check_positive(name: str) -> Callable[[dict], None]:
    def check(values):
        if _fixed(values[name]) and values[name] <= 0:
            raise SpecError(f"{name} must be positive, got {values[name]!r}")

    return check


def check_not_negative(name: str) -> Callable[[dict], None]:
    def check(values):
        if _fixed(values[name]) and values[name] < 0:
            raise SpecError(f"{name} must not be negative, got {values[name]!r}")

    return check
