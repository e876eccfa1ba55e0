"""Records share one `attributes` dict per distinct set of kept string attributes (a
dict per buffered span was ~180 bytes): equal items in the same order share, anything
else (another value, a non-string value, an unhashable one) keeps its own dict."""

from __future__ import annotations

from test_normalize_basics import make_request, make_span

from tracepass.collector.normalize import normalize_request

TOOL = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"}


def test_equal_kept_attributes_share_one_dict_across_requests() -> None:
    first, _ = normalize_request(make_request(make_span("a", TOOL, span_id=1)))
    second, _ = normalize_request(
        make_request(make_span("b", TOOL, span_id=2), make_span("c", TOOL, span_id=3))
    )
    assert first[0].attributes == {
        "tracepass.convention": "genai",
        "gen_ai.operation.name": "execute_tool",
    }
    assert second[0].attributes is first[0].attributes
    assert second[1].attributes is first[0].attributes


def test_other_values_and_types_keep_their_own_dict() -> None:
    model = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m-1"}
    records, _ = normalize_request(
        make_request(
            make_span("a", model, span_id=1),
            make_span("b", {**model, "gen_ai.request.model": "m-2"}, span_id=2),
            make_span("c", {**TOOL, "tracepass.content.truncated": True}, span_id=3),
            make_span("d", {**TOOL, "tracepass.content.truncated": True}, span_id=4),
        )
    )
    a, b, c, d = records
    assert a.attributes["gen_ai.request.model"] == "m-1"
    assert b.attributes["gen_ai.request.model"] == "m-2"
    assert c.attributes is not d.attributes  # a bool value: never shared
    assert c.attributes["tracepass.content.truncated"] is True
