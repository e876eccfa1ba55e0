"""`CollectorService`: the long-running collector built from components and started.

One object builds what `tracepass serve`, `tracepass demo` and the embedded collector
of `tracepass probe` run, so the three cannot drift apart:

    telemetry (MeterProvider: Prometheus /metrics + optional OTLP push)
      → state file (span buffer, local results, window journal)
      → result chain: results store → metrics → rolling windows (restore, replay,
        persist: export/windows/) → evaluation events → failure log → listeners
      → Pipeline (references, assembly, matching, scoring) → the chain
      → read API and UI → OTLP receivers (gRPC + HTTP, /healthz, /readyz)

It does no work of its own: each component has `start`/`shutdown`, started bottom-up
(receivers last, so no span is accepted before the pipeline can take it) and shut down
in reverse. Any failure during `start()` unwinds what was already started, so a bad
reference file or a busy port leaves no thread or socket behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from tracepass.collector.api import (
    ConversationViews,
    ReadModel,
    ReviewQueue,
    Triage,
    conversation_routes,
    read_routes,
)
from tracepass.collector.config import CollectorConfig, ConfigError
from tracepass.collector.export import (
    UIBase,
    derive_ui_base,
    register_alert_link_gauges,
    register_budget_gauge,
    register_schema_check_counter,
)
from tracepass.collector.instruments import CollectorInstruments
from tracepass.collector.pipeline import (
    ConversationSampler,
    ListenerComponent,
    Pipeline,
    ResultChain,
    ResultComponent,
    ResultInfo,
    ResultsWriter,
)
from tracepass.collector.receiver import (
    BindError,
    GetRoute,
    MemoryGuard,
    ReceiverServers,
    RecordingSink,
    SpanSink,
)
from tracepass.collector.state import StateStore
from tracepass.evaluator.judge.call_budget import JudgeBudget
from tracepass.evaluator.judge.model_loading import JudgeSpecError, resolve_chat_model
from tracepass.evaluator.models import ConversationResult
from tracepass.evaluator.stats.rolling import KeySnapshot

__all__ = ["BoundPorts", "CollectorService", "ResultCallback", "build_evaluator"]

log = logging.getLogger(__name__)

ResultCallback = Callable[[ConversationResult, ResultInfo], Awaitable[None] | None]


@dataclass(frozen=True, slots=True)
class BoundPorts:
    """Ports actually bound (useful when the config asked for port 0)."""

    grpc: int | None
    http: int | None
    metrics: int | None


def load_judge(
    spec: str,
    *,
    threshold: float,
    concurrency: int,
    cache: Any,
    budget: Any = None,
    price: Any = None,
) -> Any:
    """`module:attr` → an `LLMJudge` around that langchain-core chat model (an instance
    or a zero-argument factory), paying its calls from `budget` if given and pricing them
    with `price` (a `pricing.PriceBook`). Errors are `ConfigError`s naming
    `evaluation.judge`."""
    try:
        model = resolve_chat_model(spec)
    except JudgeSpecError as exc:
        raise ConfigError(f"evaluation.judge {exc}") from exc
    from tracepass.evaluator.judge.llm_judge import LLMJudge

    return LLMJudge(
        model,
        pass_threshold=threshold,
        concurrency=concurrency,
        cache=cache,
        budget=budget,
        price=price,
    )


def conversation_judge_specs(ev: Any) -> list[Any]:
    """`evaluation.conversation_judges`, checked: each rubric fits its token budget, and
    the judges have a model (`evaluation.judge`). Errors are `ConfigError`s."""
    from tracepass.evaluator.judge.conversation_judges import ConversationJudgeError, compile_all

    specs = list(ev.conversation_judges)
    if specs and ev.judge is None:
        raise ConfigError(
            "evaluation.conversation_judges needs evaluation.judge (the chat model that judges)"
        )
    try:
        compile_all(specs)
    except ConversationJudgeError as exc:
        raise ConfigError(f"evaluation.conversation_judges: {exc}") from exc
    return specs


def build_evaluator(config: CollectorConfig, judge: Any = None) -> Any:
    """The evaluator `config.evaluation` describes (with `judge` for the llm grader)."""
    from tracepass.evaluator.scoring.evaluator import EvaluationConfig, Evaluator

    # The settings the scoring config shares with `evaluation:` (profile, thresholds,
    # default grader), by name: a field added to both needs no copying here.
    shared = set(EvaluationConfig.model_fields) & set(type(config.evaluation).model_fields)
    scoring = EvaluationConfig.model_validate(config.evaluation.model_dump(include=shared))
    return Evaluator(
        scoring, judge=judge, conversation_judges=conversation_judge_specs(config.evaluation)
    )


def shared_results_store(config: CollectorConfig) -> Any:
    """The PostgreSQL results store of `state.results_url` (None: the state file)."""
    url = config.state.results_url
    if url is None:
        return None
    from tracepass.collector.state.postgres import PostgresResults

    shared = PostgresResults(url)
    shared.failure_modes.max_per_version = config.failure_modes.max_per_version
    return shared


def retention_cutoff(config: CollectorConfig, now: float) -> float | None:
    """Results evaluated before this are deleted (None: kept forever)."""
    keep = config.state.results_retention_s
    if keep <= 0:
        return None
    return now - config.assembly.retention_s - keep


class CollectorService:
    """`await start()`, then `await stop()` (idempotent). Read `ports`, `metrics_url`,
    `snapshot()` and `views.conversation_view(id)` while running.

    Builds the components and starts them; the work is theirs: the state file (span
    buffer and local results), the result chain (`pipeline/components.py`: results
    store, metrics, rolling windows, events, failure log, `listeners`), the pipeline,
    the read API and the receivers."""

    def __init__(
        self,
        config: CollectorConfig,
        *,
        listeners: Sequence[ResultCallback] = (),
        persist_interval_s: float = 30.0,
        end_grace_s: float = 5.0,
        drain_grace_s: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.listeners = list(listeners)
        self.persist_interval_s = persist_interval_s
        self.end_grace_s = end_grace_s
        self.drain_grace_s = drain_grace_s
        self.clock = clock
        self.telemetry: Any = None
        self.pipeline: Pipeline | None = None
        self.views: ConversationViews | None = None
        self.read_model: ReadModel | None = None
        self.triage: Triage | None = None
        self.review: ReviewQueue | None = None
        self.metrics: Any = None
        self.receivers: ReceiverServers | None = None
        self.store: StateStore | None = None
        self.chain = ResultChain()
        self._recorded: Callable[[], int] = lambda: 0
        self._windows: Any = None  # the RollingWindows component
        self._forwarder: Any = None  # the ResultsForwarder (state.results_url)
        self._judge_cache: Any = None
        self._recorder: RecordingSink | None = None
        self._started = False
        self._stopped = False
        # The alert links' UI base URL (`tracepass_ui_info`), known once the HTTP port is.
        self.ui_base = UIBase()

    @property
    def evaluated(self) -> int:
        """Evaluations recorded (revisions included, stale ones not)."""
        return self._recorded()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        if self._started:
            raise RuntimeError("CollectorService already started")
        self._started = True
        try:
            await self._start()
        except BaseException:
            await self._teardown()
            raise

    async def _start(self) -> None:
        # Imported here: the metrics stack pulls in prometheus_client and the SDK, which
        # commands that never run a collector should not pay for.
        from tracepass.collector.export import (
            EvaluationMetrics,
            build_telemetry,
            rolling_config,
        )

        cfg = self.config
        self.telemetry = build_telemetry(
            cfg.metrics,
            default_host=cfg.receiver.host,
            fallback_bearer_token=cfg.receiver.bearer_token,
        )
        meter = self.telemetry.meter()
        instruments = CollectorInstruments.create(meter)
        register_schema_check_counter(meter)
        self.metrics = EvaluationMetrics(
            meter,
            cfg.metrics,
            clock=self.clock,
            exemplars=self.telemetry.exemplars,
        )
        register_alert_link_gauges(meter, self.ui_base, self.telemetry.exemplars)
        judge, budget = self._build_judge(meter)
        sampler = ConversationSampler(
            cfg.sampling,
            instruments,
            meter,
            budget=budget,
            default_grader=cfg.evaluation.default_grader,
            common_labels=self.metrics.common_labels,
            judges_every_conversation=bool(cfg.evaluation.conversation_judges),
        )
        self.store = StateStore(
            cfg.state.path,
            durability=cfg.state.durability,
            batch_max_delay_ms=cfg.state.batch_max_delay_ms,
        )
        shared = shared_results_store(cfg)
        results = ResultsWriter(self.store, results=shared)
        self.chain = self._build_chain(results, meter, shared)
        self.pipeline = Pipeline.from_config(
            cfg,
            build_evaluator(cfg, judge),
            instruments=instruments,
            meter=meter,
            listener=self.chain,
            clock=self.clock,
            end_grace_s=self.end_grace_s,
            sampler=sampler,
            store=self.store,
            results=results,
        )
        # tracepass_spans_unrecognized{scope}: scope labels bounded by the label limiter.
        self.pipeline.intake.scope_label = partial(self.metrics.limiter, "scope")
        # Started bottom-up: the state file, then every result consumer (the windows
        # restore and replay here), then the pipeline (references: a broken file fails
        # here; recovery may complete conversations, whose results the chain takes),
        # and the receivers last, so no span is accepted before the pipeline can take it.
        self.store.failure_modes.max_per_version = cfg.failure_modes.max_per_version
        if self._forwarder is not None:
            self.pipeline.readiness_checks.append(self._forwarder.readiness)
        await self._open_state_file()
        await self.chain.start()
        await self.pipeline.start()
        self.views = ConversationViews(self.pipeline)
        rolling = rolling_config(cfg.metrics)
        snapshots: Callable[[], Sequence[KeySnapshot]] = self.snapshot
        if shared is not None:
            # Every replica's agents, not only this one's windows (api/pooled.py).
            from tracepass.collector.api import pooled_snapshots

            snapshots = pooled_snapshots(shared, rolling, self.clock)
        self.read_model = ReadModel(
            shared if shared is not None else self.store.results,
            snapshots,
            rolling,
            clock=self.clock,
            query_timeout_s=cfg.limits.query_timeout_s,
        )
        await restore_failure_examples(self.metrics, self.telemetry, self.store)
        await self._start_receivers(instruments)
        derived = derive_ui_base(cfg.ui, cfg.receiver.host, self.ports.http)
        self.ui_base.url, self.ui_base.source = derived.url, derived.source
        self.ui_base.warning = derived.warning
        log.info(
            "collector listening: grpc=%s http=%s metrics=%s",
            self.ports.grpc,
            self.ports.http,
            self.metrics_url,
        )

    async def _open_state_file(self) -> None:
        """Open the state file; a damaged file or a read-only directory is a
        `StateError` naming the path (exit 2), not a traceback."""
        from tracepass.collector.state import unusable_state

        assert self.store is not None
        try:
            await asyncio.to_thread(self.store.open)
        except Exception as exc:
            error = unusable_state(self.store.path, exc)
            if error is None or error is exc:
                raise
            raise error from exc

    def _build_judge(self, meter: Any) -> tuple[Any, JudgeBudget | None]:
        ev = self.config.evaluation
        if ev.judge is None:
            return None, None
        if ev.judge_cache is not None:
            from tracepass.evaluator.judge.verdict_cache import JudgeCache

            self._judge_cache = JudgeCache(ev.judge_cache)
        budget = None
        limits = ev.judge_budget
        if (
            limits.calls_per_minute is not None
            or limits.calls_per_day is not None
            or limits.usd_per_day is not None
        ):
            budget = JudgeBudget(
                limits.calls_per_minute, limits.calls_per_day, usd_per_day=limits.usd_per_day
            )
            register_budget_gauge(meter, budget)
        judge = load_judge(
            ev.judge,
            threshold=ev.threshold,
            concurrency=ev.judge_concurrency,
            cache=self._judge_cache,
            budget=budget,
            price=self.config.pricing.book(),
        )
        # Judge calls by outcome (ok / error / cached / retry): tracepass_judge_calls_total;
        # their tokens and cost: tracepass_judge_tokens_total, tracepass_judge_cost_usd_total.
        judge.on_call = self.metrics.record_judge_call
        judge.on_spend = self.metrics.record_judge_spend
        return judge, budget

    def _build_chain(self, results: ResultsWriter, meter: Any, shared: Any) -> ResultChain:
        """The result consumers in the order each result visits them: stored first (its
        journal number goes on), counted (a stale revision stops the events and the
        failure line), noted by the windows, then the events, the failure log line and
        the caller's listeners."""
        from tracepass.collector.export import (
            EvaluationEvents,
            EventsComponent,
            FailureLogComponent,
            MetricsComponent,
            RollingWindows,
        )

        metrics = self.metrics
        counted = MetricsComponent(metrics)
        self._recorded = lambda: counted.recorded
        self._windows = RollingWindows(
            self.store, metrics, persist_interval_s=self.persist_interval_s
        )
        components: list[ResultComponent] = [results]
        if shared is not None:
            from tracepass.collector.pipeline.forwarding import ResultsForwarder

            assert self.store is not None
            self._forwarder = ResultsForwarder(
                self.store,
                shared,
                meter=meter,
                retention_cutoff=lambda: retention_cutoff(self.config, self.clock()),
            )
            components.append(self._forwarder)
        components += [counted, self._windows]
        event_logger = self.telemetry.event_logger()
        if event_logger is not None and self.config.metrics.emit_evaluation_events:
            events = EvaluationEvents(event_logger)
            components.append(EventsComponent(events, metrics.common_labels))
        components.append(FailureLogComponent())
        components.append(ListenerComponent(self._observe_candidate))
        components.append(ListenerComponent(lambda r, i: self.review and self.review.observe(r, i)))
        components.extend(ListenerComponent(listener) for listener in self.listeners)
        return ResultChain(components)

    async def _start_receivers(self, instruments: CollectorInstruments) -> None:
        cfg = self.config
        assert self.pipeline is not None
        assert self.views is not None
        assert self.read_model is not None
        routes = [*conversation_routes(self.views), *read_routes(self.read_model)]
        routes += triage_routes(self, cfg)
        write = self.triage.write if self.triage is not None else None
        # With a shared results database the queue and labels live there too.
        labels = self._forwarder.results.review if self._forwarder is not None else None
        self.review = ReviewQueue(cfg, self.pipeline, self.clock, write, labels=labels)
        routes += await self.review.start(self.read_model)  # tables, API and page routes
        if cfg.ui.enabled:
            from tracepass.collector.api import ui_routes

            routes += ui_routes(
                self.read_model,
                self.pipeline.latest_result,
                cfg.ui,
                write=self.triage.write if self.triage is not None else None,
                readiness=cfg.metrics.readiness_rule(),
                bind_host=cfg.receiver.host,
                review=self.review.pages,
            )
        memory = None
        if cfg.limits.max_memory_mb is not None:
            memory = MemoryGuard(
                cfg.limits.max_memory_mb,
                cfg.limits.soft_limit_ratio,
                on_hard=self.pipeline.shed_memory,
            )
        sink: SpanSink = self.pipeline
        if cfg.receiver.record_dir is not None:
            self._recorder = RecordingSink(
                self.pipeline,
                cfg.receiver.record_dir,
                max_file_bytes=cfg.receiver.record_max_file_bytes,
                max_bytes=cfg.receiver.record_max_bytes,
                max_age_s=cfg.receiver.record_max_age_s,
            )
            sink = self._recorder
        self.receivers = ReceiverServers(
            sink,
            instruments,
            cfg.receiver,
            extra_routes=routes,
            memory=memory,
        )
        if self.triage is not None:
            self.triage.mount(self.receivers.http_app)
        self.review.mount(self.receivers.http_app)
        await self.receivers.start()

    async def stop(self) -> None:
        """Drain receivers, evaluate what is due, persist, shut everything down."""
        if not self._started or self._stopped:
            return
        self._stopped = True
        await self._teardown()

    async def _teardown(self) -> None:
        """Shut down in the reverse order of `_start`: receivers drain first (exporters
        are told to retry), the pipeline evaluates what is due, the result components
        shut down (the windows' last snapshot, while the state file is still open), the
        pipeline persists open conversations, the state file closes, providers flush.
        Safe after a failed start: each part stops only what it started."""
        if self.receivers is not None:
            try:
                await self.receivers.stop(self.drain_grace_s)
            except Exception:
                log.exception("stopping the receivers failed")
            self.receivers = None
        if self._recorder is not None:
            self._recorder.close()
            self._recorder = None
        pipeline = self.pipeline
        if pipeline is not None and pipeline.ready():
            try:
                # Evaluate what is already due so the persisted windows include it.
                await pipeline.process_due()
            except Exception:
                log.exception("final evaluation failed")
        await self.chain.shutdown()
        if pipeline is not None:
            await pipeline.stop()
            self.pipeline = None
            self.views = None
            self.read_model = None
            self.triage = None
            self.review = None
        if self.store is not None:
            await asyncio.to_thread(self.store.close)  # a store that never opened: no-op
            self.store = None
        if self._judge_cache is not None:
            with contextlib.suppress(Exception):
                self._judge_cache.close()
            self._judge_cache = None
        if self.telemetry is not None:
            self.telemetry.shutdown()
            self.telemetry = None

    async def __aenter__(self) -> CollectorService:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _observe_candidate(self, result: ConversationResult, info: ResultInfo) -> None:
        """The reference-candidates link of the chain (after the failure log)."""
        if self.triage is not None:
            self.triage.candidates.observe(result, info.conversation)

    async def persist(self) -> None:
        """Persist the rolling windows now (also done periodically and at stop)."""
        if self._windows is not None:
            await self._windows.persist()

    # ------------------------------------------------------------------ views

    @property
    def ports(self) -> BoundPorts:
        r = self.receivers
        return BoundPorts(
            grpc=r.grpc_port if r is not None else None,
            http=r.http_port if r is not None else None,
            metrics=self.telemetry.prometheus_port if self.telemetry is not None else None,
        )

    @property
    def metrics_url(self) -> str | None:
        return self.telemetry.prometheus_url if self.telemetry is not None else None

    @property
    def ui_url(self) -> str | None:
        """Loopback URL of the web UI (None when it or the HTTP receiver is off)."""
        if not self.config.ui.enabled:
            return None
        base = self.endpoint("http")
        return None if base is None else f"{base}/ui/"

    def endpoint(self, protocol: str = "http") -> str | None:
        """Loopback URL an exporter on this machine should use."""
        port = self.ports.http if protocol == "http" else self.ports.grpc
        return None if port is None else f"http://127.0.0.1:{port}"

    def snapshot(self) -> list[KeySnapshot]:
        """The rolling windows now (what the pass@k / pass^k gauges export)."""
        return [] if self.metrics is None else list(self.metrics.snapshot())


def triage_routes(service: CollectorService, cfg: CollectorConfig) -> list[GetRoute]:
    """Failure modes and reference candidates (`api/triage.py`): their read routes;
    the write routes are mounted on the HTTP app before it starts."""
    assert service.pipeline is not None
    service.triage = Triage(cfg, service.pipeline, service.clock)
    fed = service.triage.warm_up()
    if fed:
        log.info("reference candidates: %d unreferenced stored results read", fed)
    assert service.read_model is not None
    return service.triage.read_routes(service.read_model)


async def restore_failure_examples(metrics: Any, telemetry: Any, store: StateStore | None) -> None:
    """`tracepass_failure_example` (the alert's example trace) from the state file's
    latest failing result per series, so a restart does not leave the alert with
    `example_trace_id = none` until the next failure."""
    if metrics is None or telemetry is None or store is None:
        return
    if telemetry.exemplars is None:
        return
    rows = await asyncio.to_thread(store.results.latest_failures)
    metrics.restore_failure_examples(rows)


def with_overrides(
    config: CollectorConfig,
    *,
    references: Sequence[Any] | None = None,
    host: str | None = None,
    grpc_port: int | None = None,
    http_port: int | None = None,
    metrics_port: int | None = None,
    state: Any | None = None,
    durability: str | None = None,
    record_dir: Any | None = None,
    results_url: str | None = None,
) -> CollectorConfig:
    """`config` with command-line flags applied (None = keep the file's value);
    re-validated, so a flag cannot smuggle in a value the file could not hold."""
    data = config.model_dump()
    if references:
        data["references"] = list(references)
    if host is not None:
        data["receiver"]["host"] = host
    if grpc_port is not None:
        data["receiver"]["grpc_port"] = grpc_port
    if http_port is not None:
        data["receiver"]["http_port"] = http_port
    if metrics_port is not None:
        data["metrics"]["prometheus_port"] = metrics_port
    if state is not None:
        data["state"]["path"] = state
    if durability is not None:
        data["state"]["durability"] = durability
    if record_dir is not None:
        data["receiver"]["record_dir"] = record_dir
    if results_url is not None:
        data["state"]["results_url"] = results_url
    from pydantic import ValidationError

    try:
        return CollectorConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"{where}: {first['msg']}") from exc


_FLAG_OF_SETTING = {
    "receiver.grpc_port": "--grpc-port",
    "receiver.http_port": "--http-port",
    "metrics.prometheus_port": "--metrics-port",
}


def startup_error(exc: BaseException) -> str | None:
    """The message to show when `CollectorService.start()` failed on bad input or an
    unavailable resource (exit code 2), or None for a bug (let it propagate)."""
    from tracepass.collector.state import StateError
    from tracepass.evaluator.references import ReferenceLoadError

    if isinstance(exc, ConfigError | ReferenceLoadError | StateError):
        return str(exc)
    if isinstance(exc, sqlite3.DatabaseError):  # read after recovery (pipeline names the path)
        return f"the state file is damaged ({exc}); restore it or move it away (state.path)"
    if isinstance(exc, BindError):
        flag = _FLAG_OF_SETTING.get(exc.setting)
        where = f"{flag} {exc.port} ({exc.setting})" if flag else f"{exc.setting} {exc.port}"
        return f"{where}: {exc.reason}"
    if isinstance(exc, OSError):
        # aiohttp / prometheus_client bind errors: errno + address.
        return f"cannot listen: {exc.strerror or exc}" + (
            f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        )
    text = str(exc)
    if isinstance(exc, RuntimeError) and ("bind" in text.lower() or "port" in text.lower()):
        return f"cannot listen: {text}"
    return None
