"""Content capture: serialization fallbacks, redaction, truncation, the off switch."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import pytest
from _instr_support import attr_json, one
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracepass.instrumentation import ContentSettings, agent, configure, get_settings, tool
from tracepass.instrumentation._content import (
    CAPTURE_ENV,
    REDACTION_FAILED,
    cap,
    set_settings,
    to_json,
    truncation_marker,
)


@dataclass
class Point:
    x: int
    y: int


class Opaque:
    def __repr__(self) -> str:
        return "<Opaque thing>"


class BrokenRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


@tool
def echo(value: Any) -> Any:
    return value


@agent
def answer(question: str) -> str:
    return "The answer to " + question


def test_to_json_fallbacks_never_raise() -> None:
    assert to_json({"a": [1, 2.5, None, True]}) == '{"a": [1, 2.5, null, true]}'
    assert to_json("café") == '"café"'  # readable, not \\u-escaped
    assert json.loads(to_json(Point(1, 2))) == {"x": 1, "y": 2}
    assert json.loads(to_json({"o": Opaque()})) == {"o": "<Opaque thing>"}
    assert json.loads(to_json({1, 2})) in ([1, 2], [2, 1])
    loop: list[Any] = []
    loop.append(loop)
    assert json.loads(to_json(loop)) == "[[...]]"
    assert json.loads(to_json({(1, 2): "tuple key"})) == "{(1, 2): 'tuple key'}"
    assert json.loads(to_json(BrokenRepr())).startswith("<unrepresentable BrokenRepr")


def test_non_serializable_arguments_and_results(spans: InMemorySpanExporter) -> None:
    echo(Opaque())
    span = one(spans.get_finished_spans(), "execute_tool echo")
    assert attr_json(span, "gen_ai.tool.call.arguments") == {"value": "<Opaque thing>"}
    assert attr_json(span, "gen_ai.tool.call.result") == "<Opaque thing>"


def test_capture_off_via_configure(spans: InMemorySpanExporter) -> None:
    configure(capture_content=False)
    assert get_settings().capture is False
    echo("secret")
    answer("secret?")
    finished = spans.get_finished_spans()
    tool_attrs = dict(one(finished, "execute_tool echo").attributes or {})
    agent_attrs = dict(one(finished, "invoke_agent answer").attributes or {})
    for key in ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result"):
        assert key not in tool_attrs
    for key in ("gen_ai.input.messages", "gen_ai.output.messages"):
        assert key not in agent_attrs
    # Structure is still there: evaluation of tool names/ids works without content.
    assert tool_attrs["gen_ai.tool.name"] == "echo"
    assert "gen_ai.tool.call.id" in tool_attrs
    assert agent_attrs["gen_ai.agent.name"] == "answer"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("false", False),
        ("FALSE", False),
        ("0", False),
        ("true", True),
        ("", True),
        # The enum of OTel's GenAI utilities (gen_ai_latest_experimental stability mode).
        ("NO_CONTENT", False),
        ("EVENT_ONLY", False),
        ("SPAN_ONLY", True),
        ("span_and_event", True),
    ],
)
def test_capture_env_var(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch, raw: str, expected: bool
) -> None:
    monkeypatch.setenv(CAPTURE_ENV, raw)
    configure()
    assert get_settings().capture is expected
    echo("x")
    attrs = one(spans.get_finished_spans(), "execute_tool echo").attributes or {}
    assert ("gen_ai.tool.call.arguments" in attrs) is expected


def test_unrecognised_env_value_warns_and_keeps_capture(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(CAPTURE_ENV, "sometimes")
    configure()
    assert get_settings().capture is True
    assert f"{CAPTURE_ENV}='sometimes' is not a recognised value" in caplog.text


def test_env_false_wins_over_explicit_true(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CAPTURE_ENV, "false")
    configure(capture_content=True)
    assert get_settings().capture is False


def test_redaction_hook_sees_key_and_value(spans: InMemorySpanExporter) -> None:
    seen: list[str] = []

    def redact(key: str, value: Any) -> Any:
        seen.append(key)
        if key == "gen_ai.tool.call.arguments":
            return {k: ("***" if k == "value" else v) for k, v in value.items()}
        if isinstance(value, str):
            return value.replace("secret", "[redacted]")
        return value

    configure(redact=redact)
    echo("my secret")
    answer("the secret")
    finished = spans.get_finished_spans()
    tool_span = one(finished, "execute_tool echo")
    assert attr_json(tool_span, "gen_ai.tool.call.arguments") == {"value": "***"}
    assert attr_json(tool_span, "gen_ai.tool.call.result") == "my [redacted]"
    turn = one(finished, "invoke_agent answer")
    assert attr_json(turn, "gen_ai.input.messages")[0]["parts"][0]["content"] == "the [redacted]"
    assert (
        attr_json(turn, "gen_ai.output.messages")[0]["parts"][0]["content"]
        == "The answer to the [redacted]"
    )
    assert seen == [
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "gen_ai.input.messages",
        "gen_ai.output.messages",
    ]


def test_failing_redaction_withholds_value(
    spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    def redact(key: str, value: Any) -> Any:
        raise ValueError("bad hook")

    configure(redact=redact)
    assert echo("pii") == "pii"  # the tool itself is unaffected
    span = one(spans.get_finished_spans(), "execute_tool echo")
    assert attr_json(span, "gen_ai.tool.call.result") == REDACTION_FAILED
    assert "redact hook failed" in caplog.text


def test_truncation_of_tool_values(spans: InMemorySpanExporter) -> None:
    configure(max_value_bytes=100)
    big = "x" * 500
    echo(big)
    span = one(spans.get_finished_spans(), "execute_tool echo")
    attrs = span.attributes or {}
    args = attrs["gen_ai.tool.call.arguments"]
    assert isinstance(args, str)
    full = json.dumps({"value": big})
    assert args == full[:100] + truncation_marker(len(full))
    assert tuple(attrs["tracepass.content.truncated"]) == (  # type: ignore[arg-type]
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    )


def test_truncation_of_messages_keeps_valid_json(spans: InMemorySpanExporter) -> None:
    configure(max_value_bytes=10)
    answer("short?")  # query fits (6 bytes); answer does not
    span = one(spans.get_finished_spans(), "invoke_agent answer")
    assert attr_json(span, "gen_ai.input.messages")[0]["parts"][0]["content"] == "short?"
    out = attr_json(span, "gen_ai.output.messages")[0]
    full = "The answer to short?"
    assert out["parts"][0]["content"] == full[:10] + truncation_marker(len(full))
    assert out["finish_reason"] == "stop"
    assert tuple(span.attributes["tracepass.content.truncated"]) == ("gen_ai.output.messages",)  # type: ignore[index,arg-type]


def test_no_truncation_attribute_when_nothing_cut(spans: InMemorySpanExporter) -> None:
    echo("small")
    span = one(spans.get_finished_spans(), "execute_tool echo")
    assert "tracepass.content.truncated" not in (span.attributes or {})


def test_default_cap_is_64_kib() -> None:
    assert ContentSettings().max_value_bytes == 65536
    with pytest.raises(ValueError, match="max_value_bytes must be >= 1"):
        set_settings(ContentSettings(max_value_bytes=0))


@given(st.text(), st.integers(min_value=1, max_value=64))
def test_cap_property(text: str, limit: int) -> None:
    out, cut = cap(text, limit)
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= limit:
        assert (out, cut) == (text, False)
    else:
        assert cut
        marker = truncation_marker(len(raw))
        assert out.endswith(marker)
        kept = out[: -len(marker)]
        assert text.startswith(kept)
        kept_bytes = len(kept.encode("utf-8", "surrogatepass"))
        assert kept_bytes <= limit
        # Cut on a character boundary as late as possible: one more char would not fit.
        if len(kept) < len(text):
            assert kept_bytes + len(text[len(kept)].encode("utf-8", "surrogatepass")) > limit


def test_nan_and_inf_results_do_not_raise(spans: InMemorySpanExporter) -> None:
    echo(math.nan)
    span = one(spans.get_finished_spans(), "execute_tool echo")
    assert (span.attributes or {})["gen_ai.tool.call.result"] == "NaN"


def test_default_cap_truncates_at_64_kib(spans: InMemorySpanExporter) -> None:
    big = "é" * 40_000  # 80,000 UTF-8 bytes: over the default cap, as a string and as JSON
    answer(big)
    echo(big)
    finished = spans.get_finished_spans()
    turn = one(finished, "invoke_agent answer")
    content = attr_json(turn, "gen_ai.input.messages")[0]["parts"][0]["content"]
    assert content == "é" * 32_768 + truncation_marker(80_000)
    out = attr_json(turn, "gen_ai.output.messages")[0]["parts"][0]["content"]
    assert out.endswith(truncation_marker(len(("The answer to " + big).encode())))
    tool_attrs = one(finished, "execute_tool echo").attributes or {}
    result = tool_attrs["gen_ai.tool.call.result"]
    assert isinstance(result, str)
    assert result == json.dumps(big, ensure_ascii=False)[:32_768] + truncation_marker(80_002)
    assert len(result.encode()) - len(truncation_marker(80_002).encode()) <= 65_536
