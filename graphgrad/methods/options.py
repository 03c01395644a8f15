"""What an attribution takes and what it reports, TensorFlow-free: the options as one
typed object, the names errors give them, SmoothGrad's noise, the report, and the
checks of the rows a caller gives."""

import math
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError
from .registry import Method

DEFAULT_TIMEOUT = 300.0  # seconds all of a call's runs may take together, loading included (as check's)
DEFAULT_MAX_STEPS = 1024  # a path integral refined to a tolerance spends at most this many gradients a row


@dataclass(frozen=True)
class ArgumentNames:
    """How errors name what the caller gave: :meth:`Explainer.explain`'s arguments,
    or the command's options (:data:`COMMAND_NAMES`)."""

    inputs: str = "inputs"
    target: str = "target"
    baseline: str = "baseline"
    x: str = "x"
    layer: str = "layer"
    feed: str = "feeds={{'{name}': {value}}}"  # formatted with a placeholder's name and value
    tolerance: str = "tolerance"
    y: str = "y"
    feeds: str = "feeds"


def given(name: str, value: Any) -> str:
    """A value as the caller gave it: ``--target 99`` for an option, ``target=99`` for a keyword."""
    return f"{name} {value}" if name.startswith("--") else f"{name}={value!r}"


COMMAND_NAMES = ArgumentNames("--input", "--target", "--baseline", "--x", "--layer", "--feed {name}={value}",
                              "--tolerance", "--y", "--feed")

AGGREGATES = ("mean", "abs", "squared", "variance")


@dataclass(frozen=True)
class RankedTargets:
    """Several classes per row in one call, each attributed as a target of its
    own: the ``count`` classes y scores highest for the row, best first
    (``top:K``), or every class in index order (``all``, ``count`` None)."""

    count: int | None

    def __str__(self) -> str:
        return "all" if self.count is None else f"top:{self.count}"


def ranked_targets(text: str, name: str) -> RankedTargets | None:
    """``top:K`` or ``all`` as a :class:`RankedTargets`; None for any other text
    (which the caller reads as it does); ``top:`` with no count of at least 1
    refused, naming ``name``."""
    if text == "all":
        return RankedTargets(None)
    if not text.startswith("top:"):
        return None
    count = text.removeprefix("top:")
    if not count.isdigit() or int(count) < 1:
        raise UsageError(f"{name} {text!r}: give top:K with K a whole number of classes, at least 1 (e.g. top:3)")
    return RankedTargets(int(count))


@dataclass(frozen=True)
class Noise:
    """SmoothGrad over any method: the attributions of ``samples`` copies of each
    row with Gaussian noise of ``sigma`` times the row's range (max - min), as the
    SmoothGrad paper and the saliency library scale it, joined by ``aggregate``:
    ``mean`` (SmoothGrad), ``abs`` (the mean of magnitudes: samples of opposite
    signs do not cancel), ``squared`` (the mean of squares,
    SmoothGrad-squared) or ``variance`` (VarGrad). ``seed`` makes them repeat bit for bit."""

    samples: int
    sigma: float
    aggregate: str = "mean"
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.samples, bool) or not isinstance(self.samples, int) or self.samples < 1:
            raise UsageError(f"Noise(samples={self.samples!r}): give a whole number of samples, at least 1")
        if not isinstance(self.sigma, (int, float)) or not 0 <= self.sigma < math.inf:
            raise UsageError(f"Noise(sigma={self.sigma!r}): give a scale of at least 0 (a fraction of each row's "
                             "range, e.g. 0.15)")
        if self.aggregate not in AGGREGATES:
            raise UsageError(f"Noise(aggregate={self.aggregate!r}): give one of {', '.join(AGGREGATES)}")

    def describe(self) -> str:
        return f"{self.samples} samples, sigma {self.sigma:g} of each row's range, {self.aggregate}"


def as_noise(noise: Any) -> "Noise | None":
    """``noise`` as a :class:`Noise`: one already, ``(samples, sigma)``, or None."""
    if noise is None or isinstance(noise, Noise):
        return noise
    if isinstance(noise, (tuple, list)) and len(noise) == 2:
        return Noise(*noise)
    raise UsageError(f"noise={noise!r}: give graphgrad.Noise(samples, sigma) or a pair (samples, sigma), e.g. "
                     "(50, 0.15)")


def positive_seconds(timeout: Any) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
        raise UsageError(f"timeout={timeout!r}: give a number of seconds above 0")
    return float(timeout)


@dataclass(frozen=True)
class RunOptions:
    """How a command runs a model, the same for ``check``, ``attribute`` and
    ``attack``: the tensors (``xs``: none, one or several x; ``y``), the values of
    other placeholders (``feeds``), which MetaGraphDef and checkpoint, the file's
    kind, whether ops the gate refuses may run, and how long all runs may take."""

    xs: tuple = ()
    y: str | None = None
    feeds: dict = field(default_factory=dict)  # placeholder name -> a number, a JSON list or a .npy path
    tags: str | None = None
    checkpoint: str | None = None
    kind: str | None = None
    allow_effects: bool = False
    timeout: float = DEFAULT_TIMEOUT
    names: "ArgumentNames" = COMMAND_NAMES  # how errors name x, y and the feeds: the command's options


@dataclass(frozen=True)
class AttributeOptions:
    """What an attribution takes besides the model and the rows: one typed object
    from the command (or the Python call) to the explainer."""

    method: Method
    x: str | None = None
    y: str | None = None
    target: Any = None  # an index for every row, "predicted", an array of one index per row, or RankedTargets
    allow_uncovered: bool = False
    allow_effects: bool = False
    kind: str | None = None
    tags: str | None = None
    checkpoint: str | None = None
    feeds: dict = field(default_factory=dict)  # placeholder name -> a number, a JSON list or a .npy path
    timeout: float = DEFAULT_TIMEOUT  # seconds all runs may take together
    noise: Noise | None = None  # SmoothGrad over the method
    layer: str | None = None  # Grad-CAM's layer (default: the last 4-D tensor on the path with a spatial size)
    tolerance: float | None = None  # a path integral's steps doubled until each row's completeness gap is under it
    max_steps: int | None = None  # ... or until a row takes this many (None: DEFAULT_MAX_STEPS)

    def __post_init__(self) -> None:
        if self.tolerance is not None and (isinstance(self.tolerance, bool) or not 0 < self.tolerance < 1):
            raise UsageError(f"tolerance={self.tolerance!r}: give the largest completeness gap to accept, a fraction "
                             "of f(x) - f(baseline) above 0 and below 1 (e.g. 0.01)")
        if self.max_steps is not None and (isinstance(self.max_steps, bool) or not isinstance(self.max_steps, int)
                                           or self.max_steps < 2):
            raise UsageError(f"max_steps={self.max_steps!r}: give a whole number of gradient evaluations, at least 2 "
                             "(the path's two ends)")
        if self.tolerance is None and self.max_steps is not None:
            raise UsageError(f"max_steps={self.max_steps}: it bounds the refinement to a tolerance, and none is given "
                             "(add tolerance=..., e.g. 0.01)")

    @property
    def budget(self) -> int:
        """Each row's budget of gradient evaluations under a tolerance."""
        return DEFAULT_MAX_STEPS if self.max_steps is None else self.max_steps

    @property
    def run(self) -> RunOptions:
        """How the model runs (the Python API keeps these as keywords of their own)."""
        return RunOptions((self.x,) if self.x else (), self.y, self.feeds, self.tags, self.checkpoint, self.kind,
                          self.allow_effects, self.timeout)


@dataclass
class RowCheck:
    """Completeness of one row: the attributions' sum against f(x) - f(baseline),
    and the gradient evaluations its path integral took (0 for the methods that take none)."""

    row: int
    attribution_sum: float
    output_difference: float
    steps: int = 0  # refined to a tolerance: the gradient evaluations the row took
    error: float = 0.0  # refined: the largest change of one attribution in the last round, or from the first
    # grid's every other point to all of it for a row met there (an error estimate)
    target: int | None = None  # with several targets a row (top:K, all): the class this check is of

    @property
    def gap(self) -> float:
        """|sum - (f(x) - f(baseline))| as a fraction of |f(x) - f(baseline)| (the
        absolute gap where that difference is 0)."""
        missing = abs(self.attribution_sum - self.output_difference)
        return missing / abs(self.output_difference) if self.output_difference else missing


@dataclass
class Refinement:
    """How a path integral refined to a tolerance ended: ``met`` (every row's gap
    under ``tolerance``) or a row's budget of ``max_steps`` gradient evaluations
    spent first; ``evaluations`` in all."""

    tolerance: float
    max_steps: int
    met: bool
    evaluations: int


@dataclass
class AttributionReport:
    model: str
    method: str
    x: str
    y: str
    target: int | None
    shape: tuple = ()
    targets: list = field(default_factory=list)  # one class per row (FILE.npy, predicted), or a list each (ranked)
    ranked: str = ""  # several targets a row, "top:K" or "all": the attributions are (rows, K, *row)
    noise: str = ""  # SmoothGrad's samples, sigma and aggregate, when the method is smoothed
    layer: str = ""  # Grad-CAM's layer
    rules: dict = field(default_factory=dict)  # op type -> the spec the method gives it, for those on the path
    uncovered: list = field(default_factory=list)  # op types on the path with neither a rule nor a pass-through
    completeness: list = field(default_factory=list)  # RowCheck, for methods with a baseline
    refinement: Refinement | None = None  # with a tolerance: how the steps were refined
    feeds: dict = field(default_factory=dict)  # --feed: tensor -> "given"
    training_flags: list = field(default_factory=list)  # boolean inputs left at a default of True
    batch: int | None = None  # the rows each run takes, where the graph fixes it
    notes: list = field(default_factory=list)  # x or y taken where a gradient written into the graph applies


def checked_rows(inputs: Any, dtype: Any, name: str) -> Any:
    """``inputs`` as an array of x's dtype, refused in one line if it is not one of
    numbers or holds NaN or infinity (every attribution of such a row is NaN)."""
    import numpy as np

    try:
        rows = np.asarray(inputs, dtype=dtype)
    except (TypeError, ValueError) as error:
        raise UsageError(f"{name} is not an array of numbers: {error}") from None
    refuse_not_finite(rows, name)
    return rows


def refuse_not_finite(array: Any, name: str) -> None:
    import numpy as np

    if array.dtype.kind in "fc" and not np.isfinite(array).all():
        where = np.argwhere(~np.isfinite(array))[0]
        raise UsageError(f"{name} holds NaN or infinity (first at index {where.tolist()}): every attribution of "
                         "its row would be NaN; give finite values")
