"""A frozen graph beside a renamed copy of itself: DeepLIFT's rules compare each op
at the input with the same op at the baseline, which a graph whose batch is fixed
(a classifier frozen for [1, H, W, C], its residual adds traced for that batch)
cannot hold in one batch. The copy's nodes are named ``TWIN_PREFIX + name`` and
read only one another; the rules find an op's twin by that name
(:mod:`graphgrad.gradients.attribution`)."""

from ..errors import GraphgradError
from ..graph.model import GRAPHDEF, Model
from ..names import TWIN_PREFIX


def with_a_twin(model: Model) -> Model:
    """A copy of the frozen GraphDef ``model`` with every node a second time, renamed
    (its functions shared: a call's body reads only its arguments)."""
    if model.kind != GRAPHDEF:
        raise GraphgradError(f"{model.path}: only a frozen GraphDef can run its baselines beside itself")
    twinned = model.copy()
    graph = twinned.message
    copies = []
    for node in model.message.node:
        copy = type(node)()
        copy.CopyFrom(node)
        copy.name = TWIN_PREFIX + node.name
        copy.input[:] = [_renamed(ref) for ref in node.input]
        copy.attr.pop("_class", None)  # colocation with the originals': the copies have their own
        copies.append(copy)
    graph.node.extend(copies)
    return twinned


def _renamed(ref: str) -> str:
    return "^" + TWIN_PREFIX + ref[1:] if ref.startswith("^") else TWIN_PREFIX + ref
