"""Ops whose effects reach outside the graph: what a command that runs a graph
(``check``) refuses to run unless told.

Pure functions over NodeDefs (or live ops' NodeDefs) and a GraphDef's function
bodies: a call into a function that writes a file is such an op too.
"""

from collections.abc import Iterable

from ..graph.functions import functions_run

# File reads and listings: what a graph reads from the file system ends up in its
# outputs, or in TensorFlow's error messages, which a command prints. A file that
# maps a constant (ImmutableConst) is a read too. Readers of TF1 input queues and
# the file datasets read the files they are handed.
READ_OPS = frozenset({
    "ReadFile", "MatchingFiles", "MatchingFilesDataset", "ImmutableConst",
    "TextLineDataset", "TextLineDatasetV2", "TFRecordDataset", "TFRecordDatasetV2", "FixedLengthRecordDataset",
    "FixedLengthRecordDatasetV2", "ExperimentalCSVDataset", "CSVDataset", "CSVDatasetV2", "LoadDataset",
    "ExperimentalLMDBDataset", "LMDBDataset", "SqlDataset", "ExperimentalSqlDataset",
    "WholeFileReader", "WholeFileReaderV2", "TextLineReader", "TextLineReaderV2", "TFRecordReader",
    "TFRecordReaderV2", "FixedLengthRecordReader", "FixedLengthRecordReaderV2", "IdentityReader",
    "IdentityReaderV2", "LMDBReader", "ReaderRead", "ReaderReadV2", "ReaderReadUpTo", "ReaderReadUpToV2",
    "InitializeTableFromTextFile", "InitializeTableFromTextFileV2", "DecodeProtoV2", "LoadAndRemapMatrix",
    "GenerateVocabRemapping",
})

# File writes, checkpoint saves and restores (which read and write the file
# system), summaries, dataset snapshots and saves, Python callbacks (which run
# arbitrary code), debugger dumps and printing to files; and the reads above.
EFFECT_OPS = READ_OPS | frozenset({
    "WriteFile", "Save", "SaveV2", "SaveSlices", "MergeV2Checkpoints", "Restore", "RestoreV2", "RestoreSlice",
    "PyFunc", "PyFuncStateless", "EagerPyFunc",
    "WriteSummary", "WriteRawProtoSummary", "WriteScalarSummary", "WriteHistogramSummary", "WriteImageSummary",
    "WriteAudioSummary", "WriteGraphSummary", "ImportEvent", "CreateSummaryFileWriter", "CreateSummaryDbWriter",
    "FlushSummaryWriter", "CloseSummaryWriter",
    "DatasetToTFRecord", "ExperimentalDatasetToTFRecord", "SaveDataset", "SaveDatasetV2", "SnapshotDataset",
    "SnapshotDatasetV2", "DebugIdentity", "DebugIdentityV2", "DebugIdentityV3", "DebugNanCount",
    "DebugNumericSummary", "DebugNumericSummaryV2", "PrintV2",
})


def effects_in(node_defs: Iterable, bodies: dict) -> list[str]:
    """The ops among ``node_defs`` whose effects reach outside the graph, and those in
    the function bodies they run (``bodies``: name -> NodeDefs), transitively; each
    as ``NAME (OP)``, ``FUNCTION/NAME (OP)`` in a body."""
    found = [f"{node.name} ({node.op})" for node in node_defs if node.op in EFFECT_OPS]
    seen, pending = set(), sorted(functions_run(node_defs, bodies))
    while pending:
        name = pending.pop()
        if name in seen or name not in bodies:
            continue
        seen.add(name)
        found += [f"{name}/{node.name} ({node.op})" for node in bodies[name] if node.op in EFFECT_OPS]
        pending += sorted(functions_run(bodies[name], bodies) - seen)
    return found
