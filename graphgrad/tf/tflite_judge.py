"""The deployed model as the judge of its rebuilt graph: TensorFlow Lite's interpreter
(LiteRT's, where ``ai-edge-litert`` is installed; else TensorFlow's) running the
original ``.tflite`` on the rows the rebuilt graph runs: ``check --verify`` compares
every output, ``attack`` re-scores its adversarial images on it.

The interpreter runs ops TensorFlow Lite builds in; custom operators it cannot
resolve and Flex ops are refused by the rebuild before anything runs, so nothing a
file names is run here beyond TensorFlow Lite's own kernels.
"""

from dataclasses import dataclass
from typing import Any

from ..errors import GraphgradError, UsageError
from ..graph.model import TFLITE


@dataclass(frozen=True)
class Difference:
    """The largest difference between an output of the rebuilt graph and the interpreter's."""

    output: str
    largest: float
    relative: float  # to the interpreter's largest magnitude of that output

    def describe(self) -> str:
        return (f"against TensorFlow Lite's interpreter, on check's feeds: {self.output} differs by at most "
                f"{self.largest:.3g} ({self.relative:.3g} of its largest magnitude)")


def interpreted(path: str, feeds: list) -> list:
    """Every output the interpreter computes of ``feeds`` (one array per input, rows
    first), in the model's order; an integer input takes its values rounded and
    clamped to its type, as the rebuilt graph's placeholder does."""
    import numpy as np

    interpreter = _interpreter(path)
    given = interpreter.get_input_details()
    if len(given) != len(feeds):
        raise GraphgradError(f"{path}: the interpreter takes {len(given)} inputs, given {len(feeds)}")
    try:
        for detail, rows in zip(given, feeds):
            interpreter.resize_tensor_input(detail["index"], list(np.shape(rows)))
        interpreter.allocate_tensors()
        for detail, rows in zip(given, feeds):
            interpreter.set_tensor(detail["index"], _as_taken(np.asarray(rows), detail["dtype"]))
        interpreter.invoke()
    except (ValueError, RuntimeError) as error:
        raise GraphgradError(f"{path}: TensorFlow Lite's interpreter says: {str(error).strip().splitlines()[0]}") \
            from None
    return [interpreter.get_tensor(detail["index"]) for detail in interpreter.get_output_details()]


def refuse_unverifiable(model: Any) -> None:
    """--verify of a model that is not a TensorFlow Lite model's rebuilt graph: one line."""
    if model.rebuilt_from != TFLITE:
        raise UsageError(f"--verify compares a TensorFlow Lite model's rebuilt graph with TensorFlow Lite's "
                         f"interpreter; {model.path} is not a .tflite")


def verified(model: Any, run: Any, feed: dict) -> list["Difference"]:
    """Every output of the rebuilt graph of ``model`` (a :class:`~graphgrad.graph.model.Model`
    read from a .tflite), run by ``run`` on ``feed``, against the interpreter's on the same inputs."""
    from ..files.tflite_graph import rebuilt_ends

    inputs, outputs = rebuilt_ends(model.message)
    by_name = {tensor.name: value for tensor, value in feed.items()}
    missing = [name for name in inputs if f"{name}:0" not in by_name]
    if missing:
        raise UsageError(f"--verify runs every input of {model.path}; give {missing[0]} with --feed or --x")
    got = run.evaluate([run.graph.get_tensor_by_name(f"{name}:0") for name in outputs], feed)
    return differences(outputs, got, interpreted(model.path, [by_name[f"{name}:0"] for name in inputs]))


@dataclass(frozen=True)
class Rescored:
    """Accuracy on TensorFlow Lite's interpreter running the original .tflite: of the
    images, and of the attack's adversarial images (None, with why, where it cannot say)."""

    clean: float | None = None
    attacked: float | None = None
    why_not: str = ""
    output: str = ""  # the output of the .tflite whose argmax is the class


def rescored(model: Any, y: Any, images: Any, adversarial: Any, labels: Any) -> Rescored:
    """The attack's images and adversarial images judged by the interpreter: the
    class (argmax over the last axis) of y (a tensor of the rebuilt graph), if it is
    an output of the model, else of its one output of as many classes (the softmax
    of logits y, say), against ``labels``."""
    import numpy as np

    from ..files.tflite_graph import rebuilt_ends

    inputs, outputs = rebuilt_ends(model.message)
    if len(inputs) != 1:
        return Rescored(why_not=f"the .tflite takes {len(inputs)} inputs; the interpreter re-scores one-input models")
    y_name, classes = y.name.removesuffix(":0"), y.shape[-1]
    fitting = [name for name in outputs if y.graph.get_tensor_by_name(f"{name}:0").shape[-1] == classes]
    chosen = y_name if y_name in outputs else fitting[0] if len(fitting) == 1 and classes is not None else None
    if chosen is None:
        return Rescored(why_not=f"y ({y_name}) is not an output of the .tflite ({', '.join(outputs)}), and no one "
                        f"output has its {classes} classes")
    position = outputs.index(chosen)

    def accuracy(rows: Any) -> float:
        scores = interpreted(model.path, [rows])[position]
        return float(np.mean(np.argmax(scores.reshape(len(rows), -1), axis=-1) == labels))

    return Rescored(accuracy(images), accuracy(adversarial), output=chosen)



def differences(names: list, rebuilt: list, reference: list) -> list[Difference]:
    """Each output's largest difference, the rebuilt graph's against the interpreter's."""
    import numpy as np

    found = []
    for name, got, expected in zip(names, rebuilt, reference, strict=True):
        expected = np.asarray(expected, np.float64)
        largest = float(np.max(np.abs(np.asarray(got, np.float64) - expected), initial=0.0))
        scale = float(np.max(np.abs(expected), initial=0.0))
        found.append(Difference(name, largest, largest / scale if scale else largest))
    return found


def _as_taken(rows: Any, dtype: Any) -> Any:
    import numpy as np

    if np.issubdtype(dtype, np.integer):
        limits = np.iinfo(dtype)
        return np.clip(np.round(rows), limits.min, limits.max).astype(dtype)
    return rows.astype(dtype)


def _interpreter(path: str) -> Any:
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        from .runtime import tensorflow

        Interpreter = tensorflow().lite.Interpreter
    import warnings

    with warnings.catch_warnings():  # TensorFlow's interpreter warns that LiteRT's replaces it
        warnings.simplefilter("ignore")
        try:
            return Interpreter(model_path=path)
        except (ValueError, RuntimeError) as error:
            raise GraphgradError(f"{path}: TensorFlow Lite's interpreter cannot load it: "
                                 f"{str(error).strip().splitlines()[0]}") from None
