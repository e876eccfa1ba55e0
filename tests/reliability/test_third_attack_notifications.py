"""Third attack, notifications (issue 33, item 11): span-controlled label values went
unescaped into the Slack/Mattermost template (`<https://…|text>` became a link with the
attacker's text, `<!channel>` pinged the channel).

A real Alertmanager (Debian's `prometheus-alertmanager`) runs the shipped config and
template, its Slack receiver (the shipped, commented `slack_configs` example) pointed at a
loopback receiver. An alert whose labels and annotations carry what a span can set (an
agent name, version and reference set are span attributes; the summary and description
repeat them) is posted to its API; the delivered Slack webhook body must carry the text
escaped: no `<`, `>` or raw `&` from the values, no live `<!channel>`, no attacker link.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
ALERTMANAGER_DIR = ROOT / "deploy" / "alertmanager"
HOSTILE = "<!channel> <https://evil.example/login|Reset your password> & @here `x`"


class _Slack(http.server.BaseHTTPRequestHandler):
    bodies: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        type(self).bodies.append(json.loads(body))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def _slack() -> Iterator[str]:
    _Slack.bodies = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Slack)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _slack_receiver() -> dict[str, Any]:
    """The shipped config's commented Slack receiver, as an operator uncomments it."""
    text = (ALERTMANAGER_DIR / "alertmanager.yaml").read_text(encoding="utf-8")
    start = text.index("  # - name: tracepass-slack")
    lines = []
    for line in text[start:].splitlines():
        if not line.startswith("  #"):
            break
        lines.append("  " + line[len("  # ") :])
    doc = yaml.safe_load("\n".join(lines))
    receiver: dict[str, Any] = doc[0]
    return receiver


def _config(hook: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(
        (ALERTMANAGER_DIR / "alertmanager.yaml").read_text(encoding="utf-8")
    )
    doc["templates"] = [str(ALERTMANAGER_DIR / t) for t in doc["templates"]]
    slack = _slack_receiver()
    for cfg in slack["slack_configs"]:
        cfg.pop("api_url_file", None)
        cfg["api_url"] = hook
    doc["receivers"].append(slack)
    doc["route"] = {
        "receiver": slack["name"],
        "group_by": ["alertname", "agent_name", "agent_version", "reference_set"],
        "group_wait": "1s",
        "group_interval": "2s",
        "repeat_interval": "1m",
    }
    return doc


@contextlib.contextmanager
def _alertmanager(tmp_path: Path, hook: str) -> Iterator[str]:
    binary = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
    if binary is None:
        pytest.skip("prometheus-alertmanager is not installed")
    config = tmp_path / "alertmanager.yaml"
    config.write_text(yaml.safe_dump(_config(hook)), encoding="utf-8")
    port = _free_port()
    log = (tmp_path / "alertmanager.log").open("wb")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, (tmp_path / "alertmanager.log").read_text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "Alertmanager never became ready"
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


def _post_alert(base: str) -> None:
    labels = {
        "alertname": "TracepassPassPowKBelowTarget",
        "severity": "critical",
        "agent_name": HOSTILE,
        "agent_version": "v1 <!here>",
        "reference_set": "set & <https://evil.example|x>",
        "k": "3",
    }
    annotations = {
        "summary": f"pass^3 of {HOSTILE} v1 <!here> is confidently below target",
        "description": f"pass^3 of {HOSTILE} is 10%",
        "runbook_url": "http://tracepass.example/ui/runbook#tracepasspasspowkbelowtarget",
        "failing_conversations": "http://tracepass.example/ui/conversations?agent_name="
        "%3C%21channel%3E&outcome=fail",
        "example_trace_id": "<!channel>",
    }
    body = json.dumps([{"labels": labels, "annotations": annotations}]).encode()
    request = urllib.request.Request(
        f"{base}/api/v2/alerts", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as resp:
        assert resp.status == 200


def test_slack_message_carries_span_values_escaped(tmp_path: Path) -> None:
    with _slack() as hook, _alertmanager(tmp_path, hook) as am:
        _post_alert(am)
        deadline = time.monotonic() + 120
        while not _Slack.bodies:
            assert time.monotonic() < deadline, (tmp_path / "alertmanager.log").read_text()
            time.sleep(0.2)
    attachment = _Slack.bodies[0]["attachments"][0]
    delivered = attachment["title"] + "\n" + attachment["text"]
    # The values are there, escaped the way Slack reads text...
    assert "&lt;!channel&gt;" in delivered
    assert "&lt;https://evil.example/login|Reset your password&gt;" in delivered
    assert "&amp;" in delivered
    # ...and nothing of them is live: no ping, no link but the template's own.
    assert "<!channel>" not in delivered
    assert "<!here>" not in delivered
    assert "<https://evil.example" not in delivered
    assert "@here" not in delivered  # Mattermost pings on the plain word
    links = [part.split("|")[0] for part in delivered.split("<")[1:]]
    assert all(link.startswith("http://tracepass.example/") for link in links), links
    assert attachment["title_link"].startswith("http://tracepass.example/ui/conversations")
