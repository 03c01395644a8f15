import pytest

from graphgrad import REGISTRY, SpecError, parse_spec
from graphgrad.errors import RegistryError
from graphgrad.gradients.registry import GradientDef
from graphgrad.gradients.spec import spec_from_attr_value


@pytest.mark.parametrize(
    "text, name",
    [
        ("ste", "graphgrad/ste(clip=1.0)"),
        ("ste(clip=1)", "graphgrad/ste(clip=1.0)"),
        ("ste(1.0)", "graphgrad/ste(clip=1.0)"),
        (" ste ( clip = 1e0 ) ", "graphgrad/ste(clip=1.0)"),
        ("QuantizeGrad", "graphgrad/ste(clip=1.0)"),
        ("GuidedRelu", "graphgrad/guided_relu"),
        ("clip_value(-0.1, 0.1)", "graphgrad/clip_value(lo=-0.1,hi=0.1)"),
        ("clip_value(hi=0.1, lo=-0.1)", "graphgrad/clip_value(lo=-0.1,hi=0.1)"),
        ("identity|clip_norm(1.0)", "graphgrad/identity|clip_norm(max_norm=1.0)"),
        ("ste|scale(0.5)", "graphgrad/ste(clip=1.0)|scale(factor=0.5)"),
        ("QuantizeGrad|reverse", "graphgrad/ste(clip=1.0)|reverse(strength=1.0)"),
        ("noise(0.1)", "graphgrad/noise(stddev=0.1,seed=None)"),
        ("noise(0.1, seed=7)", "graphgrad/noise(stddev=0.1,seed=7)"),
        ("select", "graphgrad/select(index=0)"),
        ("scale(5)|select(1)", "graphgrad/scale(factor=5.0)|select(index=1)"),
        ("tf:Identity", "Identity"),
        ("tf:QuantizeGrad", "QuantizeGrad"),
    ],
)
def test_canonical_names(text, name):
    spec = parse_spec(text)
    assert spec.attr_value == name
    # The name alone rebuilds the same spec: the runtime relies on it.
    if name.startswith("graphgrad/"):
        assert spec_from_attr_value(name) == spec
        assert parse_spec(spec.canonical) == spec


def test_different_specs_never_share_a_name():
    texts = ["ste", "ste(2)", "approx_sign", "triangle", "identity", "zero", "scale(2)", "scale(-2)",
             "reverse", "reverse(2)", "clip_value(-1,1)", "clip_norm(1)", "select(0)", "select(1)",
             "identity|scale(2)", "tf:Identity", "swish_sign", "swish_sign(beta=2)", "guided_relu"]
    names = {parse_spec(t).attr_value for t in texts}
    assert len(names) == len(texts)


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty gradient spec"),
        ("   ", "empty gradient spec"),
        ("ste(", "ends early"),
        ("ste(clip=", "ends early"),
        ("ste(clip=1", "it ends early, expected ',' or ')'"),
        ("ste(clip 1)", "expected '=', found '1'"),
        ("clip_value(-1 1)", "expected ',' or ')', found '1'"),
        ("(1)", "expected a name, found '('"),
        ("ste)", "unexpected ')'"),
        ("ste;rm -rf /", "unexpected ';rm"),
        ("__import__('os')", "unexpected \"'os')\""),
        ("stee", "Did you mean ste?"),
        ("quantizegrad", "Did you mean QuantizeGrad?"),
        ("Identity", "write tf:Identity"),
        ("ste(clip=0)", "clip must be positive"),
        ("ste(x=1)", "no parameter 'x'"),
        ("ste(1, 2)", "takes 1 argument"),
        ("ste(clip=1, clip=2)", "given twice"),
        ("scale", "scale needs 'factor'"),
        ("select(1.5)", "whole number"),
        ("select(-1)", "must not be negative"),
        ("clip_value(1, -1)", "lo <= hi"),
        ("noise(None)", "cannot be None"),
        ("scale(2)|ste", "can only come first"),
        ("ste|identity", "can only come first"),
        ("QuantizeGrad(2)", "alias for ste(clip=1.0)"),
        ("tf:", "needs a registry name"),
        ("tf:graphgrad/ste", "instead of tf:"),
        ("ste(1e400)", "must be finite"),
        ("x" * 5000, "longer than"),
    ],
)
def test_bad_specs_say_what_is_wrong(text, message):
    with pytest.raises(SpecError) as error:
        parse_spec(text)
    assert message in str(error.value)


def test_duplicate_registration_names_the_first_place():
    first = REGISTRY.get("ste")
    with pytest.raises(RegistryError, match=r"registered twice: first at .*straight_through.py:\d+"):
        REGISTRY.add(GradientDef(name="ste", kind="user", function=len, origin="elsewhere.py:1"))
    assert REGISTRY.get("ste") is first


def test_registry_refuses_invalid_names_and_alias_clashes():
    with pytest.raises(RegistryError, match="invalid gradient name"):
        REGISTRY.add(GradientDef(name="my-grad", kind="user", function=len, origin="x.py:1"))
    with pytest.raises(RegistryError, match="already an alias"):
        REGISTRY.add(GradientDef(name="QuantizeGrad", kind="user", function=len, origin="x.py:1"))
