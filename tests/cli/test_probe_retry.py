"""Probe transport handling against a real aiohttp agent on port 0: transport errors
(HTTP 503) are retried under a fresh conversation id, giving up is recorded as
`transport` (not a trial), HTTP 4xx is the agent's answer, not retried; `--concurrency`
bounds the trials in flight and `--rate` spaces trial starts. Evaluations come from a
small in-memory stand-in for the collector's conversation API."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from tracepass.collector.app.probe.runner import ProbeOptions, plan, run_probe
from tracepass.collector.app.probe.summary import probe_document
from tracepass.collector.app.probe.targets import HttpTarget
from tracepass.evaluator.models import Reference, ReferenceSet, ReferenceTurn

SETS = [
    ReferenceSet(
        name="s",
        references=(
            Reference(id="one", turns=(ReferenceTurn(query="hi"),)),
            Reference(id="two", turns=(ReferenceTurn(query="a"), ReferenceTurn(query="b"))),
        ),
    )
]


class Agent:
    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.requests: Counter[str] = Counter()
        self.answered: dict[str, int] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        self.first_request_at: dict[str, float] = {}

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        cid = body["conversation_id"]
        self.requests[cid] += 1
        self.first_request_at.setdefault(cid, time.monotonic())
        if self.mode == "slow":
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                await asyncio.sleep(0.05)
            finally:
                self.in_flight -= 1
        if self.mode == "always-503" or (self.mode == "first-503" and "-r" not in cid):
            return web.json_response({"error": "busy"}, status=503)
        if self.mode == "400":
            return web.json_response({"error": "bad query"}, status=400)
        self.answered[cid] = self.answered.get(cid, 0) + 1
        return web.json_response({"answer": f"echo {body['query']}"})


class FakeCollector:
    """Evaluates whatever the agent answered: pass."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    async def get(self, conversation_id: str) -> dict[str, Any] | None:
        turns = self.agent.answered.get(conversation_id)
        if not turns:
            return None
        return {
            "status": "evaluated",
            "turns": [{}] * turns,
            "evaluation": {"outcome": "pass", "correct": True, "reference_id": "x", "turns": []},
        }


@pytest.fixture
async def agent_url(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Agent, str]]:
    agent = Agent(request.param)
    app = web.Application()
    app.router.add_post("/chat", agent.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield agent, f"http://127.0.0.1:{port}/chat"
    finally:
        await runner.cleanup()


async def _probe(
    url: str,
    agent: Agent,
    retries: int,
    *,
    trials: int = 2,
    concurrency: int = 2,
    rate: float | None = None,
) -> Any:
    target = HttpTarget(url, timeout_s=10)
    await target.start({})
    try:
        opts = ProbeOptions(
            trials=trials,
            concurrency=concurrency,
            rate=rate,
            retries=retries,
            backoff_s=0.01,
            result_timeout_s=2,
        )
        return await run_probe(plan(SETS, trials), target, FakeCollector(agent), opts, run_id="t")
    finally:
        await target.close()


@pytest.mark.parametrize("agent_url", ["first-503"], indirect=True)
async def test_transport_errors_retried_with_fresh_id(agent_url: tuple[Agent, str]) -> None:
    agent, url = agent_url
    run = await _probe(url, agent, retries=2)
    assert [r.outcome for r in run.results] == ["pass"] * 4
    assert all(r.conversation_id.endswith("-r1") for r in run.results)
    assert agent.requests["probe-t-one-0"] == 1  # the refused attempt, not replayed
    assert agent.requests["probe-t-two-1-r1"] == 2  # both turns of the retry


@pytest.mark.parametrize("agent_url", ["always-503"], indirect=True)
async def test_giving_up_is_not_a_trial(agent_url: tuple[Agent, str]) -> None:
    agent, url = agent_url
    run = await _probe(url, agent, retries=1)
    assert {r.outcome for r in run.results} == {"transport"}
    assert all("HTTP 503" in (r.error or "") for r in run.results)
    assert agent.requests["probe-t-one-0"] == 1
    assert agent.requests["probe-t-one-0-r1"] == 1
    doc = probe_document(run.results, [1], run={})
    assert doc["summary"]["trials"] == 0
    assert doc["references"][0]["not_counted"] == {"transport": 2}


@pytest.mark.parametrize("agent_url", ["400"], indirect=True)
async def test_client_error_is_the_answer(agent_url: tuple[Agent, str]) -> None:
    agent, url = agent_url
    target = HttpTarget(url, timeout_s=10)
    await target.start({})
    try:
        answers = await target.play("c1", "one", ["hi"])
    finally:
        await target.close()
    assert answers == ["[agent error: HTTP 400: " + '{"error": "bad query"}]']
    assert agent.requests["c1"] == 1


@pytest.mark.parametrize("agent_url", ["slow"], indirect=True)
async def test_concurrency_bounds_trials_in_flight(agent_url: tuple[Agent, str]) -> None:
    agent, url = agent_url
    run = await _probe(url, agent, retries=0, trials=6, concurrency=3)
    assert len(run.results) == 12
    # Each trial plays its turns one after the other: in flight = trials in flight.
    assert agent.max_in_flight == 3


@pytest.mark.parametrize("agent_url", ["ok"], indirect=True)
async def test_rate_spaces_trial_starts(agent_url: tuple[Agent, str]) -> None:
    agent, url = agent_url
    rate = 10.0
    run = await _probe(url, agent, retries=0, trials=4, concurrency=8, rate=rate)
    assert len(run.results) == 8
    # Seen by the agent, so request latency jitters each start a little: 8 starts at
    # 0.1 s intervals span 0.7 s, and no two come close together.
    starts = sorted(agent.first_request_at[r.conversation_id] for r in run.results)
    assert starts[-1] - starts[0] >= 0.7 - 0.05
    assert min(b - a for a, b in itertools.pairwise(starts)) >= 0.05
