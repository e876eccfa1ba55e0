"""Simulated users for `tracepass probe --user-simulator MODULE:ATTR`.

A reference with a `user:` scenario is played by a simulator, turn by turn, against
the probe target: the simulator writes the user's next message from the transcript so
far, the target answers, until the user emits the stop marker (`###STOP###`, which the
simulator is told to write when its goal is met), `max_turns` user messages were sent,
or the agent failed (an `[agent error: …]` answer).

The simulator is half of the experiment: τ² found that up to 30 % of failed
trajectories were the simulated user's fault and that changing the simulator model
moved pass^1 by ~28 points. So it is pinned and recorded (`describe()`: model name,
settings, prompt version, in the run's metadata and the checkpoint) and audited per
trial (`audit`): a trial whose user strayed from its instructions is `simulator_fault`,
never a failure of the agent.

MODULE:ATTR is either
* a langchain-core `BaseChatModel` (or a zero-argument factory returning one), driven
  with this module's prompt (`PROMPT_VERSION`); langchain-core is imported only then;
* an object with `reply(scenario, reference_id, transcript) -> str` (sync or async) and
  `describe() -> dict` — a scripted simulator (examples/simulated/user.py) that needs
  no model.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import re
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tracepass.collector.app.probe.targets import NextQuery
from tracepass.evaluator.models import STOP_MARKER, UserScenario

__all__ = [
    "MAX_USER_MESSAGE_CHARS",
    "PROMPT_VERSION",
    "STOP_MARKER",
    "ChatModelSimulator",
    "SimulatedConversation",
    "SimulatorError",
    "UserSimulator",
    "audit",
    "load_simulator",
    "simulate",
]

PROMPT_VERSION = "tracepass-user-simulator/1"
# A user message longer than this is not a user following instructions (a simulator
# pasting its prompt, or looping): an audit problem, and the bound on what is sent.
MAX_USER_MESSAGE_CHARS = 4000
AGENT_ERROR_PREFIX = "[agent error"
_MANGLED_STOP = re.compile(r"#{2,}\s*stop|stop\s*#{2,}", re.IGNORECASE)

Message = tuple[str, str]  # ("user" | "agent", text)


class SimulatorError(ValueError):
    """A --user-simulator that cannot be used: exit 2 with this message."""


class UserSimulator(Protocol):
    def describe(self) -> dict[str, Any]: ...

    async def reply(
        self, scenario: UserScenario, reference_id: str, transcript: Sequence[Message]
    ) -> str: ...


# ----------------------------------------------------------------------------- chat model


def _system_prompt(scenario: UserScenario) -> str:
    lines = [
        "You are playing a USER talking to a customer-facing AI agent. You are not the "
        "agent; never answer for it, never invent what it said.",
        "Follow your instructions exactly; reveal information only when it is asked for "
        "or needed, one step at a time, in short messages.",
        f"When your goal is met, or it cannot be met, write {STOP_MARKER} alone.",
        "",
        "Instructions:",
        scenario.instructions,
    ]
    if scenario.persona:
        lines += ["", "Persona:", scenario.persona]
    return "\n".join(lines)


def _json_scalars(params: Mapping[str, Any]) -> dict[str, Any]:
    return {
        str(k): v
        for k, v in sorted(params.items())
        if isinstance(v, str | int | float | bool) or v is None
    }


class ChatModelSimulator:
    """A langchain-core chat model playing the user: the roles are swapped (the agent's
    answers are the model's human input, the user's earlier messages its own turns)."""

    def __init__(self, model: Any, spec: str) -> None:
        self.model = model
        self.spec = spec

    def describe(self) -> dict[str, Any]:
        params: Mapping[str, Any] = {}
        with contextlib.suppress(Exception):  # a model without identifying params
            params = dict(self.model._identifying_params)
        name = (
            getattr(self.model, "model_name", None)
            or getattr(self.model, "model", None)
            or params.get("model_name")
            or params.get("model")
            or type(self.model).__name__
        )
        return {
            "kind": "chat_model",
            "spec": self.spec,
            "model": str(name),
            "settings": _json_scalars(params),
            "prompt_version": PROMPT_VERSION,
        }

    async def reply(
        self, scenario: UserScenario, reference_id: str, transcript: Sequence[Message]
    ) -> str:
        from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

        messages: list[Any] = [SystemMessage(_system_prompt(scenario))]
        if not transcript:
            messages.append(HumanMessage("(The agent is waiting. Write your first message.)"))
        for role, text in transcript:
            messages.append(AIMessage(text) if role == "user" else HumanMessage(text))
        out = await self.model.ainvoke(messages)
        content = getattr(out, "content", out)
        if isinstance(content, list):  # content blocks
            content = "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
        return str(content)


class _Scripted:
    """An object with `reply` / `describe`, its `reply` made awaitable."""

    def __init__(self, obj: Any, spec: str) -> None:
        self.obj = obj
        self.spec = spec
        self._async = inspect.iscoroutinefunction(obj.reply)

    def describe(self) -> dict[str, Any]:
        info = dict(self.obj.describe()) if hasattr(self.obj, "describe") else {}
        info.setdefault("kind", "scripted")
        info.setdefault("model", type(self.obj).__name__)
        info.setdefault("settings", {})
        info.setdefault("prompt_version", None)
        info["spec"] = self.spec
        return info

    async def reply(
        self, scenario: UserScenario, reference_id: str, transcript: Sequence[Message]
    ) -> str:
        if self._async:
            return str(await self.obj.reply(scenario, reference_id, transcript))
        return str(self.obj.reply(scenario, reference_id, transcript))


def _import(spec: str) -> Any:
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise SimulatorError(f"--user-simulator {spec!r}: expected MODULE:ATTR")
    try:
        if module_name.endswith(".py") or "/" in module_name:
            from pathlib import Path

            from tracepass.collector.app.demo.examples import load_module

            path = Path(module_name)
            if not path.is_file():
                raise SimulatorError(f"--user-simulator {spec!r}: {path}: no such file")
            module: Any = load_module(path, f"tracepass_user_simulator_{path.stem}")
        else:
            if os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(module_name)
    except SimulatorError:
        raise
    except Exception as exc:
        raise SimulatorError(
            f"--user-simulator {spec!r}: cannot import {module_name!r}: {type(exc).__name__}: {exc}"
        ) from exc
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise SimulatorError(
                f"--user-simulator {spec!r}: {module_name!r} has no attribute {attr!r}"
            )
        target = getattr(target, part)
    return target


def _wrap(obj: Any, spec: str) -> UserSimulator | None:
    if hasattr(obj, "reply") and callable(obj.reply):
        return _Scripted(obj, spec)
    try:
        from langchain_core.language_models import BaseChatModel
    except ImportError:  # langchain-core is optional: only a chat model needs it
        return None
    if isinstance(obj, BaseChatModel):
        return ChatModelSimulator(obj, spec)
    return None


def load_simulator(spec: str) -> UserSimulator:
    """MODULE:ATTR (or file.py:ATTR) → a simulator; a factory is called once."""
    target = _import(spec)
    made = _wrap(target, spec)
    if made is not None:
        return made
    if not callable(target):
        raise SimulatorError(
            f"--user-simulator {spec!r}: {type(target).__name__} is neither a "
            "langchain-core chat model, a factory, nor an object with reply()"
        )
    try:
        produced = target()
    except Exception as exc:
        raise SimulatorError(
            f"--user-simulator {spec!r}: factory raised {type(exc).__name__}: {exc}"
        ) from exc
    made = _wrap(produced, spec)
    if made is None:
        raise SimulatorError(
            f"--user-simulator {spec!r}: factory returned {type(produced).__name__}, expected "
            "a langchain-core chat model or an object with reply()"
        )
    return made


# ----------------------------------------------------------------------------- conversation


@dataclass
class SimulatedConversation:
    user_messages: list[str] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    ended_by: str = "max_turns"  # user_stop | max_turns | agent_error | simulator_error
    simulator_error: str | None = None
    stopped_with: str | None = None  # text the user wrote with the stop marker

    def transcript(self) -> list[Message]:
        out: list[Message] = []
        for i, msg in enumerate(self.user_messages):
            out.append(("user", msg))
            if i < len(self.answers):
                out.append(("agent", self.answers[i]))
        return out


async def simulate(
    converse: Callable[[NextQuery], Awaitable[list[str]]],
    simulator: UserSimulator,
    scenario: UserScenario,
    reference_id: str,
    opening: str,
) -> SimulatedConversation:
    """Play one conversation: `converse(next_query)` is the target's turn loop (it asks
    `next_query(answers so far)` for each user message, None ends)."""
    sim = SimulatedConversation()

    async def next_query(answers: Sequence[str]) -> str | None:
        sim.answers = list(answers)
        if answers and answers[-1].startswith(AGENT_ERROR_PREFIX):
            sim.ended_by = "agent_error"
            return None
        if len(sim.user_messages) >= scenario.max_turns:
            sim.ended_by = "max_turns"
            return None
        if not sim.user_messages and opening:
            message = opening
        else:
            try:
                message = await simulator.reply(scenario, reference_id, sim.transcript())
            except Exception as exc:  # the simulator's failure, not the agent's
                sim.ended_by = "simulator_error"
                sim.simulator_error = f"{type(exc).__name__}: {exc}"
                return None
        if STOP_MARKER in message:
            sim.ended_by = "user_stop"
            sim.stopped_with = message.replace(STOP_MARKER, "").strip() or None
            return None
        message = message.strip()
        sim.user_messages.append(message[:MAX_USER_MESSAGE_CHARS])  # bounded, audited
        return sim.user_messages[-1]

    sim.answers = await converse(next_query)
    return sim


def audit(scenario: UserScenario, sim: SimulatedConversation) -> list[str]:
    """Deterministic checks that the simulated user followed its instructions; each
    problem found is one line. Empty: the simulator behaved."""
    problems: list[str] = []
    if sim.simulator_error is not None:
        problems.append(f"simulator failed: {sim.simulator_error}")
    if not sim.user_messages and sim.ended_by == "user_stop":
        problems.append("the user ended the conversation before saying anything")
    for i, msg in enumerate(sim.user_messages):
        if not msg:
            problems.append(f"user message {i + 1} is empty")
        elif len(msg) >= MAX_USER_MESSAGE_CHARS:
            problems.append(f"user message {i + 1} is {MAX_USER_MESSAGE_CHARS}+ characters")
        if _MANGLED_STOP.search(msg):  # the whole marker would have ended the conversation
            problems.append(f"user message {i + 1} carries a mangled stop marker")
    said = "\n".join(sim.user_messages).casefold()
    for phrase in scenario.must_not_say:
        if phrase.casefold() in said:
            problems.append(f"the user said {phrase!r}, which its instructions forbid")
    # A conversation the agent broke off says nothing about what the user would have said.
    if sim.ended_by in ("user_stop", "max_turns"):
        for phrase in scenario.must_say:
            if phrase.casefold() not in said:
                problems.append(f"the user never said {phrase!r}, which its instructions require")
    return problems
