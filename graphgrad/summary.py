"""What a model holds: op type counts, and the gradient overrides it carries,
each classified by whether a loading process can resolve it."""

from collections import Counter
from dataclasses import dataclass, field

from .errors import SpecError
from .model import Model, iter_nodes
from .spec import CUSTOM_GRADIENT, FUNCTION_CALL_NAME, NAMESPACE, spec_from_attr_value

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
    """Op type counts (top level and function bodies) and overrides of ``model``."""
    top, in_functions = Counter(), Counter()
    overrides, function_names = [], set()
    for ref in iter_nodes(model, functions):
        if ref.function is None:
            top[ref.op_type] += 1
        else:
            in_functions[ref.op_type] += 1
            function_names.add((ref.graph, ref.function))
        value = ref.override
        if value is not None:
            status, detail = classify_override(value)
            overrides.append(Override(ref.graph, ref.name, ref.op_type, value, status, detail))
    op_types = [
        OpTypeCount(op_type, top[op_type], in_functions[op_type])
        for op_type in sorted(top.keys() | in_functions.keys(), key=lambda t: (-(top[t] + in_functions[t]), t))
    ]
    graphs = model.graphs()
    problems = [problem for label, graph_def in graphs for problem in graph_problems(graph_def, label)]
    return ModelSummary(
        path=model.path,
        kind=model.kind,
        encoding=model.encoding,
        graphs=len(graphs),
        functions=sum(len(g.library.function) for _, g in graphs),
        nodes_top=sum(top.values()),
        nodes_functions=sum(in_functions.values()),
        op_types=op_types,
        overrides=overrides,
        graph_problems=problems,
    )


def graph_problems(graph_def, label: str = "") -> list[str]:
    """Duplicate node names and inputs naming no node: TensorFlow refuses such graphs."""
    where = f"{label}: " if label else ""
    bodies = [("", list(graph_def.node), set())]
    bodies += [
        (f.signature.name + "/", list(f.node_def), {arg.name for arg in f.signature.input_arg})
        for f in graph_def.library.function
    ]
    problems = []
    for prefix, nodes, arguments in bodies:
        counts = Counter(node.name for node in nodes)
        problems += [f"{where}{count} nodes are named {prefix}{name}" for name, count in counts.items() if count > 1]
        known = set(counts) | arguments
        for node in nodes:
            missing = [i for i in node.input if i.lstrip("^").split(":")[0] not in known]
            if missing:
                problems.append(f"{where}{prefix}{node.name} refers to missing input(s) {', '.join(missing)}")
    return problems
