"""What a model holds: op type counts, and the gradient overrides it carries,
each classified by whether a loading process can resolve it."""

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import compress

from ..errors import SpecError
from ..gradients.spec import spec_from_attr_value
from ..graph.functions import calls_into_overrides
from ..graph.model import Model
from ..names import CALL_OPS, CUSTOM_GRADIENT, FUNCTION_CALL_NAME, NAMESPACE
from ..readings import open_reading
from ..readings.bodies import Body
from ..readings.protocol import Reading

GRAPHGRAD = "graphgrad"
UNRESOLVED = "unresolved"
DANGLING = "dangling"
SAVED = "saved"
EXTERNAL = "external"
FUNCTION_CALL = "tf.function"


@dataclass(frozen=True)
class OpTypeCount:
    op_type: str
    top: int
    functions: int


@dataclass(frozen=True)
class Override:
    """A node's ``_gradient_op_type``, its status and what it means."""

    graph: str
    node: str
    op_type: str
    value: str
    status: str
    detail: str


@dataclass(frozen=True)
class GraphEnd:
    """A likely input or output node of a graph's top level."""

    graph: str
    node: str
    op_type: str


@dataclass(frozen=True)
class Signature:
    """A MetaGraphDef's signature: its input and output names, each to its tensor."""

    graph: str
    key: str
    inputs: dict
    outputs: dict


@dataclass
class ModelSummary:
    path: str
    kind: str
    encoding: str
    graphs: int
    functions: int
    nodes_top: int
    nodes_functions: int
    op_types: list = field(default_factory=list)
    overrides: list = field(default_factory=list)
    graph_problems: list = field(default_factory=list)
    unrouted_calls: list = field(default_factory=list)  # see graphgrad.graph.functions.calls_into_overrides
    inputs: list = field(default_factory=list)  # GraphEnd: see graph_ends
    outputs: list = field(default_factory=list)
    signatures: list = field(default_factory=list)  # Signature, of MetaGraphDefs

    @property
    def problems(self) -> list:
        return [o for o in self.overrides if o.status in (UNRESOLVED, DANGLING)]


def classify_override(value: str, saved: dict | None = None) -> tuple[str, str]:
    """(status, detail) for an override value; ``saved`` is the graph's
    :func:`~graphgrad.graph.functions.saved_gradients`.

    ``graphgrad``: a graphgrad gradient this process can build; ``unresolved``:
    a graphgrad name it cannot (e.g. a user gradient not imported); ``saved``: a
    ``tf.custom_gradient`` whose gradient function was saved with the model;
    ``dangling``: a ``CustomGradient-<n>`` left by ``tf.custom_gradient`` without
    its function, which no loading process has; ``tf.function``: a
    ``PartitionedCall-<n>`` on a call op, which needs nothing; ``external``: any
    other name, which the loading process must register itself (or TensorFlow
    has under that op type).
    """
    if saved and value in saved:
        return SAVED, (
            f"tf.custom_gradient's gradient, saved with the model as function {saved[value]}: "
            "tf.saved_model.load registers it again; for graph mode, graphgrad.import_graph_def "
            "(or register_gradients on the model file) calls it"
        )
    if CUSTOM_GRADIENT.match(value):
        return DANGLING, (
            "a name tf.custom_gradient gave in the process that built the graph; no other "
            "process has it, so tf.gradients fails with 'No gradient defined for operation'"
        )
    if FUNCTION_CALL_NAME.match(value):
        return FUNCTION_CALL, (
            "set by tf.function on a call op; tf.gradients differentiates call ops through the "
            "function itself and tf.saved_model.load re-registers it, so it needs nothing"
        )
    if value.startswith(NAMESPACE):
        try:
            spec = spec_from_attr_value(value)  # a spec: the value is in graphgrad's namespace
        except SpecError as error:
            return UNRESOLVED, str(error)
        if spec is not None:
            return GRAPHGRAD, spec.canonical
    return EXTERNAL, "resolved by TensorFlow's registry; the loading process must register it"


def summarize(model: Model, functions: bool = True) -> ModelSummary:
    """Op type counts (top level and function bodies), overrides, graph problems,
    likely inputs and outputs, and signatures of ``model``."""
    with open_reading(model) as reading:
        return summarize_reading(reading, functions)


def summarize_reading(reading: Reading, functions: bool = True) -> ModelSummary:
    """:func:`summarize` of any reading of a model."""
    signatures = [Signature(*row) for row in reading.signatures()]
    return summarize_bodies(reading.path, reading.kind, reading.encoding, reading.bodies(functions), signatures)


def summarize_bodies(path: str, kind: str, encoding: str, graphs: Sequence[tuple[str, list]],
                     signatures: Sequence = ()) -> ModelSummary:
    """The summary of ``graphs``: (label, [top-level Body, function Body, ...]) per graph."""
    top: Counter = Counter()
    in_functions: Counter = Counter()
    overrides, function_count, problems, unrouted, inputs, outputs = [], 0, [], [], [], []
    for label, bodies in graphs:
        function_count += len(bodies) - 1
        classified = {}  # a rewritten graph has thousands of overrides and a few distinct values
        saved = bodies[0].saved_gradients
        for body in bodies:
            (top if body.function is None else in_functions).update(body.ops)
            prefix = "" if body.function is None else body.function + "/"
            for name, op_type, value in body.overrides:
                if value not in classified:
                    classified[value] = classify_override(value, saved)
                overrides.append(Override(label, prefix + name, op_type, value, *classified[value]))
        problems += graph_problems(bodies, label)
        unrouted += [f"{label}: {name}" if label else name for name in unrouted_calls(bodies)]
        graph_inputs, graph_outputs = graph_ends(bodies[0])
        inputs += [GraphEnd(label, name, op_type) for name, op_type in graph_inputs]
        outputs += [GraphEnd(label, name, op_type) for name, op_type in graph_outputs]
    op_types = [
        OpTypeCount(op_type, top[op_type], in_functions[op_type])
        for op_type in sorted(top.keys() | in_functions.keys(), key=lambda t: (-(top[t] + in_functions[t]), t))
    ]
    return ModelSummary(
        path=path,
        kind=kind,
        encoding=encoding,
        graphs=len(graphs),
        functions=function_count,
        nodes_top=sum(top.values()),
        nodes_functions=sum(in_functions.values()),
        op_types=op_types,
        overrides=overrides,
        graph_problems=problems,
        unrouted_calls=unrouted,
        inputs=inputs,
        outputs=outputs,
        signatures=list(signatures),
    )


def unrouted_calls(bodies: Sequence[Body]) -> list[str]:
    """:func:`graphgrad.graph.functions.calls_into_overrides` of a graph's bodies. The
    NodeDefs are read only if a function holds an override, and those of the top
    level only if it has a node that may call."""
    functions = bodies[1:]
    if not any(body.overrides for body in functions):
        return []
    top = bodies[0]
    callers = set(CALL_OPS).union(body.function for body in functions)
    return calls_into_overrides(
        top.node_defs(callers) if callers.intersection(top.ops) else [],
        {body.function: body.node_defs() for body in functions},
    )


def _producer(reference: str) -> str:
    return reference.partition(":")[0].lstrip("^")


def graph_problems(bodies: Sequence[Body], label: str = "") -> list[str]:
    """Duplicate node names and inputs naming no node: TensorFlow refuses such graphs.

    Set operations first (in C); nodes are looked at one by one only when a problem exists.
    """
    where = f"{label}: " if label else ""
    problems = []
    for body in bodies:
        prefix = "" if body.function is None else body.function + "/"
        known = body.distinct_names
        if len(known) != len(body.names):
            counts = Counter(body.names)
            problems += [
                f"{where}{count} nodes are named {prefix}{name}" for name, count in counts.items() if count > 1
            ]
        known = known | body.arguments if body.arguments else known
        # An input that is a node's name refers to that node (names hold no ':' and
        # do not start with '^'); only the others need to be taken apart.
        plain = _plain(known)
        others = body.unnamed_inputs - body.arguments if plain else set(body.inputs)
        if not others:
            continue
        if not {_producer(reference) for reference in others} - known:
            continue
        for name, inputs in body.node_inputs():
            missing = [reference for reference in inputs if _producer(reference) not in known]
            if missing:
                problems.append(f"{where}{prefix}{name} refers to missing input(s) {', '.join(missing)}")
    return problems


# Never a graph's output, as in TensorFlow's summarize_graph.
UNLIKELY_OUTPUTS = {"Const", "Assign", "NoOp", "Placeholder"}
PLACEHOLDER = "Placeholder"


def graph_ends(top: Body) -> tuple[list, list]:
    """``(inputs, outputs)`` of a graph's top level, each as (node, op type) in
    graph order, found as TensorFlow's summarize_graph finds them: the inputs are
    its placeholders; the outputs, the nodes that no node reads (constants,
    assignments, no-ops and placeholders aside). Set operations and scans in C:
    no Python work per node."""
    unread = top.distinct_names.difference(top.inputs)
    if unread and top.unnamed_inputs:  # "name:1" and "^name" read a node too
        unread -= {_producer(reference) for reference in top.unnamed_inputs}
    inputs = [(top.names[index], PLACEHOLDER) for index in _positions(top.ops, PLACEHOLDER)]
    outputs = [(name, op) for name, op in compress(zip(top.names, top.ops), map(unread.__contains__, top.names))
               if op not in UNLIKELY_OUTPUTS]
    return inputs, outputs


def _positions(values: Sequence, value) -> list[int]:
    """Where ``value`` stands in ``values``: ``list.index`` scans in C, where
    comparing each item in Python would not."""
    found: list = []
    start = 0
    while True:
        try:
            start = values.index(value, start)
        except ValueError:
            return found
        found.append(start)
        start += 1


def _plain(names) -> bool:
    """Whether every name reads as itself in an input: no ':', no leading '^'."""
    text = "\n" + "\n".join(names)
    return ":" not in text and "\n^" not in text
