"""Charts of the report as inline PNG data URIs.

`matplotlib.figure.Figure` is used directly (Agg canvas, no pyplot): no global figure
registry, no GUI backend, safe to call from any thread or a headless CI runner.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping, Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from tracepass.collector.app.report.data import TRAJECTORY_AXES, Curve

_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b")


def _data_uri(fig: Figure) -> str:
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=96, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _plain(text: str) -> str:
    """`text` shown as written: matplotlib parses text between two `$` as mathtext (an
    agent version like `$x^$` raised a parse error and lost the report), so every `$`
    from the data is escaped."""
    return text.replace("$", r"\$")


def _nan(values: Sequence[float | None]) -> list[float]:
    return [math.nan if v is None else float(v) for v in values]


def passk_curves(curves: Sequence[Curve], level: float) -> str:
    fig = Figure(figsize=(10, 4))
    ax_at, ax_pow = fig.subplots(1, 2, sharey=True)
    for i, curve in enumerate(curves):
        color = _PALETTE[i % len(_PALETTE)]
        for ax, mean, lo, hi, unb in (
            (ax_at, curve.at_mean, curve.at_lower, curve.at_upper, curve.at_unbiased),
            (ax_pow, curve.pow_mean, curve.pow_lower, curve.pow_upper, curve.pow_unbiased),
        ):
            ax.fill_between(curve.ks, _nan(lo), _nan(hi), color=color, alpha=0.18, linewidth=0)
            ax.plot(curve.ks, _nan(mean), color=color, marker="o", label=_plain(curve.label))
            if any(v is not None for v in unb):
                ax.plot(curve.ks, _nan(unb), color=color, linestyle="--", marker="x")
    for ax, title in ((ax_at, "pass@K"), (ax_pow, "pass^K")):
        ax.set_title(title)
        ax.set_xlabel("K")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        if curves:
            ax.set_xticks(curves[0].ks)
    ax_at.set_ylabel(f"posterior mean, {level:.0%} band; dashed: unbiased")
    if curves:
        ax_at.legend(loc="lower right", fontsize="small")
    return _data_uri(fig)


def grouped_bars(rows: Mapping[str, Mapping[str, float]], dims: Sequence[str], title: str) -> str:
    fig = Figure(figsize=(10, 3.6))
    ax = fig.subplots()
    labels = list(rows)
    width = 0.8 / max(1, len(labels))
    for i, label in enumerate(labels):
        xs = [j + i * width - 0.4 + width / 2 for j in range(len(dims))]
        ax.bar(
            xs,
            [rows[label][d] for d in dims],
            width=width,
            label=_plain(label),
            color=_PALETTE[i % len(_PALETTE)],
        )
    ax.set_xticks(range(len(dims)))
    ax.set_xticklabels([_plain(d) for d in dims])
    ax.set_ylim(0, 1.05)
    ax.set_title(_plain(title))
    ax.grid(axis="y", alpha=0.3)
    if labels:
        # Outside the axes (right): inside, it covered the bars of the last dimensions.
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return _data_uri(fig)


def heatmap(rows: Mapping[str, Mapping[str, float]], dims: Sequence[str], title: str) -> str:
    labels = list(rows)
    fig = Figure(figsize=(10, max(2.0, 0.32 * len(labels) + 1.2)))
    ax = fig.subplots()
    values = [[rows[label][d] for d in dims] for label in labels]
    image = ax.imshow(values, aspect="auto", cmap="RdYlGn", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(len(dims)))
    ax.set_xticklabels([_plain(d) for d in dims])
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(
        [_plain(label if len(label) <= 40 else label[:39] + "…") for label in labels]
    )
    for y, row in enumerate(values):
        for x, value in enumerate(row):
            ax.text(x, y, f"{value:.2f}", ha="center", va="center", fontsize=8)
    ax.set_title(_plain(title))
    fig.colorbar(image, ax=ax, fraction=0.03)
    return _data_uri(fig)


def radar(rows: Mapping[str, Mapping[str, float]]) -> str:
    axes = list(TRAJECTORY_AXES)
    angles = [2 * math.pi * i / len(axes) for i in range(len(axes))]
    fig = Figure(figsize=(5.5, 5.5))
    ax = fig.add_subplot(projection="polar")
    for i, (label, values) in enumerate(rows.items()):
        color = _PALETTE[i % len(_PALETTE)]
        points = [values[a] for a in axes]
        ax.plot([*angles, angles[0]], [*points, points[0]], color=color, label=_plain(label))
        ax.fill([*angles, angles[0]], [*points, points[0]], color=color, alpha=0.12)
    ax.set_xticks(angles)
    ax.set_xticklabels(axes)
    ax.set_ylim(0, 1)
    ax.set_title("Trajectory metrics per agent version")
    if rows:
        ax.legend(loc="upper right", bbox_to_anchor=(1.3, 1.1), fontsize="small")
    return _data_uri(fig)
