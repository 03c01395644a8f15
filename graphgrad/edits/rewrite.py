"""Applying rules: set ``_gradient_op_type`` on the nodes rules select.

:func:`apply_rules` works on any node references with ``name``, ``op_type``,
``override`` and ``set_override`` (file nodes, or the live ops of a tf.Graph);
:func:`rewrite` applies rules to any reading of a model file, the notes included.
"""

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter

from ..errors import SelectionError
from ..graph.functions import first_names, unrouted_calls_note
from ..names import CUSTOM_GRADIENT, SIGN
from ..readings.protocol import BulkOverrides, Reading
from .select import REPAIR_DANGLING, choose_by_op_type, op_types_needed, select_nodes
from .tensor_params import check_tensor_params, refuse_in_functions
from .traps import graphgrad_spec, looks_at_x, no_gradient_notes, sign_notes


@dataclass(frozen=True)
class RewriteOptions:
    """Everything that decides which nodes get which gradient."""

    rules: tuple = ()
    match: tuple = ()
    exclude: tuple = ()
    functions: bool = True
    force: bool = False
    allow_missing: bool = False
    embed: bool = False


@dataclass(slots=True)
class NodeChange:
    """One node's override before and after (None: no override)."""

    graph: str
    node: str
    op_type: str
    old: str | None
    new: str | None


_FIELDS = attrgetter("graph", "node", "op_type", "old", "new")
_COLUMNS = range(5)
_SEPARATOR = "\0"


class Changes(Sequence):
    """Node changes (:class:`NodeChange`) held as five columns (graphs, nodes, op
    types, olds, news), not an object per node: a rewrite of 100k nodes reports
    100k of them. Rows are made when read. Pickled (reports come back from worker
    processes, and a batch keeps every file's report until it prints them), each
    column is packed into a few objects, and unpacked when first read."""

    def __init__(self, rows: Iterable[NodeChange] = ()):
        columns = list(zip(*map(_FIELDS, rows)))
        self._columns: list | None = [list(column) for column in columns] if columns else [[] for _ in _COLUMNS]
        self._packed: tuple | None = None
        self._length = len(self._columns[0])

    @classmethod
    def of_columns(cls, columns: Sequence[Sequence]) -> "Changes":
        """Changes from ``(graphs, nodes, op types, olds, news)`` columns of equal length."""
        changes = cls()
        if columns and len(columns[0]):
            changes._columns = [list(column) for column in columns]
            changes._length = len(columns[0])
        return changes

    def add(self, graph: str, node: str, op_type: str, old: str | None, new: str | None) -> None:
        """Append one change."""
        graphs, nodes, op_types, olds, news = self._columns if self._columns is not None else self._unpacked()
        graphs.append(graph)
        nodes.append(node)
        op_types.append(op_type)
        olds.append(old)
        news.append(new)
        self._length += 1

    def append(self, change: NodeChange) -> None:
        self.add(*_FIELDS(change))

    def column(self, index: int) -> Sequence:
        """One column (0: graphs ... 4: new values), without making rows."""
        return self._unpacked()[index]

    def counts(self, index: int) -> Counter:
        """How often each value of a column occurs; a column packed as one repeated
        value is counted without unpacking it."""
        if self._packed is not None and self._packed[index][0] == "same":
            _, value, count = self._packed[index]
            return Counter({value: count})
        return Counter(self.column(index))

    def packed(self) -> "Changes":
        """A copy with its columns packed, as it arrives from a worker process."""
        copy = Changes.__new__(Changes)
        copy.__setstate__(self.__getstate__())
        return copy

    def _unpacked(self) -> list:
        if self._columns is None:
            self._columns = [list(_unpack(column)) for column in self._packed or ()]
            self._packed = None
        return self._columns

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index):
        columns = self._unpacked()
        if isinstance(index, slice):
            return list(map(NodeChange, *(column[index] for column in columns)))
        return NodeChange(*(column[index] for column in columns))

    def __iter__(self):
        return map(NodeChange, *self._unpacked())

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and len(self) == len(other) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"Changes({list(self)!r})"

    def __getstate__(self):
        packed = self._packed if self._columns is None else tuple(map(_pack, self._columns))
        return {"packed": packed, "length": self._length}

    def __setstate__(self, state):
        self._columns, self._packed, self._length = None, state["packed"], state["length"]
        if not self._length:
            self._columns, self._packed = [[] for _ in _COLUMNS], None


@dataclass
class RewriteReport:
    """What a rewrite changed, what already was as asked (:class:`Changes`), and notes."""

    changes: Changes = field(default_factory=Changes)
    unchanged: Changes = field(default_factory=Changes)
    notes: list = field(default_factory=list)

    def __post_init__(self):
        self.changes = self.changes if isinstance(self.changes, Changes) else Changes(self.changes)
        self.unchanged = self.unchanged if isinstance(self.unchanged, Changes) else Changes(self.unchanged)
        self.notes = list(self.notes)

    @classmethod
    def from_columns(cls, changes: Sequence = (), unchanged: Sequence = (), notes: Sequence = ()) -> "RewriteReport":
        """A report of ``(graphs, nodes, op types, olds, news)`` columns."""
        return cls(Changes.of_columns(changes), Changes.of_columns(unchanged), list(notes))

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    @property
    def by_op_type(self) -> dict[str, int]:
        """Changed nodes per op type."""
        return dict(sorted(self.changes.counts(2).items()))

    def groups(self, examples: int = 3) -> list:
        """``(op type, new value, nodes, of which replaced, first nodes)`` per op
        type and new value, in order of first appearance; a node is ``(graph, name)``."""
        graphs, nodes, op_types, olds, news = self.columns()
        keys = list(zip(op_types, news))
        counts = Counter(keys)
        replaced = Counter(key for key, old in zip(keys, olds) if old is not None)
        names: dict = {key: [] for key in counts}
        for key, graph, node in zip(keys, graphs, nodes):
            if len(names[key]) < examples:
                names[key].append((graph, node))
                if all(len(found) == min(examples, counts[k]) for k, found in names.items()):
                    break
        return [(op_type, new, count, replaced[op_type, new], names[op_type, new])
                for (op_type, new), count in counts.items()]

    def columns(self) -> tuple:
        """``changes`` as ``(graphs, nodes, op types, olds, news)`` columns, without building rows."""
        return tuple(self.changes.column(index) for index in _COLUMNS)

    def packed(self) -> "RewriteReport":
        """This report as it arrives from a worker process: its columns packed."""
        return RewriteReport(self.changes.packed(), self.unchanged.packed(), self.notes)


def _pack(column) -> tuple:
    """A column as ``("same", value, count)``, ``("joined", text)`` (strings that
    hold no separator) or ``("list", column)``: a few objects to pickle, not one per row."""
    if column and column.count(column[0]) == len(column):
        return ("same", column[0], len(column))
    try:
        joined = _SEPARATOR.join(column)
    except TypeError:  # not all strings
        return ("list", column)
    if column and joined.count(_SEPARATOR) == len(column) - 1:
        return ("joined", joined)
    return ("list", column)


def _unpack(packed: tuple):
    kind, *payload = packed
    if kind == "same":
        return (payload[0],) * payload[1]
    return payload[0].split(_SEPARATOR) if kind == "joined" else payload[0]


def apply_rules(nodes: Iterable, options: RewriteOptions, all_nodes: Callable[[], Iterable] | None = None,
                saved: Callable[[], dict] = dict) -> RewriteReport:
    """Set the override of every node the rules select, in place, and report.

    ``all_nodes()`` gives every node when ``nodes`` was pre-filtered (for hints).
    A node that carries a different override already is refused unless
    ``options.force`` (or the rule repairs dangling overrides); nothing is
    changed then. ``saved()`` gives ``{(graph, override): gradient function}`` of
    the ``tf.custom_gradient`` gradients saved with the model (read only when a
    selected node carries a ``CustomGradient-<n>``): repairs leave those alone,
    and replacing one is said in a note.
    """
    selection = select_nodes(
        nodes, options.rules, options.match, options.exclude, options.allow_missing, all_nodes
    )
    matches, notes = selection.matches, list(selection.notes)
    kept_saved = {}
    if any(CUSTOM_GRADIENT.match(node.override or "") for node, _ in matches):
        kept_saved = saved()
        repairs_left = [node.name for node, rule in matches
                        if rule.selector == REPAIR_DANGLING and (node.graph, node.override) in kept_saved]
        if repairs_left:
            notes.append(
                f"--repair-dangling left {len(repairs_left)} node(s) alone ({first_names(repairs_left)}): "
                "their tf.custom_gradient gradient is saved with the model, and tf.saved_model.load and "
                "graphgrad.import_graph_def use it"
            )
            matches = [(node, rule) for node, rule in matches
                       if not (rule.selector == REPAIR_DANGLING and (node.graph, node.override) in kept_saved)]
    refuse_misfits((node.op_type, rule.spec, node.name) for node, rule in matches)
    changing, unchanged, refused = [], [], []
    for node, rule in matches:  # once per selected node: kept lean
        new, old = rule.spec.attr_value, node.override
        if old == new:
            unchanged.append((node, old, new))
        elif old is None or options.force or rule.selector == REPAIR_DANGLING:
            changing.append((node, old, new))
        else:
            refused.append((node, old, new))
    if refused:
        raise SelectionError(
            f"{len(refused)} node(s) already carry a different gradient override: "
            f"{_describe_refused(_changes(refused))}. To replace them, add --force (force=True)."
        )
    notes += [
        f"{node.name}: replaced {old!r}, tf.custom_gradient's gradient saved with the model as function "
        f"{kept_saved[node.graph, old]}" for node, old, _ in changing if (node.graph, old) in kept_saved
    ]
    for node, _, new in changing:
        node.set_override(new)
    return RewriteReport(changes=_changes(changing), unchanged=_changes(unchanged), notes=notes)


def refuse_misfits(uses: Iterable[tuple]) -> None:
    """Raise :class:`SelectionError` if a spec is given to an op type it is wrong
    for (``uses``: ``(op type, spec, node name)``), e.g. guided_relu on Sigmoid."""
    reasons = {}
    for op_type, spec, name in uses:
        key = (op_type, spec)
        if key not in reasons:
            reasons[key] = (spec.refuses(op_type), name)
    misfits = [f"{name} ({op_type}): {reason}" for (op_type, _), (reason, name) in reasons.items() if reason]
    if misfits:
        raise SelectionError(
            f"{'; '.join(misfits[:3])}{' ...' if len(misfits) > 3 else ''}. To fix this, narrow the rule "
            "(--op with the op type it is meant for, --exclude) or choose another gradient."
        )


def _changes(rows) -> Changes:
    return Changes.of_columns(list(zip(*[(node.graph, node.name, node.op_type, old, new) for node, old, new in rows])))


def _describe_refused(refused) -> str:
    """One phrase per (old, new) pair, naming its first node: errors stay one short line."""
    groups: dict = {}
    for change in refused:
        groups.setdefault((change.old, change.new), []).append(change)
    phrases = []
    for (old, new), changes in groups.items():
        more = f" (and {len(changes) - 1} more like it)" if len(changes) > 1 else ""
        phrases.append(f"{changes[0].node} ({changes[0].op_type}) has {old!r}{more}, the rule wants {new!r}")
    return "; ".join(phrases[:3]) + ("; ..." if len(phrases) > 3 else "")


def rewrite(reading: Reading, options: RewriteOptions) -> RewriteReport:
    """Give the nodes ``options`` select their overrides, on any reading of a model
    (:func:`graphgrad.readings.open_reading`), and report with notes. Where the
    reading offers it (:meth:`~graphgrad.readings.protocol.Reading.bulk_overrides`),
    plain ``--op`` rules are applied to columns, without an object per node."""
    reading_tensors = {rule.spec.attr_value: rule.spec for rule in options.rules if rule.spec.tensor_refs}
    if reading_tensors:
        top_levels = reading.scopes(functions=False)
        for spec in reading_tensors.values():
            check_tensor_params(top_levels, spec)
    op_types = op_types_needed(options.rules, options.match, options.exclude)

    def all_nodes() -> list:
        return reading.candidates(None, options.functions)

    bulk = reading.bulk_overrides(op_types, options.functions) if op_types is not None else None
    if bulk is not None:
        report = _apply_in_bulk(bulk, options, all_nodes)
    else:
        report = apply_rules(reading.candidates(op_types, options.functions), options, all_nodes=all_nodes,
                             saved=reading.saved_gradients)
    for node in all_nodes() if reading_tensors else ():
        if node.function is not None and node.override in reading_tensors:
            refuse_in_functions(reading_tensors[node.override], node.name)
    calls = reading.unrouted_calls()
    report.notes += [unrouted_calls_note(calls)] if calls else []
    report.notes += no_gradient_notes(report.by_op_type)
    if changes_signs(report):
        lists, skipped = reading.sign_lists()
        report.notes += skipped
        for label, prefix, nodes, signs, adds in lists:
            report.notes += sign_trap_notes(report, label, prefix, nodes, signs, adds)
    return report


def _apply_in_bulk(bulk: BulkOverrides, options: RewriteOptions, all_nodes: Callable[[], Iterable]) -> RewriteReport:
    """:func:`apply_rules` for the commonest case, on columns: plain ``--op`` rules,
    and no node has an override yet (so every selected node changes, and none is refused)."""
    names, ops = bulk.names, bulk.ops
    chosen, notes = choose_by_op_type(
        Counter(ops), options.rules, options.allow_missing, all_nodes,
        names_of=lambda op_type: [name for name, op in zip(names, ops) if op == op_type],
    )
    refuse_misfits((op_type, rule.spec, names[ops.index(op_type)]) for op_type, rule in chosen.items())
    values = {op_type: rule.spec.attr_value for op_type, rule in chosen.items()}
    bulk.apply(values)
    changes = (("",) * len(names), names, ops, (None,) * len(names), list(map(values.get, ops)))
    return RewriteReport.from_columns(changes, notes=notes)


def changes_signs(report: RewriteReport) -> bool:
    """Whether the rewrite gave a Sign node a graphgrad gradient that looks at x
    (see :func:`graphgrad.edits.traps.shifted_sign_notes`)."""
    if SIGN not in report.by_op_type:
        return False
    _, _, op_types, _, news = report.columns()
    values = {new for op_type, new in set(zip(op_types, news)) if op_type == SIGN}  # a few distinct pairs, in C
    return any(looks_at_x(spec) for spec in map(graphgrad_spec, values) if spec is not None)


def sign_trap_notes(report: RewriteReport, label: str, prefix: str, nodes: Sequence | None,
                    signs: Sequence | None = None, adds: Sequence | None = None) -> list[str]:
    """:func:`graphgrad.edits.traps.sign_notes` for one list of nodes (a graph's top level,
    or a function body with ``prefix`` ``FUNCTION/``) that ``report`` rewrote,
    labelled with the graph. The report's rows are read only for a Sign that reads
    an add of a Sign."""
    new: dict = {}

    def spec_of(name):
        if not new:
            new.update({(c.graph, c.node): c.new for c in report.changes if c.op_type == SIGN})
        return graphgrad_spec(new.get((label, prefix + name)))

    notes = sign_notes(nodes, spec_of, prefix, signs, adds)
    return [f"{label}: {note}" if label else note for note in notes]
