"""The live pipeline behind the receivers (`live.py`): ingest and back-pressure
(`ingest.py`), evaluation (`evaluation.py`, scheduling in `scheduling.py`), the result
chain of components (`components.py`, the results store first: `results.py`), crash
recovery (`recovery.py`) and the offline rebuild of conversations from files
(`offline.py`)."""

from tracepass.collector.pipeline.components import (
    Component,
    ListenerComponent,
    ResultChain,
    ResultComponent,
)
from tracepass.collector.pipeline.gc_pause import batch_gc_pause
from tracepass.collector.pipeline.live import Pipeline
from tracepass.collector.pipeline.offline import (
    Normalizer,
    assemble_offline,
    assemble_records,
    default_normalizer,
)
from tracepass.collector.pipeline.results import ResultsWriter
from tracepass.collector.pipeline.review_rules import ReviewRules
from tracepass.collector.pipeline.sampling import ConversationSampler
from tracepass.collector.pipeline.scheduling import (
    ConversationEvaluator,
    ResultInfo,
    ResultListener,
)

__all__ = [
    "Component",
    "ConversationEvaluator",
    "ConversationSampler",
    "ListenerComponent",
    "Normalizer",
    "Pipeline",
    "ResultChain",
    "ResultComponent",
    "ResultInfo",
    "ResultListener",
    "ResultsWriter",
    "ReviewRules",
    "assemble_offline",
    "assemble_records",
    "batch_gc_pause",
    "default_normalizer",
]
