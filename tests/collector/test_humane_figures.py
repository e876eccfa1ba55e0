"""Money and durations as a person reads them (issue 40 item 6): never an exponent,
three significant digits, and the printed figure reads back as the value it stands for."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracepass.collector.api.ui.humane import duration, usd


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (6.15225e-05, "$0.0000615"),
        (4.8e-05, "$0.000048"),
        (0.5, "$0.50"),
        (0.123456, "$0.123"),
        (0.01, "$0.01"),
        (1.0, "$1.00"),
        (1234.5, "$1,234.50"),
        (0.0, "$0"),
        (1e-15, "$0"),
        (-0.00025, "-$0.00025"),
        (None, "—"),
    ],
)
def test_usd_examples(value: float | None, text: str) -> None:
    assert usd(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (4.8e-05, "48 µs"),
        (0.0015, "1.5 ms"),
        (0.25, "250 ms"),
        (0.99949, "999 ms"),
        (0.9996, "1 s"),
        (2.314, "2.31 s"),
        (0.0009996, "1 ms"),
        (4321.0, "4,321 s"),
        (0.0, "0 s"),
        (None, "—"),
    ],
)
def test_duration_examples(value: float | None, text: str) -> None:
    assert duration(value) == text


def _number(text: str) -> float:
    return float(re.sub(r"[^0-9.\-]", "", text))


@given(st.floats(min_value=1e-9, max_value=1e9))
def test_usd_no_exponent_and_reads_back(value: float) -> None:
    text = usd(value)
    assert "e" not in text.lower()
    assert text.startswith("$")
    # three significant digits below a dollar, cents above: relative error ≤ 0.5 %
    tolerance = max(abs(value) * 5e-3, 0.005 if value >= 1 else 0.0)
    assert abs(_number(text) - value) <= tolerance


@given(st.floats(min_value=1e-9, max_value=1e7))
def test_duration_no_exponent_and_reads_back(value: float) -> None:
    text = duration(value)
    assert "e" not in text.lower()
    unit = text.rsplit(" ", 1)[1]
    scale = {"µs": 1e-6, "ms": 1e-3, "s": 1.0}[unit]
    assert abs(_number(text) * scale - value) <= max(value * 5e-3, 0.5 if value >= 1000 else 0)
