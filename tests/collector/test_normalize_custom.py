"""`conventions.custom`: user mappings validated at load (`file:line:col`), claimed
before the built-in conventions, and bounded against hostile input (RE2 patterns,
JSON size and pointer depth, a mapping that matches every span)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from test_normalize_basics import make_request, make_span

from tracepass.collector.config import ConfigError, ConventionsConfig, load_config
from tracepass.collector.normalize import (
    CONVENTION_ATTR,
    CustomConventions,
    ReadTally,
    RecordKind,
    normalize_request,
)


def _conventions(tmp_path: Path, yaml_text: str) -> ConventionsConfig:
    path = tmp_path / "collector.yaml"
    path.write_text(yaml_text, encoding="utf-8")
    return load_config(path).conventions


def _load_error(tmp_path: Path, yaml_text: str) -> str:
    path = tmp_path / "collector.yaml"
    path.write_text(yaml_text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    return str(info.value).replace(str(path), "FILE")


TOOL_MAPPING = """\
conventions:
  custom:
    - name: acme-tool
      match: {span_name: "acme.tool.*", attributes: [acme.tool]}
      kind: tool
      fields:
        tool_name: acme.tool
        call_id: "acme.payload#/call/id"
        arguments: "acme.payload#/call/args"
        result: event:acme.done/acme.output
        conversation_id: acme.session
"""


def test_a_mapping_reads_attributes_json_inside_them_and_span_events(tmp_path: Path) -> None:
    span = make_span(
        "acme.tool.run",
        {
            "acme.tool": "search",
            "acme.session": "s-1",
            "acme.payload": json.dumps({"call": {"id": "c1", "args": {"q": "x"}}}),
        },
    )
    event = span.events.add(name="acme.done")
    event.attributes.add(key="acme.output").value.string_value = '{"hits": 3}'
    custom = CustomConventions(_conventions(tmp_path, TOOL_MAPPING))
    (rec,), _ = normalize_request(make_request(span), custom=custom)
    assert rec.kind is RecordKind.TOOL
    assert (rec.tool_name, rec.tool_call_id, rec.conversation_id) == ("search", "c1", "s-1")
    assert rec.tool_arguments == {"q": "x"}
    assert rec.tool_result == {"hits": 3}
    assert rec.attributes[CONVENTION_ATTR] == "custom:acme-tool"


def test_a_mapping_comes_before_the_built_in_conventions(tmp_path: Path) -> None:
    mapping = """\
conventions:
  custom:
    - name: mine
      match: {span_name: "execute_tool *"}
      kind: other
"""
    span = make_span("execute_tool x", {"gen_ai.operation.name": "execute_tool"})
    custom = CustomConventions(_conventions(tmp_path, mapping))
    (rec,), _ = normalize_request(make_request(span), custom=custom)
    assert (rec.kind, rec.attributes[CONVENTION_ATTR]) == (RecordKind.OTHER, "custom:mine")
    (plain,), _ = normalize_request(make_request(span))
    assert plain.kind is RecordKind.TOOL


def test_spans_a_mapping_does_not_match_go_to_the_built_in_table(tmp_path: Path) -> None:
    custom = CustomConventions(_conventions(tmp_path, TOOL_MAPPING))
    span = make_span("acme.tool.run", {"gen_ai.tool.name": "t"})  # no acme.tool attribute
    (rec,), _ = normalize_request(make_request(span), custom=custom)
    assert rec.attributes[CONVENTION_ATTR] != "custom:acme-tool"


def test_a_mapped_field_that_is_absent_counts_as_unreadable(tmp_path: Path) -> None:
    custom = CustomConventions(_conventions(tmp_path, TOOL_MAPPING))
    tally = ReadTally()
    span = make_span("acme.tool.run", {"acme.tool": "search"})
    normalize_request(make_request(span), custom=custom, tally=tally)
    assert tally.unreadable["arguments"] == 1
    assert tally.unreadable["conversation_id"] == 1


# ------------------------------------------------------------------- errors at load


def test_an_unknown_field_is_a_located_error_with_a_suggestion(tmp_path: Path) -> None:
    message = _load_error(
        tmp_path,
        "conventions:\n  custom:\n    - name: a\n      match: {}\n      kind: tool\n"
        "      fields:\n        tool_nme: x\n",
    )
    assert message.startswith("FILE:7:9: conventions.custom.0.fields.tool_nme:"), message
    assert "did you mean 'tool_name'?" in message


def test_a_regex_re2_cannot_run_in_linear_time_is_refused_with_its_location(
    tmp_path: Path,
) -> None:
    message = _load_error(
        tmp_path,
        "conventions:\n  custom:\n    - name: a\n      kind: turn\n      match:\n"
        "        span_name_regex: '(a)\\1'\n",
    )
    assert message.startswith("FILE:6:9: conventions.custom.0.match.span_name_regex:"), message
    assert "RE2" in message


def test_a_regex_whose_automaton_is_too_big_is_refused(tmp_path: Path) -> None:
    message = _load_error(
        tmp_path,
        "conventions:\n  custom:\n    - name: a\n      kind: turn\n      match:\n"
        "        span_name_regex: '((((a{100}){100}){100}){100})'\n",
    )
    assert "span_name_regex" in message
    assert "RE2" in message


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("event:/k", "event:<event name>/<attribute key>"),
        ("k#a", "starts with '/'"),
        ("k#" + "/a" * 17, "pointer segments"),
        ("#/a", "empty attribute key"),
    ],
)
def test_malformed_paths_are_refused(tmp_path: Path, path: str, why: str) -> None:
    message = _load_error(
        tmp_path,
        "conventions:\n  custom:\n    - name: a\n      match: {}\n      kind: tool\n"
        f"      fields:\n        tool_name: {json.dumps(path)}\n",
    )
    assert why in message


# ------------------------------------------------------------------------- bounds


def test_a_catastrophic_pattern_matches_in_linear_time(tmp_path: Path) -> None:
    """`(a+)+$` takes exponential time in a backtracking engine on `aaa…b`; RE2 does
    not backtrack (this test would hang with Python's `re`)."""
    mapping = (
        "conventions:\n  custom:\n    - name: a\n      kind: turn\n      match:\n"
        "        span_name_regex: '^(a+)+$'\n"
    )
    custom = CustomConventions(_conventions(tmp_path, mapping))
    span = make_span("a" * 5_000 + "b")
    (rec,), _ = normalize_request(make_request(span), custom=custom)
    assert rec.attributes.get(CONVENTION_ATTR) != "custom:a"


def test_json_beyond_the_size_bound_is_not_parsed(tmp_path: Path) -> None:
    mapping = TOOL_MAPPING.replace("conventions:\n", "conventions:\n  max_json_chars: 1000\n")
    custom = CustomConventions(_conventions(tmp_path, mapping))
    tally = ReadTally()
    big = json.dumps({"call": {"id": "c1", "args": {"q": "x" * 2000}}})
    span = make_span("acme.tool.run", {"acme.tool": "search", "acme.payload": big})
    (rec,), _ = normalize_request(make_request(span), custom=custom, tally=tally)
    assert rec.tool_call_id is None
    assert tally.unreadable["call_id"] == 1


def test_a_mapping_that_matches_every_span_is_allowed(tmp_path: Path) -> None:
    mapping = "conventions:\n  custom:\n    - name: all\n      match: {}\n      kind: other\n"
    custom = CustomConventions(_conventions(tmp_path, mapping))
    spans: list[Span] = [make_span(f"s{i}", span_id=i + 1) for i in range(50)]
    records, _ = normalize_request(make_request(*spans), custom=custom)
    assert {r.attributes[CONVENTION_ATTR] for r in records} == {"custom:all"}
