"""What an alert needs to take the person paged somewhere, as two gauges Prometheus
alert templates can `query` (they cannot read exemplars or tracepass's config):

- `tracepass_ui_info{url}` = 1: the web UI's public base URL, `ui.external_url` + "/ui"
  (absent when it is not configured: links then stay relative);
- `tracepass_failure_example{agent_name, agent_version, reference_set, trace_id,
  conversation_id}` = 1: the exemplar of each failing series of
  `tracepass_conversations_total` (its latest failing conversation), one series per
  agent × version × reference set, so bounded like the counter (the trace id label
  changes as new failures come: old series go stale).

deploy/prometheus/tracepass.rules.yaml builds the failing-list link, the runbook link and
the example trace id of TracepassPassPowKBelowTarget from them (docs/operations.md).
"""

from __future__ import annotations

from collections.abc import Iterable

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from tracepass.collector.config import UIConfig
from tracepass.collector.export.exemplars import ExemplarStore

__all__ = ["register_alert_link_gauges", "ui_base_url"]

FAILING_OUTCOME = "fail"


def ui_base_url(config: UIConfig) -> str | None:
    """The UI's absolute base URL (no trailing slash), or None without `external_url`."""
    if config.external_url is None:
        return None
    return config.external_url.rstrip("/") + "/ui"


def register_alert_link_gauges(
    meter: Meter, config: UIConfig, exemplars: ExemplarStore | None
) -> None:
    base = ui_base_url(config)
    if base is not None:

        def observe_ui(options: CallbackOptions) -> Iterable[Observation]:
            yield Observation(1, {"url": base})

        meter.create_observable_gauge(
            "tracepass_ui_info",
            callbacks=[observe_ui],
            description="The web UI's public base URL (ui.external_url), for alert links",
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
