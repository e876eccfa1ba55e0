"""The live collector counts, per request, how normalization read the spans: by
convention and framework adapter, and the fields it could not read."""

from __future__ import annotations

import json
from pathlib import Path

from _pipeline_support import Clock, Metrics, StubEvaluator
from test_normalize_basics import make_request, make_span

from tracepass.collector.pipeline import Pipeline


async def test_spans_read_and_unreadable_fields_are_counted() -> None:
    m = Metrics()
    p = Pipeline(StubEvaluator(), instruments=m.instruments, meter=m.meter, clock=Clock())
    await p.start(background=False)
    conv = {"gen_ai.conversation.id": "c"}
    request = make_request(
        make_span("invoke_agent a", {**conv, "gen_ai.operation.name": "invoke_agent"}, span_id=1),
        make_span(
            "execute_tool t",
            {**conv, "gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.arguments": "x("},
            span_id=2,
            parent=1,
        ),
        make_span(
            "GetWeather",
            {
                **conv,
                "openinference.span.kind": "TOOL",
                "tool.name": "get_weather",
                # smolagents' own wrapper (a bare {"args": [], "kwargs"} the convention reads).
                "input.value": json.dumps(
                    {"args": [], "sanitize_inputs_outputs": True, "kwargs": {"city": "P"}}
                ),
            },
            span_id=3,
            parent=1,
        ),
        make_span("http", conv, span_id=4, parent=1),
    )
    request.resource_spans[0].scope_spans.add().spans.append(
        request.resource_spans[0].scope_spans[0].spans.pop()
    )
    request.resource_spans[0].scope_spans[1].spans.append(
        request.resource_spans[0].scope_spans[0].spans.pop()
    )
    request.resource_spans[0].scope_spans[1].scope.name = "openinference.instrumentation.smolagents"
    await p.ingest(request)
    assert m.value("tracepass_spans_read", convention="genai", adapter="none") == 2
    assert m.value("tracepass_spans_read", convention="openinference", adapter="smolagents") == 1
    assert m.value("tracepass_spans_read", convention="none", adapter="none") == 1
    assert m.value("tracepass_fields_unreadable", field="tool_arguments") == 1
    assert m.value("tracepass_fields_unreadable", field="tool_name") == 1
    # The unclaimed `http` span, by its scope (moved to the smolagents one above).
    scope = "openinference.instrumentation.smolagents"
    assert m.value("tracepass_spans_unrecognized", scope=scope) == 1
    await p.stop()


async def test_unrecognized_spans_are_counted_by_scope_through_the_label_limiter() -> None:
    """A new framework arriving unread shows as tracepass_spans_unrecognized{scope}; its
    scope label goes through the label limiter (the service's `metrics.label_limit`)."""
    from tracepass.collector.export.cardinality import LabelLimiter

    m = Metrics()
    p = Pipeline(StubEvaluator(), instruments=m.instruments, meter=m.meter, clock=Clock())
    limiter = LabelLimiter(2)
    p.intake.scope_label = lambda scope: limiter("scope", scope)
    await p.start(background=False)
    request = make_request()
    for i, scope in enumerate(["acme.a", "acme.b", "acme.c", "acme.d"]):
        scope_spans = request.resource_spans[0].scope_spans.add()
        scope_spans.scope.name = scope
        scope_spans.spans.append(make_span("acme.step", {"k": "v"}, span_id=i + 1))
    await p.ingest(request)
    assert m.value("tracepass_spans_unrecognized", scope="acme.a") == 1
    assert m.value("tracepass_spans_unrecognized", scope="acme.b") == 1
    assert m.value("tracepass_spans_unrecognized", scope="other") == 2
    await p.stop()


async def test_the_configured_custom_mappings_read_live_spans(tmp_path: Path) -> None:
    """`Pipeline.from_config` hands `conventions.custom` to the live normalizer: spans
    it claims are counted under `custom:<name>`, its missing fields as unreadable."""
    from tracepass.collector.config import CollectorConfig

    config = CollectorConfig.model_validate(
        {
            # A fresh state file: the default path is relative to the working directory,
            # and a file left there by an earlier run would be recovered (its spans read
            # again).
            "state": {"path": str(tmp_path / "state.sqlite")},
            "conventions": {
                "custom": [
                    {
                        "name": "acme",
                        "match": {"span_name": "acme.*"},
                        "kind": "tool",
                        "fields": {"tool_name": "acme.tool", "arguments": "acme.args"},
                    }
                ]
            },
        }
    )
    m = Metrics()
    p = Pipeline.from_config(
        config, StubEvaluator(), instruments=m.instruments, meter=m.meter, clock=Clock()
    )
    await p.start(background=False)
    await p.ingest(
        make_request(
            make_span("acme.step", {"acme.tool": "t", "acme.args": '{"a": 1}'}, span_id=1),
            make_span("acme.step", {"acme.tool": "t"}, span_id=2),
        )
    )
    # The two spans, one of them without arguments.
    assert m.value("tracepass_spans_read", convention="custom:acme", adapter="none") == 2
    assert m.value("tracepass_spans_read", convention="none", adapter="none") == 0
    assert m.value("tracepass_fields_unreadable", field="arguments") == 1
    await p.stop()
