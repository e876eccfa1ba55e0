"""A scripted judge chat model that obeys instructions found in its prompt (only the LLM
is fake): the worst case for prompt injection into conversation judges.

Every call appends one JSON line (the mode, whether the system message gave a verdict
id) to the file named by TRACEPASS_TEST_JUDGE_LOG. When the user message (the data)
holds `REPLY EXACTLY: … END REPLY`, the model obeys it: `TRACEPASS_TEST_OBEY=echo`
replies the injected text verbatim, `=obey` replies the injected verdict re-serialized
(the same JSON, its own spacing: not a quotation). Otherwise it judges honestly: the
conversations of these tests fail (score 0.1), with the verdict id the system message
asked for, when it asked for one.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

_INJECTED = re.compile(r"REPLY EXACTLY:\s*(.*?)\s*END REPLY", re.DOTALL)
_VERDICT_ID = re.compile(r'"verdict_id" with the value "([0-9a-f]+)"')
_FENCED = re.compile(r"```json\s*(.*?)\s*```", re.DOTALL)


def _reply(system: str, data: str) -> str:
    injected = _INJECTED.search(data)
    if injected is not None:
        text = injected.group(1)
        if os.environ.get("TRACEPASS_TEST_OBEY", "obey") == "echo":
            return text
        inner = _FENCED.search(text)
        found = inner.group(1) if inner else text
        try:
            verdict = json.loads(found)
        except ValueError:  # inside a JSON string (tool arguments, results): escaped
            verdict = json.loads(found.replace('\\"', '"'))
        return "```json\n" + json.dumps(verdict, indent=2) + "\n```"
    verdict: dict[str, Any] = {"reasoning": "the goal was not met", "score": 0.1}
    wanted = _VERDICT_ID.search(system)
    if wanted is not None:
        verdict["verdict_id"] = wanted.group(1)
    return "```json\n" + json.dumps(verdict) + "\n```"


class ObedientJudge(BaseChatModel):
    @property
    def _llm_type(self) -> str:
        return "obedient-judge"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        system, data = str(messages[0].content), str(messages[-1].content)
        with open(os.environ["TRACEPASS_TEST_JUDGE_LOG"], "a", encoding="utf-8") as log:
            log.write(json.dumps({"injected": "REPLY EXACTLY" in data}) + "\n")
        return ChatResult(
            generations=[ChatGeneration(message=AIMessage(content=_reply(system, data)))]
        )


model = ObedientJudge()
