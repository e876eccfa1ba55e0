"""Configuration of `tracepass serve` (YAML file, overridden by CLI flags).

Every field has a default that is sane for a single collector in production; the demo
and the tests shorten the time-based ones. `docs/configuration.md` documents each field.
Each section belongs to one stage: a stage reads only its own section.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Literal, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from tracepass.evaluator.models import ConversationJudgeSpec
from tracepass.evaluator.pricing import ModelPrice, PriceBook
from tracepass.evaluator.stats.readiness import HEADLINE_K, TARGET, ReadinessRule
from tracepass.evaluator.strict_yaml import YamlFileError, locate, locations, parse, read_text
from tracepass.evaluator.vocabulary import DEFAULT_GRADER, PROFILE_DEFAULT, DefaultGrader, Profile


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TLSConfig(_Section):
    cert_file: Path
    key_file: Path


class ReceiverConfig(_Section):
    # Loopback by default, as the OpenTelemetry Collector's receivers: the API and UI
    # serve conversation contents, so reaching other machines is an explicit choice
    # (`0.0.0.0`, set by the compose and Kubernetes manifests).
    host: str = "127.0.0.1"
    grpc_port: int = Field(default=4317, ge=0, le=65535)
    http_port: int = Field(default=4318, ge=0, le=65535)
    grpc_enabled: bool = True
    http_enabled: bool = True
    # Cap on one request's *decompressed* size (a gzip bomb is cut off while streaming).
    max_request_bytes: int = Field(default=16 * 1024 * 1024, gt=0)
    # Concurrent export requests being ingested before answering 429 / RESOURCE_EXHAUSTED.
    max_inflight_requests: int = Field(default=64, gt=0)
    retry_after_s: float = Field(default=1.0, gt=0)
    # Slow-client defences: open connections per port (HTTP and gRPC each) beyond the
    # limit are refused (HTTP: 503); null fits the default (1024) under the process's
    # file limit (receiver/fd_budget.py). An HTTP connection must deliver complete
    # request headers within header_timeout_s (gRPC: its handshake), and a body or gRPC
    # message within body_timeout_s (else 408 / DEADLINE_EXCEEDED).
    max_connections: int | None = Field(default=None, gt=0)
    header_timeout_s: float = Field(default=10.0, gt=0)
    body_timeout_s: float = Field(default=60.0, gt=0)
    # gRPC: concurrent calls per connection (HTTP/2 MAX_CONCURRENT_STREAMS), and how
    # long a connection without calls stays open (an HTTP keep-alive connection gets
    # header_timeout_s).
    grpc_max_concurrent_streams: int = Field(default=100, gt=0)
    grpc_idle_timeout_s: float = Field(default=120.0, gt=0)
    bearer_token: str | None = None
    tls: TLSConfig | None = None
    # Record every accepted export request to size-rotated files here (`serve --record`).
    record_dir: Path | None = None
    record_max_file_bytes: int = Field(default=64 * 1024 * 1024, gt=0)
    # Bounds on the whole recording (null: none): the oldest files are deleted once all
    # of them together exceed record_max_bytes, or once their last write is older than
    # record_max_age_s (the file being written is rotated at that age first).
    record_max_bytes: int | None = Field(default=None, gt=0)
    record_max_age_s: float | None = Field(default=None, gt=0)


class AssemblyConfig(_Section):
    idle_timeout_s: float = Field(default=300.0, gt=0)
    # A conversation with no conversation id (the trace is the conversation) closes this
    # long after its root span ended.
    trace_grace_s: float = Field(default=30.0, ge=0)
    # After evaluation, late spans within this horizon cause a re-evaluation (revision).
    retention_s: float = Field(default=3600.0, ge=0)
    max_open_conversations: int = Field(default=10_000, gt=0)
    max_buffered_spans: int = Field(default=1_000_000, gt=0)
    max_spans_per_conversation: int = Field(default=10_000, gt=0)
    # GenAI log events held while their spans have not arrived (buffers of events
    # only): their own budget, never made room for by evicting a conversation; beyond
    # it the oldest are dropped (tracepass_log_events_dropped{reason="orphan_budget"}),
    # and one logs request holding more such events than this is refused (503).
    max_orphan_events: int = Field(default=10_000, gt=0)
    # Extra span/resource attribute keys that carry a conversation id, tried after the
    # built-in ones (gen_ai.conversation.id, session.id, traceloop association properties).
    conversation_id_keys: list[str] = Field(default_factory=list)
    tick_interval_s: float = Field(default=1.0, gt=0)


class StateConfig(_Section):
    path: Path = Path("tracepass-state/state.sqlite")
    # none: no durability (fastest); batch: spans are committed (WAL) before the client
    # is acknowledged, many requests per commit.
    durability: Literal["none", "batch"] = "batch"
    batch_max_delay_ms: float = Field(default=5.0, ge=0)
    # Evaluation results (served by /api/v1/conversations/{id}) are deleted this long after
    # their spans were purged; 0 keeps them forever. Metrics never read them back.
    results_retention_s: float = Field(default=7 * 86400.0, ge=0)
    # Where evaluation results are stored and read back by the API and UI: null = this
    # state file (one replica); `postgresql://user@host:port/db` = one PostgreSQL
    # database shared by several replicas, so any replica shows all of them. Results
    # wait in this state file's outbox while the database is unreachable.
    results_url: str | None = None

    @field_validator("results_url")
    @classmethod
    def _postgres_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("postgresql://", "postgres://")):
            raise ValueError("must be a postgresql:// URL (or null for the state file)")
        return value


class MatchingConfig(_Section):
    fuzzy: bool = True
    fuzzy_threshold: float = Field(default=90.0, ge=0, le=100)
    reload_interval_s: float = Field(default=2.0, gt=0)


class JudgeBudgetConfig(_Section):
    # null: unlimited. A call the budget cannot pay for makes its conversation
    # `skipped_budget` (no trial), never a failure.
    calls_per_minute: float | None = Field(default=None, gt=0)
    calls_per_day: int | None = Field(default=None, ge=0)
    # The judge's spend in USD per UTC day (its calls' reported tokens, priced): once
    # reached, judge-needing conversations are `skipped_budget` until midnight UTC.
    usd_per_day: float | None = Field(default=None, ge=0, allow_inf_nan=False)


class EvaluationSettings(_Section):
    profile: Profile = PROFILE_DEFAULT
    threshold: float = Field(default=0.7, ge=0, le=1)
    tool_threshold: float = Field(default=1.0, ge=0, le=1)
    default_grader: DefaultGrader = DEFAULT_GRADER
    # module:attr of a langchain-core BaseChatModel instance or factory, for the llm grader.
    judge: str | None = None
    judge_concurrency: int = Field(default=4, gt=0)
    judge_cache: Path | None = None
    judge_budget: JudgeBudgetConfig = JudgeBudgetConfig()
    # `command` graders run programs as the collector's user: off unless set here (a
    # reference file alone cannot turn them on). docs/graders.md.
    allow_command_graders: bool = False

    # Judges of whole conversations (docs/judges.md); they need `judge`.
    conversation_judges: list[ConversationJudgeSpec] = Field(default_factory=list)

    @field_validator("conversation_judges")
    @classmethod
    def _judges_usable(cls, value: list[ConversationJudgeSpec]) -> list[ConversationJudgeSpec]:
        # Unique names, and each rubric fits its token budget (refused here, at load).
        from tracepass.evaluator.judge.conversation_judges import (
            ConversationJudgeError,
            compile_all,
        )

        try:
            compile_all(value)
        except ConversationJudgeError as exc:
            raise ValueError(str(exc)) from None
        return value


class SamplingRuleConfig(_Section):
    # Globs (fnmatch, case-sensitive); a field left out matches anything. reference_set
    # matches only conversations whose spans name their reference (an explicit id).
    agent_name: str | None = None
    agent_version: str | None = None
    reference_set: str | None = None
    rate: float = Field(ge=0, le=1)


class SamplingConfig(_Section):
    # Share of conversations evaluated, decided from the conversation id alone (the
    # formula in docs/configuration.md), so replicas with one seed agree.
    rate: float = Field(default=1.0, ge=0, le=1)
    seed: str = ""
    # First matching rule wins; else `rate`.
    rules: list[SamplingRuleConfig] = Field(default_factory=list)
    # Lower the share of judge-needing conversations so the judge's daily budget lasts.
    adaptive: bool = False


class WindowConfig(_Section):
    name: str
    seconds: float = Field(gt=0)


# Added to retention + idle timeout for the windows' revision horizon: a revision is
# evaluated after its late span settles and waits its turn in the evaluation queue.
REVISION_MARGIN_S = 600.0


class MetricsConfig(_Section):
    prometheus_enabled: bool = True
    # None: the receivers' host (`receiver.host`, i.e. `--host`).
    prometheus_host: str | None = None
    prometheus_port: int = Field(default=9464, ge=0, le=65535)
    # When set, /metrics answers 401 unless `Authorization: Bearer <token>` is sent.
    # None: receiver.bearer_token's (any token set protects /metrics); "": open.
    bearer_token: str | None = None
    # Exemplars carry trace ids only; true adds the conversation id (user data).
    exemplar_conversation_ids: bool = False
    # OTLP metrics push; None disables it unless OTEL_EXPORTER_OTLP_(METRICS_)ENDPOINT is set.
    otlp_endpoint: str | None = None
    otlp_protocol: Literal["grpc", "http/protobuf"] = "http/protobuf"
    # Bound on one OTLP export (metrics and evaluation events), retries included, so an
    # unreachable endpoint never holds up SIGTERM for longer than about this.
    otlp_timeout_s: float = Field(default=5.0, gt=0)
    export_interval_s: float = Field(default=15.0, gt=0)
    windows: list[WindowConfig] = Field(
        default_factory=lambda: [
            WindowConfig(name="1h", seconds=3600),
            WindowConfig(name="24h", seconds=86400),
        ]
    )
    # Half-life of the exponentially decayed "fast" window.
    decay_half_life_s: float = Field(default=900.0, gt=0)
    ks: list[int] = Field(default_factory=lambda: [1, 3, 5])
    # The one k every surface headlines (web UI, dashboard default, alert target,
    # readiness): pass^headline_k. One of `ks` when set; when ks lacks the default 3,
    # the UI headlines the largest k.
    headline_k: int = Field(default=HEADLINE_K, ge=1)
    # The pass^headline_k target of the readiness rule: "production ready" when the
    # credible interval's lower bound is above it, "needs improvement" when its upper
    # bound is below it (the rules' tracepass:pass_pow_k_target: keep them equal).
    pass_pow_k_target: float = Field(default=TARGET, gt=0, lt=1)
    credible_level: float = Field(default=0.95, gt=0, lt=1)
    prior: Literal["uniform", "jeffreys"] = "uniform"
    min_conversations: int = Field(default=20, ge=1)
    cusum_p0: float = Field(default=0.9, gt=0, lt=1)
    cusum_p1: float = Field(default=0.7, gt=0, lt=1)
    # The rolling windows count outcomes per bucket of this many seconds: a window holds
    # its last ceil(seconds / window_bucket_s) buckets (docs/statistics.md, "Buckets").
    # null: 60 s, or a 60th of the shortest window when that is shorter (a window's edge
    # then moves by at most 1/60 of it).
    window_bucket_s: float | None = Field(default=None, gt=0)
    # How long after its last evaluation a conversation's outcome can still be replaced
    # by a revision (null: assembly.retention_s + assembly.idle_timeout_s + 600 s, the
    # longest gap between two evaluations of one conversation); later, a revision
    # counts as a new conversation. Window memory holds one row per evaluation of it.
    revision_horizon_s: float | None = Field(default=None, gt=0)
    label_limit: int = Field(default=50, gt=0)
    emit_evaluation_events: bool = True

    @model_validator(mode="after")
    def _headline_k_is_exported(self) -> MetricsConfig:
        # Checked when set: a config of other ks without it keeps working (the UI then
        # headlines the largest k, as it did).
        if "headline_k" in self.model_fields_set and self.headline_k not in self.ks:
            raise ValueError(
                f"metrics.headline_k {self.headline_k} is not one of metrics.ks "
                f"({', '.join(map(str, self.ks))})"
            )
        return self

    def readiness_rule(self) -> ReadinessRule:
        """The readiness rule every surface applies (evaluator/stats/readiness.py): pass^k at
        headline_k (the largest of `ks` when they lack it) against pass_pow_k_target."""
        k = self.headline_k if self.headline_k in self.ks else max(self.ks)
        return ReadinessRule(k, self.pass_pow_k_target)


class LimitsConfig(_Section):
    # Resident memory cap of the collector process, in MB (the OTel Collector's
    # memory_limiter is the model). None: no cap. Above soft_limit_ratio of it, export
    # requests are refused with retryable codes (503 / UNAVAILABLE + Retry-After) before
    # their bodies are read; above the cap itself, memory is shed as well (evaluated
    # conversations kept for late spans are freed, a full garbage collection runs).
    max_memory_mb: float | None = Field(default=None, gt=0)
    soft_limit_ratio: float = Field(default=0.8, gt=0, lt=1)
    # A read API / web UI query runs off the event loop and is interrupted after this
    # long (504): a slow query must not hold the collector.
    query_timeout_s: float = Field(default=10.0, gt=0)


class UIConfig(_Section):
    """The read-only web UI at /ui/ on the receiver's HTTP port (same bearer token)."""

    enabled: bool = True
    # Link for each trace id on the conversation page; `{trace_id}` is replaced by the
    # id (hex). E.g. Jaeger: "https://jaeger.example/trace/{trace_id}" (docs/ui.md).
    trace_url_template: str | None = None
    # `Host` names the UI answers (DNS-rebinding guard; others get 421). None: the
    # loopback names and receiver.host (with 0.0.0.0, the machine's own names); ["*"]:
    # any (docs/ui.md, "Security").
    allowed_hosts: list[str] | None = None
    # The overview's window when the URL names none (and so the window of its
    # "vs previous version" links); None: the first of metrics.windows.
    default_window: str | None = None
    # The UI's public base URL as people reach it (scheme, host, port, path prefix of a
    # proxy; no /ui), e.g. "https://tracepass.example.com": alert links are built from
    # it (`tracepass_ui_info`, docs/operations.md). None: links stay relative.
    external_url: str | None = None

    @field_validator("external_url")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an absolute http:// or https:// URL")
        return value

    @field_validator("trace_url_template")
    @classmethod
    def _has_placeholder(cls, value: str | None) -> str | None:
        if value is not None and "{trace_id}" not in value:
            raise ValueError("must contain the placeholder {trace_id}")
        return value


# ---------------------------------------------------------------- conventions.custom
# A user-written mapping for instrumentation tracepass does not know (docs/conventions.md
# "My framework is not listed"). Validated here, at start-up, so a bad pattern or path is
# a `file:line:col` error; compiled for the ingest loop by `normalize/custom.py`.

# Bounds that keep a hostile mapping cheap (docs/configuration.md `conventions.custom`).
MAX_CUSTOM_MAPPINGS = 64
MAX_PATTERN_CHARS = 512
MAX_PATHS_PER_FIELD = 8
MAX_POINTER_SEGMENTS = 16
# What a mapping can fill (the contract spelled in issue 25, part 5).
MAPPING_FIELDS = (
    "conversation_id",
    "query",
    "answer",
    "tool_name",
    "call_id",
    "arguments",
    "result",
    "error",
    "agent_name",
    "model",
    "input_tokens",
    "output_tokens",
)
EVENT_PREFIX = "event:"


def compile_safe_regex(pattern: str) -> object:
    """`pattern` compiled with RE2 (linear-time matching: no catastrophic backtracking)
    by the evaluator's safe-regex helper (`schema_guard.compile_re2`, which span-declared
    schemas use too); ValueError with RE2's reason when it cannot be."""
    import re2

    from tracepass.evaluator.schema_guard import compile_re2

    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(f"pattern longer than {MAX_PATTERN_CHARS} characters")
    try:
        return compile_re2(pattern)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise ValueError(f"invalid or too costly regex for RE2: {reason}") from None


def glob_to_regex(glob: str) -> str:
    """A glob (`*` any run, `?` one character, the rest literal) as an anchored RE2
    pattern: globs match in linear time too."""
    import re2

    parts = []
    for char in glob:
        if char == "*":
            parts.append(".*")
        elif char == "?":
            parts.append(".")
        else:
            parts.append(re2.escape(char))
    return "^" + "".join(parts) + "$"


def parse_field_path(path: str) -> tuple[str | None, str, tuple[str, ...]]:
    """`(event name or None, attribute key, JSON pointer segments)` of a mapping path:
    `KEY`, `KEY#/a/0/-1` (JSON inside the attribute), `event:NAME/KEY[#/ptr]` (an
    attribute of the span's first event called NAME). ValueError when malformed."""
    event: str | None = None
    rest = path
    if rest.startswith(EVENT_PREFIX):
        event, sep, rest = rest[len(EVENT_PREFIX) :].partition("/")
        if not sep or not event:
            raise ValueError(f"{path!r}: expected event:<event name>/<attribute key>")
    key, sep, pointer = rest.partition("#")
    if not key:
        raise ValueError(f"{path!r}: empty attribute key")
    segments: tuple[str, ...] = ()
    if sep:
        if not pointer.startswith("/"):
            raise ValueError(f"{path!r}: a JSON pointer after '#' starts with '/'")
        segments = tuple(s.replace("~1", "/").replace("~0", "~") for s in pointer[1:].split("/"))
        if len(segments) > MAX_POINTER_SEGMENTS:
            raise ValueError(f"{path!r}: more than {MAX_POINTER_SEGMENTS} pointer segments")
    return event, key, segments


class CustomMatchConfig(_Section):
    """Which spans a mapping claims: all given conditions must hold."""

    scope: str | None = Field(default=None, max_length=MAX_PATTERN_CHARS)  # glob
    span_name: str | None = Field(default=None, max_length=MAX_PATTERN_CHARS)  # glob
    span_name_regex: str | None = Field(default=None, max_length=MAX_PATTERN_CHARS)
    attributes: list[str] = Field(default_factory=list, max_length=16)  # all present

    @field_validator("span_name_regex")
    @classmethod
    def _regex_compiles(cls, value: str | None) -> str | None:
        if value is not None:
            compile_safe_regex(value)
        return value


# One path, or a list of paths tried in order (first present wins).
FieldPaths = str | list[str]


class CustomFieldsConfig(_Section):
    """Where each field is (`MAPPING_FIELDS`); an unset field is not read."""

    conversation_id: FieldPaths | None = None
    query: FieldPaths | None = None
    answer: FieldPaths | None = None
    tool_name: FieldPaths | None = None
    call_id: FieldPaths | None = None
    arguments: FieldPaths | None = None
    result: FieldPaths | None = None
    error: FieldPaths | None = None
    agent_name: FieldPaths | None = None
    model: FieldPaths | None = None
    input_tokens: FieldPaths | None = None
    output_tokens: FieldPaths | None = None

    @field_validator("*")
    @classmethod
    def _paths_parse(cls, value: FieldPaths | None) -> FieldPaths | None:
        if value is None:
            return None
        listed = [value] if isinstance(value, str) else value
        if not listed or len(listed) > MAX_PATHS_PER_FIELD:
            raise ValueError(f"between 1 and {MAX_PATHS_PER_FIELD} paths")
        for path in listed:
            parse_field_path(path)
        return value

    def paths(self) -> dict[str, list[str]]:
        """{field: its paths} of the fields set, in `MAPPING_FIELDS` order."""
        out: dict[str, list[str]] = {}
        for name in MAPPING_FIELDS:
            value = getattr(self, name)
            if value is not None:
                out[name] = [value] if isinstance(value, str) else list(value)
        return out


class CustomMappingConfig(_Section):
    """One user mapping: spans it matches, the kind they are, where each field is."""

    name: str = Field(min_length=1, max_length=64)
    match: CustomMatchConfig
    # turn: the span is a turn boundary (one user query → one answer); tool: one tool
    # call; model: one LLM call; other: kept for structure, fields still read.
    kind: Literal["turn", "tool", "model", "other"]
    fields: CustomFieldsConfig = CustomFieldsConfig()


class ConventionsConfig(_Section):
    # User mappings, evaluated before the built-in conventions (first match wins).
    custom: list[CustomMappingConfig] = Field(default_factory=list, max_length=MAX_CUSTOM_MAPPINGS)
    # JSON inside an attribute is parsed only up to this many characters (bigger: the
    # path reads nothing, counted as unreadable), so a huge payload cannot stall ingest.
    max_json_chars: int = Field(default=1_000_000, gt=0, le=16_000_000)


class PricingConfig(_Section):
    """Model prices in USD per million tokens, over the genai-prices library's
    (docs/cost-latency.md): `models: {name: {input_per_mtok, output_per_mtok,
    cached_input_per_mtok?, reasoning_per_mtok?}}`."""

    models: dict[str, ModelPrice] = Field(default_factory=dict)

    def book(self) -> PriceBook:
        return PriceBook(self.models)


class ApiConfig(_Section):
    """Write access to the API and the UI (docs/api.md "Write access"). None: every
    endpoint that changes state is off (404) and the UI hides its buttons."""

    # The token with write scope, separate from `receiver.bearer_token` (read scope).
    write_token: str | None = Field(default=None, min_length=1)


class FailureModesConfig(_Section):
    """Failure signatures of failing conversations (docs/failure-modes.md)."""

    # Distinct signatures kept per agent version; the rest are counted under `other`.
    max_per_version: int = Field(default=200, ge=1)
    # An LLM summary of each mode's free text (judge reasonings, answer-grader misses)
    # by `evaluation.judge`, under its budget: the mode's `summary` in the API.
    summarize: bool = False


class CandidatesConfig(_Section):
    """Reference candidates from unreferenced live conversations
    (docs/reference-candidates.md)."""

    # Conversations of one task whose behaviour agrees before a candidate is proposed.
    min_conversations: int = Field(default=5, ge=2)
    # Where approved references are written (one new file each). None: the first
    # directory among `references`.
    directory: Path | None = None
    # Tasks (normalized first queries) followed at once; the least recently seen are
    # dropped beyond it (counted in the candidates' `dropped_tasks`).
    max_tasks: int = Field(default=10000, ge=1)
    # What the followed tasks' conversations may hold in memory (their queries, answers
    # and arguments, estimated); the least recently seen tasks are dropped beyond it
    # (counted in `dropped_tasks` too).
    max_memory_mb: int = Field(default=64, ge=1)


class ReviewRuleConfig(_Section):
    """One review-queue rule (docs/review.md "Queue rules"): conversations it matches
    are queued for a person, a `rate` share of them picked by the conversation id."""

    # failing: a failing, errored or incomplete outcome; judge_uncertain: a judge gave
    # no verdict, or a score within `margin` of its threshold; new_failure_mode: a
    # failure signature the previous version of the agent never had; sampled: any.
    when: Literal["failing", "judge_uncertain", "new_failure_mode", "sampled"]
    # Share queued, decided from the conversation id (the sampling contract, own seed).
    rate: float = Field(default=1.0, ge=0, le=1)
    # Globs (fnmatch, case-sensitive); a field left out matches anything.
    agent_name: str | None = None
    agent_version: str | None = None
    reference_set: str | None = None
    # judge_uncertain: how close to the pass threshold a judge score counts as unsure.
    margin: float = Field(default=0.1, ge=0, le=1)


class ReviewConfig(_Section):
    """The review queue (docs/review.md): which evaluated conversations are queued for
    people to label. Every rule is applied to every stored result; the first that
    matches queues it."""

    rules: list[ReviewRuleConfig] = Field(default_factory=list)
    # Seed of the queue's sampling hash (kept apart from `sampling.seed` so the queued
    # share is not the same conversations the evaluation sampling kept or dropped).
    seed: str = "review"


class CollectorConfig(_Section):
    references: list[Path] = Field(default_factory=list)
    receiver: ReceiverConfig = ReceiverConfig()
    assembly: AssemblyConfig = AssemblyConfig()
    state: StateConfig = StateConfig()
    matching: MatchingConfig = MatchingConfig()
    evaluation: EvaluationSettings = EvaluationSettings()
    sampling: SamplingConfig = SamplingConfig()
    metrics: MetricsConfig = MetricsConfig()
    limits: LimitsConfig = LimitsConfig()
    ui: UIConfig = UIConfig()
    conventions: ConventionsConfig = ConventionsConfig()
    pricing: PricingConfig = PricingConfig()
    api: ApiConfig = ApiConfig()
    failure_modes: FailureModesConfig = FailureModesConfig()
    candidates: CandidatesConfig = CandidatesConfig()
    review: ReviewConfig = ReviewConfig()

    @model_validator(mode="after")
    def _revision_horizon(self) -> CollectorConfig:
        """Windows must remember a conversation as long as a late span can revise it."""
        if self.metrics.revision_horizon_s is None:
            a = self.assembly
            self.metrics.revision_horizon_s = a.retention_s + a.idle_timeout_s + REVISION_MARGIN_S
        return self

    @model_validator(mode="after")
    def _ui_window_exists(self) -> CollectorConfig:
        names = [w.name for w in self.metrics.windows]
        if self.ui.default_window is not None and self.ui.default_window not in names:
            raise ValueError(
                f"ui.default_window {self.ui.default_window!r} is not one of the "
                f"metrics.windows ({', '.join(names)})"
            )
        return self

    @model_validator(mode="after")
    def _summaries_have_a_model(self) -> CollectorConfig:
        if self.failure_modes.summarize and self.evaluation.judge is None:
            raise ValueError(
                "failure_modes.summarize needs evaluation.judge (the chat model that "
                "writes the summaries)"
            )
        return self


class ConfigError(ValueError):
    """A config file that cannot be used; the message names the file and the field."""


def unknown_key_message(loc: tuple[int | str, ...]) -> str:
    """`unknown key; did you mean 'idle_timeout_s'?` — the closest key the section at
    `loc` accepts (difflib), or the list of keys when none is close."""
    section: type[BaseModel] = CollectorConfig
    for part in loc[:-1]:
        if isinstance(part, int):  # an item of a list of sections (conventions.custom)
            continue
        field = section.model_fields.get(str(part))
        annotation = field.annotation if field is not None else None
        if get_origin(annotation) is list and get_args(annotation):
            annotation = get_args(annotation)[0]
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return "unknown key"
        section = annotation
    known = sorted(section.model_fields)
    close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
    if close:
        return f"unknown key; did you mean {close[0]!r}?"
    return f"unknown key (expected one of {', '.join(known)})"


def load_config(path: Path | None) -> CollectorConfig:
    """The config in `path` (defaults when None). Every error is a `ConfigError` whose
    lines read `file:line:col: field: message` (syntax errors, duplicate keys, bytes
    that are not UTF-8, and schema errors alike)."""
    if path is None:
        return CollectorConfig()
    try:
        text = read_text(path)
        data = parse(text, str(path)) or {}
    except YamlFileError as exc:
        raise ConfigError(str(exc)) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1:1: top level must be a mapping, got {type(data).__name__}")
    try:
        return CollectorConfig.model_validate(data)
    except ValidationError as exc:
        where = locations(text)
        lines = []
        for err in exc.errors():
            pos = locate(where, err["loc"])
            at = f"{path}:{pos[0]}:{pos[1]}" if pos is not None else str(path)
            field = ".".join(str(p) for p in err["loc"])
            message = err["msg"]
            if err["type"] == "extra_forbidden":
                message = unknown_key_message(err["loc"])
            lines.append(f"{at}: {field}: {message}")
        raise ConfigError("\n".join(lines)) from None
