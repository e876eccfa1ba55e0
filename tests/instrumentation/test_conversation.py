"""conversation(): ids on every span (any library, any task) and the end marker."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from contextvars import copy_context

import pytest
from _instr_support import by_name, one
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracepass.instrumentation import (
    agent,
    conversation,
    current_conversation_id,
    current_reference_id,
    tool,
)


@tool
async def fetch(item: str) -> str:
    await asyncio.sleep(0)
    return item[::-1]


@agent(name="conv-agent")
async def turn_agent(question: str) -> str:
    # Work fanned out to tasks still belongs to the conversation.
    parts = await asyncio.gather(fetch(question), asyncio.create_task(fetch(question + "!")))
    await asyncio.sleep(0)
    return "|".join(parts)


def test_every_span_is_stamped_including_foreign_ones(spans: InMemorySpanExporter) -> None:
    foreign = trace.get_tracer("some.other.library")

    @agent
    def bot(q: str) -> str:
        with foreign.start_as_current_span("http GET"):
            pass
        return "done"

    with conversation("conv-1", reference_id="ref-7", agent_version="2.0") as conv:
        assert current_conversation_id() == "conv-1"
        assert current_reference_id() == "ref-7"
        bot("hi")
        with foreign.start_as_current_span("outside any agent"):
            pass
    assert current_conversation_id() is None
    assert conv.id == "conv-1"
    finished = spans.get_finished_spans()
    assert len(finished) == 4
    for span in finished:
        assert span.attributes is not None
        assert span.attributes["gen_ai.conversation.id"] == "conv-1", span.name
        assert span.attributes["tracepass.reference.id"] == "ref-7", span.name
    for name in ("invoke_agent bot", "http GET", "outside any agent"):
        attrs = one(finished, name).attributes
        assert attrs is not None
        assert attrs["tracepass.agent.version"] == "2.0"
    turn = one(finished, "invoke_agent bot")
    assert turn.attributes is not None
    assert turn.attributes["gen_ai.agent.version"] == "2.0"  # inherited from the conversation


def test_end_marker_shape(spans: InMemorySpanExporter) -> None:
    @agent
    def bot(q: str) -> str:
        return q

    with conversation("conv-end", reference_id="ref-1"):
        bot("one")
        bot("two")
        bot("three")
    end = one(spans.get_finished_spans(), "tracepass.conversation.end")
    assert end.start_time == end.end_time
    assert end.kind is trace.SpanKind.INTERNAL
    assert dict(end.attributes or {}) == {
        "tracepass.conversation.end": True,
        "gen_ai.conversation.id": "conv-end",
        "tracepass.reference.id": "ref-1",
        "tracepass.conversation.turns": 3,
    }
    # The marker is the last span of the conversation.
    assert end.end_time is not None
    assert all(
        s.end_time is not None and s.end_time <= end.end_time for s in spans.get_finished_spans()
    )


def test_end_marker_without_reference_and_generated_id(spans: InMemorySpanExporter) -> None:
    with conversation() as conv:
        pass
    assert len(conv.id) == 32
    end = one(spans.get_finished_spans(), "tracepass.conversation.end")
    assert dict(end.attributes or {}) == {
        "tracepass.conversation.end": True,
        "gen_ai.conversation.id": conv.id,
        "tracepass.conversation.turns": 0,
    }


def test_end_marker_emitted_when_block_raises(spans: InMemorySpanExporter) -> None:
    with pytest.raises(KeyError), conversation("conv-err"):
        raise KeyError("boom")
    end = one(spans.get_finished_spans(), "tracepass.conversation.end")
    assert end.attributes is not None
    assert end.attributes["gen_ai.conversation.id"] == "conv-err"
    assert current_conversation_id() is None


def test_nested_conversations_restore_outer(spans: InMemorySpanExporter) -> None:
    with conversation("outer"):
        with conversation("inner"):
            assert current_conversation_id() == "inner"
        assert current_conversation_id() == "outer"
    ends = by_name(spans.get_finished_spans(), "tracepass.conversation.end")
    assert [e.attributes["gen_ai.conversation.id"] for e in ends if e.attributes] == [
        "inner",
        "outer",
    ]


def test_conversation_rejects_reentry_and_bad_ids() -> None:
    conv = conversation("x")
    with conv, pytest.raises(RuntimeError, match="already active"), conv:
        pass
    with pytest.raises(TypeError, match="must be a str"):
        conversation(123)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must not be empty"):
        conversation("")


async def test_async_conversation_with_tasks(spans: InMemorySpanExporter) -> None:
    async with conversation("async-conv") as conv:
        assert await turn_agent("ab") == "ba|!ba"
        assert await turn_agent("cd") == "dc|!dc"
    assert conv.turns == 2
    finished = spans.get_finished_spans()
    assert len(finished) == 2 * 3 + 1
    assert {s.attributes["gen_ai.conversation.id"] for s in finished if s.attributes} == {
        "async-conv"
    }


async def test_200_concurrent_conversations_do_not_leak(spans: InMemorySpanExporter) -> None:
    async def run_one(i: int) -> str:
        async with conversation(f"conv-{i:03d}", reference_id=f"ref-{i:03d}"):
            for turn in range(2):
                await turn_agent(f"q{i}-{turn}")
                await asyncio.sleep(0)
        return f"conv-{i:03d}"

    ids = await asyncio.gather(*(run_one(i) for i in range(200)))
    assert len(set(ids)) == 200
    finished = spans.get_finished_spans()
    assert len(finished) == 200 * (2 * 3 + 1)
    by_id: dict[str, list[str]] = {}
    for span in finished:
        assert span.attributes is not None
        conv_id = span.attributes["gen_ai.conversation.id"]
        assert isinstance(conv_id, str)
        assert span.attributes["tracepass.reference.id"] == conv_id.replace("conv", "ref")
        by_id.setdefault(conv_id, []).append(span.name)
        if span.name == "invoke_agent conv-agent":
            # The query of a turn names its conversation: no cross-talk between tasks.
            assert f'"q{conv_id[5:].lstrip("0") or "0"}-' in str(
                span.attributes["gen_ai.input.messages"]
            )
    assert len(by_id) == 200
    for names in by_id.values():
        assert sorted(names).count("execute_tool fetch") == 4
        assert names.count("tracepass.conversation.end") == 1
    for end in by_name(finished, "tracepass.conversation.end"):
        assert end.attributes is not None
        assert end.attributes["tracepass.conversation.turns"] == 2
    # Trace structure: every tool span's parent is a turn of the same conversation.
    turns = {
        s.context.span_id: s.attributes["gen_ai.conversation.id"]
        for s in by_name(finished, "invoke_agent conv-agent")
        if s.context is not None and s.attributes is not None
    }
    for call in by_name(finished, "execute_tool fetch"):
        assert call.parent is not None
        assert call.attributes is not None
        assert turns[call.parent.span_id] == call.attributes["gen_ai.conversation.id"]


def test_threads_need_copied_context(spans: InMemorySpanExporter) -> None:
    """Plain threads do not inherit contextvars; running in a copied context does."""
    seen: list[str | None] = []
    with conversation("threaded"):
        ctx = copy_context()
        t = threading.Thread(target=lambda: seen.append(ctx.run(current_conversation_id)))
        t.start()
        t.join(5)
    assert seen == ["threaded"]


_SETUP_SCRIPT = """
import json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tracepass.instrumentation import agent, configure, conversation, install, tool

exporter = InMemorySpanExporter()
if sys.argv[1] == "configure":
    configure(service_name="svc", exporter=exporter, batch=False)
else:
    provider = TracerProvider()  # the user's own
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    if sys.argv[1] == "install":
        install(provider)
foreign = trace.get_tracer("some.other.library")

@tool
def lookup(order: str) -> str:
    return "shipped"

@agent(name="helper")
def helper(q: str) -> str:
    return lookup(q)

@agent(name="support")
def support(q: str) -> str:
    with foreign.start_as_current_span("http GET"):
        pass
    return helper(q)

with conversation("conv-1", reference_id="ref-1", agent_version="3.1"):
    support("where is 42?")
print(json.dumps({s.name: dict(s.attributes or {}) for s in exporter.get_finished_spans()}))
"""


@pytest.mark.slow  # starts a process or a server
@pytest.mark.parametrize("setup", ["configure", "install", "own"])
def test_which_spans_carry_the_conversation_attributes(setup: str) -> None:
    """docs/instrumentation.md's table, in a fresh interpreter per setup (the global
    provider can be set once): tracepass's spans stamp the conversation's attributes
    themselves; other libraries' spans get them only from the installed processor."""
    out = subprocess.run(
        [sys.executable, "-c", _SETUP_SCRIPT, setup],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    attrs = json.loads(out.stdout)
    ours = ["invoke_agent support", "invoke_agent helper", "execute_tool lookup"]
    ours.append("tracepass.conversation.end")
    assert set(attrs) == {*ours, "http GET"}
    stamped = {
        "gen_ai.conversation.id": "conv-1",
        "tracepass.reference.id": "ref-1",
        "tracepass.agent.version": "3.1",
    }
    for name in ours:
        assert {k: attrs[name].get(k) for k in stamped} == stamped, name
    assert attrs["tracepass.conversation.end"]["tracepass.conversation.turns"] == 1
    foreign = {k: attrs["http GET"].get(k) for k in stamped}
    assert foreign == (dict.fromkeys(stamped) if setup == "own" else stamped)
