"""`tracepass_schema_checks_unknown_total{reason}`: tool-argument schema checks left
unknown because the schema (declared by a span, so untrusted) exceeded a bound of
`tracepass.evaluator.schema_guard` (docs/exported-metrics.md).

An observable counter read at each scrape from the evaluator's own tally: the
evaluator counts without knowing about metrics, and nothing is added to the
evaluation path.
"""

from __future__ import annotations

from collections.abc import Iterable

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from tracepass.evaluator.schema_guard import unknown_counts

__all__ = ["register_schema_check_counter"]


def register_schema_check_counter(meter: Meter) -> None:
    def observe(options: CallbackOptions) -> Iterable[Observation]:
        for reason, count in unknown_counts().items():
            yield Observation(count, {"reason": reason})

    meter.create_observable_counter(
        "tracepass_schema_checks_unknown",
        callbacks=[observe],
        description="arguments_schema checks left unknown (schema beyond a bound), by reason",
    )
