"""The compiled JSON fast path of reference files and datasets decides as the precise
reader does: it answers only documents the precise reader accepts, with the same values
(types included), and never answers a document that repeats a key at any depth."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracepass.evaluator.references import ReferenceLoadError
from tracepass.evaluator.references._fast_json import MAY_DIFFER, fast_loads
from tracepass.evaluator.references.loader import _DuplicateKey, _no_duplicates, _parse_text

# --------------------------------------------------------------------------- helpers


def precise(text: str) -> tuple[str, Any]:
    """The reader before the fast path: ("ok", value) or ("error", exception type)."""
    try:
        return "ok", json.loads(text, object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError) as exc:
        return "error", type(exc)


def same(a: Any, b: Any) -> bool:
    """Equal values of equal types (1, 1.0 and True differ; -0.0 is not 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        if math.isnan(a):
            return math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def check(text: str) -> None:
    verdict, expected = precise(text)
    got = fast_loads(text)
    if got is MAY_DIFFER:
        return  # the caller runs the precise reader: same answer by construction
    assert verdict == "ok", f"fast path accepted what json refuses ({expected}): {text!r}"
    assert same(got, expected), (text, got, expected)


# --------------------------------------------------------------------------- generated JSON

_WS = st.sampled_from(["", " ", "\n", "\t", "\r\n", "  "])
_CHARS = st.characters(codec="utf-8") | st.sampled_from(list(':"\\/\b\f\n\r\t\x00\x1f\x7f'))


@st.composite
def json_string(draw: st.DrawFn, text: st.SearchStrategy[str] | None = None) -> str:
    """A JSON string literal, each character written raw or as one of its escapes."""
    value = draw(text if text is not None else st.text(_CHARS, max_size=12))
    out = ['"']
    for ch in value:
        how = draw(st.sampled_from(["raw", "raw", "raw", "u", "U", "short"]))
        code = ord(ch)
        if how in ("u", "U") or (how == "raw" and (code < 0x20 or ch in '"\\')):
            if code > 0xFFFF:  # a surrogate pair
                code -= 0x10000
                hi, lo = 0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF)
                out.append(f"\\u{hi:04x}\\u{lo:04x}")
            else:
                escape = f"\\u{code:04x}"
                out.append(escape.upper().replace("\\U", "\\u") if how == "U" else escape)
        elif how == "short" and ch in '"\\/\b\f\n\r\t':
            out.append(
                {"/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(
                    ch, "\\" + ch
                )
            )
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


_INTS = (
    st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from(
        [0, -1, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64 - 1, 2**64, 10**18, 10**19]
    )
)
_FLOAT_TEXT = st.floats(allow_nan=False, allow_infinity=False).map(repr) | st.sampled_from(
    [
        "0.0",
        "-0.0",
        "1e400",
        "-1e400",
        "1E-400",
        "5e-324",
        "1.7976931348623159e308",
        "1.5e+3",
        "2E3",
        "0.1",
        "123.456e-7",
        "1" + "0" * 30 + ".5",
    ]
)
_SCALAR = (
    _INTS.map(str)
    | _FLOAT_TEXT
    | st.sampled_from(["true", "false", "null", "NaN", "Infinity", "-Infinity", "-0"])
    | json_string()
    | json_string(st.sampled_from(["\ud800", "\udc00", "a\udbff"]))  # lone surrogates
)
_KEYS = json_string(
    st.sampled_from(["a", "b", "a:b", ":", "é", "\u2028", "k"]) | st.text(_CHARS, max_size=4)
)


@st.composite
def json_object(draw: st.DrawFn, values: st.SearchStrategy[str]) -> str:
    """An object written from (key, value) pairs: keys may repeat, as raw or escaped
    spellings of the same string."""
    pairs = draw(st.lists(st.tuples(_KEYS, values), max_size=5))
    repeat = draw(st.booleans())
    if pairs and repeat:
        key = draw(st.sampled_from([k for k, _ in pairs]))
        pairs.insert(draw(st.integers(0, len(pairs))), (key, draw(values)))
    if draw(st.booleans()):  # the same key spelled another way: "a" and "\u0061"
        pairs.append(('"\\u0061"', draw(values)))
        pairs.append(('"a"', draw(values)))
    ws = draw(_WS)
    body = ",".join(f"{ws}{k}{draw(_WS)}:{draw(_WS)}{v}" for k, v in pairs)
    return "{" + body + draw(_WS) + "}"


def _containers(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    arrays = st.lists(children, max_size=4).map(lambda items: "[" + ", ".join(items) + "]")
    return arrays | json_object(children)


DOCUMENTS = st.tuples(_WS, st.recursive(_SCALAR, _containers, max_leaves=25), _WS).map("".join)


@settings(max_examples=1500, deadline=None)
@given(DOCUMENTS)
def test_generated_documents_decide_and_read_as_the_precise_reader(text: str) -> None:
    check(text)


@settings(max_examples=800, deadline=None)
@given(DOCUMENTS, st.data())
def test_damaged_documents_are_never_accepted_where_json_refuses(text: str, data: Any) -> None:
    """One character deleted, replaced or inserted anywhere."""
    pos = data.draw(st.integers(0, len(text)))
    junk = data.draw(st.sampled_from(list(',:{}[]"\\ 0e.-+tnu\x00\x0c\ufeff')))
    how = data.draw(st.sampled_from(["delete", "replace", "insert"]))
    if how == "delete":
        text = text[:pos] + text[pos + 1 :]
    elif how == "replace":
        text = text[:pos] + junk + text[pos + 1 :]
    else:
        text = text[:pos] + junk + text[pos:]
    check(text)


@settings(max_examples=400, deadline=None)
@given(st.recursive(_SCALAR, _containers, max_leaves=40))
def test_a_repeated_key_at_any_depth_is_left_to_the_precise_reader(inner: str) -> None:
    depth_wrap = '{"outer": [1, {"x": ' + inner + ', "x": 2}]}'
    assert precise(depth_wrap)[0] == "error"
    assert fast_loads(depth_wrap) is MAY_DIFFER


# --------------------------------------------------------------------------- known cases


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "a": 2}',
        '{"a": 1, "\\u0061": 2}',
        '[{"k": {"deep": [{"z": 1, "z": 1}]}}]',
        '{"a:": 1, "a:": 2}',
        '{"x": "\\u003a", "x": 1}',
        '{"a": {}, "a": {}}',
    ],
)
def test_duplicates_are_never_answered_by_the_fast_path(text: str) -> None:
    with pytest.raises(_DuplicateKey):
        json.loads(text, object_pairs_hook=_no_duplicates)
    assert fast_loads(text) is MAY_DIFFER


@pytest.mark.parametrize(
    "text",
    [
        '{"big": 12345678901234567890123}',
        '{"neg": -9223372036854775809}',
        "[NaN, Infinity]",
        '["\\ud800"]',
        "[1e400]",
        '{"colon": "\\u003a"}',
    ],
)
def test_what_orjson_reads_differently_takes_the_precise_path(text: str) -> None:
    assert fast_loads(text) is MAY_DIFFER
    assert precise(text)[0] == "ok"


@pytest.mark.parametrize("depth", [1, 100, 254, 255, 300, 990, 1024, 1100, 5000])
def test_deep_nesting_decides_as_the_precise_reader(depth: int) -> None:
    """orjson re-encodes at most 254 levels and parses at most 1,024; `json` stops near
    the interpreter's recursion limit. Each depth gets the precise reader's answer."""
    for text in ("[" * depth + "]" * depth, '{"a":' * depth + "1" + "}" * depth):
        check(text)


def test_a_duplicate_is_still_reported_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "refs.json"
    text = '{\n  "references": [\n    {"id": "a",\n     "id": "b"}\n  ]\n}\n'
    with pytest.raises(ReferenceLoadError) as err:
        _parse_text(path, text)
    assert err.value.file == str(path)
    assert err.value.line == 4
    assert "duplicate" in err.value.message


def test_plain_documents_take_the_fast_path() -> None:
    sample = Path(__file__).resolve().parents[1] / "data/fair-forge/dataset_agentic.json"
    text = sample.read_text(encoding="utf-8")
    value = fast_loads(text)
    assert value is not MAY_DIFFER
    assert same(value, json.loads(text))
