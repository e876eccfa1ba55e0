"""What the shared PostgreSQL store used to leave per replica: reference candidates and
the review labels' export, with two real `tracepass serve` replicas on one real
PostgreSQL (`state.results_url`).

The traffic is split by conversation, as the gateway splits it: three conversations of
one unreferenced task ("plan a trip to Bergen", the same tool call each time) on
replica A and three on replica B, with `candidates.min_conversations: 5`. Mined from
its own evaluations neither replica would propose anything (3 < 5); mined from the
shared results both list the same candidate, built from all six conversations, and a
rejection through A takes it off B's list too. Then a
conversation judged by the (real, scripted-model) LLM judge on B is labelled through
A, and `tracepass review export --results-url` writes that label from the database
(neither state file holds it).
"""

from __future__ import annotations

import csv
import json
import subprocess
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from _live_support import TRACEPASS, clean_env, http_get, wait_until
from _replica_support import Replica, post, replica_config
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

pytestmark = [
    pytest.mark.slow,
    pytest.mark.system,
    pytest.mark.xdist_group("postgres"),
    pytest.mark.timeout(600),
]

HERE = Path(__file__).parent
DEADLINE_S = 180.0
WRITE_TOKEN = "shared-triage-token"
TRIP = "Plan a trip to Bergen"
FLIGHTS = "Find flights from Oslo to Rome"
REFERENCES = f"""\
name: shared-triage
version: "1"
references:
  - id: oslo-rome
    turns:
      - query: {FLIGHTS}
        expected_answer: The cheapest is DY1870.
        graders: [{{type: contains, keywords: [DY1870]}}, {{type: llm}}]
"""


def _messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def conversation_spans(
    conversation: str, query: str, answer: str, tool: tuple[str, dict[str, Any]] | None
) -> list[ReadableSpan]:
    """One GenAI-semconv turn (an `invoke_agent` root, optionally one `execute_tool`
    child), from the real SDK."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "trips"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests.shared_triage")
    with tracer.start_as_current_span(
        "invoke_agent trips",
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.conversation.id": conversation,
            "gen_ai.agent.name": "trips",
            "gen_ai.input.messages": _messages("user", query),
            "gen_ai.output.messages": _messages("assistant", answer),
        },
    ):
        if tool is not None:
            name, arguments = tool
            with tracer.start_as_current_span(
                f"execute_tool {name}",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.conversation.id": conversation,
                    "gen_ai.tool.name": name,
                    "gen_ai.tool.call.arguments": json.dumps(arguments),
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
        evaluation={"judge": "_counting_judge:model"},
        candidates={"min_conversations": 5},
    )


def export(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TRACEPASS, "review", "export", *args],
        capture_output=True, text=True, env=clean_env(**(env or {})), timeout=120,
    )  # fmt: skip


def test_candidates_and_review_export_read_the_shared_store(
    tmp_path: Path, postgres_cluster: Any, postgres_url: str
) -> None:
    refs = tmp_path / "refs"
    refs.mkdir()
    (refs / "flights.yaml").write_text(REFERENCES, encoding="utf-8")
    env = {"PYTHONPATH": str(HERE), "TRACEPASS_TEST_JUDGE_LOG": str(tmp_path / "judge.log")}
    replicas: dict[str, Replica] = {}
    for name in ("a", "b"):
        directory = tmp_path / name
        directory.mkdir()
        replicas[name] = Replica(directory, _config(directory, refs, postgres_url), env)
    a, b = replicas["a"], replicas["b"]
    trips = {name: [f"{name}-trip-{i}" for i in range(3)] for name in replicas}
    tool = ("search_trains", {"destination": "Bergen", "date": "2026-06-01"})
    try:
        a.start()
        b.start()
        for name, replica in replicas.items():
            for cid in trips[name]:
                replica.send(conversation_spans(cid, TRIP, "Take the 08:25 train.", tool))
            replica.send(
                conversation_spans(f"{name}-flight", FLIGHTS, "The cheapest is DY1870.", None)
            )
        every = {f"{n}-flight" for n in replicas} | {c for ids in trips.values() for c in ids}
        for replica in (a, b):
            wait_until(
                lambda r=replica: (lambda got: got if got == every else None)(r.listed()),
                DEADLINE_S,
                "every conversation of both replicas in each replica's list",
                interval=1.0,
            )

        # Reference candidates: one list, whichever replica is asked.
        def proposed(r: Replica) -> list[dict[str, Any]] | None:
            body: list[dict[str, Any]] = r.json("/api/v1/reference-candidates")["candidates"]
            return body if body and body[0]["conversations"] == 6 else None

        listings = [
            wait_until(lambda r=r: proposed(r), DEADLINE_S, "the pooled candidate", 1.0)
            for r in (a, b)
        ]
        assert listings[0] == listings[1]
        (candidate,) = listings[0]
        assert candidate["tools"] == ["search_trains"]
        assert set(candidate["conversation_ids"]) == set(trips["a"]) | set(trips["b"])
        assert candidate["query"] == TRIP
        for r in (a, b):
            one = r.json(f"/api/v1/reference-candidates/{urllib.parse.quote(candidate['id'])}")
            assert one["yaml"] == candidate["yaml"]
            status, page = http_get(r.http + "/ui/reference-candidates", timeout=60)
            assert status == 200
            assert candidate["id"].encode() in page

        # Rejected through A: gone from B's list too (at B's next read, ≤ 10 s).
        cid = urllib.parse.quote(candidate["id"])
        status, answer = post(a, f"/api/v1/reference-candidates/{cid}/reject", {}, WRITE_TOKEN)
        assert status == 200, answer
        assert a.json("/api/v1/reference-candidates")["candidates"] == []
        wait_until(
            lambda: b.json("/api/v1/reference-candidates")["candidates"] == [] or None,
            DEADLINE_S,
            "A's rejection on replica B",
            1.0,
        )
        assert b.json(f"/api/v1/reference-candidates/{cid}")["state"] == "rejected"

        # B's judged conversation, labelled through A; exported from the database.
        label = {"passed": "pass", "turns": {"0": "pass"}}
        status, answer = post(a, "/api/v1/review/b-flight/label", label, WRITE_TOKEN)
        assert status == 200, answer
        out = tmp_path / "labelled.csv"
        done = export("--results-url", postgres_url, "-o", str(out))
        assert done.returncode == 0, done.stderr
        with out.open(encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
        assert [(r["conversation_id"], r["turn_index"], r["human_label"]) for r in rows] == [
            ("b-flight", "0", "pass")
        ]
        assert rows[0]["judge_passed"] in ("true", "True", "1", "pass")
        # The same through the environment variable; the state files hold no label.
        env_out = tmp_path / "env.csv"
        done = export("-o", str(env_out), env={"TRACEPASS_RESULTS_URL": postgres_url})
        assert done.returncode == 0, done.stderr
        assert env_out.read_text(encoding="utf-8") == out.read_text(encoding="utf-8")
        done = export("--state", str(b.dir / "state.sqlite"), "-o", str(tmp_path / "b.csv"))
        assert done.returncode == 2
        assert "no labelled judged turns" in done.stderr
        done = export("--results-url", postgres_url, "--state", str(b.dir / "state.sqlite"),
                      "-o", str(tmp_path / "both.csv"))  # fmt: skip
        assert done.returncode == 2
        assert "give either" in done.stderr
        empty = postgres_cluster.create_database("t_shared_triage_empty")
        done = export("--results-url", empty, "-o", str(tmp_path / "empty.csv"))
        assert done.returncode == 2
        assert "not a tracepass results database" in done.stderr
    except AssertionError as exc:
        logs = "".join(
            f"\n--- replica {n} stderr:\n{r.stderr()[-4000:]}" for n, r in replicas.items()
        )
        raise AssertionError(f"{exc}{logs}") from None
    finally:
        for replica in replicas.values():
            replica.stop()
