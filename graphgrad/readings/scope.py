"""Node lists to edit in place: tensor references, consumers, new nodes, rerouting.

Top-level nodes name tensors ``node:index`` (``node`` for index 0); nodes in a
function body name them ``node:output_arg:index`` and the function's ``ret`` map
also consumes them. A :class:`Scope` hides that difference. Every node graphgrad
creates carries ``_graphgrad_group`` (the name of the node that stands in for
the original tensor), and that node also carries ``_graphgrad_source`` (the
tensor it stands in for), so ``reset`` can undo the edit exactly. Attributes
whose names start with ``_`` are not checked against op definitions by
TensorFlow, so the marked graphs still load anywhere.
"""

from collections import defaultdict
from collections.abc import Callable, Container, Iterable, Sequence
from typing import Any

from ..errors import GraphgradError
from ..files.protos import AttrValue
from ..files.wireformat import encode_nodes
from ..graph.model import Model, NodeRef, dtype_in
from ..names import ATTR, GROUP, SOURCE, TF1_LOOP_ENTERS
from .added import AddedNode, new_node, output_ref_of
from .protocol import NodeGroupTemplate

class _UseSets(defaultdict):
    """``producer name -> {(consumer name, or None for a function's ret, input position)}``."""

    def __init__(self):
        super().__init__(set)

    def add(self, producer: str, use: tuple) -> None:
        self[producer].add(use)


def _use_order(use: tuple) -> tuple:
    return use[0] is None, use[0] or "", str(use[1])


class _Instance:
    """One use of a :class:`NodeGroupTemplate` in a scope: its slot values, and the nodes
    read or edited one by one (made from the template when first asked for)."""

    __slots__ = ("template", "values", "nodes")

    def __init__(self, template: NodeGroupTemplate, values: dict):
        self.template, self.values = template, values
        self.nodes: dict = {}

    def node(self, label: str) -> AddedNode | None:
        index = self.template.index_of.get(label)
        if index is None:
            return None
        if index not in self.nodes:
            self.nodes[index] = self.template.node(index, self.values)
        return self.nodes[index]

    def encoded(self, field_number: int) -> bytes:
        template = self.template
        if self.nodes and any(node.input != template.node(index, self.values).input
                              for index, node in self.nodes.items()):  # a rerouted input: encode its nodes one by one
            nodes = [self.nodes.get(index) or template.node(index, self.values) for index in range(len(template.nodes))]
            return b"".join(encode_nodes(nodes, field_number))
        return template.encoding(tuple(map(str.encode, map(self.values.__getitem__, template.slots))), field_number)


# The field that holds the nodes: GraphDef.node, FunctionDef.node_def.
_NODE_FIELDS = {"GraphDef": 1, "FunctionDef": 3, "GraphNodes": 1}  # GraphNodes: graphgrad.readings.small_nodes
INDEX_PARTS = ("_loop_nodes", "_by_name", "_name_scopes", "_uses", "_stand_ins", "_groups")  # Scope's IndexParts


class IndexPart:
    """An attribute of a scope's index, which ``_index()`` makes with all the others
    when one is first read. A non-data descriptor: once made, the instance's own
    attribute is found first, at no cost (``__getattr__`` would tax every attribute
    read of the scope, 2.5% of an --embed of 20,000 nodes)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, scope: Any, owner: type | None = None) -> Any:
        if scope is None:
            return self
        scope._index()
        return scope.__dict__[self.name]


class Scope:
    """One editable list of nodes: a graph's top level or one function body, here
    parsed (NodeDefs); :class:`graphgrad.readings.stored_scope.StoredScope` is the
    top level of many small nodes as stored, the same methods over columns. Edits
    are written once against :class:`graphgrad.readings.protocol.EditScope`.

    Nodes an edit adds are :class:`AddedNode` until :meth:`commit`, which the edit
    calls once it is done; the scope indexes its nodes again when next asked.
    """

    def __init__(self, graph: str, owner: Any):
        """``owner``: the GraphDef of a top level, or the FunctionDef of a body."""
        self.graph, self.owner = graph, owner
        is_body = owner.DESCRIPTOR.name == "FunctionDef"
        self.function: Any = owner if is_body else None
        self.nodes = owner.node_def if is_body else owner.node  # the repeated NodeDef
        self._added: list = []  # AddedNode and _Instance, in order
        self._group_values: dict = {}
        self._templates: dict = {}

    # The index, made when first read (again after a commit): see IndexPart.
    _loop_nodes = IndexPart()
    _by_name = IndexPart()
    _name_scopes = IndexPart()
    _uses = IndexPart()
    _stand_ins = IndexPart()
    _groups = IndexPart()

    def _index(self):
        self._loop_nodes = None  # see in_tf1_loop
        self._by_name = {node.name: node for node in self.nodes}
        if len(self._by_name) != len(self.nodes):
            self._refuse_duplicate_names([node.name for node in self.nodes])
        self._name_scopes = name_scopes(self._by_name)
        # producer name -> {(consumer name, or None for the function's ret, input position)}
        self._uses = _UseSets()  # (StoredScope: a mapping that makes each set on demand)
        for node in self.nodes:
            self._record_uses(node)
        if self.function is not None:
            for key, value in self.function.ret.items():
                self._uses[value.split(":")[0]].add((None, key))
        self._stand_ins = {self.canonical(node.attr[SOURCE].s.decode()): node for node in self.marked(SOURCE)}
        self._groups = {}  # group name -> _Instance, until the commit

    def _refuse_duplicate_names(self, names: list) -> None:
        from collections import Counter  # only on this error path

        name, count = Counter(names).most_common(1)[0]
        where = f"function {self.function.signature.name}" if self.function is not None else "the graph"
        raise GraphgradError(
            f"{count} nodes of {where} are named {name!r}: TensorFlow refuses to import such a graph, and an "
            "edit of its structure cannot tell them apart. To fix this, rename or remove one (graphgrad ops "
            "lists such problems); overrides alone (rewrite without --embed) still apply to each"
        )

    def candidates(self, op_types: Container[str] | None = None) -> list[tuple[Any, Any]]:
        """``(reference, node)`` of each node not added by graphgrad (of ``op_types``
        only, if given), the reference as rules see nodes (name, op_type, graph, function)."""
        function = self.function.signature.name if self.function is not None else None
        return [(NodeRef(self.graph, function, node), node) for node in self.nodes
                if (op_types is None or node.op in op_types) and GROUP not in node.attr]

    def marked(self, key: str) -> list:
        """The nodes that carry attribute ``key`` (graphgrad's markers), in order."""
        return [node for node in self.nodes if key in node.attr]

    def overriding(self) -> list[tuple[Any, Any]]:
        """``(reference, node)`` of each node that carries an override, in order, the
        reference as :meth:`candidates` gives it (its ``override`` and ``set_override``)."""
        function = self.function.signature.name if self.function is not None else None
        return [(NodeRef(self.graph, function, node), node) for node in self.nodes if ATTR in node.attr]

    def _append(self, fields: list[bytes]) -> None:
        """Add nodes encoded as fields of the owner (see :data:`_NODE_FIELDS`), in order."""
        self.owner.MergeFromString(b"".join(fields))  # appended to its nodes, as protobuf merges

    def _enter_names(self) -> list[str]:
        return [node.name for node in self.nodes if node.op in TF1_LOOP_ENTERS]

    def _set_input(self, consumer: str, position: int, ref: str) -> None:
        self.node(consumer).input[position] = ref

    def _record_uses(self, node, inputs=None):
        """Record ``node``'s data inputs (``inputs``: its input list, if at hand as
        Python strings: reading a NodeDef's repeated field costs an object per entry)."""
        name = node.name
        for position, ref in enumerate(node.input if inputs is None else inputs):
            if not ref.startswith("^"):
                self._uses[ref.split(":")[0]].add((name, position))

    def commit(self) -> None:
        """Append the nodes added since the last commit to the graph."""
        if not self._added:
            return
        number, encoded, run = _NODE_FIELDS[self.owner.DESCRIPTOR.name], [], []
        for item in self._added + [None]:
            if isinstance(item, AddedNode):
                run.append(item)
                continue
            if run:  # nodes added one by one, encoded together: they share attribute values
                encoded += encode_nodes(run, number)
                run = []
            if item is not None:
                encoded.append(item.encoded(number))
        self._append(encoded)
        self._added, self._group_values = [], {}
        for name in INDEX_PARTS:  # it holds the AddedNodes: made again from the graph when next needed
            self.__dict__.pop(name, None)

    @property
    def prefix(self) -> str:
        return "" if self.function is None else self.function.signature.name + "/"

    def names(self) -> Iterable[str]:
        """The names of the nodes."""
        return self._by_name

    def node(self, name: str) -> Any:
        found = self._by_name.get(name)
        if found is None and self._groups:
            group, _, label = name.rpartition("/")
            instance = self._groups.get(group)
            found = instance.node(label) if instance is not None else None
        return found

    def output_ref(self, node: Any, index: int = 0) -> str:
        return output_ref_of(self.function is not None, node, index)

    def canonical(self, ref: str) -> str:
        """TensorFlow's own spelling: ``node`` for ``node:0`` at top level."""
        if self.function is None and ref.endswith(":0"):
            return ref[:-2]
        return ref

    def _input(self, consumer, position) -> str:
        return self.function.ret[position] if consumer is None else self.node(consumer).input[position]

    def data_inputs(self, node: Any) -> list[str]:
        """The inputs of ``node`` that are data edges (control inputs, ``^name``, left out)."""
        return [ref for ref in node.input if ref[:1] != "^"]

    def consumers(self, ref: str) -> list:
        """(consumer name, input position) of every data use; ret outputs as (None, key)."""
        ref = self.canonical(ref)
        return self.uses_by_ref(self.split_ref(ref)[0]).get(ref, [])

    def uses_by_ref(self, name: str) -> dict[str, list]:
        """The data uses of node ``name``'s outputs by the (canonical) tensor reference
        they read: ``{ref: [(consumer name, input position)]}``, ordered as
        :meth:`consumers` orders them; ret outputs as (None, key)."""
        uses = self._uses[name]
        if len(uses) == 1:  # the commonest case, without a sort
            (use,) = uses
            return {self.canonical(self._input(*use)): [use]}
        found: dict = {}
        for use in sorted(uses, key=_use_order):
            found.setdefault(self.canonical(self._input(*use)), []).append(use)
        return found

    def in_tf1_loop(self, name: str) -> bool:
        """Whether node ``name`` runs inside a TF1 while loop's frame: it is reached
        from an ``Enter`` by data edges without passing an ``Exit``. (TF2's
        ``While`` keeps its body in a function instead.)"""
        if self._loop_nodes is None:
            frame, pending = set(), self._enter_names()
            while pending:
                current = pending.pop()
                if current in frame:
                    continue
                frame.add(current)
                if self.node(current).op not in ("Exit", "RefExit"):
                    pending += [consumer for consumer, _ in self._uses[current] if consumer is not None]
            self._loop_nodes = frame
        return name in self._loop_nodes

    def reroute(self, uses: Iterable[tuple], new_ref: str) -> None:
        """Make each use ``(consumer, input position)`` read ``new_ref`` instead."""
        all_uses, new_producer = self._uses, new_ref.partition(":")[0]
        for use in uses:
            consumer, position = use
            all_uses[self._input(consumer, position).partition(":")[0]].discard(use)
            all_uses.add(new_producer, use)
            if consumer is None:
                self.function.ret[position] = new_ref
            else:
                self._set_input(consumer, position, new_ref)

    def stand_in(self, ref: str) -> Any:
        """The graphgrad node that already stands in for tensor ``ref``, if any."""
        found = self._stand_ins.get(self.canonical(ref))
        if isinstance(found, _Instance):
            return found.node(found.template.labels[found.template.output])
        return found

    def mark_stand_in(self, node: AddedNode, ref: str) -> None:
        self.mark(node, SOURCE, ref)
        self._stand_ins[self.canonical(ref)] = node

    def unique_name(self, base: str, start: int | None = None) -> str:
        """``base`` (or ``base_<n>``, from ``start``: 1 unless given, and then ``base``
        itself is not tried) that no node has, nor uses as a name scope."""
        # A group added by add_group is a name scope; its members' labels are a
        # builder's (stop_y, clip, ...), never a base's suffix here.
        names, name_scopes = self._by_name, self._name_scopes
        if start is None and base not in names and base not in name_scopes:
            return base
        number = 1 if start is None else start
        while (candidate := f"{base}_{number}") in names or candidate in name_scopes:
            number += 1
        return candidate

    def add(self, op: str, name: str, inputs: Sequence[str] = (), attrs: dict | None = None, group: str | None = None,
            device: str = "") -> AddedNode:
        """A new node (``attrs``: AttrValues, not copied), marked as one of ``group``;
        the graph holds it after :meth:`commit`."""
        group = group or name
        group_value = self._group_values.get(group)
        if group_value is None:  # one value per group, shared by its nodes (and so encoded once)
            group_value = self._group_values[group] = AttrValue(s=group.encode())
        node = new_node(op, name, inputs, attrs, group_value, device)
        inputs = node.input
        self._added.append(node)
        self._by_name[name] = node
        scope = name
        while "/" in scope:  # the name scopes it opens, up to the first one already open
            scope = scope.rsplit("/", 1)[0]
            if scope in self._name_scopes:
                break
            self._name_scopes.add(scope)
        self._record_uses(node, inputs)
        return node

    def template(self, key: Any, record: Callable[[], NodeGroupTemplate]) -> NodeGroupTemplate:
        """The template known by ``key`` in this scope, recorded by ``record()`` when first asked for."""
        if key not in self._templates:
            self._templates[key] = record()
        return self._templates[key]

    def add_group(self, template: NodeGroupTemplate, values: dict) -> tuple[str, str]:
        """Add ``template``'s nodes with the slots' ``values`` (the group's name
        first: new, see :meth:`unique_name`); returns the name of the node that
        stands in for the tensor ``values[template.stands_in_for]``, and its ref."""
        instance = _Instance(template, values)
        group = values[template.slots[0]]
        self._added.append(instance)
        self._groups[group] = instance
        name_scopes, scope = self._name_scopes, group + "/"
        while "/" in scope:
            scope = scope.rsplit("/", 1)[0]
            if scope in name_scopes:
                break
            name_scopes.add(scope)
        uses = self._uses
        for suffix, position, slot in template.slot_uses:
            ref = values[slot]
            if ref[:1] != "^":
                uses.add(ref.partition(":")[0], (group + suffix, position))
        self._stand_ins[self.canonical(values[template.stands_in_for])] = instance
        return group + template.output_suffix, template.output_ref_of(values)

    def mark(self, node: AddedNode, key: str, value: str) -> None:
        """Set the string attribute ``key`` of a node added since the last commit."""
        node.attr[key] = AttrValue(s=value.encode())

    def remove(self, names: set) -> None:
        """Remove the nodes named ``names`` (nodes added since the last commit are committed first)."""
        # In place, a run of neighbours at a time (a surrogate's nodes were added
        # together): re-adding the kept nodes would copy each of them, and a frozen
        # model's constants with them.
        self.commit()
        doomed = [index for index, node in enumerate(self.nodes) if node.name in names]
        for start, stop in reversed(runs_of(doomed)):
            del self.nodes[start:stop]
        self._index()

    def split_ref(self, ref: str) -> tuple[str, int]:
        """(producer name, output index) of a tensor reference in this scope."""
        parts = ref.split(":")
        if self.function is None:
            return parts[0], int(parts[1]) if len(parts) > 1 else 0
        return parts[0], int(parts[2]) if len(parts) > 2 else 0

    def depends_on(self, ref: str, ancestor: str) -> bool:
        """Whether tensor ``ref`` is computed from tensor ``ancestor`` (data edges)."""
        ancestor = self.canonical(ancestor)
        pending, seen = [self.split_ref(ref)[0]], set()
        while pending:
            node = self.node(pending.pop())
            if node is None or node.name in seen:
                continue
            seen.add(node.name)
            for name in node.input:
                if self.canonical(name) == ancestor:
                    return True
                if not name.startswith("^"):
                    pending.append(name.split(":")[0])
        return False

    def shape_of(self, ref: str) -> list | None:
        """The static shape of a tensor (-1: an unknown dimension), from its
        producer's ``_output_shapes`` or a placeholder's ``shape``; None if unknown."""
        name, index = self.split_ref(ref)
        producer = self.node(name)
        if producer is None:
            return None
        if "_output_shapes" in producer.attr and len(producer.attr["_output_shapes"].list.shape) > index:
            shape = producer.attr["_output_shapes"].list.shape[index]
        elif producer.op.startswith("Placeholder") and "shape" in producer.attr:
            shape = producer.attr["shape"].shape
        elif producer.op == "Const" and "value" in producer.attr:
            shape = producer.attr["value"].tensor.tensor_shape
        else:
            return None
        return None if shape.unknown_rank else [dim.size for dim in shape.dim]

    def dtype_of(self, ref: str) -> int | None:
        """The dtype of a tensor, read from its producer's attributes (None if unknown)."""
        name, index = self.split_ref(ref)
        producer = self.node(name)
        if producer is None:
            return None
        if producer.op in _ELEMENTS_OUT and index == 0 and "element_dtype" in producer.attr:
            return producer.attr["element_dtype"].type  # a map_fn's result, stacked from its TensorList
        return dtype_in(producer.attr, index)


# TensorList ops whose output 0 is the list's elements (of its element_dtype), not a list (a variant).
_ELEMENTS_OUT = {"TensorListStack", "TensorListGetItem", "TensorListGather", "TensorListConcat", "TensorListConcatV2"}


def name_scopes(names: Iterable[str]) -> set[str]:
    """The name scopes that ``names`` open: every prefix ending before a ``/``."""
    opened: set = set()
    for name in names:
        while "/" in name:
            name = name.rpartition("/")[0]
            if name in opened:
                break
            opened.add(name)
    return opened


def scopes(model: Model, functions: bool = True) -> list[Scope]:
    """Every editable node list of ``model``: top levels, then function bodies."""
    found = []
    for label, graph_def in model.graphs():
        found.append(Scope(label, graph_def))
        if functions:
            found.extend(Scope(label, f) for f in graph_def.library.function)
    return found


def runs_of(indices: list) -> list:
    """``[(start, stop)]`` of the runs of consecutive numbers in sorted ``indices``."""
    runs: list = []
    for index in indices:
        if runs and runs[-1][1] == index:
            runs[-1][1] = index + 1
        else:
            runs.append([index, index + 1])
    return runs
