"""Write graphgrad/tf/allowed_ops.py: the op types a command may run without
--allow-effects, those known to compute only on tensors in memory.

Two sources, both kept apart in the output so that a reviewer sees where each op
came from:

- the ops XLA's CPU JIT compiles, read from TensorFlow's own kernel registry once
  a jit-compiled function has run (tf2xla registers its kernels then). An XLA
  computation is a pure function of its inputs and the variables it reads and
  writes: it cannot open a file, a socket or a process. Less the few XLA ops that
  talk to the host or to other devices (EXCLUDED_FROM_XLA);
- a short list of ops reviewed by hand (REVIEWED), which TensorFlow runs on the
  CPU only: graph inputs, TF1 variables and control flow, in-memory lookup tables,
  image and audio codecs on tensors, string arithmetic. Each group says why it is
  safe. Not on it, whatever their use: anything that names a file or an address
  (readers, datasets, savers other than the model's own restore, summaries
  writers, printing to a stream, proto descriptors, samplers with a vocabulary
  file, ImmutableConst), queues and staging areas (they wait on producers),
  Python callbacks, Abort, TPU and distributed ops.

Run with the TensorFlow whose list you want (the version is recorded):

    python scripts/make_allowed_ops.py

tests/test_allowed_ops.py runs it again and compares, where the installed
TensorFlow is the recorded one.
"""

import os
import sys

EXCLUDED_FROM_XLA = {
    # talk to the host or another device, or run code XLA does not see
    "XlaSend": "sends a tensor to the host or another device",
    "XlaRecv": "receives a tensor from the host or another device",
    "XlaCustomCall": "calls a registered native function",
    "XlaCustomCallV2": "calls a registered native function",
    "XlaCallModule": "runs a serialized StableHLO module, which may hold host callbacks",
    "CollectiveReduceV2": "waits on the other members of a collective group",
    "CollectiveAssignGroupV2": "joins a collective group across devices",
    "XlaAllReduce": "reduces across replicas",
    "XlaReduceScatter": "reduces across replicas",
}

REVIEWED = {
    "graph inputs and pure plumbing": [
        "Placeholder", "PlaceholderV2", "GuaranteeConst", "DeepCopy", "InplaceAdd", "InplaceSub", "InplaceUpdate",
        "CheckNumericsV2", "RefIdentity", "ParallelConcat", "_SwitchN",
    ],
    "TF1 variables: in memory, read and assigned by the graph": [
        "VariableV2", "Variable", "VarHandleOp", "Assign", "AssignAdd", "AssignSub", "IsVariableInitialized",
        "DestroyResourceOp", "DisableCopyOnRead", "ScatterUpdate", "ScatterAdd", "ScatterSub", "ScatterNdUpdate",
        "ApplyGradientDescent", "ApplyMomentum", "ApplyAdam", "ApplyRMSProp", "ApplyAdagrad", "ApplyAdadelta",
        "ApplyFtrl", "ApplyFtrlV2", "ApplyCenteredRMSProp", "ApplyProximalAdagrad",
    ],
    "TF1 control flow": [
        "Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond", "RefEnter", "RefExit", "RefMerge",
        "RefSwitch", "RefNextIteration", "RefSelect",
    ],
    "in-memory lookup tables (a table read from a file is the model's own asset, allowed apart)": [
        "HashTable", "HashTableV2", "MutableHashTable", "MutableHashTableV2", "MutableHashTableOfTensorsV2",
        "MutableDenseHashTableV2", "InitializeTable", "InitializeTableV2", "LookupTableFind", "LookupTableFindV2",
        "LookupTableInsertV2", "LookupTableRemoveV2", "LookupTableSize", "LookupTableSizeV2", "LookupTableImportV2",
        "LookupTableExportV2",
    ],
    "TensorFlow's recurrent cells and lists, computed on the CPU": [
        "LSTMBlockCell", "LSTMBlockCellGrad", "BlockLSTM", "BlockLSTMV2", "BlockLSTMGrad", "BlockLSTMGradV2",
        "GRUBlockCell", "GRUBlockCellGrad", "CudnnRNN", "CudnnRNNV2", "CudnnRNNV3", "CudnnRNNBackprop",
        "CudnnRNNBackpropV2", "CudnnRNNBackpropV3", "CudnnRNNParamsSize", "TensorListResize",
        "TensorListScatterV2", "TensorListScatter", "TensorListScatterIntoExistingList", "TensorListConcat",
        "TensorListConcatLists",
    ],
    "images and audio decoded, encoded and transformed as tensors in memory": [
        "DecodeJpeg", "EncodeJpeg", "EncodeJpegVariableQuality", "DecodeAndCropJpeg", "ExtractJpegShape",
        "DecodePng", "EncodePng", "DecodeBmp", "DecodeGif", "DecodeImage", "DecodeRaw", "DecodeWav", "EncodeWav",
        "AudioSpectrogram", "Mfcc", "ResizeBicubic", "ResizeArea", "ScaleAndTranslate", "CropAndResize",
        "NonMaxSuppression", "NonMaxSuppressionV2", "NonMaxSuppressionV5", "CombinedNonMaxSuppression",
        "DrawBoundingBoxes", "DrawBoundingBoxesV2", "AdjustContrast", "SampleDistortedBoundingBox",
        "SampleDistortedBoundingBoxV2", "MaxPoolWithArgmax", "Dilation2D", "BatchNormWithGlobalNormalization",
    ],
    "arithmetic XLA does not compile": [
        "MatrixDeterminant", "LogMatrixDeterminant", "MatrixExponential", "MatrixLogarithm", "MatrixSquareRoot",
        "SelfAdjointEig", "Lu", "HistogramFixedWidth", "SegmentSum", "SegmentMean", "SegmentMax", "SegmentMin",
        "SegmentProd", "SparseSegmentSum", "SparseSegmentMean", "SparseSegmentSqrtN", "UnravelIndex",
        "RandomGamma", "RandomPoisson", "RandomPoissonV2", "StatelessRandomGammaV2",
        "StatelessRandomPoisson", "RaggedTensorToTensor", "RaggedRange", "RaggedGather", "SparseReshape",
        "SparseFillEmptyRows", "SparseTensorDenseMatMul", "SparseReorder", "SparseSlice", "SparseConcat",
        "SparseAdd", "SparseSoftmax", "QuantizeV2", "QuantizedConv2D", "QuantizedMatMul", "QuantizedRelu",
        "QuantizedRelu6", "QuantizedBiasAdd", "QuantizedAvgPool", "QuantizedMaxPool", "QuantizedReshape",
        "QuantizedConcat", "RequantizationRange", "Requantize", "_FusedMatMul", "_FusedDepthwiseConv2dNative",
    ],
    "strings and examples parsed in memory": [
        "StringJoin", "ShardedFilename", "ShardedFilespec",
        "StaticRegexFullMatch", "RegexFullMatch", "StaticRegexReplace", "RegexReplace", "AsString",
        "StringToNumber", "StringFormat", "StringLength", "StringLower", "StringUpper", "StringStrip", "Substr",
        "StringSplit", "StringSplitV2", "ReduceJoin", "StringToHashBucket", "StringToHashBucketFast",
        "StringToHashBucketStrong", "DecodeBase64", "EncodeBase64", "Fingerprint", "ParseExample",
        "ParseExampleV2", "ParseSingleExample", "ParseSequenceExample", "ParseSequenceExampleV2", "DecodeCSV",
        "DecodeCompressed", "UnicodeDecode", "UnicodeDecodeWithOffsets", "UnicodeEncode", "UnicodeTranscode",
    ],
    "optionals and maps in memory": [
        "OptionalFromValue", "OptionalNone", "OptionalHasValue", "OptionalGetValue", "EmptyTensorMap",
        "TensorMapInsert", "TensorMapLookup", "TensorMapErase", "TensorMapHasKey", "TensorMapSize",
        "TensorMapStackKeys",
    ],
}


def registered_ops(tf) -> set:
    """Every op type the installed TensorFlow registers."""
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session

    buffer = pywrap_tf_session.TF_GetAllOpList()
    return {op.name for op in op_def_pb2.OpList.FromString(pywrap_tf_session.TF_GetBuffer(buffer)).op}


def xla_compiled_ops(tf) -> set:
    """The ops XLA's CPU JIT has kernels for, once tf2xla has registered them."""
    from tensorflow.python.framework import kernels

    tf.function(lambda x: x * 2, jit_compile=True)(tf.constant(1.0))
    return {kernel.op for kernel in kernels.get_all_registered_kernels().kernel if kernel.device_type == "XLA_CPU_JIT"}


def module_text(tf) -> str:
    """The text of graphgrad/tf/allowed_ops.py for the installed TensorFlow."""
    registered = registered_ops(tf)
    xla = xla_compiled_ops(tf) - set(EXCLUDED_FROM_XLA)
    reviewed = {op for ops in REVIEWED.values() for op in ops}
    unknown = sorted(reviewed - registered)
    if unknown:
        sys.exit(f"reviewed ops this TensorFlow does not register: {', '.join(unknown)}")

    def listed(ops) -> str:
        return "".join(f"    {op!r},\n" for op in sorted(ops))

    return (
        '"""The op types a command runs without --allow-effects: those known to compute only on\n'
        "tensors in memory. Generated by scripts/make_allowed_ops.py (its doc says why each\n"
        'source is safe); do not edit by hand: change the script and run it again."""\n\n'
        f"TENSORFLOW_VERSION = {tf.__version__!r}\n\n"
        "# the ops XLA's CPU JIT compiles (TensorFlow's kernel registry), less those that talk to the\n"
        "# host or other devices\n"
        f"XLA_COMPILED = frozenset({{\n{listed(xla)}}})\n\n"
        "# reviewed by hand: graph inputs, TF1 variables and control flow, in-memory tables, codecs on\n"
        "# tensors, string arithmetic (see the script's groups)\n"
        f"REVIEWED = frozenset({{\n{listed(reviewed - xla)}}})\n\n"
        "ALLOWED = XLA_COMPILED | REVIEWED\n"
    )


def main() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    target = os.path.join(os.path.dirname(__file__), "..", "graphgrad", "tf", "allowed_ops.py")
    text = module_text(tf)
    with open(target, "w") as out:
        out.write(text)
    print(f"wrote {os.path.normpath(target)} from TensorFlow {tf.__version__}")


if __name__ == "__main__":
    main()
