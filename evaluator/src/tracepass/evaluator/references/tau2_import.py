"""τ²-bench task files (`tasks.json`) → a reference set played by a simulated user.

Each task becomes one reference with a `user:` scenario (docs/probe.md):

* `user_scenario.instructions` (text, or τ²'s structured form: domain, reason for call,
  known / unknown info, task instructions) → `user.instructions`; `persona` → persona;
* `ticket` → the opening query (absent: the simulated user opens);
* `evaluation_criteria.actions` (the agent's, `requestor: assistant`) → the expected
  tool calls over the whole conversation, in any order as τ²'s action check reads them:
  `compare_args: null` → every argument `exact`; a list → those arguments, `subset`
  (other arguments free); `[]` → arguments not checked;
* `communicate_info` → a `contains` grader on the end answer;
* `nl_assertions` → one conversation judge per task (its rubric lists the assertions;
  `applies_to` that reference), returned beside the set for `evaluation.conversation_judges`.

What needs τ²'s environment cannot be mapped, and is an error at its path (file:
`[3].initial_state`), never dropped silently: user-side actions and `user_tools`
(dual control), `env_assertions`, and an `initial_state` (pre-filled history or
database). `skip_unmappable=True` skips those tasks instead, one line each in `skipped`.
The database end state (τ²'s `DB` reward) is not compared: tracepass checks the
reference trajectory's tool calls instead (docs/references.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracepass.evaluator.models import (
    ConversationJudgeSpec,
    ExpectedTool,
    GraderSpec,
    JudgeAppliesTo,
    Reference,
    ReferenceSet,
    ReferenceTurn,
    UserScenario,
)
from tracepass.evaluator.references.errors import ReferenceLoadError, raise_collected

__all__ = ["Tau2Import", "import_tau2"]

Path = tuple[str | int, ...]

_STRUCTURED = (
    ("domain", "Domain"),
    ("reason_for_call", "Reason for call"),
    ("known_info", "Known info"),
    ("unknown_info", "Unknown info"),
    ("task_instructions", "Task instructions"),
)
_UNMAPPABLE_STATE = ("message_history", "initialization_actions", "initialization_data")


@dataclass(frozen=True, slots=True)
class Tau2Import:
    reference_set: ReferenceSet
    # One per task with nl_assertions: for the config's evaluation.conversation_judges.
    judges: tuple[ConversationJudgeSpec, ...] = ()
    skipped: tuple[str, ...] = ()


class _Unmappable(ReferenceLoadError):
    """A task part only τ²'s environment can check."""


def _err(source: str, path: Path, message: str, *, unmappable: bool = False) -> ReferenceLoadError:
    cls = _Unmappable if unmappable else ReferenceLoadError
    return cls(message, file=source, path=path)


def _text(v: Any, source: str, path: Path) -> str:
    if not isinstance(v, str) or not v.strip():
        raise _err(source, path, f"expected a non-empty string, got {type(v).__name__}")
    return v


def _instructions(v: Any, source: str, path: Path) -> str:
    if isinstance(v, str):
        return _text(v, source, path)
    if not isinstance(v, Mapping):
        raise _err(source, path, f"expected a string or a mapping, got {type(v).__name__}")
    lines = []
    for key, label in _STRUCTURED:
        value = v.get(key)
        if value is None:
            if key in ("reason_for_call", "task_instructions"):
                raise _err(source, (*path, key), "missing (τ² requires it)")
            continue
        lines.append(f"{label}: {_text(value, source, (*path, key))}")
    return "\n".join(lines)


def _action(a: Any, source: str, path: Path) -> ExpectedTool:
    if not isinstance(a, Mapping):
        raise _err(source, path, f"expected a mapping, got {type(a).__name__}")
    requestor = a.get("requestor", "assistant")
    if requestor != "assistant":
        raise _err(
            source,
            (*path, "requestor"),
            f"a {requestor!r} action (dual control: the user acts on the environment) "
            "cannot be mapped: tracepass checks the agent's tool calls",
            unmappable=True,
        )
    name = _text(a.get("name"), source, (*path, "name"))
    args = a.get("arguments")
    if not isinstance(args, Mapping):
        raise _err(source, (*path, "arguments"), "expected a mapping")
    compare = a.get("compare_args")
    if compare is None:
        return ExpectedTool(name=name, arguments=dict(args), argument_match="exact")
    if not isinstance(compare, list) or not all(isinstance(k, str) for k in compare):
        raise _err(source, (*path, "compare_args"), "expected a list of argument names or null")
    if not compare:
        return ExpectedTool(name=name, arguments=None)
    missing = [k for k in compare if k not in args]
    if missing:
        raise _err(source, (*path, "compare_args"), f"names {missing[0]!r}, which arguments lack")
    return ExpectedTool(name=name, arguments={k: args[k] for k in compare}, argument_match="subset")


def _judge_name(task_id: str) -> str:
    return ("tau2-" + re.sub(r"[^A-Za-z0-9_.-]", "_", task_id))[:64]


def _rubric(assertions: Sequence[str]) -> str:
    lines = [
        "Judge whether the agent's conversation satisfies EVERY assertion below "
        "(τ²-bench nl_assertions). Score 1.0 only if all hold, 0.0 if any fails.",
        "",
    ]
    lines += [f"- {a}" for a in assertions]
    return "\n".join(lines)


def _task(
    task: Any, k: int, source: str, set_name: str
) -> tuple[Reference, ConversationJudgeSpec | None]:
    path: Path = (k,)
    if not isinstance(task, Mapping):
        raise _err(source, path, f"expected a task mapping, got {type(task).__name__}")
    tid = task.get("id")
    if isinstance(tid, int) and not isinstance(tid, bool):
        tid = str(tid)
    task_id = _text(tid, source, (*path, "id"))
    scenario = task.get("user_scenario")
    if not isinstance(scenario, Mapping):
        raise _err(source, (*path, "user_scenario"), "missing (every τ² task has one)")
    state = task.get("initial_state")
    if isinstance(state, Mapping):
        for key in _UNMAPPABLE_STATE:
            if state.get(key):
                raise _err(
                    source,
                    (*path, "initial_state", key),
                    "cannot be mapped: a probe trial starts from an empty conversation "
                    "and tracepass does not set up the agent's environment",
                    unmappable=True,
                )
    if task.get("user_tools"):
        raise _err(
            source,
            (*path, "user_tools"),
            "user tools (dual control) cannot be mapped: the simulated user only talks",
            unmappable=True,
        )
    persona = scenario.get("persona")
    user = UserScenario(
        instructions=_instructions(
            scenario.get("instructions"), source, (*path, "user_scenario", "instructions")
        ),
        persona=None
        if persona is None
        else _text(persona, source, (*path, "user_scenario", "persona")),
    )
    ticket = task.get("ticket")
    query = "" if ticket is None else _text(ticket, source, (*path, "ticket"))
    criteria = task.get("evaluation_criteria") or {}
    if not isinstance(criteria, Mapping):
        raise _err(source, (*path, "evaluation_criteria"), "expected a mapping")
    cp: Path = (*path, "evaluation_criteria")
    if criteria.get("env_assertions"):
        raise _err(
            source,
            (*cp, "env_assertions"),
            "cannot be mapped: they query τ²'s environment, which tracepass does not run",
            unmappable=True,
        )
    tools: tuple[ExpectedTool, ...] | None = None
    actions = criteria.get("actions")
    if actions is not None:
        if not isinstance(actions, list):
            raise _err(source, (*cp, "actions"), "expected a list")
        tools = tuple(_action(a, source, (*cp, "actions", i)) for i, a in enumerate(actions))
    graders: tuple[GraderSpec, ...] = ()
    info = criteria.get("communicate_info")
    if info:
        if not isinstance(info, list):
            raise _err(source, (*cp, "communicate_info"), "expected a list of strings")
        words = [_text(s, source, (*cp, "communicate_info", i)) for i, s in enumerate(info)]
        graders = (GraderSpec.model_validate({"type": "contains", "keywords": words}),)
    judge = None
    assertions = criteria.get("nl_assertions")
    if assertions:
        if not isinstance(assertions, list):
            raise _err(source, (*cp, "nl_assertions"), "expected a list of strings")
        texts = [_text(s, source, (*cp, "nl_assertions", i)) for i, s in enumerate(assertions)]
        judge = ConversationJudgeSpec(
            name=_judge_name(task_id),
            rubric=_rubric(texts),
            applies_to=JudgeAppliesTo(reference_set=set_name, reference_id=task_id),
        )
    turn = ReferenceTurn(query=query, graders=graders, expected_tools=tools)
    return Reference(id=task_id, turns=(turn,), user=user, tags=("tau2",)), judge


def import_tau2(
    data: Any, *, source: str = "<tau2>", name: str = "tau2", skip_unmappable: bool = False
) -> Tau2Import:
    """A τ² `tasks.json` (a list of tasks) → references, conversation judges, skipped."""
    if not isinstance(data, list):
        raise ReferenceLoadError(
            f"expected a τ² task list (tasks.json), got {type(data).__name__}", file=source
        )
    refs: list[Reference] = []
    judges: list[ConversationJudgeSpec] = []
    skipped: list[str] = []
    errors: list[ReferenceLoadError] = []
    seen: dict[str, int] = {}
    for k, task in enumerate(data):
        try:
            ref, judge = _task(task, k, source, name)
        except _Unmappable as exc:
            if skip_unmappable:
                skipped.append(str(exc))
                continue
            errors.append(exc)
            continue
        except ReferenceLoadError as exc:
            errors.append(exc)
            continue
        if ref.id in seen:
            errors.append(
                _err(source, (k, "id"), f"duplicate task id {ref.id!r} (first at [{seen[ref.id]}])")
            )
            continue
        seen[ref.id] = k
        refs.append(ref)
        if judge is not None:
            judges.append(judge)
    raise_collected(errors)
    return Tau2Import(
        ReferenceSet(name=name, references=tuple(refs)), tuple(judges), tuple(skipped)
    )
