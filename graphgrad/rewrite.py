"""Applying rules: set ``_gradient_op_type`` on the nodes rules select.

:func:`apply_rules` works on any node references with ``name``, ``op_type``,
``override`` and ``set_override`` (file nodes, or the live ops of a tf.Graph);
:func:`rewrite_model` is the pure version for a loaded model file.
"""

from collections import Counter
from dataclasses import dataclass, field

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
        return bool(self.changes)

    # Reports travel back from worker processes (-j): as columns they pickle
    # about 15 times faster than as one object per node.
    def __getstate__(self):
        return {
            "changes": _columns(self.changes),
            "unchanged": _columns(self.unchanged),
            "notes": self.notes,
        }

    def __setstate__(self, state):
        self.changes = _rows(state["changes"])
        self.unchanged = _rows(state["unchanged"])
        self.notes = state["notes"]

    @property
    def by_op_type(self) -> dict[str, int]:
        """Changed nodes per op type."""
        return dict(sorted(Counter(change.op_type for change in self.changes).items()))


def _columns(changes) -> tuple:
    return tuple(zip(*((c.graph, c.node, c.op_type, c.old, c.new) for c in changes)))


def _rows(columns) -> list:
    return [NodeChange(*row) for row in zip(*columns)]


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
