"""The architecture, enforced: no TensorFlow outside the runtime, layers that
only look downwards, nothing evaluated, and file commands that run without TF."""

import ast
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT, fixture

PACKAGE = os.path.join(ROOT, "graphgrad")

# The layers, bottom first: a module may import its own layer and those below it,
# never one above. Each folder of the package is a layer; the bottom one is the
# two modules at the top of the package that every layer shares.
LAYERS = [
    ("base", {"errors", "names"}),  # error types; the names every layer shares
    ("graph", {"graph"}),  # the data model: a loaded file's graphs and nodes, which functions they call
    ("files", {"files"}),  # graph files: schema, reading and atomic writing, fast readings, one validity
    ("gradients", {"gradients"}),  # the gradient library and the spec grammar
    ("methods", {"methods"}),  # attribution methods without TensorFlow: registry, options, NumPy algorithms
    ("readings", {"readings"}),  # a model opened for a job: one protocol, one factory, three readings
    ("edits", {"edits"}),  # rules to nodes, rewrites, insert/embed/reset, summaries, diffs
    ("tf", {"tf"}),  # the TensorFlow side: runtime, check
    ("jobs", {"jobs"}),  # file-level operations, batches
    ("cli", {"cli"}),  # the command line
]
RANK = {top: rank for rank, (_, tops) in enumerate(LAYERS) for top in tops}
# TensorFlow's private API, in one module that imports nothing of graphgrad: any
# layer may call it (lazily: see the TensorFlow tests below).
OPEN_TO_ALL = {("tf", "internals")}


def modules():
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                yield os.path.relpath(path, PACKAGE), ast.parse(open(path).read(), path)


def top_of(relative_path):
    """The package entry a module belongs to: its folder, or its own name at the top."""
    return relative_path.split(os.sep)[0].removesuffix(".py")


def imported_modules(relative_path, tree):
    """``(top, second)`` of each graphgrad module a module imports (``second``: the
    module within a folder, or None), resolved from relative imports."""
    package = os.path.dirname(relative_path).split(os.sep) if os.path.dirname(relative_path) else []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
            target = base + (node.module.split(".") if node.module else [])
            if target:
                for alias in node.names:
                    yield target[0], (target + [alias.name])[1]
            else:
                yield from ((alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("graphgrad."):
            target = node.module.split(".")[1:]
            yield target[0], (target + [None])[1]
        elif isinstance(node, ast.Import):  # import graphgrad.tf.loading
            for alias in node.names:
                if alias.name.startswith("graphgrad."):
                    target = alias.name.split(".")[1:]
                    yield target[0], (target + [None])[1]


# Where TensorFlow may be imported (inside functions): the TensorFlow side, and the
# gradient helpers that run inside TensorFlow's gradient machinery.
TENSORFLOW_MODULES = {
    os.path.join("tf", name) for name in os.listdir(os.path.join(PACKAGE, "tf")) if name.endswith(".py")
} | {os.path.join("gradients", "calls.py"), os.path.join("gradients", "common.py")}


def test_the_layers_are_the_folders():
    tops = {top_of(relative_path) for relative_path, _ in modules()} - {"__init__", "__main__"}
    assert tops == set(RANK), "every module belongs to one layer of LAYERS"


def test_design_md_names_every_module():
    """docs/design.md's tree names each module of every layer (a command's own
    module in cli/ is named by its command, in the commands' reference)."""
    design = open(os.path.join(ROOT, "docs", "design.md")).read()
    commands = {os.path.splitext(name)[0] for name in os.listdir(os.path.join(PACKAGE, "cli"))} - {
        "__init__", "options", "group", "exits", "render", "__pycache__"}
    unnamed = [relative_path for relative_path, _ in modules()
               if os.path.basename(relative_path) not in ("__init__.py", "__main__.py")
               and not (relative_path.startswith("cli") and os.path.splitext(os.path.basename(relative_path))[0]
                        in commands)
               and not re.search(rf"\b{re.escape(os.path.basename(relative_path))}\b", design)]
    assert unnamed == [], f"docs/design.md does not name {unnamed}"


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
        top = top_of(relative_path)
        if top in ("__init__", "__main__"):
            continue
        for imported, second in imported_modules(relative_path, tree):
            if (imported, second) in OPEN_TO_ALL:
                continue
            assert RANK[imported] <= RANK[top], (
                f"{relative_path} imports {imported}: layer {LAYERS[RANK[imported]][0]} is above "
                f"{LAYERS[RANK[top]][0]}"
            )


def _import_graph() -> dict:
    """``module -> {modules it imports}`` over graphgrad's modules, imports inside
    functions included, each module named by its path (``readings/scan``)."""
    known = {relative_path.removesuffix(".py") for relative_path, _ in modules()}
    graph: dict = {}
    for relative_path, tree in modules():
        module = relative_path.removesuffix(".py")
        graph[module] = set()
        for top, second in imported_modules(relative_path, tree):
            for candidate in (f"{top}/{second}", f"{top}/__init__", top):
                if candidate in known:
                    graph[module].add(candidate)
                    break
    return graph


def test_no_import_cycle():
    graph = _import_graph()
    state: dict = {}

    def visit(module, path):
        state[module] = "open"
        for imported in graph[module]:
            if imported == module or imported.endswith("__init__") and module.startswith(imported[:-8]):
                continue  # a package's own __init__ re-exports its modules
            assert state.get(imported) != "open", "import cycle: " + " -> ".join([*path, module, imported])
            if imported not in state:
                visit(imported, [*path, module])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [])


# What the layers above may import of the readings: the factory (the package),
# the protocols, the columns summaries read, and the plain nodes an edit adds.
READINGS_SEAM = {"readings/__init__", "readings/protocol", "readings/bodies", "readings/added"}


def test_the_readings_are_reached_through_the_factory_and_the_protocol():
    """No module above the readings names a reading's class: a new reading, or a
    module that opens one, is covered by the factory (and so by the per-reading
    test fixture, which patches the factory's one choice)."""
    for module, imported in _import_graph().items():
        if module.startswith("readings/"):
            continue
        reached = {name for name in imported if name.startswith("readings/")}
        assert reached <= READINGS_SEAM, f"{module} imports {sorted(reached - READINGS_SEAM)}"


def test_a_reading_steps_aside_only_inside_the_readings():
    """NotApplicable (and its kinds) is raised and caught in graphgrad/readings only,
    and caught there in one place: the factory."""
    names = {"NotApplicable", "Invalid", "SmallNodes"}
    catchers = set()
    for relative_path, tree in modules():
        for node in ast.walk(tree):
            mentioned = isinstance(node, ast.Name) and node.id in names
            if mentioned:
                assert relative_path.startswith("readings" + os.sep), f"{relative_path} uses {node.id}"
            if isinstance(node, ast.ExceptHandler) and node.type is not None:
                caught = {n.id for n in ast.walk(node.type) if isinstance(n, ast.Name)}
                if caught & names:
                    catchers.add(relative_path)
    assert catchers == {os.path.join("readings", "factory.py")}


def test_the_file_level_job_api_names_its_types():
    """graphgrad.jobs.api, what the CLI and library users call per file, says what
    each function takes and gives (TensorFlow's and protobuf's objects, which have
    no type stubs, are not among them)."""
    tree = ast.parse(open(os.path.join(PACKAGE, "jobs", "api.py")).read())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            annotations = [a.annotation for a in node.args.args + node.args.kwonlyargs] + [node.returns]
            assert all(a is not None and "Any" not in ast.unparse(a) for a in annotations), node.name


def test_the_exit_code_is_set_in_one_place():
    """Commands return their outcome; the group ends the process with its code."""
    for relative_path, tree in modules():
        if relative_path == os.path.join("cli", "group.py"):
            continue
        for node in ast.walk(tree):
            called = node.func if isinstance(node, ast.Call) else None
            named = (called.attr if isinstance(called, ast.Attribute) else called.id if isinstance(called, ast.Name)
                     else None)
            raised = isinstance(node, ast.Raise) and "SystemExit" in ast.dump(node.exc or ast.Pass())
            assert not raised and named not in ("exit", "SystemExit"), f"{relative_path} ends the process"


def test_the_base_and_the_private_api_module_import_nothing_of_graphgrad():
    for relative_path, tree in modules():
        if top_of(relative_path) in LAYERS[0][1] or relative_path == os.path.join("tf", "internals.py"):
            assert not list(imported_modules(relative_path, tree)), f"{relative_path} imports graphgrad"


def test_tensorflows_private_api_is_used_in_one_module():
    for relative_path, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tensorflow.python"):
                assert relative_path == os.path.join("tf", "internals.py"), (
                    f"{relative_path} imports {node.module}: add what it needs to graphgrad/tf/internals.py"
                )


# The modules that open files: reading them, writing them.
FILE_MODULES = {os.path.join("files", "reading.py"), os.path.join("files", "writing.py")}


def test_only_the_file_modules_open_files():
    for relative_path, tree in modules():
        if relative_path in FILE_MODULES:
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
    """A tensorflow package that explodes on import: ops, rewrite and convert (a
    TensorFlow Lite model rebuilt as a TensorFlow graph) must not notice."""
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
        ["convert", fixture("digits_float16.tflite"), "-o", str(tmp_path / "rebuilt.pb")],
        ["rewrite", fixture("digits_float16.tflite"), "--op", "Relu=identity", "-o", str(tmp_path / "lite.pb")],
        ["ops", fixture("digits_float16.tflite"), fixture("digits_int8.tflite")],
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
    # nor NumPy, whose BLAS threads would make a batch's workers come from a fork server
    probe = subprocess.run([sys.executable, "-c", "import sys, graphgrad.jobs.api, graphgrad.cli.rewrite, "
                            "graphgrad.cli.ops; print('numpy' in sys.modules)"],
                           env=env, capture_output=True, text=True)
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


# Exempt: click commands (click gives their parameters) and the library's gradients,
# whose signature is the registry's convention: (tf, op, grads, **parameters).
UNANNOTATED_BY_CONVENTION = {"command", "group", "builtin"}


def _decorators(node) -> set:
    names = set()
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        names.add(target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", ""))
    return names


def test_public_functions_are_annotated():
    missing = []
    for relative_path, tree in modules():
        def visit(body):
            for node in body:
                if isinstance(node, ast.ClassDef):
                    visit(node.body)
                elif isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                    if _decorators(node) & UNANNOTATED_BY_CONVENTION:
                        continue
                    arguments = [a for a in node.args.args + node.args.kwonlyargs if a.arg not in ("self", "cls")]
                    if node.returns is None or any(a.annotation is None for a in arguments):
                        missing.append(f"{relative_path}:{node.lineno} {node.name}")

        visit(tree.body)
    assert not missing, "public functions without annotations: " + ", ".join(missing)


def test_the_repository_root_holds_only_the_projects_files():
    """No stray file at the top (four once came from a paste into a shell)."""
    import subprocess

    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode:
        pytest.skip("not a git checkout")
    top = {path for path in listed.stdout.splitlines() if "/" not in path}
    assert top <= {".gitignore", "CHANGELOG.md", "LICENSE", "README.md", "pyproject.toml", "setup.cfg", "setup.py"}


def test_each_commands_summary_is_the_first_line_of_its_help():
    """`graphgrad --help` lists summaries without importing every command; each is
    the first paragraph of the command's own help, word for word, so they cannot drift."""
    import click

    from graphgrad.cli.group import COMMANDS, SUMMARIES, GraphgradGroup, main

    context = click.Context(main)
    for name in COMMANDS:
        command = GraphgradGroup().get_command(context, name)
        first = " ".join(command.help.strip().split("\n\n")[0].split())
        assert first == SUMMARIES[name], name


def test_each_commands_help_shows_examples_of_it():
    """Every command's --help ends its text with an Examples block of that command."""
    import click

    from graphgrad.cli.group import COMMANDS, GraphgradGroup, main

    context = click.Context(main)
    for name in COMMANDS:
        examples = GraphgradGroup().get_command(context, name).help.split("Examples:")
        assert len(examples) == 2 and f"graphgrad {name} " in examples[1], name


def _called_name(node) -> str:
    """``os.open``, ``importlib.import_module``, ``write_text``: what a call names (its dotted tail)."""
    function = node.func
    if isinstance(function, ast.Name):
        return function.id
    if isinstance(function, ast.Attribute):
        owner = function.value.id if isinstance(function.value, ast.Name) else ""
        return f"{owner}.{function.attr}" if owner else function.attr
    return ""


# Where graphgrad's own modules are imported by name at run time: the package's lazy
# public API, and the command line's lazy commands (modules of its own layer).
DYNAMIC_IMPORTERS = {"__init__.py", os.path.join("cli", "group.py")}


def test_no_module_is_imported_behind_the_layers_back():
    """importlib and __import__ would slip an import past the tests above: only the
    lazy API and the lazy commands use them, and nothing names TensorFlow in them
    (users' gradient files are loaded by path, in gradients/user_modules.py)."""
    for relative_path, tree in modules():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = _called_name(node)
            if name in ("__import__", "importlib.import_module", "import_module"):
                assert relative_path in DYNAMIC_IMPORTERS, f"{relative_path} imports by name ({name})"
                named = ast.unparse(node.args[0]) if node.args else ""
                assert "tensorflow" not in named, f"{relative_path} imports TensorFlow by name"


def test_only_the_file_layer_opens_and_writes_files_and_one_child_exits_at_once():
    """os.open and Path.write_text/write_bytes belong to files/ (atomic writes, no
    blocking opens); os._exit only to a child whose parent is gone (jobs/batch.py)."""
    for relative_path, tree in modules():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = _called_name(node)
            if name in ("os.open", "write_text", "write_bytes") or name.endswith((".write_text", ".write_bytes")):
                assert top_of(relative_path) == "files", f"{relative_path} calls {name}"
            if name == "os._exit":
                assert relative_path == os.path.join("jobs", "batch.py"), f"{relative_path} calls os._exit"


# Where a session runs: the run seam (a job's runs, under their deadline), and what
# loading, restoring variables and freezing run before or beside any job.
SESSION_RUNNERS = {os.path.join("tf", name) for name in ("run.py", "loading.py", "variables.py", "unfreeze.py")}
# The commands that run a model on the seam: none imports another.
RUNNING_COMMANDS = {"tf/check", "tf/explainer", "tf/attribute", "tf/attack"}


def test_one_seam_runs_the_sessions_of_check_attribute_and_attack():
    """session.run only in tf/run.py (and loading's own runs); the deadline child
    started only by the command line; the commands on the seam import none of
    one another (what they share is in tf/run.py, tf/targets.py, tf/loading.py)."""
    for relative_path, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "run":
                owner = ast.unparse(node.func.value)
                if "session" in owner:
                    assert relative_path in SESSION_RUNNERS, f"{relative_path} runs a session ({owner}.run)"
            if isinstance(node, ast.Call) and _called_name(node) == "run_until":
                assert top_of(relative_path) == "cli", f"{relative_path} starts the deadline's child"
    graph = _import_graph()
    for module in RUNNING_COMMANDS - {"tf/attribute"}:
        assert not graph[module] & RUNNING_COMMANDS - {module}, f"{module} imports {graph[module] & RUNNING_COMMANDS}"
    assert graph["tf/attribute"] & RUNNING_COMMANDS == {"tf/explainer"}  # attribute's entry is the explainer
