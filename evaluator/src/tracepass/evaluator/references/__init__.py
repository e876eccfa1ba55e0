"""Reference sets: what agents *should* do. Native YAML/JSON/JSONL files plus importers for
Fair Forge datasets, Google ADK eval sets and τ²-bench task files (see docs/references.md)."""

from tracepass.evaluator.references.adk import import_adk
from tracepass.evaluator.references.dataset import ImportedDataset
from tracepass.evaluator.references.errors import ReferenceLoadError
from tracepass.evaluator.references.fairforge_import import import_fair_forge
from tracepass.evaluator.references.loader import (
    dump_reference_set_yaml,
    iter_reference_files,
    load_dataset,
    load_reference_file,
    load_reference_sets,
)
from tracepass.evaluator.references.reference_schema import parse_reference, parse_reference_set
from tracepass.evaluator.references.tau2_import import Tau2Import, import_tau2

__all__ = [
    "ImportedDataset",
    "ReferenceLoadError",
    "Tau2Import",
    "dump_reference_set_yaml",
    "import_adk",
    "import_fair_forge",
    "import_tau2",
    "iter_reference_files",
    "load_dataset",
    "load_reference_file",
    "load_reference_sets",
    "parse_reference",
    "parse_reference_set",
]
