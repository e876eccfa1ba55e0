"""LLM judge (work in progress: the full implementation follows in the next commit)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class JudgeVerdict(BaseModel):
    model_config = ConfigDict(frozen=True)

    score: float | None
    passed: bool | None = None
    reasoning: str | None = None
    error: str | None = None


class LLMJudge:
    def __init__(self, model: Any) -> None:
        self.model = model

    async def judge(
        self, query: str | None, answer: str, expected: str | None, context: str | None = None
    ) -> JudgeVerdict:
        raise NotImplementedError
