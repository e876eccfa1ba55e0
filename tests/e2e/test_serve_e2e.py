"""`tracepass serve` end to end: a real subprocess on ephemeral ports, the example agent
exporting over real OTLP (HTTP and gRPC), /metrics scraped over HTTP, the conversation
API, a clean SIGTERM, and rolling windows that survive a restart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _live_support import (
    FAST_CONFIG,
    http_get,
    port_free,
    run_agent,
    scrape,
    select,
    serve,
    total,
    wait_until,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

REFS = str(Path(__file__).resolve().parents[2] / "examples" / "references")
N = 30


def test_serve_evaluates_exports_and_stops_cleanly(tmp_path: Path) -> None:
    with serve(tmp_path, "--references", REFS, config=FAST_CONFIG) as s:
        # 1.0: no regression, over OTLP/HTTP; 1.1: heavy regression, over OTLP/gRPC.
        run_agent(s.http, "run", "--conversations", str(N), "--version", "1.0", "--prefix", "good-")
        run_agent(
            s.grpc, "run", "--conversations", str(N), "--version", "1.1",
            "--regression", "0.6", "--prefix", "bad-", "--seed", "7",
            protocol="grpc",
        )  # fmt: skip

        def all_evaluated() -> list[tuple[str, dict[str, str], float]] | None:
            samples = scrape(s.metrics_url)
            done = total(samples, "tracepass_conversations_total")
            return samples if done >= 2 * N else None

        samples = wait_until(all_evaluated, 120, f"{2 * N} evaluated conversations")
        base = {"agent_name": "travel-assistant"}
        assert (
            total(
                samples,
                "tracepass_conversations_total",
                **base,
                agent_version="1.0",
                outcome="pass",
            )
            == N
        )
        bad_pass = total(
            samples, "tracepass_conversations_total", **base, agent_version="1.1", outcome="pass"
        )
        bad_fail = total(
            samples, "tracepass_conversations_total", **base, agent_version="1.1", outcome="fail"
        )
        assert bad_pass + bad_fail == N
        assert bad_fail > 0
        assert total(samples, "tracepass_spans_received_total", protocol="grpc") > 0
        assert total(samples, "tracepass_spans_received_total", protocol="http") > 0
        # tracepass's own instrumentation is read by the GenAI convention, no adapter.
        assert total(samples, "tracepass_spans_read_total", convention="genai", adapter="none") > 0

        def pow3(version: str) -> dict[str, float]:
            # One series per reference set the version's conversations matched.
            rows = select(
                samples, "tracepass_pass_pow_k", **base, agent_version=version, k="3",
                estimator="plugin", window="5m",
            )  # fmt: skip
            return {r[1]["reference_set"]: r[2] for r in rows}

        good, bad = pow3("1.0"), pow3("1.1")
        assert good
        assert all(v == pytest.approx(1.0) for v in good.values())
        shared = set(good) & set(bad)
        assert shared
        assert all(bad[name] < good[name] for name in shared)
        for name in ("tracepass_pass_pow_k_lower", "tracepass_pass_pow_k_upper"):
            assert select(samples, name, agent_version="1.1", k="3", window="5m")

        status, body = http_get(f"{s.http}/api/v1/conversations/good-0")
        assert status == 200, body
        view = json.loads(body)
        assert view["conversation_id"] == "good-0"
        assert view["agent"] == {"name": "travel-assistant", "version": "1.0"}
        assert view["evaluation"]["outcome"] == "pass"
        assert view["turns"][0]["query"]
        assert http_get(f"{s.http}/api/v1/conversations/nope")[0] == 404

        ports = [s.ports["grpc_port"], s.ports["http_port"], s.ports["metrics_port"]]
        assert s.terminate() == 0, s.stderr()
        assert all(port_free(p) for p in ports)

    # Restart on the same state: the rolling windows come back.
    with serve(tmp_path, "--references", REFS, config=FAST_CONFIG) as s2:
        samples = scrape(s2.metrics_url)
        n = total(
            samples, "tracepass_window_conversations", agent_name="travel-assistant",
            agent_version="1.0", window="5m",
        )  # fmt: skip
        assert n == N
        assert s2.terminate() == 0


def test_serve_bad_reference_file_exits_2(tmp_path: Path) -> None:
    import subprocess

    from _live_support import TRACEPASS, clean_env

    bad = tmp_path / "refs.yaml"
    bad.write_text("name: x\nreferences:\n  - id: a\n    turns:\n      - quer: hi\n")
    done = subprocess.run(
        [TRACEPASS, "serve", "--references", str(bad), "--grpc-port", "0", "--http-port", "0",
         "--metrics-port", "0", "--state", str(tmp_path / "s.sqlite")],
        capture_output=True, text=True, env=clean_env(), timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert str(bad) in done.stderr
    assert "quer" in done.stderr
