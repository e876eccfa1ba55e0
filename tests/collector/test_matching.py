"""Reference matching: id, normalized query, aliases, fuzzy; reload on file change."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pytest
from _pipeline_support import Metrics, reference, reference_set

from tracepass.collector.matching import ReferenceCatalog, ReferenceSource, normalize_query
from tracepass.evaluator.models import Conversation, ReferenceSet, Turn


@pytest.mark.parametrize(
    ("raw", "norm"),
    [
        ("  What's the   WEATHER in Paris?? ", "what s the weather in paris"),
        ("Ｗｅａｔｈｅｒ，Ｐａｒｉｓ", "weather paris"),  # full-width (NFKC)
        ("Straße", "strasse"),  # casefold, not lower
        ("tab\tand\nnewline", "tab and newline"),
        ("¿¡!!", ""),
    ],
)
def test_normalize_query(raw: str, norm: str) -> None:
    assert normalize_query(raw) == norm


def catalog(**kw: object) -> ReferenceCatalog:
    return ReferenceCatalog(
        [
            reference_set(
                "s1",
                reference(
                    "weather",
                    ["What is the weather in Paris?", "Tomorrow?"],
                    aliases=("paris weather",),
                ),
                reference("flights", ["Book a flight to Rome"], match_query="flight rome"),
            ),
            reference_set("s2", reference("weather", ["different"])),
        ],
        **kw,  # type: ignore[arg-type]
    )


def conv(query: str | None, reference_id: str | None = None) -> Conversation:
    return Conversation(id="c", turns=(Turn(query=query),), reference_id=reference_id)


def test_explicit_id_then_query_then_alias_then_fuzzy() -> None:
    cat = catalog()
    m = cat.match(conv("unrelated", reference_id="s2:weather"))
    assert m is not None
    assert (m.reference_set, m.method) == ("s2", "id")
    m = cat.match(conv(None, reference_id="weather"))
    assert m is not None
    assert m.reference_set == "s1"
    m = cat.match(conv("what is the weather in paris"))
    assert m is not None
    assert (m.reference.id, m.method) == ("weather", "query")
    m = cat.match(conv("PARIS, weather!"))
    assert m is not None
    assert m.method == "alias"
    m = cat.match(conv("Flight: Rome"))
    assert m is not None
    assert m.reference.id == "flights"
    assert (
        cat.match(conv("Book a flight to Rome")) is None
        or cat.match(conv("Book a flight to Rome")).method == "fuzzy"
    )  # type: ignore[union-attr]
    m = cat.match(conv("in Paris what is the weather"))
    assert m is not None
    assert m.method == "fuzzy"
    assert m.score >= 90
    # Unknown explicit id falls back to the query.
    m = cat.match(conv("paris weather", reference_id="nope"))
    assert m is not None
    assert m.reference.id == "weather"


def test_fuzzy_threshold_and_switch() -> None:
    assert catalog(fuzzy_threshold=99.5).match(conv("what is the weather in pariss")) is None
    assert catalog(fuzzy=False).match(conv("in Paris what is the weather")) is None
    assert catalog().match(conv("something else entirely")) is None


def test_turn_target() -> None:
    cat = catalog()
    assert cat.turn_target(None, "What is the weather in Paris?") == 2
    assert cat.turn_target("flights", None) == 1
    assert cat.turn_target(None, "nothing like it") is None


def test_reload_on_change_keeps_previous_set_on_error(tmp_path: Path) -> None:
    f = tmp_path / "refs.yaml"
    f.write_text("v1")
    versions = {
        "v1": [reference_set("s", reference("a", ["alpha"]))],
        "v2": [reference_set("s", reference("b", ["beta"]))],
    }

    def loader(paths: Sequence[Path]) -> list[ReferenceSet]:
        text = paths[0].read_text()
        if text not in versions:
            raise ValueError(f"{paths[0]}: line 1: not a reference set")
        return versions[text]

    m = Metrics()
    src = ReferenceSource([f], loader=loader, meter=m.meter)
    src.load()
    assert src.catalog.match_query("alpha") is not None
    assert src.poll() is False  # unchanged
    f.write_text("broken!")
    os.utime(f, ns=(1, 1))
    assert src.poll() is False
    assert src.last_error is not None
    assert "line 1" in src.last_error
    assert src.catalog.match_query("alpha") is not None  # previous set still serves
    assert m.value("tracepass_reference_reloads", outcome="error") == 1
    f.write_text("v2")
    os.utime(f, ns=(2, 2))
    assert src.poll() is True
    assert src.catalog.match_query("beta") is not None
    assert src.catalog.match_query("alpha") is None
    assert src.last_error is None
