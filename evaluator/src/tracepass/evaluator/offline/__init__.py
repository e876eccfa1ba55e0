"""Offline evaluation of recorded conversations: runs and summaries (`evaluation_run`),
CI gates (`gates`), comparing two versions (`version_comparison`, `pairwise`) and human
review (`human_review`). Needs no collector: callers pass conversations already rebuilt."""

__all__: list[str] = []
