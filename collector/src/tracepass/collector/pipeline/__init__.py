"""The live pipeline behind the receivers: ingest and back-pressure (`ingest.py`),
evaluation scheduling (`scheduling.py`), crash recovery (`recovery.py`) and the offline
rebuild of conversations from files (`offline.py`)."""

from tracepass.collector.pipeline.ingest import Pipeline
from tracepass.collector.pipeline.offline import (
    Normalizer,
    assemble_offline,
    assemble_records,
    default_normalizer,
)
from tracepass.collector.pipeline.scheduling import (
    ConversationEvaluator,
    ResultInfo,
    ResultListener,
)

__all__ = [
    "ConversationEvaluator",
    "Normalizer",
    "Pipeline",
    "ResultInfo",
    "ResultListener",
    "assemble_offline",
    "assemble_records",
    "default_normalizer",
]
