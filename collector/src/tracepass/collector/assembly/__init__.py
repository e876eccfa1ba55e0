"""Conversation assembly: buffer span records per conversation, decide completion, and
rebuild `Conversation`s (see docs/collector.md for the rules)."""

from tracepass.collector.assembly.inspection import InspectionReport, inspect_requests
from tracepass.collector.assembly.mapping_suggestion import suggest_mapping, suggestion_as_json
from tracepass.collector.assembly.span_shapes import SpanShapes
from tracepass.collector.assembly.timeline import DEFAULT_PRICES

from .assembler import Assembler, complete_all
from .buffer import unjoined_events
from .build import build_conversation
from .handover import END_TURNS_ATTRIBUTE, AddOutcome, Clock, Completed, Reason, TurnTarget

__all__ = [
    "DEFAULT_PRICES",
    "END_TURNS_ATTRIBUTE",
    "AddOutcome",
    "Assembler",
    "Clock",
    "Completed",
    "InspectionReport",
    "Reason",
    "SpanShapes",
    "TurnTarget",
    "build_conversation",
    "complete_all",
    "inspect_requests",
    "suggest_mapping",
    "suggestion_as_json",
    "unjoined_events",
]
