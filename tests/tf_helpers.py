"""Helpers for tests that run TensorFlow (imported only by those tests)."""

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow", reason="needs TensorFlow: pip install -e '.[test]'")
v1 = tf.compat.v1

import graphgrad  # noqa: E402
from conftest import run_cli  # noqa: E402


def graph_file(tmp_path, build, name="g.pb"):
    """The frozen GraphDef that ``build()`` makes in a new tf.Graph, written to ``tmp_path / name``."""
    graph = tf.Graph()
    with graph.as_default():
        build()
    path = tmp_path / name
    path.write_bytes(graph.as_graph_def().SerializeToString())
    return path


def load(path):
    """Import a GraphDef file into a new tf.Graph through graphgrad (registers gradients)."""
    graph = tf.Graph()
    with graph.as_default():
        graphgrad.import_graph_def(str(path), name="")
    return graph


def rewrite_and_load(tmp_path, source, *rule_args):
    """The user's route: graphgrad rewrite on the command line, then load and register."""
    out = tmp_path / "patched.pb"
    run_cli("rewrite", source, *rule_args, "-o", out)
    return load(out)


def gradients(graph, y, xs, feed, grad_ys=None):
    """Evaluate tf.gradients(y, xs) in a Session; None stays None."""
    with graph.as_default():
        tensor = lambda name: graph.get_tensor_by_name(name) if isinstance(name, str) else name  # noqa: E731
        xs = [tensor(x) for x in (xs if isinstance(xs, (list, tuple)) else [xs])]
        grads = v1.gradients(tensor(y), xs, grad_ys=grad_ys)
        fetch = [g for g in grads if g is not None]
        with v1.Session(graph=graph) as session:
            values = iter(session.run(fetch, {tensor(k): v for k, v in feed.items()}))
    return [None if g is None else next(values) for g in grads]


def assert_close(actual, expected):
    np.testing.assert_allclose(actual, np.asarray(expected, dtype=np.float32), rtol=1e-5, atol=1e-6)


def exported(model, path):
    """``model.export(path)``: quiet where Keras takes ``verbose`` (Keras 3), as it is (Keras 2)."""
    import inspect

    model.export(str(path), **({"verbose": False} if "verbose" in inspect.signature(model.export).parameters else {}))
