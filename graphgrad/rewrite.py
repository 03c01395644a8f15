"""Applying rules: set ``_gradient_op_type`` on the nodes rules select.

:func:`apply_rules` works on any node references with ``name``, ``op_type``,
``override`` and ``set_override`` (file nodes, or the live ops of a tf.Graph);
:func:`rewrite_model` is the pure version for a loaded model file.
"""

from collections import Counter
from dataclasses import dataclass, field
from operator import attrgetter

from .errors import SelectionError
from .model import Model, iter_nodes
from .select import DANGLING, op_types_needed, select_nodes


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


@dataclass
class RewriteReport:
    """What a rewrite changed, what already was as asked, and notes."""

    changes: list = field(default_factory=list)
    unchanged: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    @property
    def changed(self) -> bool:
        if "changes" not in self.__dict__:
            return bool(self._columns["changes"])
        return bool(self.changes)

    @property
    def by_op_type(self) -> dict[str, int]:
        """Changed nodes per op type."""
        if "changes" not in self.__dict__:
            op_types = self._columns["changes"][2] if self._columns["changes"] else ()
        else:
            op_types = map(attrgetter("op_type"), self.changes)
        return dict(sorted(Counter(op_types).items()))

    # Reports travel back from worker processes (-j) as columns: they pickle about
    # 15 times faster than one object per node, and become rows only when read (a
    # batch's table reads counts alone; the parent shares two cores with the workers).
    def __getstate__(self):
        return {
            "changes": _columns(self.changes),
            "unchanged": _columns(self.unchanged),
            "notes": self.notes,
        }

    def __setstate__(self, state):
        self.notes = state["notes"]
        self._columns = state

    def __getattr__(self, name):  # only for what is not set: rows still held as columns
        columns = self.__dict__.get("_columns")
        if columns is None or name not in ("changes", "unchanged"):
            raise AttributeError(name)
        rows = _rows(columns[name])
        setattr(self, name, rows)
        return rows


_FIELDS = attrgetter("graph", "node", "op_type", "old", "new")


def _columns(changes) -> tuple:
    return tuple(zip(*map(_FIELDS, changes)))


def _rows(columns) -> list:
    return list(map(NodeChange, *columns)) if columns else []


def apply_rules(nodes, options: RewriteOptions, all_nodes=None) -> RewriteReport:
    """Set the override of every node the rules select, in place, and report.

    ``all_nodes()`` gives every node when ``nodes`` was pre-filtered (for hints).
    A node that carries a different override already is refused unless
    ``options.force`` (or the rule repairs dangling overrides); nothing is
    changed then.
    """
    selection = select_nodes(
        nodes, options.rules, options.match, options.exclude, options.allow_missing, all_nodes
    )
    changing, unchanged, refused = [], [], []
    for node, rule in selection.matches:  # once per selected node: kept lean
        new, old = rule.spec.attr_value, node.override
        if old == new:
            unchanged.append((node, old, new))
        elif old is None or options.force or rule.selector == DANGLING:
            changing.append((node, old, new))
        else:
            refused.append((node, old, new))
    if refused:
        raise SelectionError(
            f"{len(refused)} node(s) already carry a different gradient override: "
            f"{_describe_refused(_changes(refused))}. To replace them, add --force (force=True)."
        )
    for node, _, new in changing:
        node.set_override(new)
    return RewriteReport(changes=_changes(changing), unchanged=_changes(unchanged), notes=list(selection.notes))


def _changes(rows) -> list:
    return [NodeChange(node.graph, node.name, node.op_type, old, new) for node, old, new in rows]


def _describe_refused(refused) -> str:
    """One phrase per (old, new) pair, naming its first node: errors stay one short line."""
    groups = {}
    for change in refused:
        groups.setdefault((change.old, change.new), []).append(change)
    phrases = []
    for (old, new), changes in groups.items():
        more = f" (and {len(changes) - 1} more like it)" if len(changes) > 1 else ""
        phrases.append(f"{changes[0].node} ({changes[0].op_type}) has {old!r}{more}, the rule wants {new!r}")
    return "; ".join(phrases[:3]) + ("; ..." if len(phrases) > 3 else "")


def rewrite_model(model: Model, options: RewriteOptions, inplace: bool = False):
    """Apply ``options`` to ``model``; returns ``(new_model, report)``.

    The input is left as it was unless ``inplace``.
    """
    result = model if inplace else model.copy()
    op_types = op_types_needed(options.rules, options.match, options.exclude)
    report = apply_rules(
        iter_nodes(result, options.functions, op_types), options,
        all_nodes=lambda: iter_nodes(result, options.functions),
    )
    return result, report
