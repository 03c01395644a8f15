"""The attribution methods, a registry of five kinds (as :mod:`graphgrad.gradients.registry`
is for gradients), TensorFlow-free. Each entry names its kind, its parameters with
their defaults and bounds, the gradient rules it puts on op types, and what it
refuses; ``attribute --help``, the docs' table of covered op types and the error
for an unknown method are made from it.

Kinds, each computed its own way by the explainer (:mod:`graphgrad.tf.explainer`):
- gradient-rule: dy/dx under the method's rules, times x for the methods that say so;
- path-integral: the gradient integrated from a baseline to x (integrated gradients);
- reference-based: against a baseline or a background set (DeepLIFT, DeepSHAP,
  expected gradients);
- perturbation: y's drop when parts of x are changed, no gradient (occlusion);
- class-activation: a layer's activations weighted for the target (Grad-CAM, ...).
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError
from ..gradients.attribution import DEEPLIFT_OPS, LINEAR_LAYERS, MAX_POOLS, NONLINEARITIES, PRODUCTS
from ..gradients.masking import RELU_FAMILY
from ..gradients.spec import parse_spec, parse_stages

GRADIENT_RULE, PATH_INTEGRAL, REFERENCE_BASED = "gradient-rule", "path-integral", "reference-based"
PERTURBATION, CLASS_ACTIVATION = "perturbation", "class-activation"
KINDS = (GRADIENT_RULE, PATH_INTEGRAL, REFERENCE_BASED, PERTURBATION, CLASS_ACTIVATION)

PASS_ON_EPS = 1e-9  # eps_lrp_layers' rule at a nonlinearity: y / x, kept finite at x = 0
SIGNAL_TAKE_ALL = "signal_take_all"
GATED_PRODUCTS = (PRODUCTS, SIGNAL_TAKE_ALL)  # LRP's rule for gates: a product of two x-dependent tensors needs one


@dataclass(frozen=True)
class Param:
    """A method's parameter: a whole number or a number, at least ``minimum`` (and at most ``maximum``)."""

    name: str
    type: type
    default: Any
    minimum: float | None = None
    maximum: float | None = None

    def checked(self, method: str, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int if self.type is int else (int, float)):
            raise UsageError(f"--method {method}: {self.name} must be a {'whole ' if self.type is int else ''}"
                             f"number, got {value!r}")
        if self.minimum is not None and value < self.minimum:
            raise UsageError(f"--method {method}: {self.name} must be at least {self.minimum:g}, got {value}")
        if self.maximum is not None and value > self.maximum:
            raise UsageError(f"--method {method}: {self.name} must be at most {self.maximum:g}, got {value}")
        return self.type(value)


@dataclass(frozen=True)
class Method:
    """A method as one explainer runs it: its entry's kind, flags and rules, with
    its parameters' values (``name`` spells them, as the report shows it)."""

    name: str
    entry: str
    kind: str
    rules: tuple = ()  # (op types, spec text)
    times_input: bool = False  # times x (gradient x input, LRP), or x - baseline (DeepLIFT, IG)
    complete: bool = False  # needs a rule at every nonlinearity (refuses uncovered op types)
    kept: tuple = ()  # op types whose own gradient is the method's rule (LRP: Relu passes relevance on)
    values: tuple = ()  # (parameter, value)

    def value(self, name: str) -> Any:
        return dict(self.values)[name]


@dataclass(frozen=True)
class MethodEntry:
    name: str
    kind: str
    summary: str
    params: tuple = ()
    rules: Callable[[dict], tuple] = lambda values: ()
    times_input: bool = False
    complete: bool = False
    kept: tuple = ()
    refuses: str = ""  # what it refuses, beyond bad parameters
    settle: Callable[[dict], dict] = lambda values: values  # parameters that follow others (occlusion's stride)

    def signature(self) -> str:
        """``name(param=default, ...)``, or the bare name."""
        if not self.params:
            return self.name
        return f"{self.name}({','.join(f'{p.name}={p.default!r}' for p in self.params)})"

    def make(self, given: dict) -> Method:
        unknown = sorted(set(given) - {p.name for p in self.params})
        if unknown:
            raise UsageError(f"--method {self.name}: no parameter {', '.join(unknown)} (it takes "
                             f"{', '.join(p.name for p in self.params) or 'none'})")
        values = self.settle({p.name: p.checked(self.name, given.get(p.name, p.default)) for p in self.params})
        name = f"{self.name}({','.join(f'{k}={v!r}' for k, v in values.items())})" if values else self.name
        return Method(name, self.name, self.kind, self.rules(values), self.times_input, self.complete, self.kept,
                      tuple(values.items()))


def _eps_lrp(values: dict) -> tuple:
    spec = parse_spec(f"eps_lrp(eps={values['eps']!r})")
    return ((NONLINEARITIES + ("Softmax",), spec.canonical), GATED_PRODUCTS)


def _eps_lrp_layers(values: dict) -> tuple:
    # the nonlinearities pass the relevance on (y / x): eps is the layers' alone
    nonlinear = parse_spec(f"eps_lrp(eps={PASS_ON_EPS!r})")
    linear = parse_spec(f"eps_lrp_linear(eps={values['eps']!r})")
    return ((NONLINEARITIES + ("Softmax",), nonlinear.canonical),
            (LINEAR_LAYERS + ("DepthwiseConv2dNative",), linear.canonical), GATED_PRODUCTS)


def _alpha_beta(values: dict) -> tuple:
    alpha, beta = values.get("alpha", 1.0), values.get("beta", 0.0)
    return ((LINEAR_LAYERS, parse_spec(f"lrp_alpha_beta(alpha={alpha!r},beta={beta!r})").canonical),)


def _occlusion_stride(values: dict) -> dict:
    return {**values, "stride": values["stride"] or values["window"]}


GUIDED = lambda values: ((RELU_FAMILY, "guided_relu"),)  # noqa: E731
DEEPLIFT = lambda values: ((DEEPLIFT_OPS, "deeplift"),)  # noqa: E731
BATCHED_WITH_BASELINE = ("an x without a batch axis, and an odd fixed batch in a graph with function calls (each row "
                         "runs beside its baseline)")
LRP_KEPT = ("Relu",) + MAX_POOLS

ENTRIES = (
    MethodEntry("gradient", GRADIENT_RULE, "dy/dx (saliency)"),
    MethodEntry("grad_x_input", GRADIENT_RULE, "dy/dx times x", times_input=True),
    MethodEntry("integrated_gradients", PATH_INTEGRAL,
                "dy/dx on the straight path from the baseline to x, integrated, times x - baseline",
                (Param("steps", int, 50, 1),), times_input=True),
    MethodEntry("blur_ig", PATH_INTEGRAL, "dy/dx on the path from x to x blurred by a Gaussian, integrated (Blur IG; "
                "images)", (Param("max_sigma", float, 50.0, 1e-3), Param("steps", int, 100, 1),
                            Param("grad_step", float, 0.01, 1e-6)),
                refuses="inputs that are not images (N, H, W, C); a baseline (its path ends at the blurred row)"),
    MethodEntry("guided_ig", PATH_INTEGRAL, "dy/dx on a path from the baseline to x that moves the features of "
                "smallest gradient first, integrated (Guided IG)",
                (Param("steps", int, 200, 1), Param("fraction", float, 0.25, 1e-6, 1.0),
                 Param("max_dist", float, 0.02, 0.0, 1.0)),
                refuses="a layer; a tolerance (its path is chosen step by step)"),
    MethodEntry("xrai", PATH_INTEGRAL, "integrated gradients from a black and a white baseline (or the one given), "
                "ranked by image regions: each pixel the attribution density of the region that adds it (XRAI; "
                "images)", (Param("steps", int, 100, 2), Param("area_threshold", float, 1.0, 1e-6, 1.0)),
                refuses="inputs that are not images (N, H, W, C); a layer; a tolerance; noise; without "
                        "scikit-image, which it segments with"),
    MethodEntry("guided_backprop", GRADIENT_RULE, "dy/dx with ReLUs passing only positive gradients of positive "
                "inputs", rules=GUIDED),
    MethodEntry("deconvnet", GRADIENT_RULE, "dy/dx with ReLUs passing only positive gradients",
                rules=lambda values: ((RELU_FAMILY, "deconvnet"),)),
    MethodEntry("eps_lrp", GRADIENT_RULE, "epsilon-LRP by its rule at each nonlinearity, times x",
                (Param("eps", float, 1e-4),), _eps_lrp, True, True, refuses="op types on the path without a rule"),
    MethodEntry("eps_lrp_layers", GRADIENT_RULE, "epsilon-LRP by its rule at each linear layer, times x",
                (Param("eps", float, 1e-4),), _eps_lrp_layers, True, True,
                refuses="op types on the path without a rule"),
    MethodEntry("lrp_alpha_beta", GRADIENT_RULE, "LRP-alpha-beta at each linear layer, times x",
                (Param("alpha", float, 1.0), Param("beta", float, 0.0)), _alpha_beta, True, True, LRP_KEPT,
                refuses="op types on the path without a rule"),
    MethodEntry("lrp_zplus", GRADIENT_RULE, "LRP-z+ at each linear layer (alpha 1, beta 0), times x",
                rules=_alpha_beta, times_input=True, complete=True, kept=LRP_KEPT,
                refuses="op types on the path without a rule"),
    MethodEntry("deeplift", REFERENCE_BASED, "DeepLIFT's rescale rule against the baseline, times x - baseline",
                rules=DEEPLIFT, times_input=True, complete=True,
                refuses=f"op types on the path without a rule; {BATCHED_WITH_BASELINE}"),
    MethodEntry("deepshap", REFERENCE_BASED, "DeepLIFT against each row of a background set, averaged",
                rules=DEEPLIFT, times_input=True, complete=True,
                refuses=f"op types on the path without a rule; {BATCHED_WITH_BASELINE}"),
    MethodEntry("expected_gradients", REFERENCE_BASED, "integrated gradients over a background set, sampled",
                (Param("samples", int, 200, 1), Param("seed", int, 0)), times_input=True),
    MethodEntry("gradcam", CLASS_ACTIVATION, "a layer's activations weighted by their mean gradient (Grad-CAM)",
                refuses="a path without a 4-D layer after a convolution that a run can fetch"),
    MethodEntry("gradcam_pp", CLASS_ACTIVATION, "Grad-CAM++'s weights",
                refuses="a path without a 4-D layer after a convolution that a run can fetch"),
    MethodEntry("layercam", CLASS_ACTIVATION, "a layer's activations weighted by their own positive gradient "
                "(Layer-CAM)", refuses="a path without a 4-D layer after a convolution that a run can fetch"),
    MethodEntry("guided_gradcam", CLASS_ACTIVATION, "guided backpropagation times Grad-CAM's map", rules=GUIDED,
                refuses="a path without a 4-D layer after a convolution that a run can fetch"),
    MethodEntry("scorecam", CLASS_ACTIVATION, "a layer's maps weighted by the score of x masked with each",
                refuses="a path without a 4-D layer after a convolution that a run can fetch"),
    MethodEntry("occlusion", PERTURBATION, "y's drop where a window of x is set to value",
                (Param("window", int, 4, 1), Param("stride", int, 0, 0), Param("value", float, 0.0)),
                settle=_occlusion_stride),
)
REGISTRY = {entry.name: entry for entry in ENTRIES}

# Names users reach for, and what graphgrad calls them (or how it does it).
ALIASES = {
    "saliency": "gradient", "vanilla_gradient": "gradient", "vanilla": "gradient",
    "input_x_gradient": "grad_x_input", "gradient_x_input": "grad_x_input", "gradxinput": "grad_x_input",
    "ig": "integrated_gradients", "integrated_gradient": "integrated_gradients",
    "guided_backpropagation": "guided_backprop", "guided": "guided_backprop", "lrp": "eps_lrp",
    "epsilon_lrp": "eps_lrp", "shap": "deepshap", "deep_shap": "deepshap", "deep_lift": "deeplift",
    "grad_cam": "gradcam", "gradcam++": "gradcam_pp", "gradcampp": "gradcam_pp", "score_cam": "scorecam",
    "layer_cam": "layercam", "guided_grad_cam": "guided_gradcam", "expected_gradient": "expected_gradients",
}
# Names of what is an option here, not a method.
AS_OPTIONS = {
    "smoothgrad": "SmoothGrad is --noise N,SIGMA over any method (noise=(N, SIGMA) in Python), e.g. --method "
                  "gradient --noise 50,0.15",
    "smoothgrad_squared": "SmoothGrad-squared is --noise N,SIGMA --noise-aggregate squared over any method",
    "vargrad": "VarGrad is --noise N,SIGMA --noise-aggregate variance over any method",
}


@dataclass(frozen=True)
class Catalogue:
    """The registry as the command and the docs show it."""

    entries: tuple = field(default=ENTRIES)

    def signatures(self) -> list[str]:
        return [entry.signature() for entry in self.entries]

    def help_lines(self) -> list[str]:
        """One line per method: its signature, kind and what it computes."""
        width = max(len(signature) for signature in self.signatures())
        return [f"{entry.signature().ljust(width)}  {entry.kind}: {entry.summary}" for entry in self.entries]


CATALOGUE = Catalogue()


def parse_method(text: str, option: str = "--method") -> Method:
    """A method as ``--method`` spells it: ``deeplift``, ``eps_lrp(eps=0.01)``,
    ``integrated_gradients(steps=100)`` (the spec grammar; nothing is evaluated).
    ``option``: how an error names where the text came from."""
    stages = parse_stages(text)
    if len(stages) != 1:
        raise UsageError(f"{option} {text!r}: one method, e.g. {ENTRIES[0].signature()} or {ENTRIES[-1].signature()}")
    name, positional, keywords = stages[0]
    if positional:
        raise UsageError(f"{option} {text!r}: name its parameters, e.g. eps_lrp(eps=0.01)")
    entry = REGISTRY.get(name)
    if entry is None:
        raise UsageError(unknown_method(name, option))
    return entry.make(dict(keywords))


def unknown_method(name: str, option: str = "--method") -> str:
    """The error for a method name that is not one: what it is called here, or how
    graphgrad does it, or the close names, then every method."""
    import difflib  # only on this error path

    every = ", ".join(entry.name for entry in ENTRIES)
    key = name.lower()
    if key in AS_OPTIONS:
        return f"{option} {name}: not a method: {AS_OPTIONS[key]}"
    close = [ALIASES[key]] if key in ALIASES else difflib.get_close_matches(key, list(REGISTRY), n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    return f"{option} {name}: no such method{hint} The methods: {every}"
