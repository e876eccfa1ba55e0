"""What an alert needs to take the person paged somewhere, as two gauges Prometheus
alert templates can `query` (they cannot read exemplars or tracepass's config):

- `tracepass_ui_info{url}` = 1: the web UI's public base URL, `ui.external_url` + "/ui",
  else derived from the address `serve` listens on once its HTTP port is bound
  (`derive_ui_base`); always exported, `url="/ui"` (relative links) when neither says
  where people reach the UI (UI or HTTP receiver off);
- `tracepass_failure_example{agent_name, agent_version, reference_set, trace_id,
  conversation_id}` = 1: the exemplar of each failing series of
  `tracepass_conversations_total` (its latest failing conversation), one series per
  agent × version × reference set, so bounded like the counter (the trace id label
  changes as new failures come: old series go stale).

deploy/prometheus/tracepass.rules.yaml builds the failing-list link, the runbook link and
the example trace id of TracepassPassPowKBelowTarget from them (docs/operations.md).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from tracepass.collector.config import UIConfig
from tracepass.collector.export.exemplars import ExemplarStore

__all__ = [
    "RELATIVE_UI",
    "UIBase",
    "derive_ui_base",
    "register_alert_link_gauges",
    "ui_base_url",
]

FAILING_OUTCOME = "fail"
RELATIVE_UI = "/ui"  # the url label when no absolute base is known: links stay relative


def ui_base_url(config: UIConfig) -> str | None:
    """The UI's absolute base URL (no trailing slash), or None without `external_url`."""
    if config.external_url is None:
        return None
    return config.external_url.rstrip("/") + "/ui"


@dataclass
class UIBase:
    """The UI's base URL the alert links use, and where it came from (said at start-up).
    Mutable: `serve` fills it in once the HTTP port is bound (port 0 picks one), and the
    gauge reads it at each scrape."""

    url: str | None = None
    # "ui.external_url" | "derived" | "" (unknown); `warning`: why it may not work.
    source: str = ""
    warning: str | None = None

    @property
    def label(self) -> str:
        return self.url or RELATIVE_UI


def _wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def _url_host(host: str) -> str:
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return host
    return f"[{ip}]" if ip.version == 6 else str(ip)


def derive_ui_base(config: UIConfig, host: str, http_port: int | None) -> UIBase:
    """`ui.external_url` when set; else `http://<host>:<port>/ui` from the address the
    HTTP receiver listens on. A wildcard bind (0.0.0.0, ::) names no address: the
    machine's fully qualified name is used when it resolves, else loopback, with a
    warning either way (other machines may reach it by another name)."""
    configured = ui_base_url(config)
    if configured is not None:
        return UIBase(configured, "ui.external_url")
    if not config.enabled or http_port is None:
        return UIBase(None, "")  # no UI to link to: nothing to warn about
    if not _wildcard(host):
        return UIBase(f"http://{_url_host(host)}:{http_port}/ui", "derived")
    name = socket.getfqdn()
    try:
        resolvable = bool(name) and name != "localhost" and bool(socket.getaddrinfo(name, None))
    except OSError:
        resolvable = False
    if resolvable:
        return UIBase(
            f"http://{name}:{http_port}/ui",
            "derived",
            f"bound to {host}: alert links use this machine's name {name}; set "
            "ui.external_url if people reach the UI by another address",
        )
    return UIBase(
        f"http://127.0.0.1:{http_port}/ui",
        "derived",
        f"bound to {host} and this machine's name does not resolve: alert links point to "
        "127.0.0.1 (this machine only); set ui.external_url to the address people use",
    )


def register_alert_link_gauges(meter: Meter, base: UIBase, exemplars: ExemplarStore | None) -> None:
    def observe_ui(options: CallbackOptions) -> Iterable[Observation]:
        yield Observation(1, {"url": base.label})

    meter.create_observable_gauge(
        "tracepass_ui_info",
        callbacks=[observe_ui],
        description="The web UI's base URL for alert links (ui.external_url, else derived "
        "from the address serve listens on; /ui when unknown)",
    )
    if exemplars is None:
        return
    store = exemplars

    def observe_failures(options: CallbackOptions) -> Iterable[Observation]:
        for labels, trace_id, conversation_id in store.latest("tracepass_conversations"):
            if labels.pop("outcome", None) == FAILING_OUTCOME:
                yield Observation(
                    1, {**labels, "trace_id": trace_id, "conversation_id": conversation_id}
                )

    meter.create_observable_gauge(
        "tracepass_failure_example",
        callbacks=[observe_failures],
        description="The latest failing conversation (its trace id) per agent, version "
        "and reference set: the exemplar of tracepass_conversations_total{outcome=fail}",
    )
