"""Two real `tracepass serve` replicas, one real PostgreSQL (`state.results_url`).

The traffic is split by conversation, as the conversation-routing gateway splits it:
replica A gets agent `weather-a`'s conversations, replica B `weather-b`'s. Then:
- each replica's `/api/v1/conversations` lists every conversation of both, and the UI
  overview and `/api/v1/agents` of either show both agents;
- replica B is killed with SIGKILL mid-run and restarted on its state file: no
  conversation whose spans it acknowledged loses its result;
- PostgreSQL is stopped for `TRACEPASS_PG_PAUSE_S` seconds (a real stop and start)
  while both replicas keep taking traffic: `/readyz` says why results wait,
  `tracepass_results_backlog` counts them, and every result arrives once it is back;
- every sixth conversation of each replica answers its second turn wrongly (an injected
  fault, one per phase): either replica's `/api/v1/failure-modes` (and the UI's page and
  the `failure_mode=` list) counts both halves' failures, the `failing` review rule
  puts every failing conversation in one queue that both replicas show, and a label
  written on replica A (with the write token) shows on replica B and in B's agreement.
"""

from __future__ import annotations

import json
import os
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from _live_support import http_get, scrape, total, wait_until
from _replica_support import Replica, post, replica_config
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

PAUSE_S = float(os.environ.get("TRACEPASS_PG_PAUSE_S", "10"))  # `make reliability`: 30
PER_REPLICA = 18  # conversations per replica: three phases of six
DEADLINE_S = 180.0
WRITE_TOKEN = "replicas-write-token"


def failing(index: int) -> bool:
    """The injected fault: every sixth conversation (one per phase) answers wrongly."""
    return index % 6 == 5


pytestmark = [
    pytest.mark.slow,
    pytest.mark.system,
    pytest.mark.xdist_group("postgres"),
    pytest.mark.timeout(900 + int(PAUSE_S)),
]

REFERENCES = """\
name: replicas
version: "1"
references:
  - id: two-questions
    turns:
      - query: question 0
        expected_answer: answer 0
      - query: question 1
        expected_answer: answer 1
"""


def _messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def conversation_spans(conversation: str, agent: str, fail: bool = False) -> list[ReadableSpan]:
    """Two GenAI-semconv turns of `agent` (passing the reference, unless `fail`: the
    second answer is wrong), from the real SDK."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": agent}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests.replicas")
    for turn in range(2):
        with tracer.start_as_current_span(
            f"invoke_agent {agent}",
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.conversation.id": conversation,
                "gen_ai.agent.name": agent,
                "gen_ai.input.messages": _messages("user", f"question {turn}"),
                "gen_ai.output.messages": _messages(
                    "assistant", "no idea" if fail and turn == 1 else f"answer {turn}"
                ),
            },
        ):
            pass
    provider.shutdown()
    return list(exporter.get_finished_spans())


def _config(directory: Path, refs: Path, url: str) -> Path:
    return replica_config(
        directory,
        refs,
        url,
        WRITE_TOKEN,
        review={"rules": [{"when": "new_failure_mode"}, {"when": "failing"}]},
        metrics={
            "prometheus_port": 0,
            "windows": [{"name": "1h", "seconds": 3600}],
            "min_conversations": 1,
        },
    )


def test_two_replicas_share_one_postgres_through_kill_9_and_an_outage(
    tmp_path: Path, postgres_cluster: Any, postgres_url: str
) -> None:
    refs = tmp_path / "refs.yaml"
    refs.write_text(REFERENCES, encoding="utf-8")
    replicas: dict[str, Replica] = {}
    for name in ("a", "b"):
        directory = tmp_path / name
        directory.mkdir()
        replicas[name] = Replica(directory, _config(directory, refs, postgres_url))
    traffic = {
        name: [(f"{name}-{i}", conversation_spans(f"{name}-{i}", f"weather-{name}", failing(i)))
               for i in range(PER_REPLICA)]
        for name in replicas
    }  # fmt: skip
    every = {cid for convs in traffic.values() for cid, _ in convs}
    phase = PER_REPLICA // 3
    a, b = replicas["a"], replicas["b"]
    try:
        a.start()
        b.start()
        # Phase 1: both take traffic; B is killed right after its last acknowledgement
        # (results still in its span buffer or outbox), then resumes on its state file.
        for name, replica in replicas.items():
            for _, spans in traffic[name][:phase]:
                replica.send(spans)
        b.kill()
        b.start()

        # Phase 2: PostgreSQL goes away; both replicas keep taking traffic.
        postgres_cluster.stop()
        stopped_at = time.monotonic()
        for name, replica in replicas.items():
            for _, spans in traffic[name][phase : 2 * phase]:
                replica.send(spans)

        def degraded() -> list[str] | None:
            status, body = http_get(a.http + "/readyz", timeout=30)
            assert status == 200, body  # still ready: spans are taken, results wait
            notes = json.loads(body).get("degraded")
            return notes if notes else None

        notes = wait_until(degraded, DEADLINE_S, "/readyz to say why results wait")
        assert any("unreachable" in n and "outbox" in n for n in notes), notes
        backlog = wait_until(
            lambda: total(scrape(a.ports["metrics_url"]), "tracepass_results_backlog"),
            DEADLINE_S,
            "the results backlog to count waiting results",
        )
        assert backlog >= 1
        status, _ = http_get(a.http + "/api/v1/conversations", timeout=60)
        assert status == 503  # the list names the unreachable database, not "no results"
        time.sleep(max(0.0, PAUSE_S - (time.monotonic() - stopped_at)))
        postgres_cluster.start()

        # Phase 3: the database is back.
        for name, replica in replicas.items():
            for _, spans in traffic[name][2 * phase :]:
                replica.send(spans)

        for replica in (a, b):
            listed = wait_until(
                lambda r=replica: (lambda got: got if got == every else None)(r.listed()),
                DEADLINE_S,
                "every conversation of both replicas in each replica's list",
                interval=1.0,
            )
            assert listed == every
            agents = {x["agent_name"] for x in replica.json("/api/v1/agents")["agents"]}
            assert agents == {"weather-a", "weather-b"}
            status, page = http_get(replica.http + "/ui/", timeout=60)
            assert status == 200
            assert b"weather-a" in page
            assert b"weather-b" in page
            one = urllib.parse.quote("b-0" if replica is a else "a-0")
            view = replica.json(f"/api/v1/conversations/{one}")
            assert view["evaluation"]["outcome"] == "pass"
        check_failure_modes_and_labels(a, b)
        wait_until(
            lambda: json.loads(http_get(a.http + "/readyz")[1]).get("degraded") is None,
            DEADLINE_S,
            "/readyz to stop reporting the outage",
        )
        assert total(scrape(a.ports["metrics_url"]), "tracepass_results_backlog") == 0
    except AssertionError as exc:
        logs = "".join(
            f"\n--- replica {n} stderr:\n{r.stderr()[-4000:]}" for n, r in replicas.items()
        )
        raise AssertionError(f"{exc}{logs}") from None
    finally:
        for replica in replicas.values():
            replica.stop()
        if not postgres_cluster.running:
            postgres_cluster.start()  # other tests of this session use the cluster


def post_label(replica: Replica, conversation: str, body: dict[str, Any]) -> tuple[int, Any]:
    path = f"/api/v1/review/{urllib.parse.quote(conversation)}/label"
    return post(replica, path, body, WRITE_TOKEN)


def check_failure_modes_and_labels(a: Replica, b: Replica) -> None:
    """Both halves' failures on either replica; a label given on A shows on B."""
    failed = {f"{n}-{i}" for n in ("a", "b") for i in range(PER_REPLICA) if failing(i)}
    per_agent = len(failed) // 2
    for replica in (a, b):

        def pooled(r: Replica = replica) -> dict[str, Any] | None:
            body: dict[str, Any] = r.json("/api/v1/failure-modes")
            return body if body["failing_conversations"] == len(failed) else None

        body = wait_until(pooled, DEADLINE_S, "both replicas' failures in failure-modes")
        top = body["failure_modes"][0]
        assert top["count"] == len(failed), body
        assert top["share"] == 1.0
        assert set(top["examples"]) <= failed
        for agent in ("weather-a", "weather-b"):
            scoped = replica.json(f"/api/v1/failure-modes?agent_name={agent}")
            assert scoped["failing_conversations"] == per_agent, scoped
            assert scoped["failure_modes"][0]["signature"] == top["signature"]
        signature = urllib.parse.quote(top["signature"])
        listed = replica.json(f"/api/v1/conversations?failure_mode={signature}&limit=100")
        assert {c["conversation_id"] for c in listed["conversations"]} == failed
        status, page = http_get(replica.http + "/ui/failure-modes", timeout=60)
        assert status == 200
        assert b"weather-a" in page
        assert b"weather-b" in page

    # B's conversation, labelled through A: B stored it, A finds it in the database.
    status, answer = post_label(a, "b-5", {"passed": "fail", "comment": "wrong answer"})
    assert status == 200, answer

    def labelled() -> list[Any] | None:
        labels: list[Any] = b.json("/api/v1/review/labels")["labels"]
        return labels or None

    labels = wait_until(labelled, DEADLINE_S, "A's label on replica B")
    assert [(x["conversation_id"], x["passed"], x["comment"]) for x in labels] == [
        ("b-5", False, "wrong answer")
    ]
    assert b.json("/api/v1/review/agreement")["labelled"] == 1

    # The `failing` rule queued every failing conversation, on whichever replica
    # evaluated it (through the kill and the outage): one queue, on both replicas.
    def queued(r: Replica) -> dict[str, Any] | None:
        body: dict[str, Any] = r.json("/api/v1/review/queue?pending=false")
        return body if {i["conversation_id"] for i in body["items"]} == failed else None

    for replica in (a, b):
        queue = wait_until(lambda r=replica: queued(r), DEADLINE_S, "the pooled review queue")
        reasons = {i["reason"] for i in queue["items"] if i["conversation_id"] != "b-5"}
        assert reasons == {"failing"}  # (b-5 was labelled too: queued by whichever came first)
        assert [i["conversation_id"] for i in queue["items"] if i["labelled"]] == ["b-5"]
        assert (queue["queued"], queue["labelled"]) == (len(failed), 1)
