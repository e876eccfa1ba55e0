"""Conversation assembly: buffer span records per conversation, decide completion, and
rebuild `Conversation`s (see docs/collector.md for the rules)."""

from .assembler import Assembler, complete_all
from .buffer import unjoined_events
from .build import build_conversation
from .handover import END_TURNS_ATTRIBUTE, AddOutcome, Clock, Completed, Reason, TurnTarget

__all__ = [
    "END_TURNS_ATTRIBUTE",
    "AddOutcome",
    "Assembler",
    "Clock",
    "Completed",
    "Reason",
    "TurnTarget",
    "build_conversation",
    "complete_all",
    "unjoined_events",
]
