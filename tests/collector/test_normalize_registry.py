"""The dispatch tables: conventions claim spans in table order, adapters apply per scope,
and a framework adapter is a module that the adapters package discovers."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from test_normalize_basics import make_request, make_span

from tracepass.collector.normalize import RecordKind, normalize_request, table
from tracepass.collector.normalize.adapter_discovery import ADAPTERS, discover_adapters
from tracepass.collector.normalize.registry import ADAPTERS_ATTR, CONVENTION_ATTR
from tracepass.instrumentation import semconv


def test_every_adapter_module_is_registered_once() -> None:
    names = [a.name for a in ADAPTERS]
    assert len(names) == len(set(names))
    package = Path(importlib.import_module("tracepass.collector.normalize.adapters").__file__ or "")
    modules = {p.stem for p in package.parent.glob("*.py") if not p.stem.startswith("_")}
    assert len(modules) == len(ADAPTERS)


def test_an_added_adapter_module_is_discovered_without_touching_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tracepass.collector.normalize.adapters as adapters

    extra = tmp_path / "zz_test_framework.py"
    extra.write_text(
        "from tracepass.collector.normalize.registry import Adapter\n"
        "def adapt(rec, attrs, span):\n"
        "    rec.output_text = 'adapted'\n"
        "    return True\n"
        "ADAPTER = Adapter('zz_test', scopes=('zz.scope',), adapt=adapt)\n"
    )
    monkeypatch.setattr(adapters, "__path__", [*adapters.__path__, str(tmp_path)])
    found = discover_adapters()
    assert "zz_test" in [a.name for a in found]
    monkeypatch.setattr(table, "ADAPTERS", found)
    monkeypatch.setattr(table, "_SCOPE_CACHE", {})
    req = make_request(make_span("s", {"gen_ai.operation.name": "invoke_agent"}))
    req.resource_spans[0].scope_spans[0].scope.name = "zz.scope.sub"
    (rec,), _ = normalize_request(req)
    assert rec.output_text == "adapted"
    assert rec.attributes[ADAPTERS_ATTR] == ["zz_test"]
    sys.modules.pop("tracepass.collector.normalize.adapters.zz_test_framework", None)


def test_conventions_claim_in_table_order() -> None:
    both = make_span(
        "x",
        {"openinference.span.kind": "TOOL", "gen_ai.operation.name": "chat", "tool.name": "t"},
    )
    (rec,), _ = normalize_request(make_request(both))
    assert (rec.kind, rec.attributes[CONVENTION_ATTR]) == (RecordKind.TOOL, "openinference")


def test_a_declining_convention_lets_the_next_one_read_the_span() -> None:
    # `tracepass.conversation.end = false` is not an end marker: GenAI reads the span.
    span = make_span(
        "invoke_agent a",
        {"tracepass.conversation.end": False, "gen_ai.operation.name": "invoke_agent"},
    )
    (rec,), _ = normalize_request(make_request(span))
    assert (rec.kind, rec.attributes[CONVENTION_ATTR]) == (RecordKind.TURN, "genai")


def test_attribute_names_are_the_semconv_packages() -> None:
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as ga

    assert semconv.TOOL_CALL_ARGUMENTS == ga.GEN_AI_TOOL_CALL_ARGUMENTS
    assert semconv.REFERENCE_ID == "tracepass.reference.id"
