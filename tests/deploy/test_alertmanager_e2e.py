"""The alert reaches a person: a real `tracepass serve` fed by the example agent, a real
Prometheus with the shipped rules (short windows, `short_rules`), a real Alertmanager
(Debian's `prometheus-alertmanager`) with the shipped deploy/alertmanager/alertmanager.yaml
(its webhook pointed at a small receiver on loopback, its waits shortened), and that
receiver. When pass^3 falls, TracepassPassPowKBelowTarget fires and the receiver gets a
notification whose annotations hold: a link to the UI's failing list of that agent,
version and reference set, absolute from `ui.external_url` (fetched here: it lists those
failing conversations), the runbook URL (absolute too, fetched here: the UI's
/ui/runbook page holds the alert's section), and the trace id of a failing conversation (the
exemplar of the failing counter). The Slack template renders that notification (amtool)."""

from __future__ import annotations

import contextlib
import http.server
import json
import re
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from test_prometheus_e2e import (
    AGENT,
    REFERENCE_SET,
    REFS,
    SERVE_CONFIG,
    VERSION,
    Traffic,
    free_port,
    prometheus,
)

from conftest import require_tool

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from _live_support import http_get, serve, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.system, pytest.mark.timeout(400)]

ROOT = Path(__file__).resolve().parents[2]
ALERTMANAGER_DIR = ROOT / "deploy" / "alertmanager"
ALERT = "TracepassPassPowKBelowTarget"


class _Receiver(http.server.BaseHTTPRequestHandler):
    """Alertmanager's webhook receiver: keeps every JSON payload it is sent."""

    payloads: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        type(self).payloads.append({"path": self.path, **json.loads(body)})
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def webhook_receiver() -> Iterator[str]:
    _Receiver.payloads = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def alertmanager_config(receiver_url: str) -> dict[str, Any]:
    """The shipped config with the receivers' webhooks pointed at `receiver_url` and
    the waits shortened; templates by absolute path. Route and receivers unchanged."""
    doc: dict[str, Any] = yaml.safe_load(
        (ALERTMANAGER_DIR / "alertmanager.yaml").read_text(encoding="utf-8")
    )
    doc["templates"] = [str(ALERTMANAGER_DIR / t) for t in doc["templates"]]
    doc["route"].update(group_wait="1s", group_interval="2s", repeat_interval="1m")
    for receiver in doc["receivers"]:
        for hook in receiver.get("webhook_configs", []):
            hook["url"] = f"{receiver_url}/{receiver['name']}"
    return doc


@contextlib.contextmanager
def alertmanager(tmp_path: Path, receiver_url: str) -> Iterator[str]:
    """Alertmanager on a free loopback port (never 9093: the Debian package may run a
    service there), clustering off; yields host:port."""
    binary = require_tool("prometheus-alertmanager")
    config = tmp_path / "alertmanager.yaml"
    config.write_text(yaml.safe_dump(alertmanager_config(receiver_url)), encoding="utf-8")
    log = tmp_path / "alertmanager.log"
    for _attempt in range(3):
        port = free_port()
        with log.open("wb") as log_f:
            proc = subprocess.Popen(
                [
                    binary,
                    f"--config.file={config}",
                    f"--storage.path={tmp_path / 'alertmanager'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--cluster.listen-address=",
                    "--log.level=warn",
                ],
                stdout=log_f,
                stderr=subprocess.STDOUT,
            )

        def ready(proc: subprocess.Popen[bytes] = proc, port: int = port) -> bool:
            if proc.poll() is not None:
                return True
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2) as r:
                return bool(r.status == 200)

        wait_until(ready, 60, "Alertmanager to start")
        if proc.poll() is None:
            break
    else:
        raise AssertionError(f"Alertmanager did not start:\n{log.read_text()}")
    try:
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def test_shipped_alertmanager_config_and_template_are_valid(tmp_path: Path) -> None:
    amtool = require_tool("amtool")
    done = subprocess.run(
        [amtool, "check-config", str(ALERTMANAGER_DIR / "alertmanager.yaml")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 templates" in done.stdout
    contact = yaml.safe_load((ALERTMANAGER_DIR / "grafana-contact-point.yaml").read_text())
    assert contact["apiVersion"] == 1
    (point,) = contact["contactPoints"]
    (receiver,) = point["receivers"]
    assert receiver["type"] == "slack"
    assert "{{ .Annotations.ui_url | reReplaceAll" in receiver["settings"]["text"]
    assert contact["policies"][0]["receiver"] == point["name"]


def _firing(path: str) -> list[dict[str, Any]] | None:
    for payload in _Receiver.payloads:
        if payload["path"] != path or payload["status"] != "firing":
            continue
        alerts = [
            a
            for a in payload["alerts"]
            if a["labels"]["alertname"] == ALERT
            and a["labels"]["agent_version"] == VERSION
            # The agent's two reference sets both fall; which one Alertmanager groups
            # first is timing: the checks below follow the travel-assistant set's page.
            and a["labels"]["reference_set"] == REFERENCE_SET
        ]
        if alerts:
            return [payload, *alerts]
    return None


def test_falling_pass_pow_k_pages_with_links_to_the_failing_conversations(
    tmp_path: Path,
) -> None:
    require_tool("prometheus")
    require_tool("prometheus-alertmanager")
    http_port = free_port()
    external = f"http://127.0.0.1:{http_port}"
    config = {**SERVE_CONFIG, "ui": {"external_url": external}}
    with (
        webhook_receiver() as receiver_url,
        alertmanager(tmp_path, receiver_url) as am,
        serve(tmp_path, "--references", str(REFS), "--http-port", str(http_port), config=config) as s,
        prometheus(tmp_path, s.ports["metrics_port"], alertmanager=am) as prom,
        Traffic(s.http) as traffic,
    ):  # fmt: skip
        assert s.http == external
        traffic.regression = 0.9  # pass^3 falls from the start

        def paged() -> list[dict[str, Any]] | None:
            traffic.check()
            return _firing("/tracepass-page")

        payload, alert, *_ = wait_until(paged, 300, "the page for a falling pass^3", interval=1)
        assert prom.alerts(ALERT), "Prometheus shows the alert too"
        traffic.stop()
        traffic.check()

        labels, notes = alert["labels"], alert["annotations"]
        assert labels["agent_name"] == AGENT
        assert labels["reference_set"] == REFERENCE_SET
        assert labels["severity"] == "critical"
        # The runbook, on the same public URL: the UI serves docs/operations.md.
        runbook = notes["runbook_url"]
        assert runbook == f"{external}/ui/runbook#tracepasspasspowkbelowtarget", runbook
        _check_runbook(runbook)
        # The failing list of this agent, version and reference set, on the UI's public URL.
        link = notes["failing_conversations"]
        assert link.startswith(f"{external}/ui/conversations?"), link
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(link).query)
        assert query == {
            "agent_name": [AGENT],
            "agent_version": [VERSION],
            "reference_set": [REFERENCE_SET],
            "outcome": ["fail,error,incomplete"],
        }
        example = notes["example_trace_id"]
        assert re.fullmatch(r"[0-9a-f]{32}", example), example
        _check_link(s.http, link, example)
    _check_slack_message(tmp_path, payload, link, example, runbook)


def _check_link(collector: str, link: str, example: str) -> None:
    """The link works: the page lists the failing conversations the API lists for
    those filters, and the example trace belongs to one of them."""
    api = (
        f"{collector}/api/v1/conversations?agent_name={AGENT}&agent_version={VERSION}"
        f"&reference_set={REFERENCE_SET}&outcome=fail,error,incomplete&limit=500"
    )
    status, body = http_get(api)
    assert status == 200
    failing = json.loads(body)["conversations"]
    assert failing
    assert all(c["outcome"] in {"fail", "error", "incomplete"} for c in failing)
    assert any(example in c["trace_ids"] for c in failing), example
    status, page = http_get(link)
    assert status == 200
    html = page.decode()
    shown = [c["conversation_id"] for c in failing if c["conversation_id"] in html]
    assert shown, "the page lists the failing conversations"
    assert len(shown) == html.count('href="/ui/conversations/'), "and only those"


def _check_runbook(runbook: str) -> None:
    """The runbook link is fetched: the page holds the alert's section at its anchor."""
    page_url, anchor = runbook.split("#", 1)
    status, page = http_get(page_url)
    assert status == 200, page[:500]
    html = page.decode()
    assert f'<h3 id="{anchor}">{ALERT}</h3>' in html
    assert "<strong>Meaning</strong> (critical)" in html


def _check_slack_message(
    tmp_path: Path, payload: dict[str, Any], link: str, example: str, runbook: str
) -> None:
    """The Slack template renders the real notification with the three links."""
    payload = {k: v for k, v in payload.items() if k != "path"}
    amtool = require_tool("amtool")
    data = tmp_path / "notification.json"
    data.write_text(json.dumps(payload), encoding="utf-8")
    done = subprocess.run(
        [amtool, "template", "render",
         f"--template.glob={ALERTMANAGER_DIR / 'templates' / '*.tmpl'}",
         f"--template.data={data}",
         '--template.text={{ template "tracepass.slack.text" . }}'],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"<{link}|open in tracepass>" in done.stdout.replace("&amp;", "&"), done.stdout
    assert f"Example trace: `{example}`" in done.stdout
    assert f"Runbook: <{runbook}|" in done.stdout
