"""A fake judge chat model for `tracepass serve` subprocesses: every call appends a line to
the file named by TRACEPASS_TEST_JUDGE_LOG, so a test counts the calls the collector made.
Only the LLM is fake; the collector, its judge, budget and scoring are real."""

from __future__ import annotations

import os
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

VERDICT = '```json\n{"score": 1.0, "reasoning": "correct"}\n```'


class CountingJudge(BaseChatModel):
    @property
    def _llm_type(self) -> str:
        return "counting-judge"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        with open(os.environ["TRACEPASS_TEST_JUDGE_LOG"], "a", encoding="utf-8") as log:
            log.write("call\n")
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=VERDICT))])


model = CountingJudge()
