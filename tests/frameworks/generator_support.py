"""What every framework generator does the same way: its command line, the answer check,
and (for frameworks faked at the HTTP level) the chat-completions reply of a script step.

Kept apart from `harness.py` (the shared scenario and file format, which other generators
rely on unchanged); like it, this runs inside each framework's own environment, so it
imports only the standard library and the harness.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import harness


def check_answers(scenario: str, answers: Sequence[str]) -> None:
    """Stop when the agent's answers are not the script's: the run did not go as scripted."""
    expected = [turn.answer for turn in harness.TURNS]
    if list(answers) != expected:
        raise SystemExit(
            f"{scenario}: the agent answered {answers!r}, the script said {expected!r}"
        )


def chat_completion_body(
    step: harness.Step, index: int, model: str, tool_name: Callable[[str], str] = str
) -> dict[str, Any]:
    """A script step as the OpenAI chat-completions API would answer it.

    `tool_name` maps a scenario tool name to the name the framework registered it under
    (Semantic Kernel qualifies functions with their plugin).
    """
    message: dict[str, Any] = {"role": "assistant", "content": step.text}
    if step.tool_calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": tool_name(c.name), "arguments": json.dumps(c.arguments)},
            }
            for c in step.tool_calls
        ]
    return {
        "id": f"chatcmpl-scripted-{index}",
        "object": "chat.completion",
        "created": 1_700_000_000 + index,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if step.tool_calls else "stop",
            }
        ],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def run_cli(
    script: str,
    doc: str | None,
    scenarios: Sequence[str],
    generate: Callable[[str], Path],
    argv: Sequence[str] | None = None,
) -> None:
    """`generate.py [--list] [SCENARIO...]` (all scenarios when none is named).

    `doc` is the generator's docstring: its first line describes the command.

    Several scenarios run one process each (re-running `script`): instrumentations patch
    the framework globally, so a second one in the same process would see the first.
    """
    parser = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0])
    parser.add_argument("scenarios", nargs="*")
    parser.add_argument("--list", action="store_true", help="print the scenario names")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(scenarios))
        return
    chosen = args.scenarios or list(scenarios)
    unknown = [s for s in chosen if s not in scenarios]
    if unknown:
        raise SystemExit(f"unknown scenario(s) {unknown}; known: {', '.join(scenarios)}")
    if len(chosen) == 1:
        print(generate(chosen[0]))
        return
    for scenario in chosen:
        subprocess.run([sys.executable, script, scenario], check=True)
