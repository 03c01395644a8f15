"""The exceptions graphgrad raises. All share one root, :class:`GraphgradError`.

Library code raises these; only the CLI turns them into a one-line message and an
exit code.
"""


class GraphgradError(Exception):
    """Root of every error graphgrad raises on purpose."""


class UsageError(GraphgradError):
    """The call itself is wrong (where to write, how a rule is spelt): exit code 2
    at the command line, like click's own usage errors."""


class ModelReadError(GraphgradError):
    """A model file or directory could not be read or recognised."""


class ModelWriteError(GraphgradError):
    """An output could not be written; nothing was left behind."""


class SpecError(GraphgradError, ValueError):
    """A gradient spec string is malformed or names an unknown gradient."""


class RegistryError(GraphgradError):
    """A gradient was registered twice, or under an invalid name."""


class SelectionError(GraphgradError):
    """A rule selects nothing, or rules contradict each other or the graph."""


class NothingSelectedError(SelectionError):
    """A rule selects no node of a model (``--allow-missing`` passes over such models)."""


class RuleSyntaxError(SelectionError, UsageError):
    """A rule is not spelt ``KEY=GRADIENT``."""


class TensorFlowMissingError(GraphgradError, ImportError):
    """TensorFlow is needed for this and is not installed."""


class UnresolvedGradientsError(GraphgradError):
    """A graph names gradients that no one in this process can provide."""


class UnroutedCallsWarning(UserWarning):
    """A built graph holds calls whose functions' overrides graph mode will ignore."""
