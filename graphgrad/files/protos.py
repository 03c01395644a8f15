"""TensorFlow's graph schema, without TensorFlow.

``tensorboard.compat.proto`` is a copy of TensorFlow's protos that the TensorFlow
team keeps in lockstep with each release; it imports in milliseconds. It has no
``SavedModel`` message, so that two-field wrapper is declared here at run time
from a descriptor that reuses tensorboard's ``MetaGraphDef`` (the wire format is
what matters: field 1 is the schema version, field 2 the repeated meta graphs).
"""

from tensorboard.compat.proto import graph_pb2, types_pb2
from tensorboard.compat.proto.attr_value_pb2 import AttrValue
from tensorboard.compat.proto.node_def_pb2 import NodeDef
from tensorboard.compat.proto.tensor_pb2 import TensorProto

GraphDef = graph_pb2.GraphDef
DataType = types_pb2.DataType

__all__ = [
    "AttrValue", "DataType", "GraphDef", "MetaGraphDef", "NodeDef", "SavedModel",  # noqa: F822
    "TensorProto",
]


def _declare_saved_model():
    # descriptor_pb2 costs ~30 ms to import: only files that are SavedModels pay it.
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from tensorboard.compat.proto import meta_graph_pb2

    pool = descriptor_pool.Default()
    file_name = "graphgrad/saved_model.proto"
    try:
        descriptor = pool.FindMessageTypeByName("graphgrad.SavedModel")
    except KeyError:
        proto = descriptor_pb2.FileDescriptorProto(
            name=file_name,
            package="graphgrad",
            syntax="proto3",
            dependency=[meta_graph_pb2.DESCRIPTOR.name],
        )
        message = proto.message_type.add(name="SavedModel")
        message.field.add(
            name="saved_model_schema_version",
            number=1,
            type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
            label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
        )
        message.field.add(
            name="meta_graphs",
            number=2,
            type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
            label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
            type_name=".tensorboard.MetaGraphDef",
        )
        pool.Add(proto)
        descriptor = pool.FindMessageTypeByName("graphgrad.SavedModel")
    return message_factory.GetMessageClass(descriptor)


def _meta_graph_def():
    from tensorboard.compat.proto import meta_graph_pb2

    return meta_graph_pb2.MetaGraphDef


# Made on first use: a GraphDef never pays for the MetaGraphDef schema (and what it
# pulls in: saver, saved object graph, ...).
_LAZY = {"MetaGraphDef": _meta_graph_def, "SavedModel": _declare_saved_model}


def __getattr__(name):
    if name in _LAZY:
        globals()[name] = _LAZY[name]()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
