"""What an importer returns: the reference side and, when the source recorded what an
agent actually did, the conversations to score offline (`tracepass evaluate --dataset`)."""

from __future__ import annotations

from dataclasses import dataclass

from tracepass.evaluator.models import Conversation, ReferenceSet

__all__ = ["ImportedDataset"]


@dataclass(frozen=True, slots=True)
class ImportedDataset:
    reference_set: ReferenceSet
    conversations: tuple[Conversation, ...] = ()
    # Parts of the source that could not be represented (e.g. ADK user-simulation cases),
    # one human-readable line each; callers log and count them.
    skipped: tuple[str, ...] = ()
