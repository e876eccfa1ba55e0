"""Reference matching in the live collector: the pure catalog (from the evaluator) plus
file watching (`ReferenceSource`)."""

from tracepass.collector.matching.watch import Loader, ReferenceSource
from tracepass.evaluator.references.matching import Match, ReferenceCatalog, normalize_query

__all__ = ["Loader", "Match", "ReferenceCatalog", "ReferenceSource", "normalize_query"]
