"""Reference matching: id, normalized query, aliases, fuzzy; reload on file change."""

from __future__ import annotations

import os
import re
import shutil
import unicodedata
from collections.abc import Sequence
from pathlib import Path

import pytest
from _pipeline_support import Metrics, reference, reference_set
from hypothesis import given, settings
from hypothesis import strategies as st

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


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=st.characters(max_codepoint=127), max_size=20)
    | st.text(alphabet=st.sampled_from("aZ9 _-\t\x1c\x7féßＡﬁ\u00a0\u2003ǅ"), max_size=12)
)
def test_normalize_query_ascii_fast_path_equals_the_general_rule(text: str) -> None:
    # ASCII takes a byte-table path; it must give what NFKC + casefold + the
    # `[\W_]+` regex give (the general path, still used for any other text).
    general = re.sub(r"[\W_]+", " ", unicodedata.normalize("NFKC", text).casefold()).strip()
    assert normalize_query(text) == general


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
    # `match.query` replaces the first turn's query as the exact key: the full sentence
    # is only close enough for the fuzzy step (token_sort_ratio 72 < 90).
    assert cat.match(conv("Book a flight to Rome")) is None
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


DATA = Path(__file__).resolve().parents[1] / "data" / "references"

EXTRA = """\
name: extra
version: "1"
references:
  - id: refund
    turns:
      - query: I want a refund
        expected_tools: {tools}
"""


def test_reload_with_the_real_loader_on_a_folder(tmp_path: Path) -> None:
    """The default loader (`load_reference_sets`) on real files in a watched folder."""
    folder = tmp_path / "refs"
    folder.mkdir()
    shutil.copy(DATA / "support.yaml", folder / "support.yaml")
    m = Metrics()
    src = ReferenceSource([folder], meter=m.meter)
    src.load()
    hit = src.catalog.match_query("Where is my order?")
    assert hit is not None
    assert (hit.reference_set, hit.reference.id, hit.method) == (
        "support-bot",
        "order-status",
        "query",
    )
    assert src.catalog.turn_target(None, "weather in paris") == 1

    # A new file with a bad field: blocked alone (the other files keep loading), the
    # error is precise and names it (issue 33 #7: it used to refuse the directory).
    extra = folder / "nested" / "extra.yaml"
    extra.parent.mkdir()
    extra.write_text(EXTRA.format(tools=7))
    assert src.poll() is True
    message = f"{extra}:7: references[0].turns[0].expected_tools: expected a list, got number"
    assert src.last_error == f"{extra}: {message}"
    assert src.blocked == {str(extra): message}
    assert src.readiness() is not None
    assert str(extra) in src.readiness()
    assert src.catalog.match_query("Where is my order?") is not None
    assert src.catalog.match_query("I want a refund") is None
    assert m.value("tracepass_reference_reloads", outcome="partial") == 1

    # Fixed atomically (write + rename, as editors and ConfigMaps do): picked up.
    tmp = folder / "nested" / "extra.tmp"
    tmp.write_text(EXTRA.format(tools="[]"))
    tmp.replace(extra)
    assert src.poll() is True
    assert src.last_error is None
    hit = src.catalog.match_query("i want a REFUND!")
    assert hit is not None
    assert (hit.reference_set, hit.reference.id) == ("extra", "refund")
    assert len(src.catalog) == 3

    # A clash of reference ids across files blocks the newcomer; the file in service
    # keeps the id.
    (folder / "Clash.YAML").write_text(EXTRA.format(tools="[]").replace("extra", "clash"))
    assert src.poll() is True
    assert src.last_error is not None
    assert list(src.blocked) == [str(folder / "Clash.YAML")]
    assert f"id 'refund' is already loaded from {extra}" in src.last_error
    assert len(src.catalog) == 3

    # The whole folder disappearing keeps the last good sets as well.
    shutil.rmtree(folder)
    assert src.poll() is True
    assert src.last_error is not None
    assert "no such file or directory" in src.last_error
    assert len(src.catalog) == 3
    assert m.value("tracepass_reference_reloads", outcome="ok") == 2
    assert m.value("tracepass_reference_reloads", outcome="partial") == 3


def test_first_load_of_a_bad_file_fails(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(EXTRA.format(tools=7))
    src = ReferenceSource([bad], meter=Metrics().meter)
    with pytest.raises(ValueError, match=r"bad\.yaml:7: references\[0\]"):
        src.load()
