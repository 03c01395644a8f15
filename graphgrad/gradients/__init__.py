"""The gradient library: built-in gradients, one family per module, and the
registry that also holds the gradients users declare with :func:`gradient`."""

from . import attribution, calls, masking, straight_through, surrogates, transforms  # noqa: F401  (they register themselves)
from .registry import REGISTRY, REPLACEMENT, TRANSFORM, USER, GradientDef, Param, gradient

__all__ = ["REGISTRY", "REPLACEMENT", "TRANSFORM", "USER", "GradientDef", "Param", "gradient"]
