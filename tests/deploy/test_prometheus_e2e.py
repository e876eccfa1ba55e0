"""A real Prometheus (the Debian `prometheus` binary, on a free loopback port with a temp
config) scrapes a real `tracepass serve` fed by the instrumented example agent over OTLP:
every Grafana dashboard panel's query returns data, and TracepassPassPowKBelowTarget
reaches `firing` after the agent's success rate drops: for the example agent (scored
against references) and for an agent with only live traffic, scored by its agent policy
(reference_set="policy:<id>", tests/e2e/_policy_agent.py).

Short windows, same rules. The collector runs with windows *named* "1h" and "24h" but
20 s and 60 s long, so the alert expressions, which select windows by name, are used
unchanged. The rules file Prometheus loads is a copy of deploy/prometheus/tracepass.rules.yaml
made by `short_rules`: range selectors [1h] / [24h] (the pooled recording rules) become the
collector's 20 s / 60 s, the health alerts' [10m] / [15m] become [30s], `offset 1d`
becomes `offset 2m`, the minimum-sample guard `tracepass:min_conversations` drops from 20
to the collector's min_conversations (5), and every `for` / `keep_firing_for` becomes
2 s / 10 s. Nothing else changes (docs/operations.md#testing-the-rules-with-short-windows).
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_grafana import dashboard_queries, load_dashboard, substitute

from conftest import require_tool

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from _live_support import run_agent, serve, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.system, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "tracepass.rules.yaml"
DOCS = ROOT / "docs" / "exported-metrics.md"
REFS = ROOT / "examples" / "references"
POLICY_AGENT = ROOT / "tests" / "e2e" / "_policy_agent.py"
POLICY = """\
policies:
  - id: travel-agent-policy
    agent: policy-travel-agent
    rules:
      - {type: order, first: search_flights, then: book_flight}
"""
POLICY_SET = "policy:travel-agent-policy"
POLICY_VERSION = "2.0"
AGENT = "travel-assistant"
VERSION = "1.0"
REFERENCE_SET = "travel-assistant"

SERVE_CONFIG: dict[str, Any] = {
    "assembly": {"idle_timeout_s": 1, "tick_interval_s": 0.2, "trace_grace_s": 0.5},
    "metrics": {
        "windows": [{"name": "1h", "seconds": 20}, {"name": "24h", "seconds": 60}],
        "decay_half_life_s": 10,
        "ks": [1, 3, 5],
        "min_conversations": 5,
        # Five values per label and five label sets: the sets of versions "1.0", "2.0"
        # (the policy agent, both recorded first: the test waits for them), "0.9",
        # "junk" and the unmatched conversation fit; the policy agent's "0.1" set
        # overflows (label="combination"), alone in the all-`other` set (n=4: no alert).
        "label_limit": 5,
    },
}
PANEL_VALUES = {
    "agent_name": AGENT,
    "agent_version": VERSION,
    "reference_set": REFERENCE_SET,
    "k": "3",
    "window": "1h",
    "smoothing": "30s",
    "__rate_interval": "10s",
    "__interval": "1s",
    "__range": "2m",
}
# One conversation that matches no reference (counts in tracepass_conversations_unmatched).
UNMATCHED_AGENT = """
import sys
from tracepass.instrumentation import agent, configure, conversation, shutdown
configure(service_name="odd-agent", endpoint=sys.argv[1], protocol="http/protobuf")

@agent(name="travel-assistant")
def ask(query: str) -> str:
    return "I have no idea."

with conversation("unmatched-1", agent_version="1.0"):
    ask("What is the airspeed velocity of an unladen swallow?")
shutdown()
"""


def short_rules(text: str) -> dict[str, Any]:
    """The test copy of the rules (see the module docstring)."""
    doc: dict[str, Any] = yaml.safe_load(text)
    ranges = {"1h": "20s", "24h": "60s", "10m": "30s", "15m": "30s"}
    for group in doc["groups"]:
        for rule in group["rules"]:
            expr = re.sub(
                r"\[(\w+)\]", lambda m: f"[{ranges.get(m.group(1), m.group(1))}]", rule["expr"]
            )
            expr = expr.replace("offset 1d", "offset 2m")
            if rule.get("record") == "tracepass:min_conversations":
                expr = "vector(5)"
            rule["expr"] = expr
            if "for" in rule:
                rule["for"] = "2s"
            if "keep_firing_for" in rule:
                rule["keep_firing_for"] = "10s"
    return doc


def full_rules() -> dict[str, Any]:
    """The rules unchanged but for the minimum-sample guard (5 instead of 20)."""
    doc: dict[str, Any] = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    for group in doc["groups"]:
        for rule in group["rules"]:
            if rule.get("record") == "tracepass:min_conversations":
                rule["expr"] = "vector(5)"
    return doc


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Prometheus:
    def __init__(self, proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.proc, self.port, self.log = proc, port, log

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def api(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=10) as resp:
            body = json.loads(resp.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self.api("/api/v1/query", query=expr)
        result: list[dict[str, Any]] = data["result"]
        return result

    def stop(self) -> int:
        """SIGTERM and wait: Prometheus flushes its TSDB head and exits 0."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=120)
                raise AssertionError("Prometheus did not stop on SIGTERM") from None
        return self.proc.returncode

    def alerts(self, name: str) -> list[dict[str, Any]]:
        return [a for a in self.api("/api/v1/alerts")["alerts"] if a["labels"]["alertname"] == name]


@contextlib.contextmanager
def prometheus(
    tmp_path: Path,
    metrics_port: int | Sequence[int],
    *flags: str,
    rules_file: bool = True,
    alertmanager: str | None = None,
    short: bool = True,
) -> Iterator[Prometheus]:
    """A Prometheus scraping `metrics_port` (or several) with the short rules;
    `alertmanager` (host:port) receives its alerts."""
    binary = require_tool("prometheus")
    tmp_path.mkdir(parents=True, exist_ok=True)
    ports = [metrics_port] if isinstance(metrics_port, int) else list(metrics_port)
    rules = tmp_path / "tracepass.rules.yaml"
    rules.write_text(
        yaml.safe_dump(short_rules(RULES.read_text(encoding="utf-8")) if short else full_rules()),
        encoding="utf-8",
    )
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules)] if rules_file else [],
        "scrape_configs": [
            {
                "job_name": "tracepass",
                "static_configs": [{"targets": [f"127.0.0.1:{p}" for p in ports]}],
            }
        ],
    }
    if alertmanager is not None:
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]}
    config_file = tmp_path / "prometheus.yaml"
    config_file.write_text(yaml.safe_dump(config), encoding="utf-8")
    log = tmp_path / "prometheus.log"
    # Never 9090: CI's Debian package runs a system Prometheus there. A port taken between
    # free_port() and the bind makes Prometheus exit; try again with another one.
    for _attempt in range(3):
        port = free_port()
        with log.open("wb") as log_f:
            proc = subprocess.Popen(
                [
                    binary,
                    f"--config.file={config_file}",
                    f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--storage.tsdb.retention.time=1h",
                    "--log.level=warn",
                    *flags,
                ],
                stdout=log_f,
                stderr=subprocess.STDOUT,
            )
        prom = Prometheus(proc, port, log)

        def started(prom: Prometheus = prom) -> bool:
            """Ready, or exited (a port taken meanwhile): either ends the wait."""
            if prom.proc.poll() is not None:
                return True
            with urllib.request.urlopen(f"{prom.url}/-/ready", timeout=2) as resp:
                return bool(resp.status == 200)

        try:
            wait_until(started, 60, "Prometheus to start")
        except AssertionError:
            proc.kill()
            proc.wait(timeout=120)
            raise
        if proc.poll() is None:
            break
    else:
        raise AssertionError(f"Prometheus did not start:\n{log.read_text()}")
    try:
        yield prom
    finally:
        prom.stop()


class Traffic:
    """The example agent in a loop (one subprocess per batch of conversations), with a
    regression knob that can be turned while it runs."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.regression = 0.0
        self.batches = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Traffic:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=120)
        assert not self._thread.is_alive(), "agent traffic did not stop"

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                i = self.batches
                run_agent(
                    self.endpoint, "run", "--conversations", "6", "--version", VERSION,
                    "--regression", str(self.regression), "--prefix", f"b{i}-", "--seed", str(i),
                )  # fmt: skip
                self.batches += 1
        except BaseException as exc:  # reported by check()
            self.error = exc

    def check(self) -> None:
        if self.error is not None:
            raise AssertionError(f"agent traffic failed: {self.error}") from self.error


class PolicyTraffic(Traffic):
    """The live-only policy agent in a loop: clean conversations, or (regressed) ones
    that book before searching, which its policy's order rule fails."""

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                i = self.batches
                scripts = "early" if self.regression else "clean"
                run_policy_agent(
                    self.endpoint, "--scripts", scripts, "--repeat", "3",
                    "--prefix", f"p{i}-", "--version", POLICY_VERSION,
                )  # fmt: skip
                self.batches += 1
        except BaseException as exc:  # reported by check()
            self.error = exc


def run_policy_agent(endpoint: str, *args: str) -> None:
    done = subprocess.run(
        [sys.executable, str(POLICY_AGENT), endpoint, *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def assert_families_documented(metrics_url: str) -> None:
    """Every metric family the running collector exports is in docs/exported-metrics.md
    under its exported Prometheus name (with `_total` / `_seconds` as exposed)."""
    with urllib.request.urlopen(metrics_url, timeout=10) as resp:
        text = resp.read().decode()
    families = {
        line.split()[2] for line in text.splitlines() if line.startswith("# TYPE tracepass_")
    }
    assert len(families) > 20, families
    doc = DOCS.read_text(encoding="utf-8")
    undocumented = sorted(f for f in families if f"`{f}`" not in doc)
    assert not undocumented, f"not in {DOCS.name}: {undocumented}"


# Panels fed by model calls' tokens and prices: the example agent's traffic records no
# model-call spans, so they stay empty here. Their families are checked on a real
# `tracepass serve` with the corpus's model calls (tests/e2e/test_cost_latency_e2e.py)
# and their expressions parsed by promtool (tests/deploy/test_grafana.py).
NEEDS_MODEL_CALLS = frozenset(
    {
        "Cost per conversation by agent version",
        "pass^$k per dollar by agent version",
        "Tokens by type and unpriced model calls",
    }
)


def test_dashboard_queries_and_pass_pow_k_alert(tmp_path: Path) -> None:
    require_tool("prometheus")
    refs = tmp_path / "refs"
    shutil.copytree(REFS, refs)
    (refs / "policy.yaml").write_text(POLICY, encoding="utf-8")
    with (
        serve(tmp_path, "--references", str(refs), config=SERVE_CONFIG) as s,
        prometheus(tmp_path, s.ports["metrics_port"]) as prom,
        Traffic(s.http) as traffic,
        PolicyTraffic(s.http) as policy_traffic,
    ):

        def first(expr: str) -> list[dict[str, Any]] | None:
            traffic.check()
            policy_traffic.check()
            return prom.query(expr) or None

        for version in (VERSION, POLICY_VERSION):
            wait_until(
                lambda v=version: first(f'tracepass_conversations_total{{agent_version="{v}"}}'),
                90,
                f"the first evaluations of version {version}",
                interval=0.5,
            )
        # Extras that make the health panels show data: another version, a version
        # beyond the label limit, a conversation without reference, a rejected span.
        # The older version fails now and then (the top-failing panel has something).
        run_agent(
            s.http, "run", "--conversations", "4", "--version", "0.9", "--regression", "0.7",
            "--prefix", "old-", "--seed", "3",
        )  # fmt: skip
        run_agent(s.http, "run", "--conversations", "1", "--version", "junk", "--prefix", "junk-")
        done = subprocess.run(
            [sys.executable, "-c", UNMATCHED_AGENT, s.http],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        # Four conversations of another version of the policy agent, three of them
        # violating (the violations panel); too few (n=4) for any estimate or alert.
        run_policy_agent(s.http, "--version", "0.1", "--prefix", "mixed-")
        bad_span = {
            "resourceSpans": [{"scopeSpans": [{"spans": [{
                "traceId": "0" * 32, "spanId": "0" * 16, "name": "broken",
                "startTimeUnixNano": "1", "endTimeUnixNano": "2",
            }]}]}]
        }  # fmt: skip
        req = urllib.request.Request(
            f"{s.http}/v1/traces",
            data=json.dumps(bad_span).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 200

        # Phase 1: a healthy agent. Wait for the pooled recording rule, then check panels.
        pooled = (
            f'tracepass:pass_pow_k:pooled{{agent_name="{AGENT}", agent_version="{VERSION}", '
            f'reference_set="{REFERENCE_SET}", window="24h", k="3"}}'
        )

        def has(expr: str) -> list[dict[str, Any]] | None:
            traffic.check()
            policy_traffic.check()
            return prom.query(expr) or None

        rows = wait_until(lambda: has(pooled), 90, "the pooled pass^3 recording rule", interval=0.5)
        assert float(rows[0]["value"][1]) > 0.7

        panels = dashboard_queries(load_dashboard())
        empty: dict[str, list[str]] = {}
        for title, exprs in panels:
            if title in NEEDS_MODEL_CALLS:
                continue
            queries = [substitute(e, PANEL_VALUES) for e in exprs]

            def panel_has_data(queries: list[str] = queries) -> list[str] | None:
                traffic.check()
                return [q for q in queries if prom.query(q)] or None

            try:
                wait_until(panel_has_data, 30, f"data for panel {title!r}", interval=0.5)
            except AssertionError:
                empty[title] = queries
        assert not empty, f"panels without data: {json.dumps(empty, indent=1)}"
        assert_families_documented(s.metrics_url)
        assert not prom.alerts("TracepassPassPowKBelowTarget")

        # The live-only agent's policy series are pooled like any other.
        policy_pooled = (
            f'tracepass:pass_pow_k:pooled{{agent_name="policy-travel-agent", '
            f'agent_version="{POLICY_VERSION}", reference_set="{POLICY_SET}", window="24h", '
            'k="3"}'
        )
        rows = wait_until(lambda: has(policy_pooled), 60, "the policy's pooled pass^3")
        assert float(rows[0]["value"][1]) == 1.0

        # Phase 2: both agents regress; the alert must fire for each.
        traffic.regression = 0.9
        policy_traffic.regression = 1.0

        def firing(**labels: str) -> list[dict[str, Any]] | None:
            traffic.check()
            policy_traffic.check()
            alerts = [
                a
                for a in prom.alerts("TracepassPassPowKBelowTarget")
                if a["state"] == "firing"
                and all(a["labels"].get(k) == v for k, v in labels.items())
            ]
            return alerts or None

        alerts = wait_until(
            lambda: firing(agent_version=VERSION), 150, "TracepassPassPowKBelowTarget to fire",
            interval=1,
        )  # fmt: skip
        labels = alerts[0]["labels"]
        assert labels["agent_name"] == AGENT
        assert labels["k"] == "3"
        assert labels["severity"] == "critical"
        assert float(alerts[0]["value"]) < 0.7
        assert alerts[0]["annotations"]["runbook_url"].endswith("#tracepasspasspowkbelowtarget")
        # The agent with only live traffic is paged too, on its policy series.
        alerts = wait_until(
            lambda: firing(reference_set=POLICY_SET), 150, "the alert on the policy series",
            interval=1,
        )  # fmt: skip
        assert alerts[0]["labels"]["agent_name"] == "policy-travel-agent"
        assert alerts[0]["labels"]["agent_version"] == POLICY_VERSION

        # Clean shutdown, in dependency order: agents, Prometheus, tracepass.
        traffic.stop()
        traffic.check()
        assert traffic.batches > 0
        policy_traffic.stop()
        policy_traffic.check()
        assert prom.stop() == 0, prom.log.read_text()
        assert s.terminate() == 0, s.stderr()
