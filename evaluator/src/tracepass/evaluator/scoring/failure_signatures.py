"""Deterministic failure signatures: *how* a conversation failed, as short stable strings
that group thousands of failing conversations into a few modes.

    wrong_argument:<tool>.<path>   an argument the reference's matcher rejected
    missing_tool:<tool>            an expected call that was not made
    unexpected_tool:<tool>         a call the reference did not expect
    order:<tool>                   a call out of the expected order
    tool_error:<tool>              a call that returned an error in a failing turn
                                   (<tool> is `argument_matcher` when a custom matcher broke)
    answer:<grader>                an answer grader said no (or could not decide)
    policy:<rule>                  a policy rule broken (forbidden_tool, order, …, grader)
    check:<learned check>:<tool>   a learned check failed on a call (`-`: the whole turn)
    judge:<name>                   a conversation judge said no
    incomplete:<reason>            evicted before completion / fewer turns than expected

Nothing is re-scored: everything comes from the stored result and the display pairing
of `explain.trajectory_rows` (which `explain.failure_analysis` computes once per failing
turn for the reasons and the signatures alike). Signatures are bounded: an argument path
is cut at depth 4 and every signature at 200 characters, so a hostile tool or key name
cannot make the index grow without limit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tracepass.evaluator.models import ConversationResult, Outcome, TurnResult

if TYPE_CHECKING:
    from tracepass.evaluator.scoring.explain import CallRow

__all__ = [
    "FAILING_OUTCOMES",
    "LEARNED_CHECKS",
    "MAX_PATH_DEPTH",
    "MAX_SIGNATURE_CHARS",
    "OTHER",
    "argument_path",
    "bound",
    "is_failing",
    "judge_failures",
    "result_signatures",
    "turn_signatures",
]

MAX_PATH_DEPTH = 4
MAX_SIGNATURE_CHARS = 200
OTHER = "other"
FAILING_OUTCOMES = frozenset({Outcome.FAIL, Outcome.ERROR, Outcome.INCOMPLETE})
# Violation rules that are learned checks (the rest are policy rules, or `grader`).
LEARNED_CHECKS = frozenset(
    {"unknown_tool", "arguments_schema", "unrecovered_tool_error", "repeated_call"}
)


_JUDGE_FIELD_NAMES = ("judges", "judgements", "conversation_judges")
# The fields the result model has (looked up once: `getattr` of a field a pydantic model
# lacks raises inside, several microseconds on every stored result).
_JUDGE_FIELDS = tuple(f for f in _JUDGE_FIELD_NAMES if f in ConversationResult.model_fields)


def is_failing(result: ConversationResult) -> bool:
    """Whether `result` gets signatures: a failing, errored or incomplete outcome, a
    policy verdict of fail on a conversation no reference scored, or a conversation
    judge's no."""
    return (
        result.outcome in FAILING_OUTCOMES
        or result.policy_outcome == Outcome.FAIL
        or bool(_JUDGE_FIELDS and judge_failures(result))
    )


def bound(signature: str) -> str:
    """One line, at most MAX_SIGNATURE_CHARS characters."""
    text = " ".join(signature.split())
    return text if len(text) <= MAX_SIGNATURE_CHARS else text[: MAX_SIGNATURE_CHARS - 1] + "…"


def argument_path(key: str, expected: Any, actual: Any) -> str:
    """`key`, extended into nested objects/arrays down to the first differing leaf,
    at most MAX_PATH_DEPTH parts deep."""
    parts = [key]
    while len(parts) < MAX_PATH_DEPTH:
        if isinstance(expected, Mapping) and isinstance(actual, Mapping):
            differing = [k for k in expected if k not in actual or expected[k] != actual[k]]
            differing += [k for k in actual if k not in expected]
            if not differing:
                break
            k = sorted(str(d) for d in differing)[0]
            parts.append(k)
            expected, actual = expected.get(k), actual.get(k)
        elif (
            isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual)
        ):
            index = next(
                (i for i, (e, a) in enumerate(zip(expected, actual, strict=True)) if e != a), None
            )
            if index is None:
                break
            parts.append(str(index))
            expected, actual = expected[index], actual[index]
        else:
            break
    return ".".join(parts)


def turn_signatures(turn: TurnResult, rows: Sequence[CallRow] | None) -> list[str]:
    """The signatures of one turn that is not correct; `rows` its trajectory rows (None:
    tools not wrong)."""
    out: list[str] = []
    if turn.tool_error:
        out.append("tool_error:argument_matcher")
    for row in rows or ():
        if row.status == "missing" and row.expected is not None:
            out.append(f"missing_tool:{row.expected.name}")
        elif row.status == "extra" and row.actual is not None:
            out.append(f"unexpected_tool:{row.actual.name}")
        elif row.status == "arguments" and row.actual is not None:
            name = row.actual.name
            for d in row.diffs:
                out.append(f"wrong_argument:{name}.{argument_path(d.key, d.expected, d.actual)}")
            if not row.diffs:
                out.append(f"wrong_argument:{name}")
        if row.out_of_order and row.actual is not None:
            out.append(f"order:{row.actual.name}")
    for call in turn.tool_calls:
        if call.error:
            out.append(f"tool_error:{call.name}")
    if turn.answer_correct is False or turn.answer_error:
        graders = [g for g in turn.graders if g.passed is False or g.error]
        out.extend(f"answer:{g.grader}" for g in graders)
        if not graders:
            out.append("answer:answer")
    for v in turn.violations:
        if v.rule in LEARNED_CHECKS:
            tool = "-"
            if v.tool_call is not None and 0 <= v.tool_call < len(turn.tool_calls):
                tool = turn.tool_calls[v.tool_call].name
            out.append(f"check:{v.rule}:{tool}")
        else:
            out.append(f"policy:{v.rule}")
    return out


def judge_failures(result: ConversationResult) -> list[str]:
    """Names of the conversation judges that said no. The hook for conversation judges:
    any `judges`/`judgements` entries the result carries with `passed` False (objects or
    mappings with a `name`/`judge`); none today when the result type has no such field."""
    names: list[str] = []
    fields = _JUDGE_FIELDS if isinstance(result, ConversationResult) else _JUDGE_FIELD_NAMES
    for field in fields:
        entries: Any = getattr(result, field, None)
        if isinstance(entries, Mapping):
            entries = list(entries.values())
        for entry in entries or ():
            get = (
                entry.get if isinstance(entry, Mapping) else lambda k, e=entry: getattr(e, k, None)
            )
            name = get("name") or get("judge")
            if get("passed") is False and isinstance(name, str) and name not in names:
                names.append(name)
    return names


def result_signatures(
    result: ConversationResult,
    turn_rows: Iterable[tuple[TurnResult, Sequence[CallRow] | None]],
    *,
    complete: bool | None = None,
) -> list[str]:
    """Distinct bounded signatures of `result` in a stable order (empty when it is not
    failing). `turn_rows`: each not-correct turn with its trajectory rows; `complete`:
    whether the conversation was complete (None: unknown)."""
    if not is_failing(result):
        return []
    found: list[str] = []
    if result.outcome == Outcome.INCOMPLETE:
        found.append("incomplete:evicted" if complete is False else "incomplete:missing_turns")
    for turn, rows in turn_rows:
        found.extend(turn_signatures(turn, rows))
    # Violations outside any turn's list (results of an older format keep them here).
    if not any(t.violations for t in result.turns):
        for v in result.violations:
            found.append(f"check:{v.rule}:-" if v.rule in LEARNED_CHECKS else f"policy:{v.rule}")
    found.extend(f"judge:{name}" for name in judge_failures(result))
    seen: dict[str, None] = {}
    for signature in found:
        seen.setdefault(bound(signature), None)
    return list(seen) or [OTHER]
