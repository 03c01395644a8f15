"""What a model holds: op type counts, and the gradient overrides it carries,
each classified by whether a loading process can resolve it."""

from collections import Counter
from dataclasses import dataclass, field

from .errors import SpecError
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


def summarize(model: Model, functions: bool = True) -> ModelSummary:
    """Op type counts (top level and function bodies), overrides and graph problems of ``model``."""
    top, in_functions = Counter(), Counter()
    overrides, function_count, problems = [], 0, []
    graphs = model.graphs()
    for label, graph_def in graphs:
        bodies = _bodies(graph_def, functions)
        function_count += len(bodies) - 1
        for function, nodes, _ in bodies:
            (top if function is None else in_functions).update(node.op for node in nodes)
            prefix = "" if function is None else function + "/"
            for node in nodes:
                if ATTR in node.attr:  # checked on every node: the common case is cheap
                    value = override_of(node)
                    status, detail = classify_override(value)
                    overrides.append(Override(label, prefix + node.name, node.op, value, status, detail))
        problems += graph_problems(bodies, label)
    op_types = [
        OpTypeCount(op_type, top[op_type], in_functions[op_type])
        for op_type in sorted(top.keys() | in_functions.keys(), key=lambda t: (-(top[t] + in_functions[t]), t))
    ]
    return ModelSummary(
        path=model.path,
        kind=model.kind,
        encoding=model.encoding,
        graphs=len(graphs),
        functions=function_count,
        nodes_top=sum(top.values()),
        nodes_functions=sum(in_functions.values()),
        op_types=op_types,
        overrides=overrides,
        graph_problems=problems,
    )


def _bodies(graph_def, functions: bool = True):
    """(function name or None, nodes, argument names) of the top level and function bodies."""
    bodies = [(None, graph_def.node, set())]
    if functions:
        bodies += [
            (f.signature.name, f.node_def, {arg.name for arg in f.signature.input_arg})
            for f in graph_def.library.function
        ]
    return bodies


def _producer(reference: str) -> str:
    return reference.partition(":")[0].lstrip("^")


def graph_problems(bodies, label: str = "") -> list[str]:
    """Duplicate node names and inputs naming no node: TensorFlow refuses such graphs.

    Set operations first; nodes are looked at one by one only when a problem exists.
    """
    where = f"{label}: " if label else ""
    problems = []
    for function, nodes, arguments in bodies:
        prefix = "" if function is None else function + "/"
        names = [node.name for node in nodes]
        known = set(names)
        if len(known) != len(names):
            counts = Counter(names)
            problems += [f"{where}{count} nodes are named {prefix}{name}" for name, count in counts.items() if count > 1]
        known |= arguments
        if {_producer(i) for node in nodes for i in node.input} - known:
            for node in nodes:
                missing = [i for i in node.input if _producer(i) not in known]
                if missing:
                    problems.append(f"{where}{prefix}{node.name} refers to missing input(s) {', '.join(missing)}")
    return problems
