"""What every framework generator does the same way: its command line, installing
instrumentors on a `harness.Capture`, describing the run (`meta`), checking the agent's
answers against the script, and (for frameworks faked at the HTTP level) answering
chat-completions requests with the script's steps.

Kept apart from `harness.py` (the shared scenario and file format, which the corpus test
relies on unchanged); like it, this runs inside each framework's own environment, so it
imports only the standard library and the harness at module level.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import harness

Generator = Callable[[str], Path]
Installer = Callable[[harness.Capture], Any]

#: The model name every scripted model reports (where the framework records one).
MODEL_NAME = "scripted-travel-model"


def run_cli(
    scenarios: Mapping[str, Generator], doc: str | None, argv: Sequence[str] | None = None
) -> int:
    """`generate.py --list | [SCENARIO...]` (every scenario when none is named); exit status.

    `doc` is the generator's docstring: its first paragraph describes the command.

    Several scenarios run one process each (this script again, once per name):
    instrumentations patch the framework globally (callback managers, trace processors,
    class methods, tracer singletons read from the environment once) and most cannot be
    taken off again, so a second scenario in the same process would see the first.
    """
    parser = argparse.ArgumentParser(description=(doc or "").strip().split("\n\n")[0])
    parser.add_argument("scenarios", nargs="*", metavar="SCENARIO")
    parser.add_argument("--list", action="store_true", help="print the scenario names")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(scenarios))
        return 0
    chosen = args.scenarios or list(scenarios)
    unknown = [name for name in chosen if name not in scenarios]
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(unknown)}; known: {', '.join(scenarios)}")
    if len(chosen) == 1:
        print(f"{chosen[0]}: wrote {scenarios[chosen[0]](chosen[0])}")
        return 0
    script = sys.modules["__main__"].__file__ or sys.argv[0]
    failed = [name for name in chosen if subprocess.call([sys.executable, script, name]) != 0]
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def instrument(
    capture: harness.Capture, factory: Callable[[], Any], *, logs: bool = False, **options: Any
) -> Any:
    """Instrument with `factory()` on the capture's providers; returns the instrumentor.

    Why explicit providers: an instrumentor that defaults to the global providers would
    miss a `Capture` created after it. `logs` also passes the logger provider, for
    instrumentations that emit GenAI events as log records; `options` go to
    `instrument(...)` as they are.
    """
    providers = {"tracer_provider": capture.tracer_provider}
    if logs:
        providers["logger_provider"] = capture.logger_provider
    instrumentor = factory()
    instrumentor.instrument(**providers, **options)
    return instrumentor


def installer(factory: Callable[[], Any], *, logs: bool = False, **options: Any) -> Installer:
    """`instrument` deferred: `install(capture)` instruments and returns the instrumentor."""

    def install(capture: harness.Capture) -> Any:
        return instrument(capture, factory, logs=logs, **options)

    return install


class _Together:
    """Instrumentors taken off together, the last installed first."""

    def __init__(self, instrumentors: list[Any]) -> None:
        self.instrumentors = instrumentors

    def uninstrument(self) -> None:
        for instrumentor in reversed(self.instrumentors):
            instrumentor.uninstrument()


def together(*installers: Installer) -> Installer:
    """One installer for several instrumentations used side by side."""

    def install(capture: harness.Capture) -> Any:
        return _Together([install_one(capture) for install_one in installers])

    return install


def run_instrumented(
    scenario: str, install: Installer, run: Callable[[], Sequence[str | None]]
) -> harness.Capture:
    """A new `Capture` with the instrumentation installed while `run` plays the turns.

    The instrumentation is taken off afterwards (so nothing later is recorded twice) and
    `run`'s answers are checked against the script; the capture is ready to `write`.
    """
    capture = harness.Capture()
    instrumentor = install(capture)
    try:
        answers = run()
    finally:
        instrumentor.uninstrument()
    check_answers(scenario, answers)
    return capture


def meta(
    framework: str,
    instrumentation: str,
    *,
    framework_package: str | None = None,
    instrumentation_package: str | None = None,
    **fields: Any,
) -> harness.Meta:
    """`harness.Meta` with both versions read from the installed distributions.

    Each package defaults to the name beside it (pass `instrumentation_package` when the
    instrumentation is described, e.g. a framework's built-in tracing); `fields` are the
    remaining `Meta` fields.
    """
    framework_package = framework_package or framework
    return harness.Meta(
        framework=framework,
        framework_version=harness.package_version(framework_package),
        instrumentation=instrumentation,
        instrumentation_version=harness.package_version(instrumentation_package or instrumentation),
        **fields,
    )


def per_turn_conversations() -> dict[str, Any]:
    """`Meta` fields for spans that carry no session id: each turn is its own conversation,
    whose id tracepass derives from the trace (so none is expected)."""
    return {"conversations": [[0], [1]], "conversation_id": None}


def check_answers(scenario: str, answers: Sequence[str | None]) -> None:
    """Stop when the agent's answers are not the script's: the run did not go as scripted."""
    expected = [turn.answer for turn in harness.TURNS]
    if list(answers) != expected:
        raise SystemExit(
            f"{scenario}: the agent answered {list(answers)!r}, the script said {expected!r}"
        )


def openai_tool_calls(
    step: harness.Step, tool_name: Callable[[str], str] = str
) -> list[dict[str, Any]]:
    """A step's tool calls in the OpenAI chat-completions shape (arguments as JSON text)."""
    return [
        {
            "id": c.id,
            "type": "function",
            "function": {"name": tool_name(c.name), "arguments": json.dumps(c.arguments)},
        }
        for c in step.tool_calls
    ]


def chat_completion_body(
    step: harness.Step, index: int, model: str, tool_name: Callable[[str], str] = str
) -> dict[str, Any]:
    """A script step as the OpenAI chat-completions API would answer it.

    `tool_name` maps a scenario tool name to the name the framework registered it under
    (Semantic Kernel qualifies functions with their plugin).
    """
    message: dict[str, Any] = {"role": "assistant", "content": step.text}
    if step.tool_calls:
        message["tool_calls"] = openai_tool_calls(step, tool_name)
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


def chat_completions_transport(model: str, tool_name: Callable[[str], str] = str) -> Any:
    """An `httpx.MockTransport` answering each chat-completions POST with the next step.

    Why at the HTTP level: some frameworks' instrumentations trace only their own model
    classes, so the fake sits under the framework's real OpenAI model (only the LLM
    endpoint is fake). Anything else is answered 404 so an unscripted request fails loudly.
    """
    import httpx

    steps = enumerate(harness.model_steps())

    def respond(request: httpx.Request) -> httpx.Response:
        if request.method != "POST" or not request.url.path.endswith("/chat/completions"):
            return httpx.Response(404, json={"error": {"message": f"unscripted {request.url}"}})
        index, step = next(steps)
        return httpx.Response(200, json=chat_completion_body(step, index, model, tool_name))

    return httpx.MockTransport(respond)
