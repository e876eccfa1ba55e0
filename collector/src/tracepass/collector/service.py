"""`CollectorService`: the long-running collector assembled from its stages.

One object owns the lifecycle of everything `tracepass serve`, `tracepass demo` and the
embedded collector of `tracepass probe` run, so the three cannot drift apart:

    telemetry (MeterProvider: Prometheus /metrics + optional OTLP push)
      → operational instruments → Evaluator (+ optional LLM judge)
      → Pipeline (references, durable state, assembly, matching, scoring)
      → RollingAggregator (restored from state, persisted periodically and on stop)
      → EvaluationMetrics (counters, gauges, evaluation events)
      → OTLP receivers (gRPC + HTTP, /healthz, /readyz, /api/v1/conversations/{id})

Start order is bottom-up (receivers last, so no span is accepted before the pipeline
can take it); stop order is the reverse: receivers drain first (exporters are told to
retry), the pipeline evaluates what is due, the aggregator is persisted while the state
file is still open, then the pipeline persists open conversations and the providers
flush. Any failure during `start()` unwinds what was already started, so a bad
reference file or a busy port leaves no thread or socket behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tracepass.collector.api import ConversationViews, ReadModel, conversation_routes, read_routes
from tracepass.collector.api.review import ReviewQueue
from tracepass.collector.api.triage import Triage
from tracepass.collector.api.write_access import mount_write_routes
from tracepass.collector.config import CollectorConfig, ConfigError
from tracepass.collector.export.alert_links import register_alert_link_gauges
from tracepass.collector.export.budget import register_budget_gauge
from tracepass.collector.export.schema_checks import register_schema_check_counter
from tracepass.collector.instruments import CollectorInstruments
from tracepass.collector.pipeline import Pipeline, ResultInfo
from tracepass.collector.pipeline.sampling import ConversationSampler
from tracepass.collector.receiver import ReceiverServers
from tracepass.collector.receiver.binding import BindError
from tracepass.collector.receiver.http_server import GetRoute
from tracepass.collector.receiver.memory import MemoryGuard
from tracepass.collector.receiver.recording import RecordingSink
from tracepass.collector.receiver.sink import SpanSink
from tracepass.collector.state import JOURNAL_RESULT, JOURNAL_WINDOW
from tracepass.evaluator.judge_budget import JudgeBudget
from tracepass.evaluator.judge_loading import JudgeSpecError, resolve_chat_model
from tracepass.evaluator.models import ConversationResult
from tracepass.evaluator.rolling import KeySnapshot, RollingAggregator, StateCapture

__all__ = ["AGGREGATOR_BLOB", "BoundPorts", "CollectorService", "ResultCallback"]

log = logging.getLogger(__name__)

AGGREGATOR_BLOB = "rolling_aggregator"

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
    from tracepass.evaluator.judge import LLMJudge

    return LLMJudge(
        model,
        pass_threshold=threshold,
        concurrency=concurrency,
        cache=cache,
        budget=budget,
        price=price,
    )


def judge_price_book(config: CollectorConfig) -> Any:
    """The prices of the judge's own calls: the config's `pricing.models` (when this
    build's config has that section) over the `genai-prices` library."""
    from tracepass.evaluator.pricing import PriceBook

    pricing = getattr(config, "pricing", None)
    models = getattr(pricing, "models", None)
    return PriceBook(models if isinstance(models, dict) else None)


def conversation_judge_specs(ev: Any) -> list[Any]:
    """`evaluation.conversation_judges`, checked: each rubric fits its token budget, and
    the judges have a model (`evaluation.judge`). Errors are `ConfigError`s."""
    from tracepass.evaluator.conversation_judges import ConversationJudgeError, compile_all

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


class CollectorService:
    """`await start()`, then `await stop()` (idempotent). Read `ports`, `metrics_url`,
    `snapshot()` and `views.conversation_view(id)` while running."""

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
        self.review_pages: Any = None  # api/ui/review.py ReviewPages, with the UI on
        self.metrics: Any = None
        self.receivers: ReceiverServers | None = None
        self._judge_cache: Any = None
        self._recorder: RecordingSink | None = None
        self._persist_task: asyncio.Task[None] | None = None
        self._metrics_ready = asyncio.Event()
        self._journal_applied = 0  # highest window-journal entry in the windows
        self._started = False
        self._stopped = False
        self.evaluated = 0  # evaluations recorded (revisions included)

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
        from tracepass.collector.export.metrics import EvaluationMetrics, rolling_config
        from tracepass.collector.export.telemetry import build_telemetry
        from tracepass.collector.export.window_entry import journal_entry
        from tracepass.evaluator.scoring import EvaluationConfig, Evaluator

        cfg = self.config
        ev = cfg.evaluation
        self.telemetry = build_telemetry(
            cfg.metrics,
            default_host=cfg.receiver.host,
            fallback_bearer_token=cfg.receiver.bearer_token,
        )
        meter = self.telemetry.meter()
        instruments = CollectorInstruments.create(meter)
        register_schema_check_counter(meter)
        judge = None
        budget = None
        if ev.judge is not None:
            if ev.judge_cache is not None:
                from tracepass.evaluator.judge_cache import JudgeCache

                self._judge_cache = JudgeCache(ev.judge_cache)
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
                price=judge_price_book(cfg),
            )
        sampler = ConversationSampler(
            cfg.sampling,
            instruments,
            meter,
            budget=budget,
            default_grader=ev.default_grader,
            common_labels=self._common_labels,
            judges_every_conversation=bool(ev.conversation_judges),
        )
        evaluator = Evaluator(
            EvaluationConfig(
                profile=ev.profile,
                threshold=ev.threshold,
                tool_threshold=ev.tool_threshold,
                default_grader=ev.default_grader,
            ),
            judge=judge,
            conversation_judges=conversation_judge_specs(ev),
        )
        self.pipeline = Pipeline.from_config(
            cfg,
            evaluator,
            instruments=instruments,
            meter=meter,
            listener=self._on_result,
            journal_entry=journal_entry,
            clock=self.clock,
            end_grace_s=self.end_grace_s,
            sampler=sampler,
        )
        if self.pipeline.store is not None:
            self.pipeline.store.failure_modes.max_per_version = cfg.failure_modes.max_per_version
        # Loads references (a broken file fails here) and recovers durable state.
        await self.pipeline.start()
        aggregator = self._restore_aggregator(rolling_config(cfg.metrics))
        self.metrics = EvaluationMetrics(
            meter,
            cfg.metrics,
            aggregator,
            event_logger=self.telemetry.event_logger(),
            clock=self.clock,
            exemplars=self.telemetry.exemplars,
        )
        self._replay_window_journal()
        register_alert_link_gauges(meter, cfg.ui, self.telemetry.exemplars)
        if judge is not None:
            # Judge calls by outcome (ok / error / cached / retry): tracepass_judge_calls_total;
            # their tokens and cost: tracepass_judge_tokens_total, tracepass_judge_cost_usd_total.
            judge.on_call = self.metrics.record_judge_call
            judge.on_spend = self.metrics.record_judge_spend
        self._metrics_ready.set()
        self.views = ConversationViews(self.pipeline)
        self.read_model = ReadModel(
            self.pipeline.store,
            self.snapshot,
            rolling_config(cfg.metrics),
            clock=self.clock,
            query_timeout_s=cfg.limits.query_timeout_s,
        )
        routes = [*conversation_routes(self.views), *read_routes(self.read_model)]
        routes += self._triage_routes(cfg)
        routes += await self._review_routes(cfg)
        if cfg.ui.enabled:
            from tracepass.collector.api.ui import ui_routes

            routes += ui_routes(
                self.read_model,
                self.pipeline.latest_result,
                cfg.ui,
                write=self.triage.write if self.triage is not None else None,
                headline_k=cfg.metrics.headline_k,
                bind_host=cfg.receiver.host,
                review=self.review_pages,
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
        self._mount_review()
        await self.receivers.start()
        self._persist_task = asyncio.create_task(self._persist_loop(), name="tracepass-persist")
        log.info(
            "collector listening: grpc=%s http=%s metrics=%s",
            self.receivers.grpc_port,
            self.receivers.http_port,
            self.metrics_url,
        )

    def _common_labels(
        self, agent_name: str | None, agent_version: str | None, reference_set: str | None
    ) -> dict[str, str]:
        if self.metrics is None:  # decisions before metrics exist carry no common labels
            return {}
        labels: dict[str, str] = self.metrics.common_labels(
            agent_name, agent_version, reference_set
        )
        return labels

    async def stop(self) -> None:
        """Drain receivers, evaluate what is due, persist, shut everything down."""
        if not self._started or self._stopped:
            return
        self._stopped = True
        await self._teardown()

    async def _teardown(self) -> None:
        self._metrics_ready.set()  # never leave a result listener waiting on a failed start
        if self._persist_task is not None:
            self._persist_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._persist_task
            self._persist_task = None
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
        if pipeline is not None:
            try:
                if pipeline.ready() and self.metrics is not None:
                    # Evaluate what is already due so the persisted windows include it;
                    # pipeline.stop() would do it too, but after closing the state file.
                    await pipeline.process_due()
                    await self.persist()
            except Exception:
                log.exception("final evaluation / persisting the rolling windows failed")
            # Persists open conversations and closes the state file (also after a
            # failed start: closing a store that never opened is a no-op).
            await pipeline.stop()
            self.pipeline = None
            self.views = None
            self.read_model = None
            self.triage = None
            self.review = None
            self.review_pages = None
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

    # ------------------------------------------------------------------ results

    def _triage_routes(self, cfg: CollectorConfig) -> list[GetRoute]:
        """Failure modes and reference candidates (`api/triage.py`): their read routes;
        the write routes are mounted on the HTTP app before it starts."""
        assert self.pipeline is not None
        self.triage = Triage(cfg, self.pipeline, self.clock)
        fed = self.triage.warm_up()
        if fed:
            log.info("reference candidates: %d unreferenced stored results read", fed)
        assert self.read_model is not None
        return self.triage.read_routes(self.read_model)

    async def _review_routes(self, cfg: CollectorConfig) -> list[GetRoute]:
        """The review queue (`api/review.py`): its tables, its read routes and, with the
        UI, its page; the write routes are mounted with the triage's (`_mount_review`)."""
        assert self.pipeline is not None
        assert self.triage is not None
        self.review = ReviewQueue(cfg, self.pipeline, self.clock)
        await self.review.open()
        assert self.read_model is not None
        routes = self.review.read_routes(self.read_model)
        if cfg.ui.enabled:
            from tracepass.collector.api.ui.review import ReviewPages
            from tracepass.collector.api.ui.security import allowed_hosts

            hosts = allowed_hosts(cfg.ui.allowed_hosts, cfg.receiver.host)
            self.review_pages = ReviewPages(self.review, self.triage.write, hosts)
            routes += self.review_pages.read_routes()
        return routes

    def _mount_review(self) -> None:
        app = self.receivers.http_app if self.receivers is not None else None
        if self.review is None or self.triage is None or app is None:
            return
        routes = self.review.write_routes()
        if self.review_pages is not None:
            routes += self.review_pages.write_routes()
        mount_write_routes(app, self.triage.write, routes)

    async def _on_result(self, result: ConversationResult, info: ResultInfo) -> None:
        # State recovery can complete conversations before the metrics exist.
        await self._metrics_ready.wait()
        if self.metrics is None:  # start() failed before the metrics existed
            return
        recorded = self.metrics.record(
            result,
            revision=info.revision,
            lag_s=info.lag_s,
            now=info.now,
            conversation=info.conversation,
        )
        if info.journal_seq is not None:
            self._journal_applied = max(self._journal_applied, info.journal_seq)
        if recorded:
            from tracepass.collector.export.failure_log import log_failure

            log_failure(result, info.conversation, info.revision)
        if self.triage is not None:
            self.triage.candidates.observe(result, info.conversation)
        if self.review is not None:
            try:
                await self.review.observe(result, info)
            except Exception:
                log.exception("review queue: %s not queued", result.conversation_id)
        self.evaluated += 1
        for listener in self.listeners:
            try:
                ret = listener(result, info)
                if inspect.isawaitable(ret):
                    await ret
            except Exception:
                log.exception("result listener failed for %s", result.conversation_id)

    # ------------------------------------------------------------------ rolling state

    def _restore_aggregator(self, config: Any) -> RollingAggregator:
        store = self.pipeline.store if self.pipeline is not None else None
        if store is None:
            return RollingAggregator(config)
        blob = store.get_blob(AGGREGATOR_BLOB)
        if blob is None:
            return RollingAggregator(config)
        try:
            agg = RollingAggregator.from_state(json.loads(blob), config)
        except (ValueError, KeyError, TypeError) as exc:
            # The windows are a cache of evaluated outcomes: losing them costs history,
            # refusing to start would cost the service. Say so loudly.
            log.error(
                "%s: rolling windows could not be restored, starting empty: %s",
                store.path,
                exc,
            )
            return RollingAggregator(config)
        log.info("restored rolling windows for %d keys from %s", len(agg), store.path)
        return agg

    def _replay_window_journal(self) -> None:
        """Evaluations committed after the restored snapshot (up to a crash) go back into
        the windows from the state file's journal, so the windows equal those of a run
        that never stopped. Entries this process writes are applied by `_on_result`."""
        store = self.pipeline.store if self.pipeline is not None else None
        metrics = self.metrics
        if store is None or metrics is None:
            return
        from tracepass.collector.export.window_entry import decode_entries

        upto = store.journal_upto(AGGREGATOR_BLOB)
        self._journal_applied = upto
        entries = store.window_journal(upto, store.journal_seq_at_open)
        replayed = bad = 0
        for entry in entries:
            try:
                if entry.format == JOURNAL_RESULT:  # written before schema version 5
                    result = ConversationResult.model_validate_json(entry.text)
                    added = metrics.replay(result, revision=entry.revision, now=entry.evaluated_at)
                elif entry.format == JOURNAL_WINDOW:
                    added = False
                    for window in decode_entries(entry.text):  # + judge series' entries
                        added |= metrics.replay_entry(
                            window, revision=entry.revision, now=entry.evaluated_at
                        )
                else:
                    raise ValueError(f"unknown journal entry format {entry.format}")
            except ValueError as exc:
                bad += 1
                log.error("%s: window journal entry %d unreadable: %s", store.path, entry.seq, exc)
                continue
            if added:
                replayed += 1
            self._journal_applied = max(self._journal_applied, entry.seq)
        if entries:
            log.info(
                "rolling windows: %d evaluations replayed from the journal of %s (%d unreadable)",
                replayed,
                store.path,
                bad,
            )

    async def persist(self) -> None:
        """Write the rolling aggregator's state into the state file (no-op if closed)."""
        pipeline, metrics = self.pipeline, self.metrics
        if pipeline is None or pipeline.store is None or metrics is None:
            return
        # A point-in-time copy under the lock every reader and writer of the aggregator
        # takes (tens of ms at a million entries); encoding it costs far more and runs in
        # a worker thread, so neither the receivers nor `record` wait for it.
        with metrics._lock:
            capture = metrics.aggregator.capture()
            # Every journal entry up to here is in the capture (entries are applied in
            # commit order); the store drops them with the snapshot, atomically.
            upto = self._journal_applied
        blob = await asyncio.to_thread(_encode_state, capture)
        await asyncio.wrap_future(pipeline.store.put_blob(AGGREGATOR_BLOB, blob, journal_upto=upto))

    async def _persist_loop(self) -> None:
        last = -1
        while True:
            await asyncio.sleep(self.persist_interval_s)
            if self.evaluated == last:
                continue
            last = self.evaluated
            try:
                await self.persist()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("persisting the rolling windows failed")

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


def _encode_state(capture: StateCapture) -> bytes:
    """The captured rolling windows as JSON bytes (in a worker thread: the capture is a
    copy, so nothing here touches the live aggregator)."""
    return json.dumps(capture.to_state(), separators=(",", ":"), allow_nan=False).encode()


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
