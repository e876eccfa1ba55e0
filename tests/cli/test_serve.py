"""`tracepass serve` input errors (exit 2, precise message) and the service lifecycle
in-process; the full end-to-end run is tests/e2e/test_serve_e2e.py."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tracepass.collector.app.cli.main import app
from tracepass.collector.config import CollectorConfig, ConfigError, MetricsConfig, ReceiverConfig
from tracepass.collector.service import CollectorService, startup_error, with_overrides
from tracepass.evaluator.models import ConversationResult, Outcome
from tracepass.evaluator.stats.rolling import StateCapture

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_bad_config_field_exit_2(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("receiver:\n  grpc_prot: 1\n")
    res = runner.invoke(app, ["serve", "--config", str(cfg)])
    assert res.exit_code == 2
    assert f"{cfg}:2:3: receiver.grpc_prot" in res.output


def test_trace_url_template_without_placeholder_exit_2(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text('ui:\n  trace_url_template: "http://jaeger/trace/"\n')
    res = runner.invoke(app, ["serve", "--config", str(cfg)])
    assert res.exit_code == 2
    assert f"{cfg}:2:3: ui.trace_url_template" in res.output
    assert "{trace_id}" in res.output


def test_missing_references_exit_2(tmp_path: Path) -> None:
    res = runner.invoke(app, ["serve", "--references", str(tmp_path / "nope")])
    assert res.exit_code == 2
    assert "no such file or directory (--references)" in res.output


def test_bad_durability_exit_2() -> None:
    res = runner.invoke(app, ["serve", "--durability", "sometimes"])
    assert res.exit_code == 2
    assert "--durability" in res.output


def test_with_overrides_revalidates() -> None:
    cfg = with_overrides(CollectorConfig(), grpc_port=0, http_port=0, durability="none")
    assert (cfg.receiver.grpc_port, cfg.receiver.http_port, cfg.state.durability) == (0, 0, "none")
    with pytest.raises(ConfigError, match=r"state\.durability"):
        with_overrides(CollectorConfig(), durability="sometimes")


def _config(tmp_path: Path, http_port: int = 0) -> CollectorConfig:
    return CollectorConfig(
        references=[EXAMPLES / "references"],
        receiver=ReceiverConfig(host="127.0.0.1", grpc_port=0, http_port=http_port),
        metrics=MetricsConfig(prometheus_host="127.0.0.1", prometheus_port=0),
        state={"path": tmp_path / "s.sqlite", "durability": "none"},  # type: ignore[arg-type]
    )


async def test_service_busy_port_unwinds(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        service = CollectorService(_config(tmp_path, http_port=busy.getsockname()[1]))
        with pytest.raises(OSError, match=r"address|bind|in use") as info:
            await service.start()
        assert startup_error(info.value) is not None
    assert service.telemetry is None  # providers shut down, metrics port closed
    assert service.pipeline is None


async def test_service_start_stop_and_persist(tmp_path: Path) -> None:
    service = CollectorService(_config(tmp_path))
    await service.start()
    ports = service.ports
    assert ports.grpc
    assert ports.http
    assert ports.metrics
    assert service.snapshot() == []
    await service.stop()
    await service.stop()  # idempotent
    await asyncio.sleep(0)
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", ports.http))  # the port is free again


def _result(cid: str, ok: bool) -> ConversationResult:
    return ConversationResult(
        conversation_id=cid,
        reference_id="book-flight",
        reference_set="travel",
        agent_name="travel-assistant",
        agent_version="1.0",
        correct=ok,
        outcome=Outcome.PASS if ok else Outcome.FAIL,
    )


async def test_rolling_windows_persist_off_the_loop_and_restore(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The windows are encoded in a worker thread (seconds at a million entries) from a
    copy taken under the lock, and a new service on the same state file restores exactly
    the same numbers."""
    threads: list[str] = []
    original = StateCapture.to_state

    def spying_to_state(self: StateCapture) -> Any:
        threads.append(threading.current_thread().name)
        return original(self)

    monkeypatch.setattr(StateCapture, "to_state", spying_to_state)
    service = CollectorService(_config(tmp_path))
    await service.start()
    now = time.time()
    for i in range(12):
        service.metrics.record(_result(f"c{i}", i % 4 != 0), now=now)
    before = service.snapshot()
    assert before
    assert before[0].windows[0].n == 12
    await service.stop()  # persists the windows
    assert threads
    assert threading.main_thread().name not in threads

    again = CollectorService(_config(tmp_path))
    await again.start()
    try:
        after = again.snapshot()
    finally:
        await again.stop()

    def counts(snap: list[Any]) -> list[Any]:
        # The decayed window keeps decaying between the two reads: compare it loosely.
        return [
            (s.key, [(w.window, w.n, w.c) for w in s.windows if w.window != "fast"]) for s in snap
        ]

    assert counts(after) == counts(before)
    fast = [w for w in after[0].windows if w.window == "fast"]
    assert fast
    assert fast[0].n == pytest.approx(12, rel=0.01)


def broken_judge() -> Any:
    raise RuntimeError("no API key in this test")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("test_serve:broken_judge", "factory raised RuntimeError: no API key in this test"),
        ("test_serve:nothing_here", "module 'test_serve' has no attribute 'nothing_here'"),
        ("test_serve", "expected module:attr"),
    ],
)
def test_bad_judge_in_config_exit_2(tmp_path: Path, spec: str, message: str) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f"evaluation:\n  judge: {spec}\nreceiver:\n  grpc_port: 0\n  http_port: 0\n"
        "metrics:\n  prometheus_port: 0\n"
        f"state:\n  path: {tmp_path / 's.sqlite'}\n",
        encoding="utf-8",
    )
    res = runner.invoke(
        app, ["serve", "--config", str(cfg), "--references", str(EXAMPLES / "references")]
    )
    assert res.exit_code == 2, res.output
    assert f"evaluation.judge {spec!r}: {message}" in res.stderr


def good_judge() -> Any:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    return FakeListChatModel(responses=['```json\n{"reasoning": "fine", "score": 0.9}\n```'])


async def test_judge_calls_are_counted_on_metrics(tmp_path: Path) -> None:
    import urllib.request

    config = _config(tmp_path).model_copy(
        update={
            "evaluation": CollectorConfig().evaluation.model_copy(
                update={"judge": "test_serve:good_judge"}
            )
        }
    )
    service = CollectorService(config)
    await service.start()
    try:
        judge = service.pipeline.evaluator.judge  # type: ignore[union-attr]
        verdict = await judge.judge("q", "a", "a")
        assert verdict.error is None
        body = await asyncio.to_thread(
            lambda: urllib.request.urlopen(service.metrics_url, timeout=10).read().decode()
        )
        line = next(x for x in body.splitlines() if x.startswith("tracepass_judge_calls_total{"))
        assert 'outcome="ok"' in line
        assert line.endswith(" 1.0")
    finally:
        await service.stop()
