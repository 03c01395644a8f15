"""From rules to nodes: which nodes a rule selects, and near-miss hints when a
rule selects nothing (``sign`` for ``Sign``, ``stack`` for ``Pack``, ...).

Works on any nodes with ``name`` and ``op_type`` (file nodes or live ops).
"""

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from ..errors import NothingSelectedError, RuleSyntaxError, SelectionError, SpecError
from ..gradients.spec import GradientSpec, parse_spec
from ..graph.hints import close_names
from ..names import CUSTOM_GRADIENT

OP = "op"
NODE = "node"
REPAIR_DANGLING = "repair-dangling"

# Python API names -> the op types they create: the usual reason an --op key
# matches nothing.
API_OP_TYPES = {
    "stack": ["Pack"], "unstack": ["Unpack"], "concat": ["ConcatV2", "Concat"],
    "py_func": ["PyFunc", "PyFuncStateless"], "numpy_function": ["PyFunc", "PyFuncStateless"],
    "py_function": ["EagerPyFunc"], "add": ["AddV2", "Add"], "add_n": ["AddN"],
    "where": ["SelectV2", "Select", "Where"], "matmul": ["MatMul", "BatchMatMulV2"],
    "multiply": ["Mul"], "subtract": ["Sub"], "divide": ["RealDiv"], "truediv": ["RealDiv"],
    "floordiv": ["FloorDiv"], "round": ["Round"], "sign": ["Sign"], "floor": ["Floor"],
    "ceil": ["Ceil"], "rint": ["Rint"], "relu": ["Relu"], "relu6": ["Relu6"],
    "leaky_relu": ["LeakyRelu"], "identity": ["Identity"], "identity_n": ["IdentityN"],
    "custom_gradient": ["IdentityN"], "stop_gradient": ["StopGradient"],
    "reshape": ["Reshape"], "gather": ["GatherV2"], "cast": ["Cast"],
    "reduce_sum": ["Sum"], "reduce_mean": ["Mean"], "reduce_max": ["Max"],
    "reduce_min": ["Min"], "argmax": ["ArgMax"], "argmin": ["ArgMin"],
    "expand_dims": ["ExpandDims"], "squeeze": ["Squeeze"], "transpose": ["Transpose"],
    "conv2d": ["Conv2D"], "max_pool": ["MaxPool"], "max_pool2d": ["MaxPool"],
    "avg_pool": ["AvgPool"], "bias_add": ["BiasAdd"], "softmax": ["Softmax"],
    "sigmoid": ["Sigmoid"], "tanh": ["Tanh"], "clip_by_value": ["ClipByValue"],
    "one_hot": ["OneHot"], "pow": ["Pow"], "square": ["Square"], "sqrt": ["Sqrt"],
    "abs": ["Abs"], "exp": ["Exp"], "log": ["Log"], "maximum": ["Maximum"],
    "minimum": ["Minimum"], "pad": ["Pad", "PadV2", "MirrorPad"], "slice": ["Slice"],
    "strided_slice": ["StridedSlice"], "tile": ["Tile"], "split": ["Split", "SplitV"],
    "fused_batch_norm": ["FusedBatchNormV3"], "batch_normalization": ["FusedBatchNormV3"],
    "constant": ["Const"], "placeholder": ["Placeholder"], "variable": ["VariableV2", "VarHandleOp"],
    "while_loop": ["While", "StatelessWhile"], "cond": ["If", "StatelessIf"],
    "equal": ["Equal"], "greater": ["Greater"], "less": ["Less"],
    "fake_quant_with_min_max_vars": ["FakeQuantWithMinMaxVars"],
    "fake_quant_with_min_max_args": ["FakeQuantWithMinMaxArgs"],
    "quantize_and_dequantize": ["QuantizeAndDequantizeV4", "QuantizeAndDequantizeV2"],
}
_API_PREFIXES = ("tf.compat.v1.", "tf.math.", "tf.nn.", "tf.linalg.", "tf.raw_ops.", "tf.", "math.", "nn.")


@dataclass(frozen=True)
class Rule:
    """Give nodes selected by op type (``op``) or name glob (``node``) a gradient.

    ``match``/``exclude`` narrow this rule alone; ``origin`` says where it came
    from (a rules file entry) for messages.
    """

    selector: str
    pattern: str
    spec: GradientSpec
    match: tuple = ()
    exclude: tuple = ()
    origin: str = ""

    def __str__(self) -> str:
        if self.selector == REPAIR_DANGLING:
            text = f"--{REPAIR_DANGLING} {self.spec.canonical}"
        else:
            text = f"--{self.selector} {self.pattern}={self.spec.canonical}"
        return f"{self.origin} ({text.removeprefix('--')})" if self.origin else text

    def selects(self, node: Any) -> bool:
        if self.selector == OP:
            hit = node.op_type == self.pattern
        elif self.selector == REPAIR_DANGLING:
            hit = bool(CUSTOM_GRADIENT.match(node.override or ""))
        else:
            hit = fnmatchcase(node.name, self.pattern)
        return hit and (not (self.match or self.exclude) or in_scope(node.name, self.match, self.exclude))


def repair_rule(spec: str) -> Rule:
    """Give every node whose override is a dangling ``CustomGradient-<n>`` the gradient ``spec``."""
    return Rule(REPAIR_DANGLING, "CustomGradient-<n>", parse_spec(spec))


def parse_rule(selector: str, text: str) -> Rule:
    """Parse ``KEY=SPEC`` (e.g. ``Sign=ste(clip=2)``) into a :class:`Rule`."""
    key, separator, spec = text.partition("=")
    key = key.strip()
    if not separator or not key or not spec.strip():
        example = "Sign=ste" if selector == OP else "'encoder/*/Sign=ste'"
        raise RuleSyntaxError(f"--{selector} {text!r}: expected KEY=GRADIENT, e.g. --{selector} {example}")
    return Rule(selector, key, parse_spec(spec))


_RULE_KEYS = {"op", "node", "gradient", "match", "exclude"}


def rules_from_document(document: dict, origin: str) -> tuple:
    """Rules from a parsed rules file: ``[[rule]]`` tables with ``op`` or ``node``,
    ``gradient``, and optional ``match``/``exclude`` lists."""
    entries = document.get("rule")
    unknown = set(document) - {"rule"}
    if unknown or not isinstance(entries, list) or not entries:
        raise SelectionError(
            f"{origin}: expected [[rule]] tables (with op or node, and gradient)"
            + (f"; unknown top-level keys: {', '.join(sorted(unknown))}" if unknown else "")
        )
    rules = []
    for number, entry in enumerate(entries, 1):
        where = f"{origin} rule {number}"
        if not isinstance(entry, dict):
            raise SelectionError(f"{where}: expected a table")
        extra = set(entry) - _RULE_KEYS
        if extra:
            raise SelectionError(
                f"{where}: unknown keys {', '.join(sorted(extra))}; known: {', '.join(sorted(_RULE_KEYS))}"
            )
        if ("op" in entry) == ("node" in entry):
            raise SelectionError(f"{where}: give exactly one of op = \"TYPE\" or node = \"GLOB\"")
        selector = OP if "op" in entry else NODE
        pattern, gradient = entry.get(selector), entry.get("gradient")
        if not (isinstance(pattern, str) and pattern and isinstance(gradient, str) and gradient):
            raise SelectionError(f"{where}: {selector} and gradient must be non-empty strings")
        globs = {}
        for key in ("match", "exclude"):
            value = entry.get(key, [])
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or not all(isinstance(g, str) for g in value):
                raise SelectionError(f"{where}: {key} must be a list of globs")
            globs[key] = tuple(value)
        try:
            spec = parse_spec(gradient)
        except SpecError as error:
            raise SpecError(f"{where}: {error}") from None
        rules.append(Rule(selector, pattern, spec, globs["match"], globs["exclude"], where))
    return tuple(rules)


@dataclass
class Selection:
    """The nodes rules selected, each with its rule, and notes for the user."""

    matches: list = field(default_factory=list)  # [(node, rule)]
    notes: list = field(default_factory=list)


def in_scope(name: str, match: Sequence[str] = (), exclude: Sequence[str] = ()) -> bool:
    """Whether ``--match`` / ``--exclude`` globs leave node ``name`` in play."""
    if match and not any(fnmatchcase(name, glob) for glob in match):
        return False
    return not any(fnmatchcase(name, glob) for glob in exclude)


def op_types_needed(rules: Sequence[Rule], match: Sequence[str] = (), exclude: Sequence[str] = ()) -> set | None:
    """The op types that can matter, when only plain --op rules are given; else None.

    Lets callers skip every other node cheaply (see ``select_nodes``'s ``all_nodes``).
    """
    if match or exclude or any(rule.selector != OP or rule.match or rule.exclude for rule in rules):
        return None
    return {rule.pattern for rule in rules}


def select_nodes(nodes: Iterable, rules: Sequence[Rule], match: Sequence[str] = (), exclude: Sequence[str] = (),
                 allow_missing: bool = False, all_nodes: Callable[[], Iterable] | None = None) -> Selection:
    """Match ``rules`` against ``nodes``.

    Raises :class:`SelectionError` when rules that would both apply to a node
    disagree, or when a rule selects nothing (with hints); ``allow_missing``
    turns the latter into notes. When ``nodes`` was pre-filtered by
    :func:`op_types_needed`, ``all_nodes()`` gives every node, for the hints.
    """
    nodes = list(nodes)
    rules = list(rules)
    op_types = op_types_needed(rules, match, exclude)
    if op_types is not None:
        # Plain --op rules: one dict lookup per node (graphs have 100k nodes).
        hits = [node for node in nodes if node.op_type in op_types]
        chosen, notes = choose_by_op_type(
            Counter(node.op_type for node in hits), rules, allow_missing, all_nodes or (lambda: nodes),
            names_of=lambda op_type: [node.name for node in hits if node.op_type == op_type],
        )
        return Selection([(node, chosen[node.op_type]) for node in hits], notes)
    selection = Selection()
    counts = [0] * len(rules)
    counts_in_scope = [0] * len(rules)
    # Op-type rules without a scope of their own are looked up by type; the rest
    # are tried node by node. Rule order is kept for the choice between rules.
    by_type: dict = {}
    others: list = []
    for order, rule in enumerate(rules):
        if rule.selector == OP and not (rule.match or rule.exclude):
            by_type.setdefault(rule.pattern, []).append((order, rule))
        else:
            others.append((order, rule))
    _raise_conflicts(_select_each(nodes, by_type, others, match, exclude, counts, counts_in_scope, selection))
    missed = any(count == 0 and rule.selector != REPAIR_DANGLING for rule, count in zip(rules, counts))
    if missed and all_nodes is not None:
        nodes = list(all_nodes())
    selection.notes += _unused(rules, counts, counts_in_scope, allow_missing, nodes)
    return selection


def choose_by_op_type(type_counts: dict, rules: Sequence[Rule], allow_missing: bool, all_nodes: Callable[[], Iterable],
                      names_of: Callable[[str], list]) -> tuple:
    """Plain --op rules (see :func:`op_types_needed`) for nodes counted by op type:
    ``(rule for each op type present, notes)``.

    The same choice, errors and hints as :func:`select_nodes`, without a look at
    each node: ``all_nodes()`` gives every node for hints, ``names_of(op_type)``
    the names of that type's nodes for conflict messages.
    """
    by_type: dict = {}
    for rule in rules:
        by_type.setdefault(rule.pattern, []).append(rule)
    chosen = {op_type: candidates[0] for op_type, candidates in by_type.items() if type_counts.get(op_type)}
    conflicts = []
    for op_type, rule in chosen.items():
        disagreeing = [other for other in by_type[op_type][1:] if other.spec != rule.spec]
        if disagreeing:
            conflicts += [
                f"{name} ({op_type}): {rule} and {other}" for name in names_of(op_type) for other in disagreeing
            ]
    _raise_conflicts(conflicts)
    counts = [type_counts.get(rule.pattern, 0) for rule in rules]
    nodes = list(all_nodes()) if not all(counts) else []
    return chosen, _unused(rules, counts, counts, allow_missing, nodes)


def _raise_conflicts(conflicts) -> None:
    if conflicts:
        raise SelectionError(
            f"rules disagree on {len(conflicts)} node(s): {'; '.join(conflicts[:5])}"
            f"{' ...' if len(conflicts) > 5 else ''}. To fix this, narrow one rule "
            "(--exclude, a tighter --node glob) so each node gets one gradient."
        )


def _unused(rules, counts, counts_in_scope, allow_missing, nodes) -> list:
    """Notes on rules that selected nothing (hints drawn from ``nodes``); an error
    unless ``allow_missing``."""
    unused = [rule for rule, count in zip(rules, counts) if count == 0]
    repairs = [rule for rule in unused if rule.selector == REPAIR_DANGLING]
    notes = ["no node carries a dangling CustomGradient-<n> override" for _ in repairs]
    misses = [_miss_message(rule, nodes) for rule in unused if rule not in repairs]
    misses += [
        f"{rule} selects no node left by --match/--exclude"
        for rule, count, in_scope_count in zip(rules, counts, counts_in_scope)
        if count and not in_scope_count
    ]
    if misses and not allow_missing:
        raise NothingSelectedError("; ".join(misses))
    return notes + misses


class _Candidates:
    """The rules with globs or scopes that may select a node, found without trying
    every rule on every node (20,000 ``node = "nI/*"`` rules on 100,000 nodes): a
    name glob is filed under the literal text before its first wildcard, and a
    node looks up the starts of its name of those lengths; an op-type rule with a
    scope is filed under its op type. What no index narrows is tried on every node."""

    def __init__(self, others: list):
        self.by_start: dict = {}
        self.by_type: dict = {}
        self.always: list = []
        for order, rule in others:
            if rule.selector == OP:
                self.by_type.setdefault(rule.pattern, []).append((order, rule))
            elif rule.selector == REPAIR_DANGLING:
                self.always.append((order, rule))
            else:
                start = re.split(r"[*?\[]", rule.pattern, maxsplit=1)[0]
                self.by_start.setdefault(start, []).append((order, rule))
        self.lengths = sorted({len(start) for start in self.by_start})

    def of(self, node: Any) -> list:
        """``(order, rule)`` of the rules that select ``node``, in rule order."""
        name = node.name
        found = self.always + self.by_type.get(node.op_type, [])
        for length in self.lengths:
            if length > len(name):
                break
            found += self.by_start.get(name[:length], [])
        return sorted(item for item in found if item[1].selects(node))


def _select_each(nodes, by_type, others, match, exclude, counts, counts_in_scope, selection) -> list:
    """Rules with globs or scopes: tried node by node, in rule order."""
    conflicts = []
    candidates = _Candidates(others) if others else None
    for node in nodes:
        selecting = by_type.get(node.op_type, [])
        if candidates is not None:
            selecting = sorted(selecting + candidates.of(node))
        if not selecting:
            continue
        for order, _ in selecting:
            counts[order] += 1
        if (match or exclude) and not in_scope(node.name, match, exclude):
            continue
        chosen = selecting[0][1]
        for order, _ in selecting:
            counts_in_scope[order] += 1
        if len(selecting) > 1:
            conflicts += [
                f"{node.name} ({node.op_type}): {chosen} and {rule}"
                for _, rule in selecting[1:]
                if rule.spec != chosen.spec
            ]
        selection.matches.append((node, chosen))
    return conflicts


def _miss_message(rule: Rule, nodes) -> str:
    if rule.match or rule.exclude:
        unscoped = Rule(rule.selector, rule.pattern, rule.spec)
        if any(unscoped.selects(node) for node in nodes):
            return f"{rule} selects no node within its own match/exclude"
    if rule.selector == OP:
        present = sorted({node.op_type for node in nodes})
        hints = suggest_op_types(rule.pattern, present)
        message = f"no node has op type {rule.pattern!r}" + (f" ({hints})" if hints else "")
    else:
        names = [node.name for node in nodes]
        hint = _suggest_names(rule.pattern, names)
        message = f"--node {rule.pattern!r} matches no node name" + (f" ({hint})" if hint else "")
    return f"{rule.origin}: {message}" if rule.origin else message


def suggest_op_types(wanted: str, present: list[str]) -> str:
    """A hint for an op type no node has: case, Python API name, or a close spelling."""
    same_case = [t for t in present if t.lower() == wanted.lower()]
    if same_case:
        return f"op types are case-sensitive: did you mean {same_case[0]}?"
    key = wanted
    for prefix in _API_PREFIXES:
        if key.startswith(prefix):
            key = key[len(prefix):]
            break
    api_types = API_OP_TYPES.get(key) or API_OP_TYPES.get(key.lower())
    if api_types and wanted not in api_types:  # "Identity" is an op type, not only tf.identity
        found = [t for t in api_types if t in present]
        if found:
            return f"{wanted} is a Python API name; the graph has op type {' / '.join(found)}"
        return (
            f"{wanted} is a Python API name that creates op type {' or '.join(api_types)}, "
            "and this graph has none"
        )
    close = close_names(wanted, present)
    if close:
        return f"did you mean {' or '.join(close)}?"
    return ""


def _suggest_names(pattern: str, names: list[str]) -> str:
    if not any(c in pattern for c in "*?["):
        suffixed = [n for n in names if n.endswith("/" + pattern)]
        if suffixed:
            return (
                f"globs match whole names; {len(suffixed)} name(s) end in /{pattern}, "
                f"e.g. {suffixed[0]}: try '*/{pattern}'"
            )
    close = close_names(pattern, names)
    return f"close names: {', '.join(close)}" if close else ""
