"""Geometry of the UI's inline SVG charts, computed here so the templates only place
numbers (and so the geometry can be tested without a browser).

The trend chart plots, per agent version, the share of passing trials in equal time
slices of the window (the plug-in pass@1 of each slice); a slice without trials leaves
a gap rather than drawing a zero.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

__all__ = ["PALETTE", "Series", "TrendChart", "interval_bar", "trend_chart"]

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b")
# The chart's own coordinates; the page scales it to the content width (viewBox).
WIDTH, HEIGHT = 1200, 260
LEFT, RIGHT, TOP, BOTTOM = 44, 16, 12, 28
BAR_WIDTH = 120


@dataclass(frozen=True, slots=True)
class Point:
    x: float
    y: float
    title: str


@dataclass(frozen=True, slots=True)
class Series:
    label: str
    color: str
    # Runs of consecutive slices with trials (one polyline each: gaps stay gaps).
    runs: list[str] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class TrendChart:
    width: int
    height: int
    series: list[Series]
    y_ticks: list[tuple[float, str]]
    x_labels: list[tuple[float, str, str]]  # (x, text-anchor, text)
    plot: tuple[float, float, float, float]  # left, top, right, bottom


def trend_chart(
    series: Mapping[str, Mapping[int, tuple[int, int]]],
    *,
    start: float,
    width_s: float,
    buckets: int,
    label: Callable[[float], str],
) -> TrendChart:
    """`series`: label → slice index → (trials, passes)."""
    x0, x1 = float(LEFT), float(WIDTH - RIGHT)
    y0, y1 = TOP, HEIGHT - BOTTOM

    def x_of(b: int) -> float:
        return x0 + (x1 - x0) * ((b + 0.5) / buckets)

    def y_of(rate: float) -> float:
        return y1 - (y1 - y0) * rate

    out = []
    for i, (name, slices) in enumerate(series.items()):
        runs: list[str] = []
        points: list[Point] = []
        current: list[str] = []
        for b in range(buckets):
            if b not in slices or slices[b][0] == 0:
                if current:
                    runs.append(" ".join(current))
                    current = []
                continue
            n, c = slices[b]
            x, y = x_of(b), y_of(c / n)
            current.append(f"{x:.1f},{y:.1f}")
            points.append(
                Point(
                    x, y, f"{name}: {c}/{n} passed ({c / n:.0%}) from {label(start + b * width_s)}"
                )
            )
        if current:
            runs.append(" ".join(current))
        out.append(Series(name, PALETTE[i % len(PALETTE)], runs, points))
    ticks = [(y_of(v), f"{v:.0%}") for v in (0.0, 0.25, 0.5, 0.75, 1.0)]
    end = start + buckets * width_s
    x_labels = [
        (x0, "start", label(start)[:19].replace("T", " ")),
        (x1, "end", label(end)[:19].replace("T", " ")),
    ]
    return TrendChart(WIDTH, HEIGHT, out, ticks, x_labels, (x0, y0, x1, y1))


def interval_bar(
    lower: float | None, mean: float | None, upper: float | None
) -> dict[str, float] | None:
    """x positions (0..BAR_WIDTH) of a credible interval and its point estimate on [0, 1]."""
    if lower is None or mean is None or upper is None:
        return None
    return {
        "width": BAR_WIDTH,
        "lo": lower * BAR_WIDTH,
        "hi": upper * BAR_WIDTH,
        "mean": mean * BAR_WIDTH,
    }
