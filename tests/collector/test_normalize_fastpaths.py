"""The hot path's shortcuts agree with the general readers they bypass.

`normalize_request` reads semconv messages in place (no `Message` objects, single text
part answered directly) and answers plain JSON-object tool arguments/results without the
LangChain checks; each shortcut is compared here with the general function it stands
for, on generated inputs (hypothesis) that include the shapes the shortcuts refuse.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tracepass.collector.normalize import messages
from tracepass.collector.records import NOT_JSON, loads, tool_values

ROLES = st.sampled_from(
    ["user", "assistant", "USER", "Human", "ai", "model", "tool", "system", "", "other"]
)
TEXT = st.text(max_size=8)
PART = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "content": st.one_of(TEXT, st.integers())}),
    st.fixed_dictionaries(
        {
            "type": st.just("tool_call"),
            "id": TEXT,
            "name": TEXT,
            "arguments": st.dictionaries(TEXT, TEXT, max_size=2),
        }
    ),
    st.fixed_dictionaries({"type": st.just("text")}),
    TEXT,
)
SEMCONV = st.fixed_dictionaries(
    {
        "role": st.one_of(ROLES, st.integers(), st.lists(TEXT, max_size=1)),
        "parts": st.lists(PART, max_size=3),
    }
)
OTHER_SHAPES = st.one_of(
    st.fixed_dictionaries({"role": ROLES, "content": st.one_of(TEXT, st.none())}),
    st.fixed_dictionaries({"type": ROLES, "data": st.fixed_dictionaries({"content": TEXT})}),
    st.tuples(ROLES, TEXT).map(list),
    TEXT,
    st.integers(),
    st.fixed_dictionaries({"role": ROLES, "parts": TEXT}),  # parts not a list
)
MESSAGES = st.one_of(
    st.lists(st.one_of(SEMCONV, OTHER_SHAPES), max_size=4),
    SEMCONV,
    st.integers(),
)


def _general_last_text(value: Any, role: str) -> str | None:
    decoded = loads(value) if isinstance(value, str) else value
    if isinstance(decoded, dict):
        decoded = [decoded]
    if not isinstance(decoded, list):
        return None
    for item in reversed(decoded):
        msg = messages.parse_message(item, with_calls=False)
        if msg is not None and msg.role == role:
            return msg.text
    return None


@settings(max_examples=300, deadline=None)
@given(MESSAGES, st.sampled_from([messages.USER, messages.ASSISTANT]), st.booleans())
def test_message_shortcuts_match_the_general_parser(value: Any, role: str, as_json: bool) -> None:
    raw = json.dumps(value) if as_json else value
    assert messages.last_text_in(raw, role) == _general_last_text(raw, role)
    assert messages.output_text_in(raw) == messages.output_text(messages.parse_messages(raw))


JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), TEXT),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(
                [
                    "city",
                    "input_str",
                    "inputs",
                    "tags",
                    "output",
                    "kwargs",
                    "lc",
                    "type",
                    "data",
                    "content",
                    "tool_call_id",
                ]
            ),
            inner,
            max_size=3,
        ),
    ),
    max_leaves=6,
)


def _general_arguments(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        return tool_values._coerce_text(value, loads(value))
    return tool_values.coerce_arguments(value)


def _general_result(value: Any) -> Any:
    if isinstance(value, str):
        parsed = loads(value)
        if parsed is NOT_JSON:
            return value
        value = parsed
    if isinstance(value, dict):
        if "output" in value and value.keys() <= {"output", "kwargs"}:
            value = value["output"]
            if isinstance(value, str):
                return value
        if isinstance(value, dict):
            is_msg, content = tool_values._langchain_tool_message_content(value)
            if is_msg:
                return content
    return value


@settings(max_examples=300, deadline=None)
@given(JSONISH, st.booleans())
def test_argument_and_result_shortcuts_match_the_general_path(value: Any, as_json: bool) -> None:
    raw = json.dumps(value) if as_json else value
    assert tool_values.coerce_arguments(raw) == _general_arguments(raw)
    assert tool_values.coerce_result(raw) == _general_result(raw)
