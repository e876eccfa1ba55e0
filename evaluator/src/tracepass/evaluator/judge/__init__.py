"""The LLM judge (docs/judges.md, docs/graders.md): answer correctness (`llm_judge.py`)
with its verdict cache (`verdict_cache.py`), call budget (`call_budget.py`) and spend
(`spend.py`, tokens and cost); conversation judges (`conversation_judges.py`, reading
`_conversation_render.py`'s text with `_rubric_templates.py`'s built-in rubrics);
resolving a `module:attr` judge spec (`model_loading.py`); judge–human agreement
(`agreement.py`).

`from tracepass.evaluator.judge import LLMJudge, JudgeCache` are documented import paths
(docs/graders.md, README), so the package re-exports them. Inside the evaluator, import
from the modules.
"""

from tracepass.evaluator.judge.llm_judge import (
    DEFAULT_RUBRIC,
    DEFAULT_RUBRIC_VERSION,
    JudgeOutput,
    JudgeVerdict,
    LLMJudge,
    is_transient,
    neutralise,
)
from tracepass.evaluator.judge.verdict_cache import JudgeCache

__all__ = [
    "DEFAULT_RUBRIC",
    "DEFAULT_RUBRIC_VERSION",
    "JudgeCache",
    "JudgeOutput",
    "JudgeVerdict",
    "LLMJudge",
    "is_transient",
    "neutralise",
]
