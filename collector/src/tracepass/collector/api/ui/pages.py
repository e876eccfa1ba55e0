"""The web UI: read-only pages at /ui/ rendered on the server from `ReadModel` dicts
and stored results. No JavaScript, no external assets (CSS and SVG inline), so it works
offline and behind any proxy; jinja2 autoescaping is on because queries, answers and
tool arguments come from agents and users.

    /ui/                      agents × versions × reference sets, pass^k, trend chart
    /ui/conversations         the failing conversations, with the list API's filters
    /ui/conversations/{id}    turns, trajectory vs reference, verdicts, violations
    /ui/conversation?id=      the same, for ids like `..` (ui/security.py)
    /ui/regressions           per-reference pass@1 of a version against a baseline
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol
from urllib.parse import quote, urlencode

import jinja2
from aiohttp import web

from tracepass.collector.api.params import FILTER_PARAMS, ParamError, check_bounds, format_time
from tracepass.collector.api.query_guard import QueryRefused
from tracepass.collector.api.read_model import ReadModel
from tracepass.collector.api.ui import humane
from tracepass.collector.api.ui.runbook import render_runbook
from tracepass.collector.api.ui.security import (
    allowed_hosts,
    conversation_path,
    reveal_invisible,
    secured,
)
from tracepass.collector.api.ui.timeline import timeline_of
from tracepass.collector.api.ui.trend import TrendChart, interval_bar, trend_chart
from tracepass.collector.api.views import judgement_json
from tracepass.collector.api.write_access import WriteAccess
from tracepass.collector.config import UIConfig
from tracepass.collector.receiver import GetRoute
from tracepass.collector.state import StoredResult
from tracepass.evaluator.models import AgentStep, Conversation, ToolCall, TurnResult
from tracepass.evaluator.scoring.explain import (
    ArgumentDiff,
    CallRow,
    failure_reasons,
    natural_key,
    trajectory_rows,
)
from tracepass.evaluator.stats.readiness import ReadinessRule

__all__ = ["FAILING", "UI_PREFIX", "ui_routes"]

UI_PREFIX = "/ui"
FAILING = "fail,error,incomplete"
TREND_BUCKETS = 24
ResultLookup = Callable[[str], StoredResult | None]
PageHandler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("tracepass.collector.api.ui", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=reveal_invisible,
    )
    env.globals["fmt"] = _fmt
    env.globals["usd"] = _usd
    env.globals["secs"] = _secs
    env.globals["count"] = _count
    return env


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _usd(value: float | None) -> str:
    """A cost in plain dollars (`$0.000048`, never an exponent)."""
    return humane.usd(value, unknown="unknown")


def _secs(value: float | None) -> str:
    return humane.duration(value)


def _count(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def _value(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else repr(v)


def _arguments(
    args: Mapping[str, Any] | None, diffs: Sequence[ArgumentDiff], side: str
) -> list[dict[str, Any]]:
    """Arguments of one side of a trajectory row, the differing ones marked."""
    if args is None:
        return [{"key": "…", "value": "(not checked)", "mark": False}]
    marked = {
        d.key
        for d in diffs
        if (side == "expected" and not d.unexpected) or (side == "actual" and not d.missing)
    }
    return [{"key": k, "value": _value(v), "mark": k in marked} for k, v in args.items()]


def _call_row(row: CallRow) -> dict[str, Any]:
    status = row.status
    label = {
        "match": "match",
        "arguments": "arguments differ",
        "missing": "missing",
        "extra": "extra",
    }[status]
    if row.out_of_order:
        label += ", out of order"
    return {
        "status": status,
        "label": label,
        "out_of_order": row.out_of_order,
        "expected": None
        if row.expected is None
        else {
            "name": row.expected.name,
            "args": _arguments(row.expected.arguments, row.diffs, "expected"),
            "match": row.expected.argument_match,
        },
        "actual": None
        if row.actual is None
        else {
            "name": row.actual.name,
            "args": _arguments(row.actual.arguments, row.diffs, "actual"),
            "error": row.actual.error,
        },
        "diffs": [
            {
                "key": d.key,
                "expected": "(absent)" if d.unexpected else _value(d.expected),
                "actual": "(absent)" if d.missing else _value(d.actual),
            }
            for d in row.diffs
        ],
    }


def _violations(owner: Any) -> list[dict[str, Any]]:
    """Policy violations of a result or turn (tolerant: results written before the
    policy feature have none)."""
    out = []
    for v in getattr(owner, "violations", None) or ():
        out.append(
            {
                "rule": getattr(v, "rule", "?"),
                "turn": getattr(v, "turn", None),
                "tool_call": getattr(v, "tool_call", None),
                "message": getattr(v, "message", ""),
                "path": getattr(v, "path", None),
            }
        )
    return out


def _turn(turn: TurnResult) -> dict[str, Any]:
    tc = turn.tool_correctness
    return {
        "index": turn.index + 1,
        "query": turn.query,
        "answer": turn.answer,
        "expected_answer": turn.expected_answer,
        "correct": turn.correct,
        "answer_correct": turn.answer_correct,
        "answer_score": turn.answer_score,
        "answer_error": turn.answer_error,
        "tool_error": turn.tool_error,
        "graders": [g.model_dump() for g in turn.graders],
        "policy_graders": [g.model_dump() for g in getattr(turn, "policy_graders", ()) or ()],
        "tool_correctness": None if tc is None else tc.model_dump(),
        "tools_checked": turn.expected_tools is not None,
        "calls": [_call_row(r) for r in trajectory_rows(turn.tool_calls, turn.expected_tools)],
        "violations": _violations(turn),
    }


def _figures(conv: Conversation) -> dict[str, Any]:
    """The conversation page's cost and latency summary and its timeline."""
    usage, latency = conv.usage, conv.latency
    missing = {**(latency.missing if latency else {}), **(usage.missing if usage else {})}
    return {
        "usage": usage,
        "latency": latency,
        "duration_s": None if latency is None else latency.duration_s,
        "missing": sorted(missing.items()),
        "timeline": timeline_of(conv),
    }


def _steps(steps: Sequence[AgentStep], calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    """A turn's agent steps for the page, nested as in the turn; each step's tools as
    `#n name` (n: the call's row in the turn's trajectory, from 1)."""
    return [
        {
            "agent": s.agent,
            "kind": s.kind,
            "query": s.query,
            "answer": s.answer,
            "error": s.error,
            "span_id": s.span_id or "",
            "tools": [
                f"#{i + 1} {calls[i].name}" if i < len(calls) else f"#{i + 1}" for i in s.tool_calls
            ],
            "steps": _steps(s.steps, calls),
        }
        for s in steps
    ]


class ReviewPanel(Protocol):
    """What the pages show of the review queue (`ui/review.py`'s `ReviewPages`)."""

    def agreement_rows(self) -> dict[str, Any] | None: ...


class UiPages:
    def __init__(
        self,
        model: ReadModel,
        results: ResultLookup,
        config: UIConfig,
        readiness: ReadinessRule | None = None,
        write: WriteAccess | None = None,
        review: ReviewPanel | None = None,
    ) -> None:
        self.model = model
        self.results = results
        self.config = config
        # metrics.headline_k and pass_pow_k_target: the rule every surface says.
        self.readiness = readiness or ReadinessRule()
        self.env = _env()
        # Write access (docs/api.md): without it the "make this a reference" button is
        # not rendered.
        self.write = write if write is not None and write.enabled else None
        # The review queue (`ui/review.py`): the overview's agreement table and the
        # conversation page's "queue for review" button.
        self.review = review

    def trace_url(self, trace_id: str) -> str | None:
        template = self.config.trace_url_template
        return None if template is None else template.replace("{trace_id}", quote(trace_id))

    def _page(self, name: str, status: int = 200, **context: Any) -> web.Response:
        html = self.env.get_template(name).render(prefix=UI_PREFIX, **context)
        return web.Response(status=status, text=html, content_type="text/html", charset="utf-8")

    def _error(self, message: str, status: int) -> web.Response:
        return self._page("error.html.j2", status=status, title="error", message=message)

    def limited(self, handler: PageHandler) -> PageHandler:
        """The read API's limits for a page: bounded parameters (400), and its queries
        (run through `ReadModel.run`) refused when busy (503) or too slow (504)."""

        async def page(request: web.Request) -> web.StreamResponse:
            try:
                check_bounds(request.query.items())
                return await handler(request)
            except ParamError as exc:
                return self._error(str(exc), 400)
            except QueryRefused as exc:
                response = self._error(str(exc), exc.status)
                if exc.retry_after_s is not None:
                    response.headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after_s)))
                return response

        return page

    # ------------------------------------------------------------------ overview

    async def overview(self, request: web.Request) -> web.StreamResponse:
        windows = [w for w, _ in self.model.rolling.windows]
        window = request.query.get("window") or self._default_window(windows)
        if window not in windows:
            return self._error(f"window: {window!r} is not one of {', '.join(windows)}", 400)
        try:  # with a shared results store the counts come from the database
            data = await self.model.run(self.model.agents)
        except LookupError as exc:  # its database unreachable: 503, like the API
            return self._error(str(exc), 503)
        # metrics.headline_k: the k the dashboard, the alert and readiness speak of.
        rule = self.readiness
        if rule.k not in data["ks"]:
            rule = ReadinessRule(max(data["ks"]), rule.target)
        k_pow = rule.k
        versions: dict[str, list[str]] = {}
        rows = []
        for a in data["agents"]:
            w = a["windows"].get(window) or {}
            at1 = (w.get("pass_at_k") or {}).get("1")
            powk = (w.get("pass_pow_k") or {}).get(str(k_pow))
            versions.setdefault(a["agent_name"], [])
            if a["agent_version"] not in versions[a["agent_name"]]:
                versions[a["agent_name"]].append(a["agent_version"])
            rows.append(
                {
                    **a,
                    "n": w.get("n", 0),
                    "c": w.get("c", 0),
                    "sufficient": w.get("sufficient", False),
                    "pass_at_1": at1,
                    "pass_pow_k": powk,
                    "readiness": rule.verdict(
                        (powk or {}).get("lower"), (powk or {}).get("upper"), data["level"]
                    ),
                    "bar": None
                    if powk is None
                    else interval_bar(powk["lower"], powk["mean"], powk["upper"]),
                    # No "failing" link on a row whose trials in the window all passed.
                    "failing_url": self._list_url(
                        agent_name=a["agent_name"],
                        agent_version=a["agent_version"],
                        reference_set=a["reference_set"],
                        outcome=FAILING,
                    )
                    if w.get("n", 0) > w.get("c", 0)
                    else None,
                }
            )
        for name, vs in versions.items():
            vs.sort(key=natural_key)
            for row in rows:
                if row["agent_name"] != name:
                    continue
                i = vs.index(row["agent_version"])
                row["regression_url"] = (
                    None
                    if i == 0
                    else f"{UI_PREFIX}/regressions?"
                    + urlencode(
                        {
                            "agent_name": name,
                            "agent_version": row["agent_version"],
                            "baseline_version": vs[i - 1],
                            "window": window,
                        }
                    )
                )
        review = self.review

        def stored() -> tuple[TrendChart | None, dict[tuple[Any, Any], dict[str, Any]], Any]:
            agreement = review.agreement_rows() if review is not None else None
            return self._trend(window), self._version_costs(window), agreement

        try:  # off the event loop: the results store may be a database far away
            chart, costs, agreement = await self.model.run(stored)
        except LookupError as exc:  # no state file, or the results database unreachable
            return self._error(str(exc), 503)
        for row in rows:
            row["figures"] = costs.get((row["agent_name"], row["agent_version"]))
        return self._page(
            "overview.html.j2",
            title="agents",
            rows=rows,
            window=window,
            windows=windows,
            k_pow=k_pow,
            target=rule.target,
            level=data["level"],
            min_conversations=data["min_conversations"],
            chart=chart,
            agreement=agreement,
        )

    async def runbook(self, request: web.Request) -> web.StreamResponse:
        """docs/operations.md, where every alert's `runbook_url` points (`runbook.py`)."""
        return self._page("runbook.html.j2", title="runbook", body=render_runbook())

    def _version_costs(self, window: str) -> dict[tuple[Any, Any], dict[str, Any]]:
        """(agent, version) → cost per conversation and latency p95 in the window (the
        `versions` of /api/v1/references/summary); empty without a state file."""
        if self.model.store is None:
            return {}
        since = self.model.clock() - self.model.window_seconds(window)
        return {
            (v["agent_name"], v["agent_version"]): v
            for v in self.model.version_summary(since, window, None, None)
        }

    def _default_window(self, windows: list[str]) -> str:
        """`ui.default_window` (the demo's whole-run window, so the page is not empty a
        minute after the run), else the first configured window."""
        configured = self.config.default_window
        return configured if configured in windows else windows[0]

    def _trend(self, window: str) -> TrendChart | None:
        store = self.model.store
        if store is None:
            return None
        since = self.model.clock() - self.model.window_seconds(window)
        start, width, rows = store.outcome_trend(since, TREND_BUCKETS)
        series: dict[str, dict[int, tuple[int, int]]] = {}
        for agent, version, bucket, n, c in rows:
            label = f"{agent or 'agent'} {version or ''}".strip()
            series.setdefault(label, {})[bucket] = (n, c)
        if not series:
            return None
        return trend_chart(
            {k: series[k] for k in sorted(series, key=natural_key)},
            start=start,
            width_s=width,
            buckets=TREND_BUCKETS,
            label=format_time,
        )

    # ------------------------------------------------------------------ lists

    def _list_url(self, **params: str | None) -> str:
        clean = {k: v for k, v in params.items() if v}
        return f"{UI_PREFIX}/conversations" + ("?" + urlencode(clean) if clean else "")

    async def conversations(self, request: web.Request) -> web.StreamResponse:
        query = dict(request.query)
        if "outcome" not in query:
            query["outcome"] = FAILING  # the page answers "what fails?" unless told
        shown = dict(query)
        if query.get("outcome") == "any":
            query["outcome"] = ""
        try:
            body = await self.model.run(lambda: self.model.conversations(query))
        except ParamError as exc:
            return self._error(str(exc), 400)
        except LookupError as exc:
            return self._error(str(exc), 503)
        rows = [
            {**c, "url": conversation_path(UI_PREFIX, c["conversation_id"])}
            for c in body["conversations"]
        ]
        next_url = None
        if body["next_cursor"]:
            keep = {k: v for k, v in shown.items() if k in FILTER_PARAMS or k == "limit"}
            next_url = self._list_url(**keep, cursor=body["next_cursor"])
        outcome_options = [
            ("", "any outcome"),
            (FAILING, "failing (fail, error, incomplete)"),
            ("fail", "fail"),
            ("error", "error"),
            ("incomplete", "incomplete"),
            ("pass", "pass"),
            ("unscored", "unscored"),
        ]
        return self._page(
            "conversations.html.j2",
            title="conversations",
            rows=rows,
            filters={k: shown.get(k, "") for k in FILTER_PARAMS},
            outcome_options=outcome_options,
            selected_outcome="" if shown.get("outcome") == "any" else shown.get("outcome", ""),
            next_url=next_url,
        )

    # ------------------------------------------------------------------ one conversation

    async def conversation(self, request: web.Request) -> web.StreamResponse:
        conversation_id = request.match_info.get("conversation_id") or request.query.get("id")
        if not conversation_id:
            return self._error("id: missing (/ui/conversation?id=…)", 400)
        stored = self.results(conversation_id)
        if stored is None:
            return self._error(f"conversation {conversation_id!r} not found", 404)
        conv, result = stored.conversation, stored.result
        traces = [{"id": t, "url": self.trace_url(t)} for t in conv.trace_ids]
        context: dict[str, Any] = {
            "title": f"conversation {conversation_id}",
            "conversation_id": conversation_id,
            "agent_name": conv.agent_name,
            "agent_version": conv.agent_version,
            "revision": stored.revision,
            "traces": traces,
            "result": None,
            "turns": [],
            "violations": [],
            "judgements": [],
            "reasons": [],
            "raw_turns": [
                {"index": i + 1, "query": t.query, "answer": t.answer}
                for i, t in enumerate(conv.turns)
            ],
            **_figures(conv),
            # Multi-agent turns: who did what, by turn (empty lists for single agents).
            "agent_steps": [_steps(t.steps, t.tool_calls) for t in conv.turns],
        }
        if result is not None:
            context.update(
                result={
                    "outcome": result.outcome.value,
                    "reference_id": result.reference_id,
                    "reference_set": result.reference_set,
                    "unknown_reference_id": _unknown_reference_id(
                        conv.reference_id, result.reference_id, result.reference_set
                    ),
                    "policy_id": getattr(result, "policy_id", None),
                    "policy_outcome": getattr(
                        getattr(result, "policy_outcome", None), "value", None
                    ),
                },
                turns=[_turn(t) for t in result.turns],
                violations=_violations(result),
                judgements=[judgement_json(j) for j in result.judgements],
                reasons=failure_reasons(result, limit=20),
                list_url=self._list_url(
                    agent_name=result.agent_name,
                    agent_version=result.agent_version,
                    reference_id=result.reference_id,
                    outcome="any",
                ),
            )
        session = None
        if self.write is not None:
            csrf, session = self.write.page_session(request)
            context["reference_form"] = {
                "action": f"{UI_PREFIX}/conversations/{quote(conversation_id, safe='')}/reference",
                "csrf": csrf,
            }
            if self.review is not None:
                context["review_form"] = {
                    "action": f"{UI_PREFIX}/conversations/{quote(conversation_id, safe='')}/review",
                    "csrf": csrf,
                }
        response = self._page("conversation.html.j2", **context)
        WriteAccess.set_session(response, session)
        return response

    # ------------------------------------------------------------------ regressions

    async def regressions(self, request: web.Request) -> web.StreamResponse:
        params = dict(request.query)
        try:
            body = (
                await self.model.run(lambda: self.model.reference_summary(params))
                if params.get("baseline_version")
                else None
            )
            known = await self.model.run(self._known_names)  # off the event loop too
        except ParamError as exc:
            return self._error(str(exc), 400)
        except LookupError as exc:
            return self._error(str(exc), 503)
        rows = []
        for r in (body or {}).get("references", []):
            delta = r.get("delta")
            rows.append(
                {
                    **r,
                    "regressed": delta is not None
                    and r["pass_at_1"]["upper"] is not None
                    and r["baseline"]["pass_at_1"]["lower"] is not None
                    and r["pass_at_1"]["upper"] < r["baseline"]["pass_at_1"]["lower"],
                    "failing_url": self._list_url(
                        agent_name=params.get("agent_name"),
                        agent_version=params.get("agent_version"),
                        reference_id=r["reference_id"],
                        outcome=FAILING,
                    ),
                }
            )
        return self._page(
            "regressions.html.j2",
            title="regressions",
            params={
                k: params.get(k, "")
                for k in ("agent_name", "agent_version", "baseline_version", "window")
            },
            windows=[w for w, _ in self.model.rolling.windows],
            body=body,
            rows=rows,
            **known,
        )

    def _known_names(self) -> dict[str, Any]:
        """Agent names and versions the rolling windows hold, offered as the form's
        suggestions (`<datalist>`)."""
        agents = self.model.agents()["agents"]
        names = sorted({str(a["agent_name"]) for a in agents}, key=natural_key)
        versions = sorted({str(a["agent_version"]) for a in agents}, key=natural_key)
        return {"known_agents": names, "known_versions": versions}


def _unknown_reference_id(
    named: str | None, matched: str | None, matched_set: str | None
) -> str | None:
    """The reference_id the agent named when it is not the reference the conversation
    was scored against (a typo: counted in tracepass_reference_id_unknown_total)."""
    if not named or named in (matched, f"{matched_set}:{matched}"):
        return None
    return named


def ui_routes(
    model: ReadModel,
    results: ResultLookup,
    config: UIConfig,
    *,
    readiness: ReadinessRule | None = None,
    write: WriteAccess | None = None,
    bind_host: str = "127.0.0.1",
    review: ReviewPanel | None = None,
) -> list[GetRoute]:
    """The UI's GET routes (mounted behind the receiver's bearer-token check), each
    behind the Host check and with the security headers (`security.py`); `readiness`
    is `metrics.readiness_rule()` (headline_k and its target); `write`: the write access the "make this a reference"
    button needs (none: no button)."""
    pages = UiPages(model, results, config, readiness, write, review)
    hosts = allowed_hosts(config.allowed_hosts, bind_host)

    async def root(request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(f"{UI_PREFIX}/")

    routes: list[GetRoute] = [
        (UI_PREFIX, root),
        (f"{UI_PREFIX}/", pages.limited(pages.overview)),
        (f"{UI_PREFIX}/conversations", pages.limited(pages.conversations)),
        (f"{UI_PREFIX}/conversations/{{conversation_id}}", pages.limited(pages.conversation)),
        # ?id= (ids like `..`, ui/security.py)
        (f"{UI_PREFIX}/conversation", pages.limited(pages.conversation)),
        (f"{UI_PREFIX}/regressions", pages.limited(pages.regressions)),
        (f"{UI_PREFIX}/runbook", pages.limited(pages.runbook)),
    ]
    return [(path, secured(handler, hosts)) for path, handler in routes]
