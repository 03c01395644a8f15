"""Gradient specs: the grammar, canonical form and the attribute value they give.

A spec is a pipeline of stages, ``replacement|transform|transform``, each stage
a gradient name with optional arguments: ``ste``, ``ste(clip=2)``,
``clip_value(-0.1, 0.1)``, ``identity|clip_norm(1.0)``. Alternatively
``tf:NAME`` stands for a gradient that TensorFlow's own registry (or the loading
process) provides under NAME, written to the graph verbatim.

The grammar is parsed by hand, never evaluated. Every spec has one canonical
text (all parameters named, in declared order, numbers normalised), and the
value written to ``_gradient_op_type`` is ``graphgrad/<canonical>``: the runtime
rebuilds the gradient from that name alone, equal specs share one name, and the
namespace keeps clear of names users register themselves.
"""

import math
import re
from dataclasses import dataclass
from functools import cached_property
from typing import NoReturn

from ..errors import SpecError
from ..names import NAMESPACE, TF_PREFIX
from .registry import REGISTRY, TRANSFORM, GradientDef

MAX_SPEC_LENGTH = 4096  # of a spec, and of the canonical name the runtime rebuilds a gradient from
MAX_INTEGER_DIGITS = 18  # whole numbers fit in 64 bits (a seed, an index), and in a float's range

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<number>[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)
      | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<ref>@[A-Za-z0-9_.][A-Za-z0-9_./-]*(?::\d+)?)
      | (?P<punct>[(),=|])
    )""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class TensorRef:
    """A numeric parameter read from a scalar tensor of the graph at run time
    (``@NAME`` or ``@NAME:INDEX``): a schedule fed at each step."""

    name: str
    index: int = 0

    @property
    def tensor(self) -> str:
        return f"{self.name}:{self.index}"

    def __str__(self) -> str:
        return f"@{self.name}" if self.index == 0 else f"@{self.name}:{self.index}"


@dataclass(frozen=True)
class Stage:
    """One gradient in a pipeline, with every parameter's value."""

    name: str
    args: tuple = ()  # ((param name, value), ...) in declared order

    @property
    def definition(self) -> GradientDef:
        return REGISTRY.get(self.name)

    def canonical(self) -> str:
        if not self.args:
            return self.name
        return f"{self.name}({','.join(f'{k}={_format_value(v)}' for k, v in self.args)})"


@dataclass(frozen=True)
class GradientSpec:
    """A parsed spec: gradient stages, or a verbatim TensorFlow registry name."""

    stages: tuple = ()
    tf_name: str | None = None

    @cached_property
    def canonical(self) -> str:
        if self.tf_name is not None:
            return TF_PREFIX + self.tf_name
        return "|".join(stage.canonical() for stage in self.stages)

    @cached_property
    def attr_value(self) -> str:
        """The string written to the node's ``_gradient_op_type``."""
        if self.tf_name is not None:
            return self.tf_name
        return NAMESPACE + self.canonical

    @property
    def tensor_refs(self) -> list[TensorRef]:
        """The graph tensors the parameters read at run time, in order."""
        return [value for stage in self.stages for _, value in stage.args if isinstance(value, TensorRef)]

    def refuses(self, op_type: str) -> str | None:
        """Why this spec is wrong for nodes of ``op_type`` (its replacement is meant
        for other op types), or None."""
        return self.stages[0].definition.refuses(op_type) if self.stages else None

    def __str__(self) -> str:
        return self.canonical


def _format_value(value) -> str:
    if value is None:
        return "None"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position == len(text):
            return tokens
        match = _TOKEN.match(text, position)
        if not match:
            raise SpecError(
                f"cannot parse gradient spec {text!r}: unexpected {text[position:position + 10]!r} "
                f"at column {position + 1}"
            )
        kind = match.lastgroup or ""  # every alternative of _TOKEN is a named group
        tokens.append((kind, match.group(kind)))
        position = match.end()


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = _tokenize(text)
        self.position = 0

    def fail(self, what: str) -> NoReturn:
        raise SpecError(f"cannot parse gradient spec {self.text!r}: {what}")

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.position] if self.position < len(self.tokens) else ("", "")  # the end

    def take(self, kind: str | None = None, value: str | None = None, expected: str | None = None) -> str:
        token = self.peek()
        expected = expected or (repr(value) if value else f"a {kind}")
        if not token[0]:
            self.fail(f"it ends early, expected {expected}")
        if (kind and token[0] != kind) or (value and token[1] != value):
            self.fail(f"expected {expected}, found {token[1]!r}")
        self.position += 1
        return token[1]

    def pipeline(self) -> list[tuple[str, list, dict]]:
        stages = [self.stage()]
        while self.peek()[1] == "|":
            self.take(value="|")
            stages.append(self.stage())
        if self.peek()[0]:
            self.fail(f"unexpected {self.peek()[1]!r}")
        return stages

    def stage(self) -> tuple[str, list, dict]:
        name = self.take(kind="name")
        positional, keywords = [], {}
        if self.peek()[1] == "(":
            self.take(value="(")
            while self.peek()[1] != ")":
                if self.peek()[0] == "name" and self.peek()[1] != "None":
                    key = self.take(kind="name")
                    self.take(value="=")
                    if key in keywords:
                        self.fail(f"{name}: argument {key!r} given twice")
                    keywords[key] = self.value()
                else:
                    if keywords:
                        self.fail(f"{name}: positional argument after keyword argument")
                    positional.append(self.value())
                if self.peek()[1] != ")":
                    self.take(value=",", expected="',' or ')'")
            self.take(value=")")
        return name, positional, keywords

    def value(self) -> int | float | TensorRef | None:
        kind, text = self.peek()
        if not kind:
            self.fail("it ends early, expected a number, None or @TENSOR")
        if kind == "number":
            self.position += 1
            if not re.search(r"[.eE]", text):
                if len(text.lstrip("+-")) > MAX_INTEGER_DIGITS:
                    self.fail(f"{text[:20]}... is out of range: whole numbers have at most {MAX_INTEGER_DIGITS} digits")
                return int(text)
            if not math.isfinite(float(text)):
                self.fail(f"{text} is out of range: numbers must be finite")
            return float(text)
        if text == "None":
            self.position += 1
            return None
        if kind == "ref":
            self.position += 1
            name, _, index = text[1:].partition(":")
            if len(index) > MAX_INTEGER_DIGITS:
                self.fail(f"{text[:20]}... names an output index out of range")
            return TensorRef(name, int(index) if index else 0)
        self.fail(f"expected a number, None or @TENSOR, found {text!r}")


def _bind(name: str, positional: list, keywords: dict) -> Stage:
    definition = REGISTRY.get(name)
    params = definition.params
    if len(positional) > len(params):
        raise SpecError(
            f"{definition.signature()} takes {len(params)} argument(s), got {len(positional)}"
        )
    values = {}
    for param, value in zip(params, positional):
        values[param.name] = value
    for key, value in keywords.items():
        if key not in {p.name for p in params}:
            raise SpecError(
                f"{name} has no parameter {key!r}; its signature is {definition.signature()}"
            )
        if key in values:
            raise SpecError(f"{name}: argument {key!r} given twice")
        values[key] = value
    bound = {}
    for param in params:
        if param.name in values:
            bound[param.name] = _coerce(name, param, values[param.name])
        elif param.required:
            raise SpecError(f"{name} needs {param.name!r}: {definition.signature()}")
        else:
            bound[param.name] = param.default
    if definition.check:
        definition.check(bound)
    return Stage(name, tuple(bound.items()))


def _coerce(gradient: str, param, value):
    if value is None:
        if param.default is None:
            return None
        raise SpecError(f"{gradient}: {param.name} cannot be None")
    if isinstance(value, TensorRef):
        if param.type is not float:
            raise SpecError(f"{gradient}: {param.name} is a whole number, fixed when written; only "
                            f"floating-point parameters can be read from a tensor ({value})")
        return value
    if param.type is int:
        if not isinstance(value, int):
            raise SpecError(f"{gradient}: {param.name} must be a whole number, got {value!r}")
        return value
    return float(value)


def parse_stages(text: str) -> list[tuple[str, list, dict]]:
    """``(name, positional arguments, keyword arguments)`` of each stage of a
    pipeline in the spec grammar, not bound to any gradient (the names of
    ``graphgrad attribute``'s methods are spelt so)."""
    return _Parser(text.strip()).pipeline()


def parse_spec(text: str) -> GradientSpec:
    """Parse a gradient spec string into a :class:`GradientSpec`.

    Aliases expand to their specs (``QuantizeGrad`` -> ``ste(clip=1.0)``). Raises
    :class:`~graphgrad.errors.SpecError` with what is wrong and what is known.
    """
    if not isinstance(text, str):
        raise SpecError(f"a gradient spec is a string, got {type(text).__name__}")
    text = text.strip()
    if not text:
        raise SpecError("empty gradient spec: name a gradient, e.g. ste or identity|scale(0.5)")
    if len(text) > MAX_SPEC_LENGTH:
        raise SpecError(f"gradient spec is longer than {MAX_SPEC_LENGTH} characters")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # bytes the command line could not decode (surrogate escapes)
        raise SpecError(f"gradient spec {text!r} is not valid UTF-8 text") from None
    if text.startswith(TF_PREFIX):
        return _parse_tf_name(text[len(TF_PREFIX):])
    stages: list = []
    for name, positional, keywords in _Parser(text).pipeline():
        target = REGISTRY.alias_target(name)
        if target is not None:
            if positional or keywords:
                raise SpecError(f"{name} is an alias for {target} and takes no arguments")
            stages.extend(parse_spec(target).stages)
        else:
            stages.append(_bind(name, positional, keywords))
    _check_pipeline(text, stages)
    spec = GradientSpec(stages=tuple(stages))
    if len(spec.canonical) > MAX_SPEC_LENGTH:  # defaults spelt out and aliases expanded make it longer
        raise SpecError(
            f"gradient spec {text[:40]!r}... names {len(spec.canonical)} characters in canonical form, over the "
            f"{MAX_SPEC_LENGTH} a loading process rebuilds gradients from; shorten the pipeline"
        )
    return spec


def _parse_tf_name(name: str) -> GradientSpec:
    if not name or any(c.isspace() for c in name):
        raise SpecError(f"tf:NAME needs a registry name without spaces, got {name!r}")
    if name.startswith(NAMESPACE):
        raise SpecError(f"write {name[len(NAMESPACE):]!r} instead of tf:{name}")
    return GradientSpec(tf_name=name)


def _check_pipeline(text: str, stages: list) -> None:
    for position, stage in enumerate(stages):
        if position > 0 and stage.definition.kind != TRANSFORM:
            raise SpecError(
                f"in {text!r}, {stage.name} replaces the gradient, so it can only come first; "
                "after it, only transforms (scale, reverse, clip_value, clip_norm, noise, select)"
            )


def spec_from_attr_value(value: str) -> GradientSpec | None:
    """The graphgrad spec behind an override value, or None if it is not ours.

    Raises :class:`SpecError` for a ``graphgrad/`` name that cannot be rebuilt
    (e.g. a user gradient whose module was not imported).
    """
    if not value.startswith(NAMESPACE):
        return None
    return parse_spec(value[len(NAMESPACE):])


def attr_value_for(spec: "GradientSpec | str") -> str:
    """The ``_gradient_op_type`` value for a spec or spec string."""
    if isinstance(spec, str):
        spec = parse_spec(spec)
    return spec.attr_value
