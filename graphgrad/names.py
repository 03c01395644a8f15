"""The names every layer shares: TensorFlow's override attribute, graphgrad's
namespace, the op types that call functions, the names TensorFlow writes itself.

One definition each, at the bottom of the package: it imports nothing.
"""

import re

# The NodeDef attribute that tf.gradients looks up instead of the op type
# (written by Graph.gradient_override_map).
ATTR = "_gradient_op_type"
ATTR_BYTES = ATTR.encode()
# The prefix of every override graphgrad writes: graphgrad/<canonical spec>.
NAMESPACE = "graphgrad/"
# A spec naming a gradient that TensorFlow (or the loading process) registers.
TF_PREFIX = "tf:"
# The override tf.custom_gradient writes; dangling where nothing registers it.
CUSTOM_GRADIENT = re.compile(r"CustomGradient-\d+\Z")
# The override tf.function gives its own call ops; not an override of a body.
FUNCTION_CALL_NAME = re.compile(r"(Stateful)?PartitionedCall-\d+\Z")
# Ops that call the function named by their attribute ``f``.
CALL_OPS = ("PartitionedCall", "StatefulPartitionedCall")
# Every op that runs functions of the graph: calls, and control flow v2's branches and loops.
FUNCTIONAL_OPS = frozenset(CALL_OPS) | {"If", "StatelessIf", "While", "StatelessWhile", "Case", "StatelessCase"}
# Control flow v1: a TF1 while loop's frame starts at these.
TF1_LOOP_ENTERS = ("Enter", "RefEnter")
# Ops whose output depends on their input's shape or dtype only, never its values:
# their gradient is None on purpose, and reading a tensor through one uses no value of it.
VALUE_INDEPENDENT = frozenset({"ZerosLike", "OnesLike", "Shape", "ShapeN", "Size", "Rank", "TensorListLength",
                               "TensorListElementShape", "TensorArraySizeV3", "VariableShape"})
# graphgrad's markers on the nodes it adds (see graphgrad.readings.scope): every
# such node names its group; the group's output names the tensor it stands in for,
# the spec it embeds, or the tensor a bypass sends its gradient to.
GROUP = "_graphgrad_group"
SOURCE = "_graphgrad_source"
EMBED_SPEC = "_graphgrad_embed"
BYPASS = "_graphgrad_bypass"
# On a placeholder rebuilt from a quantised TensorFlow Lite input: [low, high], the values it
# takes (beyond them the model clamps, and the gradient is zero), for check's random feeds
VALUE_RANGE = "_graphgrad_value_range"
# DeepLIFT's baseline twin: a graph whose batch is fixed runs the baselines through a
# renamed copy of itself (graphgrad.edits.twin), whose ops the rules read as references.
TWIN_PREFIX = "graphgrad_baseline/"
# What larq's binarized nets compute as Sign(x) + c, which a rewrite of Sign warns about.
SIGN = "Sign"
ADDS = ("Add", "AddV2")
# The signature a SavedModel serves by default (tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY).
SERVING_DEFAULT = "serving_default"
