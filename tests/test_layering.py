"""The architecture, enforced: no TensorFlow outside the runtime, layers that
only look downwards, nothing evaluated, and file commands that run without TF."""

import ast
import os
import subprocess
import sys

import pytest

from conftest import ROOT, fixture

PACKAGE = os.path.join(ROOT, "graphgrad")

# Which graphgrad modules each layer may import (module names relative to the package).
ALLOWED = {
    "errors": set(),
    "protos": set(),
    "functions": set(),
    "gradients": {"errors", "functions", "gradients"},
    "spec": {"errors", "gradients"},
    "model": {"spec"},
    "wireformat": set(),
    "validity": {"protos", "wireformat"},
    "io": {"errors", "model", "protos", "validity"},
    "select": {"errors", "spec"},
    "traps": {"errors", "spec"},
    "rewrite": {"errors", "functions", "model", "select", "spec", "traps"},
    "summary": {"errors", "functions", "model", "spec"},
    "edit": {"errors", "functions", "model", "protos"},
    "embed": {"edit", "errors", "protos", "spec"},
    "surgery": {"edit", "embed", "errors", "model", "rewrite", "select", "spec"},
    "diff": {"model", "spec"},
    "batch": {"errors", "io"},
    "partial": {"protos", "spec", "validity", "wireformat"},
    "wire": {
        "functions", "model", "partial", "protos", "rewrite", "select", "spec", "summary", "traps", "validity",
        "wireformat",
    },
    "api": {"batch", "diff", "errors", "io", "model", "rewrite", "summary", "surgery", "wire", "wireformat"},
    "runtime": {"errors", "functions", "gradients", "io", "model", "rewrite", "select", "spec"},
    "effects": {"functions"},
    "check": {
        "edit", "effects", "embed", "errors", "functions", "gradients", "io", "model", "runtime", "spec", "summary",
        "surgery", "traps",
    },
    "cli": {
        "api", "batch", "check", "cli", "edit", "errors", "functions", "gradients", "io", "model", "rewrite", "select",
        "spec", "summary", "surgery",
    },
}


def modules():
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                yield os.path.relpath(path, PACKAGE), ast.parse(open(path).read(), path)


def layer_of(relative_path):
    return relative_path.split(os.sep)[0].removesuffix(".py")


def imported_layers(relative_path, tree):
    """graphgrad layers a module imports, resolved from relative imports."""
    package = os.path.dirname(relative_path).split(os.sep) if os.path.dirname(relative_path) else []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
            target = (base + (node.module.split(".") if node.module else []))
            if target:
                yield target[0]
            else:
                yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("graphgrad."):
            yield node.module.split(".")[1]


# The TF runtime layer, and the gradient helpers that need TF internals `tf` does not expose.
TENSORFLOW_MODULES = {
    "runtime.py", "check.py", os.path.join("gradients", "calls.py"), os.path.join("gradients", "common.py"),
}


def test_tensorflow_is_imported_only_inside_runtime_functions():
    for relative_path, tree in modules():
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(n == "tensorflow" or n.startswith("tensorflow.") for n in names):
                assert relative_path in TENSORFLOW_MODULES, f"{relative_path} imports TensorFlow"
        if relative_path in TENSORFLOW_MODULES:
            for node in tree.body:  # module level
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    module = getattr(node, "module", None) or node.names[0].name
                    assert not module.startswith("tensorflow"), f"{relative_path} imports TensorFlow at module level"


def test_layers_only_import_what_they_may():
    for relative_path, tree in modules():
        layer = layer_of(relative_path)
        if layer in ("__init__", "__main__"):
            continue
        for imported in imported_layers(relative_path, tree):
            assert imported in ALLOWED[layer] or imported == layer, f"{relative_path} imports {imported}"


def test_only_io_touches_files():
    for relative_path, tree in modules():
        if relative_path == "io.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
                pytest.fail(f"{relative_path} opens a file")


def test_nothing_is_evaluated():
    for relative_path, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in ("eval", "exec", "compile"), f"{relative_path} calls {node.func.id}"


def test_file_commands_run_without_tensorflow(tmp_path):
    """A tensorflow package that explodes on import: ops and rewrite must not notice."""
    poison = tmp_path / "poison" / "tensorflow"
    poison.mkdir(parents=True)
    (poison / "__init__.py").write_text("raise ImportError('graphgrad imported TensorFlow')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(poison.parent), ROOT]))
    commands = [
        ["ops", fixture("binary_net.pb"), fixture("saved_model"), fixture("functions.pb")],
        ["ops", "--json", fixture("custom_gradient.meta")],
        ["rewrite", fixture("binary_net.pb"), "--op", "Sign=ste|scale(2)", "-o", str(tmp_path / "o.pb")],
        ["rewrite", fixture("saved_model"), "--op", "Sign=ste", "-o", str(tmp_path / "sm")],
        ["gradients"],
        ["--help"],
    ]
    for args in commands:
        result = subprocess.run(
            [sys.executable, "-m", "graphgrad", *args], env=env, capture_output=True, text=True
        )
        assert result.returncode == 0, result.stderr
        assert "imported TensorFlow" not in result.stderr
    probe = subprocess.run(
        [sys.executable, "-c", "import sys, graphgrad, graphgrad.cli; print('tensorflow' in sys.modules)"],
        env=env, capture_output=True, text=True,
    )
    assert probe.stdout.strip() == "False", probe.stderr


def test_runtime_without_tensorflow_says_what_to_install(tmp_path):
    poison = tmp_path / "poison" / "tensorflow"
    poison.mkdir(parents=True)
    (poison / "__init__.py").write_text("raise ImportError('No module named tensorflow')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(poison.parent), ROOT]))
    code = (
        "import graphgrad\n"
        "try:\n"
        f"    graphgrad.register_gradients({fixture('binary_net.pb')!r})\n"
        "except graphgrad.TensorFlowMissingError as error:\n"
        "    print(error)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert "install one of tensorflow, tensorflow-cpu or tf-nightly" in result.stdout, result.stderr
