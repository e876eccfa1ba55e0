"""Sampling and the judge budget through real `tracepass serve` processes fed over real
OTLP/HTTP: two replicas with one seed evaluate the same conversations (exactly those the
documented formula keeps), and a judge budget caps the calls, the rest `skipped_budget`."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from _live_support import FAST_CONFIG, Serve, http_get, scrape, serve, total, wait_until

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
MAKE_TRACES = HERE.parent / "cli" / "_make_traces.py"
REFS = HERE.parent / "cli" / "data" / "calc_refs.yaml"


def _kept(cid: str, rate: float, seed: str) -> bool:
    digest = hashlib.sha256(f"{seed}:{cid}".encode()).digest()
    return int.from_bytes(digest[:8], "big") < rate * 2**64


def _frames(path: Path) -> list[bytes]:
    data, out, pos = path.read_bytes(), [], 0
    while pos < len(data):
        size = int.from_bytes(data[pos : pos + 4], "big")
        out.append(data[pos + 4 : pos + 4 + size])
        pos += 4 + size
    return out


def _post(s: Serve, body: bytes) -> None:
    request = urllib.request.Request(
        f"{s.http}/v1/traces",
        data=body,
        headers={"Content-Type": "application/x-protobuf"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as resp:
        assert resp.status == 200


def _traces(tmp_path: Path, trials: int, *extra: str) -> Path:
    out = tmp_path / "traces.binpb"
    subprocess.run(
        [sys.executable, str(MAKE_TRACES), str(out), "--trials", str(trials), *extra],
        check=True,
        timeout=120,
        capture_output=True,
    )
    return out


def _ids(trials: int) -> list[str]:
    return [f"{ref}-1.0-{i}" for i in range(trials) for ref in ("add", "mul")] + ["weather-1.0"]


def _evaluated(s: Serve) -> float:
    return sum(
        total(scrape(s.metrics_url), "tracepass_conversations_total", outcome=o)
        for o in ("pass", "fail", "error", "incomplete", "unscored", "skipped_budget")
    )


def test_two_replicas_with_one_seed_evaluate_the_same_sample(tmp_path: Path) -> None:
    trials = 30
    frames = _frames(_traces(tmp_path, trials))
    config: dict[str, Any] = {
        **FAST_CONFIG,
        "references": [str(REFS)],
        "sampling": {"rate": 0.3, "seed": "replicas"},
    }
    expected = {i for i in _ids(trials) if _kept(i, 0.3, "replicas")}
    seen: list[set[str]] = []
    for name in ("a", "b"):
        d = tmp_path / name
        d.mkdir()
        with serve(d, config=config) as s:
            for body in frames:
                _post(s, body)
            wait_until(lambda s=s: _evaluated(s) >= len(expected), 60, "evaluations")
            found = {
                cid
                for cid in _ids(trials)
                if http_get(f"{s.http}/api/v1/conversations/{cid}")[0] == 200
            }
            samples = scrape(s.metrics_url)
            assert total(samples, "tracepass_sampling_decisions_total", decision="kept") == len(
                expected
            )
            assert s.terminate() == 0
        seen.append(found)
    assert seen[0] == seen[1] == expected


def test_judge_budget_caps_calls_and_skips_the_rest(tmp_path: Path) -> None:
    trials = 6
    # Distinct answers: identical judge requests in flight would share one model call.
    frames = _frames(_traces(tmp_path, trials, "--tag-answers"))
    refs = yaml.safe_load(REFS.read_text())
    for ref in refs["references"]:
        ref["turns"][0]["graders"] = [{"type": "llm"}]
    refs_path = tmp_path / "refs.yaml"
    refs_path.write_text(yaml.safe_dump(refs))
    log = tmp_path / "judge.log"
    config: dict[str, Any] = {
        **FAST_CONFIG,
        "references": [str(refs_path)],
        "evaluation": {
            "judge": "_counting_judge:model",
            "judge_budget": {"calls_per_day": 5},
        },
    }
    env = {"PYTHONPATH": str(HERE), "TRACEPASS_TEST_JUDGE_LOG": str(log)}
    matched = 2 * trials
    with serve(tmp_path, config=config, env=env) as s:
        for body in frames:
            _post(s, body)

        def settled() -> bool:
            samples = scrape(s.metrics_url)
            return (
                sum(
                    total(samples, "tracepass_conversations_total", outcome=o)
                    for o in ("pass", "skipped_budget", "fail", "error")
                )
                >= matched
            )

        wait_until(settled, 60, "the matched conversations to be evaluated")
        samples = scrape(s.metrics_url)
        calls = len(log.read_text().splitlines()) if log.exists() else 0
        assert 1 <= calls <= 5  # never more than the budget allows
        skipped = total(samples, "tracepass_conversations_total", outcome="skipped_budget")
        passed = total(samples, "tracepass_conversations_total", outcome="pass")
        # 12 distinct judge requests, at most 5 paid for: the rest are skipped, never failed.
        assert passed <= 5
        assert skipped >= matched - 5
        assert passed + skipped == matched
        assert total(samples, "tracepass_conversations_total", outcome="fail") == 0
        assert total(samples, "tracepass_judge_budget_remaining", period="day") == 0
        assert s.terminate() == 0
