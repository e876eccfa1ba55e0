"""The live collector counts, per request, how normalization read the spans: by
convention and framework adapter, and the fields it could not read."""

from __future__ import annotations

import json

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
    await p.stop()
