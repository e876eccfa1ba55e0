"""A scripted judge chat model for `tracepass serve` subprocesses (only the LLM is
fake): every call appends its prompt (the user message) as one JSON line to the file
named by TRACEPASS_TEST_JUDGE_LOG and answers a passing verdict whose reasoning carries
markup (the UI must escape it), with provider-style usage (`usage_metadata`) for a
model the price library knows, so the judge's spend is priced."""

from __future__ import annotations

import json
import os
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

MODEL = "gpt-4o-mini"
INPUT_TOKENS = 20_000
OUTPUT_TOKENS = 1_000
REASONING = "Every goal met <script>alert(1)</script>"
VERDICT = "```json\n" + json.dumps({"reasoning": REASONING, "score": 0.9}) + "\n```"


class ScriptedConversationJudge(BaseChatModel):
    @property
    def _llm_type(self) -> str:
        return "scripted-conversation-judge"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        with open(os.environ["TRACEPASS_TEST_JUDGE_LOG"], "a", encoding="utf-8") as log:
            log.write(json.dumps({"prompt": messages[-1].content}) + "\n")
        message = AIMessage(
            content=VERDICT,
            usage_metadata={
                "input_tokens": INPUT_TOKENS,
                "output_tokens": OUTPUT_TOKENS,
                "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
            },
            response_metadata={"model_name": MODEL},
        )
        return ChatResult(generations=[ChatGeneration(message=message)])


model = ScriptedConversationJudge()
