"""What every reading of a model offers, stated once: the jobs and the edits are
written against these protocols, never against a reading's class.

A :class:`Reading` is a model file opened by :func:`graphgrad.readings.open_reading`:
the full parse (:mod:`graphgrad.readings.parsed`), the scan of a frozen model's
large nodes (:mod:`graphgrad.readings.frozen`), or the cut-down parses of many
small nodes (:mod:`graphgrad.readings.stored`). Each hands out its nodes as
:class:`NodeReference`\\ s (rules), its lists of nodes as :class:`EditScope`\\ s
(insert, bypass, ``--embed``, reset), columns for summaries, a listing for
``diff``, and writes itself back.
"""

from collections.abc import Callable, Collection, Container, Sequence
from typing import Any, Protocol

from .bodies import Body

# (graph label, node-name prefix, nodes or None, Sign nodes or None, Add nodes or None):
# one list of nodes a rewrite looks at for larq's shifted Signs (see
# graphgrad.edits.traps.sign_notes: with nodes, it finds the Signs and Adds itself).
SignList = tuple[str, str, Sequence | None, Sequence | None, Sequence | None]
# (graph label, signature key, inputs, outputs): a SavedModel's signatures.
SignatureRow = tuple[str, str, dict, dict]


class Encodings(Protocol):
    """Nodes' encodings by index, each read when asked for."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> bytes: ...


class NodeReference(Protocol):
    """A node as rules see it: where it is, what it is, and its override."""

    graph: str  # the graph's label ("" for a lone GraphDef)
    function: str | None  # the function body it is in, or None at top level
    name: str
    op_type: str

    @property
    def override(self) -> str | None: ...

    def set_override(self, value: str | None) -> None: ...


class NodeGroupTemplate(Protocol):
    """A group of nodes recorded once and added under many names
    (:class:`graphgrad.edits.templates.NodeTemplate`), as a scope uses one."""

    nodes: list
    slots: tuple
    labels: list
    output: int
    index_of: dict
    stands_in_for: str
    output_suffix: str
    slot_uses: list

    def node(self, index: int, values: dict) -> Any: ...

    def encoding(self, values: tuple, field_number: int) -> bytes: ...

    def output_ref_of(self, values: dict) -> str: ...


class EditScope(Protocol):
    """One list of nodes to edit (a top level, or a function body), as every edit
    of the graph's structure uses it (see :class:`graphgrad.readings.scope.Scope`)."""

    graph: str
    function: Any  # the FunctionDef of a body, or None at top level

    @property
    def prefix(self) -> str: ...

    def names(self) -> Any: ...

    def node(self, name: str) -> Any: ...

    def candidates(self, op_types: Container[str] | None = None) -> list[tuple[Any, Any]]: ...

    def marked(self, key: str) -> list: ...

    def overriding(self) -> list[tuple[Any, Any]]: ...

    def data_inputs(self, node: Any) -> list[str]: ...

    def consumers(self, ref: str) -> list: ...

    def uses_by_ref(self, name: str) -> dict[str, list]: ...

    def in_tf1_loop(self, name: str) -> bool: ...

    def reroute(self, uses: Any, new_ref: str) -> None: ...

    def stand_in(self, ref: str) -> Any: ...

    def mark_stand_in(self, node: Any, ref: str) -> None: ...

    def unique_name(self, base: str, start: int | None = None) -> str: ...

    def add(self, op: str, name: str, inputs: Sequence[str] = (), attrs: dict | None = None,
            group: str | None = None, device: str = "") -> Any: ...

    def template(self, key: Any, record: Callable[[], NodeGroupTemplate]) -> NodeGroupTemplate: ...

    def add_group(self, template: NodeGroupTemplate, values: dict) -> tuple[str, str]: ...

    def mark(self, node: Any, key: str, value: str) -> None: ...

    def commit(self) -> None: ...

    def output_ref(self, node: Any, index: int = 0) -> str: ...

    def canonical(self, ref: str) -> str: ...

    def split_ref(self, ref: str) -> tuple[str, int]: ...

    def depends_on(self, ref: str, ancestor: str) -> bool: ...

    def shape_of(self, ref: str) -> list | None: ...

    def dtype_of(self, ref: str) -> int | None: ...

    def remove(self, names: set) -> None: ...


class BulkOverrides(Protocol):
    """Top-level nodes chosen by op type, as columns, where a reading can give them
    overrides without an object per node (a plain ``--op`` rewrite of 100k nodes)."""

    @property
    def names(self) -> Sequence[str]: ...

    @property
    def ops(self) -> Sequence[str]: ...

    def apply(self, values: dict[str, str]) -> None:
        """Give each node the override ``values[its op type]``."""


class Reading(Protocol):
    """A model opened for a job: what every job reads, edits and writes."""

    path: str
    kind: str
    encoding: str

    def candidates(self, op_types: Container[str] | None = None, functions: bool = True) -> list[NodeReference]:
        """The nodes rules may select: every top level, then (if ``functions``) the
        function bodies; of ``op_types`` only, if given."""

    def bulk_overrides(self, op_types: Collection[str], functions: bool) -> BulkOverrides | None:
        """The top-level nodes of ``op_types`` as :class:`BulkOverrides`, where this
        reading offers them and every such node would change (no override yet,
        none in a function body); else None."""

    def saved_gradients(self) -> dict[tuple[str, str], str]:
        """``{(graph label, override): gradient function}`` saved with the model
        (``tf.custom_gradient``'s ``registered_gradients``)."""

    def unrouted_calls(self) -> list[str]:
        """The call ops whose callee holds overrides ``tf.gradients`` would not route
        to (see :func:`graphgrad.graph.functions.calls_into_overrides`), labelled."""

    def sign_lists(self) -> tuple[list[SignList], list[str]]:
        """The lists of nodes to look at for larq's shifted Signs, and notes for
        those this reading does not look at."""

    def scopes(self, functions: bool = True) -> list[EditScope]:
        """The lists of nodes to edit: top levels, then (if ``functions``) the bodies."""

    def bodies(self, functions: bool = True) -> list[tuple[str, list[Body]]]:
        """``(graph label, [top-level Body, function Body, ...])`` per graph, for summaries."""

    def signatures(self) -> list[SignatureRow]:
        """The model's signatures (a SavedModel's; none for a GraphDef)."""

    def stored_nodes(self) -> tuple[list, list, Encodings] | None:
        """``(names, op types, encodings)`` of a lone GraphDef's top-level nodes as
        stored, for ``diff`` to compare without decoding; None for a parsed model."""

    def library_graph(self) -> Any:
        """A GraphDef holding only the function library (of a stored reading)."""

    def rest(self) -> Any:
        """A GraphDef of every field but the top-level nodes (of a stored reading)."""

    def model(self) -> Any:
        """The model parsed whole (:class:`graphgrad.graph.model.Model`): a parsed
        reading's own, edits included; a stored reading's read from its file as the
        file holds it (``diff`` asks for it before any edit)."""

    def write(self, target: str, encoding: str | None, sweep_temporaries: bool) -> bool:
        """Write the model, edits included, to ``target`` (in ``encoding``: text or
        binary, None as read; a reading as stored writes binary only, and a job that
        writes text opens the parse); whether it was written."""
