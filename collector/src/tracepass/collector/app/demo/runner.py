"""The demo: an in-process `CollectorService` (real OTLP receivers, real `/metrics`),
the example travel agent exporting its spans to it over OTLP from a worker thread, a
live view of pass@k / pass^k per agent version, and an HTML report at the end.

Timeline: version 1.0 (a small baseline slip rate) until `regression_at`, then version
1.1 whose tool arguments go wrong with probability `regression_rate`. Windows and
timeouts are shortened so the numbers move within a minute.

Shutdown order matters: stop the agent, flush its spans while the receivers still
listen, wait for the last conversations to be evaluated, shut the agent's exporter,
then stop the collector (receivers → pipeline → telemetry).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from tracepass.collector.app.demo.triage import triage_lines
from tracepass.collector.config import (
    AssemblyConfig,
    CollectorConfig,
    EvaluationSettings,
    MatchingConfig,
    MetricsConfig,
    ReceiverConfig,
    StateConfig,
    UIConfig,
    WindowConfig,
)
from tracepass.collector.pipeline import ResultInfo
from tracepass.collector.service import CollectorService
from tracepass.evaluator.models import ConversationJudgeSpec, ConversationResult
from tracepass.evaluator.stats.rolling import KeySnapshot, RollingAggregator, RollingConfig

__all__ = ["DemoOptions", "DemoOutcome", "DemoState", "demo_config", "run_demo"]

BASELINE_SLIP = 0.02
KS = (1, 3, 5)
# The collector's own default (metrics.min_conversations): one threshold everywhere,
# as README and docs state it.
MIN_CONVERSATIONS: int = MetricsConfig.model_fields["min_conversations"].default
ALL_SETS = "*"
# The "run" window covers the run and a day of browsing it afterwards (--keep-serving):
# the web UI opens on it, so its rows do not fall to n 0 when the run ends.
RUN_WINDOW = "run"
RUN_WINDOW_MIN_S = 86400.0


def run_window_s(duration: float) -> float:
    return max(RUN_WINDOW_MIN_S, 2 * duration)


@dataclass
class DemoOptions:
    duration: float = 75.0
    rate: float = 4.0  # conversations per second
    regression_at: float | None = None  # default: half the duration
    regression_rate: float = 0.35
    seed: int = 0
    grpc_port: int = 4317
    http_port: int = 4318
    metrics_port: int = 9464
    report: Path = Path("tracepass-demo-report.html")
    live: bool = True
    examples: Path | None = None
    protocol: str = "http/protobuf"
    ports_file: Path | None = None
    # After the run, keep the collector (web UI, API, /metrics) up until Ctrl-C.
    keep_serving: bool = False

    @property
    def switch_at(self) -> float:
        return self.duration / 2 if self.regression_at is None else self.regression_at


@dataclass
class DemoState:
    """Shared by the agent thread (writes `sent`/`version`) and the event loop."""

    options: DemoOptions
    started: float = field(default_factory=time.monotonic)
    sent: int = 0
    version: str = "1.0"
    results: dict[str, ConversationResult] = field(default_factory=dict)
    # Per conversation: (cost in USD or None when unpriced, wall latency in s or None).
    costs: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    aggregator: RollingAggregator = field(init=False)
    notes: list[str] = field(default_factory=list)
    interrupted: bool = False
    # The run is over and --keep-serving keeps the collector up until Ctrl-C.
    serving: bool = False

    def __post_init__(self) -> None:
        d = self.options.duration
        self.aggregator = RollingAggregator(
            RollingConfig(
                windows=(("1m", 60.0), (RUN_WINDOW, run_window_s(d))),
                decay_half_life_s=15.0,
                decay_window_name="fast",
                ks=KS,
                min_conversations=MIN_CONVERSATIONS,
            )
        )

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def on_result(self, result: ConversationResult, info: ResultInfo) -> None:
        """Listener: per-version windows over all reference sets (the live view), and
        the latest evaluation of each conversation (the report)."""
        from tracepass.collector.export import result_success

        self.results[result.conversation_id] = result
        conv = info.conversation
        self.costs[result.conversation_id] = (
            None if conv.usage is None else conv.usage.cost_usd,
            None if conv.latency is None else conv.latency.duration_s,
        )
        self.aggregator.add(
            (result.agent_name or "agent", result.agent_version or "?", ALL_SETS),
            task=result.reference_id or "_unmatched",
            success=result_success(result),
            now=info.now,
            conversation_id=result.conversation_id,
            revision=info.revision,
        )

    def snapshot(self) -> list[KeySnapshot]:
        return self.aggregator.snapshot(time.time())


@dataclass
class DemoOutcome:
    state: DemoState
    ports: dict[str, int | None]
    metrics_url: str | None
    report: Path | None
    report_error: str | None = None
    # Top failure modes and reference candidates at the end (`triage.py`).
    triage: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------- config


def _port_available(port: int) -> bool:
    if port == 0:
        return True
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def choose_ports(options: DemoOptions) -> tuple[dict[str, int], list[str]]:
    """The requested ports, or 0 (any free port) for each one that is busy."""
    ports: dict[str, int] = {}
    notes: list[str] = []
    for name, port in (
        ("grpc", options.grpc_port),
        ("http", options.http_port),
        ("metrics", options.metrics_port),
    ):
        if _port_available(port):
            ports[name] = port
        else:
            ports[name] = 0
            notes.append(f"port {port} ({name}) is busy; using a free port instead")
    return ports, notes


def demo_config(
    references: Path,
    state_dir: Path,
    ports: dict[str, int],
    duration: float,
    judge: str | None = None,
) -> CollectorConfig:
    """Short timeouts and windows so the numbers move within a minute. `judge`: the
    scripted judge model, which judges every conversation's goal (`goal_completion`)."""
    return CollectorConfig(
        evaluation=demo_judging(judge),
        references=[references],
        receiver=ReceiverConfig(host="127.0.0.1", grpc_port=ports["grpc"], http_port=ports["http"]),
        assembly=AssemblyConfig(
            idle_timeout_s=5.0, trace_grace_s=2.0, retention_s=60.0, tick_interval_s=0.25
        ),
        state=StateConfig(path=state_dir / "state.sqlite", durability="none"),
        matching=MatchingConfig(reload_interval_s=2.0),
        metrics=MetricsConfig(
            prometheus_host="127.0.0.1",
            prometheus_port=ports["metrics"],
            windows=[
                WindowConfig(name="1m", seconds=60),
                WindowConfig(name=RUN_WINDOW, seconds=run_window_s(duration)),
            ],
            decay_half_life_s=15.0,
            ks=list(KS),
            min_conversations=MIN_CONVERSATIONS,
            emit_evaluation_events=False,
        ),
        ui=UIConfig(default_window=RUN_WINDOW),
    )


def demo_judging(judge: str | None) -> EvaluationSettings:
    """A `goal_completion` conversation judge through the examples' scripted model."""
    if judge is None:
        return EvaluationSettings()
    return EvaluationSettings(
        judge=judge,
        conversation_judges=[
            ConversationJudgeSpec(name="goal_completion", rubric="goal_completion")
        ],
    )


# ----------------------------------------------------------------------------- agent


def agent_loop(agent: ModuleType, state: DemoState, stop: threading.Event) -> None:
    """Play conversations at `rate` until the duration is over or `stop` is set."""
    opts = state.options
    # Unreferenced but consistent traffic too, so a reference candidate appears.
    scenarios = (*agent.SCENARIOS, *getattr(agent, "CANDIDATE_SCENARIOS", ()))
    interval = 1.0 / opts.rate
    next_at = time.monotonic()
    i = 0
    while not stop.is_set() and state.elapsed < opts.duration:
        regressed = state.elapsed >= opts.switch_at
        state.version = "1.1" if regressed else "1.0"
        rng = agent.conversation_rng(opts.seed, f"demo-{i}")
        scenario = scenarios[rng.randrange(len(scenarios))]
        agent.run_conversation(
            scenario,
            version=state.version,
            regression=opts.regression_rate if regressed else BASELINE_SLIP,
            rng=rng,
            conversation_id=f"demo-{opts.seed}-{i}",
        )
        state.sent += 1
        i += 1
        next_at += interval
        delay = next_at - time.monotonic()
        if delay > 0:
            stop.wait(min(delay, max(0.0, opts.duration - state.elapsed)))
        else:
            next_at = time.monotonic()  # running behind: do not burst to catch up


# ----------------------------------------------------------------------------- run


async def run_demo(
    options: DemoOptions,
    render: Callable[[DemoState, CollectorService], None],
    on_listening: Callable[[CollectorService], None] | None = None,
) -> DemoOutcome:
    """Run the whole demo; `render` is called a few times a second with the state."""
    from tracepass.collector.app.demo.examples import (
        find_examples,
        load_agent,
        load_scripted_judge,
    )

    examples = find_examples(options.examples)
    # Export quickly: the demo wants numbers within seconds, not the 5 s BSP default.
    os.environ.setdefault("OTEL_BSP_SCHEDULE_DELAY", "250")
    agent = load_agent(examples)
    from tracepass import instrumentation

    ports, notes = choose_ports(options)
    state = DemoState(options, notes=notes)
    report: tuple[Path | None, str | None] | None = None  # written before serving on
    with tempfile.TemporaryDirectory(prefix="tracepass-demo-") as tmp:
        config = demo_config(
            examples / "references",
            Path(tmp),
            ports,
            options.duration,
            judge=load_scripted_judge(examples),
        )
        service = CollectorService(
            config, listeners=[state.on_result], persist_interval_s=3600.0, end_grace_s=1.0
        )
        await service.start()
        stop = threading.Event()
        loop = asyncio.get_running_loop()
        installed: list[signal.Signals] = []

        def interrupt() -> None:
            state.interrupted = True
            stop.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, interrupt)
                installed.append(sig)
        try:
            if on_listening is not None:
                on_listening(service)
            endpoint = service.endpoint("grpc" if options.protocol == "grpc" else "http")
            instrumentation.configure(
                service_name="travel-assistant",
                endpoint=endpoint,
                protocol="grpc" if options.protocol == "grpc" else "http/protobuf",
            )
            state.started = time.monotonic()
            worker = asyncio.ensure_future(asyncio.to_thread(agent_loop, agent, state, stop))
            while not worker.done():
                render(state, service)
                await asyncio.wait({worker}, timeout=0.25)
            worker.result()
            # Last spans out, last conversations evaluated (bounded wait).
            await asyncio.to_thread(instrumentation.force_flush, 10_000)
            grace = 3.0 if state.interrupted else config.assembly.idle_timeout_s + 5.0
            deadline = time.monotonic() + grace
            while len(state.results) < state.sent and time.monotonic() < deadline:
                render(state, service)
                await asyncio.sleep(0.2)
            render(state, service)
            if options.keep_serving and not state.interrupted:
                # The run is complete; Ctrl-C now only ends the serving, so the summary
                # still says "finished". The report is written now (matplotlib's import
                # alone takes seconds), so Ctrl-C later ends the demo promptly.
                report = await asyncio.to_thread(_report, state, options)
                state.serving = True
                while not state.interrupted:
                    render(state, service)
                    await asyncio.sleep(0.5)
                state.interrupted = False
        finally:
            stop.set()
            await asyncio.to_thread(instrumentation.shutdown)
            for installed_sig in installed:
                loop.remove_signal_handler(installed_sig)
            bound = service.ports
            metrics_url = service.metrics_url
            triage: list[str] = []
            try:
                triage = triage_lines(service)
            except Exception as exc:  # the summary is a bonus: never fail the demo on it
                triage = [f"(failure modes not read: {exc})"]
            await service.stop()

    path, error = report if report is not None else _report(state, options)
    return DemoOutcome(
        state=state,
        ports={"grpc": bound.grpc, "http": bound.http, "metrics": bound.metrics},
        metrics_url=metrics_url,
        report=path,
        report_error=error,
        triage=triage,
    )


def _report(state: DemoState, options: DemoOptions) -> tuple[Path | None, str | None]:
    """(the report written, or None and why not)."""
    from tracepass.collector.app.report_extra import missing_report_extra

    if (missing := missing_report_extra("the HTML report")) is not None:
        return None, f"{missing} (report skipped)"
    try:
        return write_report(state, options.report), None
    except OSError as exc:
        return None, f"{options.report}: cannot write report: {exc.strerror or exc}"


def report_document(state: DemoState) -> dict[str, Any]:
    from tracepass.evaluator.offline.evaluation_run import build_document

    results = sorted(state.results.values(), key=lambda r: r.conversation_id)
    matched = [r for r in results if r.reference_id is not None]
    unmatched = [r.conversation_id for r in results if r.reference_id is None]
    return build_document(
        matched,
        list(KS),
        unmatched_ids=unmatched,
        metadata={
            "source": f"tracepass demo (seed {state.options.seed}, "
            f"{state.options.duration:g}s, regression {state.options.regression_rate:g} "
            f"from {state.options.switch_at:g}s)",
        },
    )


def write_report(state: DemoState, path: Path) -> Path:
    # matplotlib is imported only here: the demo must start in a few seconds.
    from tracepass.collector.app.report import render_report

    html = render_report(report_document(state), title="tracepass demo: travel-assistant")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html, encoding="utf-8")
    return path
