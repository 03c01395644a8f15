"""graphgrad: custom gradients for TensorFlow graphs that already exist.

File-level work (reading, inspecting, rewriting) never imports TensorFlow; the
runtime functions (:func:`register_gradients`, :func:`import_graph_def`,
:func:`override`) import it when called. Names are loaded on first use, so
``import graphgrad`` (and the command line) pay only for what they touch.
"""

import importlib

__version__ = "0.1.0"

# public name -> the module that defines it
_EXPORTS = {
    "jobs.api": ["FileResult", "OutputOptions", "rewrite_file", "rewrite_files", "summarize_file"],
    "edits.tensors": ["rename_functions"],
    "errors": [
        "GraphgradError", "ModelReadError", "ModelWriteError", "RegistryError", "SelectionError",
        "RuleSyntaxError", "SpecError", "TensorFlowMissingError", "UnresolvedGradientsError", "UnroutedCallsWarning",
        "UsageError",
    ],
    "gradients": ["REGISTRY", "gradient"],
    "gradients.user_modules": ["load_gradient_module"],
    "files.reading": ["read_model"],
    "files.writing": ["serialize", "write_model"],
    "graph.model": ["Model", "iter_nodes"],
    "edits.rewrite": ["RewriteOptions", "RewriteReport", "apply_rules"],
    "edits.apply": ["rewrite_model"],
    "tf.runtime": ["Registration", "import_graph_def", "override", "register_gradients", "save"],
    "tf.explainer": ["Explainer"],
    "methods.options": ["AttributeOptions", "Noise"],
    "methods.registry": ["parse_method"],
    "jobs.unfreeze": ["freeze", "unfreeze"],
    "edits.unfreeze": ["UnfreezeOptions"],
    "edits.select": ["Rule", "parse_rule"],
    "names": ["ATTR"],
    "gradients.spec": ["GradientSpec", "attr_value_for", "parse_spec"],
    "edits.summary": ["ModelSummary", "classify_override", "summarize"],
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_MODULE_OF)


def __getattr__(name):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'graphgrad' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
