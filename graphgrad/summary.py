"""What a model holds: op type counts, and the gradient overrides it carries,
each classified by whether a loading process can resolve it."""

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from .errors import SpecError
from .functions import CALL_OPS, calls_into_overrides
from .model import Model, override_of
from .spec import ATTR, CUSTOM_GRADIENT, FUNCTION_CALL_NAME, NAMESPACE, spec_from_attr_value

GRAPHGRAD = "graphgrad"
UNRESOLVED = "unresolved"
DANGLING = "dangling"
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
    unrouted_calls: list = field(default_factory=list)  # see graphgrad.functions.calls_into_overrides

    @property
    def problems(self) -> list:
        return [o for o in self.overrides if o.status in (UNRESOLVED, DANGLING)]


def classify_override(value: str) -> tuple[str, str]:
    """(status, detail) for an override value.

    ``graphgrad``: a graphgrad gradient this process can build; ``unresolved``:
    a graphgrad name it cannot (e.g. a user gradient not imported);
    ``dangling``: a ``CustomGradient-<n>`` left by ``tf.custom_gradient``, which
    no loading process has; ``tf.function``: a ``PartitionedCall-<n>`` on a call
    op, which needs nothing; ``external``: any other name, which the loading
    process must register itself (or TensorFlow has under that op type).
    """
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
            return GRAPHGRAD, spec_from_attr_value(value).canonical
        except SpecError as error:
            return UNRESOLVED, str(error)
    return EXTERNAL, "resolved by TensorFlow's registry; the loading process must register it"


@dataclass
class Body:
    """One list of nodes, a graph's top level or a function body, as the columns
    a summary reads (so that they can come from a full parse or a cut-down one)."""

    function: str | None
    names: Sequence
    ops: Sequence
    inputs: Sequence  # every node's inputs, one node after another
    arguments: set
    overrides: list  # (node name, op type, value)
    node_inputs: Callable[[], Iterable]  # (node name, its inputs) per node; read when an input is missing
    node_defs: Callable[..., Iterable]  # (op types=None) its NodeDefs, of those op types if given


def bodies_of(graph_def, functions: bool = True) -> list[Body]:
    """The top level and (unless ``functions`` is false) the function bodies of a GraphDef."""
    bodies = [nodes_body(None, graph_def.node, set())]
    if functions:
        bodies += [
            nodes_body(f.signature.name, f.node_def, {arg.name for arg in f.signature.input_arg})
            for f in graph_def.library.function
        ]
    return bodies


def nodes_body(function: str | None, nodes, arguments: set) -> Body:
    """A :class:`Body` of NodeDefs."""
    return Body(
        function=function,
        names=[node.name for node in nodes],
        ops=[node.op for node in nodes],
        inputs=[reference for node in nodes for reference in node.input],
        arguments=arguments,
        overrides=[(node.name, node.op, override_of(node)) for node in nodes if ATTR in node.attr],
        node_inputs=lambda: ((node.name, node.input) for node in nodes),
        node_defs=lambda op_types=None: nodes if op_types is None else [n for n in nodes if n.op in op_types],
    )


def summarize(model: Model, functions: bool = True) -> ModelSummary:
    """Op type counts (top level and function bodies), overrides and graph problems of ``model``."""
    graphs = [(label, bodies_of(graph_def, functions)) for label, graph_def in model.graphs()]
    return summarize_bodies(model.path, model.kind, model.encoding, graphs)


def summarize_bodies(path: str, kind: str, encoding: str, graphs) -> ModelSummary:
    """The summary of ``graphs``: (label, [top-level Body, function Body, ...]) per graph."""
    top, in_functions = Counter(), Counter()
    overrides, function_count, problems, unrouted = [], 0, [], []
    classified = {}  # a rewritten graph has thousands of overrides and a few distinct values
    for label, bodies in graphs:
        function_count += len(bodies) - 1
        for body in bodies:
            (top if body.function is None else in_functions).update(body.ops)
            prefix = "" if body.function is None else body.function + "/"
            for name, op_type, value in body.overrides:
                if value not in classified:
                    classified[value] = classify_override(value)
                overrides.append(Override(label, prefix + name, op_type, value, *classified[value]))
        problems += graph_problems(bodies, label)
        unrouted += [f"{label}: {name}" if label else name for name in unrouted_calls(bodies)]
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
    )


def unrouted_calls(bodies) -> list[str]:
    """:func:`graphgrad.functions.calls_into_overrides` of a graph's bodies. The
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


def graph_problems(bodies, label: str = "") -> list[str]:
    """Duplicate node names and inputs naming no node: TensorFlow refuses such graphs.

    Set operations first (in C); nodes are looked at one by one only when a problem exists.
    """
    where = f"{label}: " if label else ""
    problems = []
    for body in bodies:
        prefix = "" if body.function is None else body.function + "/"
        known = set(body.names)
        if len(known) != len(body.names):
            counts = Counter(body.names)
            problems += [
                f"{where}{count} nodes are named {prefix}{name}" for name, count in counts.items() if count > 1
            ]
        known |= body.arguments
        # An input that is a node's name refers to that node (names hold no ':' and
        # do not start with '^'); only the others need to be taken apart.
        plain = _plain(known)
        if plain and known.issuperset(body.inputs):
            continue
        others = set(body.inputs).difference(known) if plain else set(body.inputs)
        if not {_producer(reference) for reference in others} - known:
            continue
        for name, inputs in body.node_inputs():
            missing = [reference for reference in inputs if _producer(reference) not in known]
            if missing:
                problems.append(f"{where}{prefix}{name} refers to missing input(s) {', '.join(missing)}")
    return problems


def _plain(names) -> bool:
    """Whether every name reads as itself in an input: no ':', no leading '^'."""
    text = "\n" + "\n".join(names)
    return ":" not in text and "\n^" not in text
