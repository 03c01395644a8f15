"""graphgrad: custom gradients for TensorFlow graphs that already exist.

File-level work (reading, inspecting, rewriting) never imports TensorFlow; the
runtime functions (:func:`register_gradients`, :func:`import_graph_def`,
:func:`override`) import it when called.
"""

from .api import FileResult, OutputOptions, rewrite_file, rewrite_files, summarize_file
from .errors import (
    GraphgradError,
    ModelReadError,
    ModelWriteError,
    RegistryError,
    SelectionError,
    SpecError,
    TensorFlowMissingError,
    UnresolvedGradientsError,
)
from .gradients import REGISTRY, gradient
from .io import load_gradient_module, read_model, serialize, write_model
from .model import Model, iter_nodes
from .rewrite import RewriteOptions, RewriteReport, apply_rules, rewrite_model
from .runtime import Registration, import_graph_def, override, register_gradients
from .select import Rule, parse_rule
from .spec import ATTR, GradientSpec, attr_value_for, parse_spec
from .summary import ModelSummary, classify_override, summarize

__version__ = "0.1.0"

__all__ = [
    "ATTR", "FileResult", "GradientSpec", "GraphgradError", "Model", "ModelReadError",
    "ModelSummary", "ModelWriteError", "OutputOptions", "REGISTRY", "Registration",
    "RegistryError", "RewriteOptions", "RewriteReport", "Rule", "SelectionError", "SpecError",
    "TensorFlowMissingError", "UnresolvedGradientsError", "apply_rules", "attr_value_for",
    "classify_override", "gradient", "import_graph_def", "iter_nodes", "load_gradient_module",
    "override", "parse_rule", "parse_spec", "read_model", "register_gradients", "rewrite_file",
    "rewrite_files", "rewrite_model", "serialize", "summarize", "summarize_file", "write_model",
]
