"""Every committed real-framework corpus rebuilds into the conversations its script dictated.

For each `corpus/<scenario>.expected.json` the OTLP file beside it is read through the
same path `tracepass conversations` uses (OTLP file reader → normalization, logs
requests included → assembly) and compared turn by turn with the truth: grouping into
conversations (and the conversation id where the spans carry one), each turn's query
and answer, and every tool call's name, arguments, plain result and error text; for multi-agent
truths also each call's agent and each turn's agent steps (agent and kind, depth first).

Comparisons are as strict as the truth is meaningful: answers ignore surrounding
whitespace (Strands appends a newline); a result recorded as JSON or Python-literal
text equals the value it spells (frameworks hand tools' return values to the model as
text); an error matches when the expected text is a substring of the recorded one; the
result of a failing call is not compared (frameworks record the error text there or
nothing). Tool calls are matched by name and arguments, not start order, because
parallel calls may start in either order.

Known gaps are recorded, never hidden: a scenario the spans cannot rebuild at all is a
strict xfail (`KNOWN_GAPS`); one that is rebuilt except for named differences lists each
difference with its reason (`KNOWN_DIFFERENCES`), and the test fails both on any other
difference and on a listed one that no longer occurs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tracepass.collector.app.cli.sources import conversations_from_otlp, requests_from_otlp
from tracepass.collector.assembly.inspection import inspect_requests
from tracepass.collector.records import pyrepr
from tracepass.evaluator.models import AgentStep, Conversation, ToolCall

CORPUS = Path(__file__).resolve().parent / "corpus"
SCENARIOS = sorted(p.name.removesuffix(".expected.json") for p in CORPUS.glob("*.expected.json"))

# Scenarios whose spans do not (yet) let tracepass recover the truth, with why; they run
# as strict xfails so a fix shows up as an unexpected pass.
KNOWN_GAPS: dict[str, str] = {
    "autogen_native": "AutoGen's native spans carry no content (no query, answer, tool "
    "arguments or results on any span or event); only names, call ids and errors",
    "autogen_openinference": "no span carries the answer: OpenInference's AutoGen agent span "
    "records no output and it has LLM spans only for autogen-ext's OpenAI clients (queries, "
    "tool calls, results and errors are recovered)",
    "heldout_openai_otel_contrib_no_content": "content capture off (the openai-v2 default): "
    "no span or event carries a query, answer, tool argument or result; grouping, tool "
    "names, call ids and the number of calls are recovered",
    "openai_agents_otel_genai": "the OTel contrib OpenAI Agents instrumentation leaves model "
    "calls to the openai client instrumentation; with a non-OpenAI model no span carries "
    "the query or the answer",
}

# Scenarios that are recovered except for named differences the spans explain, with why.
# Each listed line must still be reported (so a fix shows up) and nothing else may be.
_AGENTO11Y_INGEST = (
    "agento11y's default protocol sends messages to Grafana's generation ingest, not OTLP: "
    "no span carries the query or the answer (protocol='otel' does: agento11y_langgraph_otel)"
)
_AGENTO11Y_ERROR_COPY = (
    "the failing tool's span carries no arguments, and without protocol='otel' no model "
    "span carries the request they could come from"
)
_AGENTO11Y_DEFAULT = {
    'conversation 0 turn 0: query None != "What\'s the weather in Paris and in Rome?"': (
        _AGENTO11Y_INGEST
    ),
    "conversation 0 turn 0: answer None != 'Paris is sunny (21 C) and Rome is rainy (15 C).'": (
        _AGENTO11Y_INGEST
    ),
    "conversation 0 turn 1: query None != 'Find me an economy flight from Paris to Rome "
    "under 200 EUR and book it.'": _AGENTO11Y_INGEST,
    "conversation 0 turn 1: answer None != 'Booked FL-123 (180 EUR), confirmation CONF-123. "
    "FL-404 was sold out.'": _AGENTO11Y_INGEST,
    "conversation 0 turn 1 tool call 1 (book_flight): no call with arguments {'flight_id': "
    "'FL-404'}; calls of that name: [({}, 'attribute'), ({'flight_id': 'FL-123'}, "
    "'attribute')]": _AGENTO11Y_ERROR_COPY,
    "conversation 0 turn 1: unexpected tool call book_flight({})": _AGENTO11Y_ERROR_COPY,
}
# Bedrock Agents' trace reports an action group's output as text only
# (`ActionGroupInvocationOutput` has `text` and `metadata`, no status): a tool that fails
# and lets the agent go on (a Lambda answering `responseState: REPROMPT`) reads as a
# success whose result is the error text.
_BEDROCK_AGENT_NO_STATUS = {
    "conversation 0 turn 1 tool call 1 (book_flight): error None lacks 'flight FL-404 is "
    "sold out'": "Bedrock Agents' action-group observation carries no status, only text"
}
# agento11y's OpenAI Agents run hooks (agento11y-openai-agents 0.21.0) read a tool's input
# from `ToolContext.tool_input`, which openai-agents sets only for agents used as tools: a
# function tool's arguments (`tool_arguments`) are on no span, and the model spans keep only
# text, not the requested calls. (The failing call's error reaches the hooks as the
# tool's result text, so it would read as a success too; it is hidden here behind the
# missing arguments.)
_AGENTO11Y_OA_NO_ARGUMENTS = (
    "agento11y's OpenAI Agents hooks record no function-tool arguments (they read "
    "ToolContext.tool_input, not tool_arguments) and no requested calls on model spans"
)
_AGENTO11Y_OA = {
    problem: _AGENTO11Y_OA_NO_ARGUMENTS
    for problem in (
        "conversation 0 turn 0 tool call 0 (get_weather): no call with arguments {'city': "
        "'Paris'}; calls of that name: [({}, 'attribute'), ({}, 'attribute')]",
        "conversation 0 turn 0 tool call 1 (get_weather): no call with arguments {'city': "
        "'Rome'}; calls of that name: [({}, 'attribute'), ({}, 'attribute')]",
        "conversation 0 turn 0: unexpected tool call get_weather({})",
        "conversation 0 turn 0: unexpected tool call get_weather({})",
        "conversation 0 turn 1 tool call 0 (search_flights): no call with arguments {'origin': "
        "'Paris', 'destination': 'Rome', 'filters': {'max_price': 200, 'cabin': 'economy'}}; "
        "calls of that name: [({}, 'attribute')]",
        "conversation 0 turn 1 tool call 1 (book_flight): no call with arguments {'flight_id': "
        "'FL-404'}; calls of that name: [({}, 'attribute'), ({}, 'attribute')]",
        "conversation 0 turn 1 tool call 2 (book_flight): no call with arguments {'flight_id': "
        "'FL-123'}; calls of that name: [({}, 'attribute'), ({}, 'attribute')]",
        "conversation 0 turn 1: unexpected tool call search_flights({})",
        "conversation 0 turn 1: unexpected tool call book_flight({})",
    )
}
# The hooks' hand-off span (`run_type=handoff`) names no destination and has no parent
# run, and every span names the hooks' one `agent_name`: no agent step can be told apart.
# (Each call's agent is hidden behind the missing arguments, as the error is above.)
_AGENTO11Y_OA_HANDOFF = {
    **_AGENTO11Y_OA,
    "conversation 0 turn 1: steps [] != [{'agent': 'travel-agent', 'kind': 'agent'}, "
    "{'agent': 'booking-agent', 'kind': 'handoff'}]": "agento11y's OpenAI Agents hand-off "
    "span names no destination agent and every span names the hooks' agent_name",
}
KNOWN_DIFFERENCES: dict[str, dict[str, str]] = {
    "logfire_anthropic": {
        "conversation 0 turn 1 tool call 1 (book_flight): error None lacks 'flight FL-404 is "
        "sold out'": "Logfire 5.4's Anthropic instrumentation writes the app's tool_result "
        "block into gen_ai.input.messages as a tool_call_response part without its "
        "is_error flag (request_data keeps only the model): no span carries the failure",
    },
    "agento11y_openai_agents_otel": _AGENTO11Y_OA,
    "agento11y_openai_agents_otel_handoff": _AGENTO11Y_OA_HANDOFF,
    "agento11y_langgraph": _AGENTO11Y_DEFAULT,
    "agento11y_langgraph_full": _AGENTO11Y_DEFAULT,
    "bedrock_openinference_invoke_agent": _BEDROCK_AGENT_NO_STATUS,
}

# What `tracepass inspect` must report for scenarios whose spans lack content (each
# warning, in order; the reason is the scenario's KNOWN_DIFFERENCES).
_AGENTO11Y_HINT = (
    "agento11y sends message content to Grafana's generation ingest, not to OTLP (its "
    "default grpc/http protocol, in every capture mode): switch the client to "
    'protocol="otel" (AGENTO11Y_PROTOCOL=otel with AGENTO11Y_ENABLE_EXPERIMENTAL_FEATURES=true) '
    "for queries, answers and model requests"
)
_AGENTO11Y_TURN_WARNINGS = ["no query found", "no answer found", _AGENTO11Y_HINT]
# The failing call's span carries no arguments (_AGENTO11Y_ERROR_COPY): a partial read.
_AGENTO11Y_NO_ARGUMENTS = "book_flight: no arguments read (a tool without parameters is fine)"
_AGENTO11Y_OA_WARNINGS = [
    f"{name}: no arguments read (a tool without parameters is fine)"
    for name in ("get_weather", "get_weather", "search_flights", "book_flight", "book_flight")
]
KNOWN_WARNINGS: dict[str, list[str]] = {
    # Every call of agento11y's OpenAI Agents hooks lacks its arguments (_AGENTO11Y_OA).
    "agento11y_openai_agents_otel": _AGENTO11Y_OA_WARNINGS,
    "agento11y_openai_agents_otel_handoff": _AGENTO11Y_OA_WARNINGS,
    "agento11y_langgraph": [
        *_AGENTO11Y_TURN_WARNINGS,
        _AGENTO11Y_NO_ARGUMENTS,
        *_AGENTO11Y_TURN_WARNINGS,
    ],
    "agento11y_langgraph_full": [
        *_AGENTO11Y_TURN_WARNINGS,
        _AGENTO11Y_NO_ARGUMENTS,
        *_AGENTO11Y_TURN_WARNINGS,
    ],
}


def _plain(value: Any) -> Any:
    """A result as the value it spells when it is JSON or Python-literal text."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            parsed = pyrepr.literal(value)
            if parsed is not pyrepr.NOT_PARSED:
                return parsed
    return value


def _same_result(actual: Any, expected: Any) -> bool:
    return actual == expected or _plain(actual) == expected


def _match_calls(actual: list[ToolCall], expected: list[dict[str, Any]], where: str) -> list[str]:
    problems: list[str] = []
    left = list(actual)
    for k, want in enumerate(expected):
        at = f"{where} tool call {k} ({want['name']})"
        found = next(
            (c for c in left if c.name == want["name"] and c.arguments == want["arguments"]), None
        )
        if found is None:
            same_name = [c for c in left if c.name == want["name"]]
            problems.append(
                f"{at}: no call with arguments {want['arguments']!r}; "
                f"calls of that name: {[(c.arguments, c.arguments_source) for c in same_name]!r}"
            )
            continue
        left.remove(found)
        if "agent" in want and found.agent != want["agent"]:
            problems.append(f"{at}: agent {found.agent!r} != {want['agent']!r}")
        if want["error"] is not None:
            if found.error is None or want["error"] not in found.error:
                problems.append(f"{at}: error {found.error!r} lacks {want['error']!r}")
        else:
            if found.error is not None:
                problems.append(f"{at}: unexpected error {found.error!r}")
            if not _same_result(found.result, want["result"]):
                problems.append(f"{at}: result {found.result!r} != {want['result']!r}")
    for extra in left:
        problems.append(f"{where}: unexpected tool call {extra.name}({extra.arguments!r})")
    return problems


def _flat_steps(steps: tuple[AgentStep, ...]) -> list[AgentStep]:
    """A turn's agent steps, depth first (multi-agent truths list them in that order)."""
    out: list[AgentStep] = []
    for step in steps:
        out.append(step)
        out.extend(_flat_steps(step.steps))
    return out


def compare(convs: list[Conversation], expected: dict[str, Any]) -> list[str]:
    """Every difference between the rebuilt conversations and the truth, one per line."""
    want_convs = expected["conversations"]
    shape = [len(c.turns) for c in convs]
    want_shape = [len(c["turns"]) for c in want_convs]
    if shape != want_shape:
        return [
            f"grouping: {len(convs)} conversation(s) of {shape} turns, expected {want_shape}"
            f" (ids {[c.id for c in convs]})"
        ]
    problems: list[str] = []
    for n, (conv, want) in enumerate(zip(convs, want_convs, strict=True)):
        if want["conversation_id"] is not None and conv.id != want["conversation_id"]:
            problems.append(f"conversation {n}: id {conv.id!r} != {want['conversation_id']!r}")
        for t, (turn, want_turn) in enumerate(zip(conv.turns, want["turns"], strict=True)):
            where = f"conversation {n} turn {t}"
            if (turn.query or "").strip() != want_turn["query"].strip():
                problems.append(f"{where}: query {turn.query!r} != {want_turn['query']!r}")
            if (turn.answer or "").strip() != want_turn["answer"].strip():
                problems.append(f"{where}: answer {turn.answer!r} != {want_turn['answer']!r}")
            problems += _match_calls(list(turn.tool_calls), want_turn["tool_calls"], where)
            if "steps" in want_turn:
                steps = [{"agent": s.agent, "kind": s.kind} for s in _flat_steps(turn.steps)]
                if steps != want_turn["steps"]:
                    problems.append(f"{where}: steps {steps!r} != {want_turn['steps']!r}")
    return problems


def _param(scenario: str) -> Any:
    gap = KNOWN_GAPS.get(scenario)
    marks = [pytest.mark.xfail(reason=gap, strict=True)] if gap else []
    return pytest.param(scenario, marks=marks, id=scenario)


@pytest.mark.parametrize("scenario", [_param(s) for s in SCENARIOS])
def test_corpus_rebuilds_the_scripted_conversations(scenario: str) -> None:
    expected = json.loads((CORPUS / f"{scenario}.expected.json").read_text())
    convs = conversations_from_otlp([CORPUS / f"{scenario}.otlp.jsonl"])
    problems = compare(convs, expected)
    known = KNOWN_DIFFERENCES.get(scenario, {})
    unexpected = [p for p in problems if p not in known]
    assert not unexpected, f"{scenario}:\n  " + "\n  ".join(unexpected)
    fixed = [p for p in known if p not in problems]
    assert not fixed, f"{scenario}: known differences no longer seen (remove them):\n  " + (
        "\n  ".join(fixed)
    )


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s not in KNOWN_GAPS])
def test_inspect_finds_nothing_misread(scenario: str) -> None:
    report = inspect_requests(requests_from_otlp([CORPUS / f"{scenario}.otlp.jsonl"]))
    warnings = [w for c in report.conversations for w in c.warnings] + [
        w for c in report.conversations for t in c.turns for w in t.warnings
    ]
    assert warnings == KNOWN_WARNINGS.get(scenario, [])
    assert report.warnings == []


def test_the_corpus_is_there() -> None:
    assert SCENARIOS, f"no *.expected.json in {CORPUS}"


def test_runs_with_their_own_root_stay_turns_without_a_query() -> None:
    """Content capture off (the openai-v2 default): no query is read, but each turn is the
    application's own root span holding its model calls, so the session id that joins
    the runs must not fold the second into the first (continuation.py)."""
    (conv,) = conversations_from_otlp(
        [CORPUS / "heldout_openai_otel_contrib_no_content.otlp.jsonl"]
    )
    assert conv.id == "conv-travel-1"
    assert [len(t.tool_calls) for t in conv.turns] == [2, 3]
