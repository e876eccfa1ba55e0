"""Draw the grid of a Grafana dashboard JSON as an SVG: one rectangle per panel at its
`gridPos`, titled, rows as bars. Grafana cannot run here, so this picture (committed as
docs/images/dashboard-layout.svg and checked up to date by tests/deploy/test_grafana.py)
is how a reviewer sees the layout. Standard library only.

    python deploy/grafana/render_layout.py [dashboard.json] [out.svg]
"""

from __future__ import annotations

import json
import sys
from html import escape
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DASHBOARD = HERE / "dashboards" / "tracepass.json"
OUT = HERE.parents[1] / "docs" / "images" / "dashboard-layout.svg"

COLUMNS = 24
COLUMN_PX = 40  # one grid column
ROW_PX = 30  # one grid unit of height (Grafana's is 30 px)
GAP_PX = 4
FILL = {"row": "#d0d7de", "table": "#dbe9f6", "stat": "#e6f4e6"}
DEFAULT_FILL = "#f6f0dc"


def panels_of(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Top-level panels and the panels kept inside collapsed rows."""
    out: list[dict[str, Any]] = []
    for panel in dashboard["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))
    return out


def render_svg(dashboard: dict[str, Any]) -> str:
    panels = panels_of(dashboard)
    bottom = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    width, height = COLUMNS * COLUMN_PX, bottom * ROW_PX
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13">',
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
    ]
    for p in panels:
        g = p["gridPos"]
        x, y = g["x"] * COLUMN_PX + GAP_PX / 2, g["y"] * ROW_PX + GAP_PX / 2
        w, h = g["w"] * COLUMN_PX - GAP_PX, g["h"] * ROW_PX - GAP_PX
        fill = FILL.get(p["type"], DEFAULT_FILL)
        parts.append(
            f'<rect x="{x:g}" y="{y:g}" width="{w:g}" height="{h:g}" rx="3" '
            f'fill="{fill}" fill-opacity="0.85" stroke="#57606a"/>'
        )
        lines = [p["title"]] if p["type"] == "row" else [p["title"], ""]
        lines[-1] += f"  [{p['type']} {g['w']}x{g['h']} at {g['x']},{g['y']}]"
        for n, line in enumerate(lines):
            fit = f' textLength="{w - 12:g}" lengthAdjust="spacingAndGlyphs"'
            parts.append(
                f'<text x="{x + 6:g}" y="{y + 18 + 16 * n:g}"'
                f"{fit if 7 * len(line) > w - 12 else ''}>{escape(line)}</text>"
            )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main(argv: list[str]) -> int:
    source = Path(argv[1]) if len(argv) > 1 else DASHBOARD
    out = Path(argv[2]) if len(argv) > 2 else OUT
    out.write_text(render_svg(json.loads(source.read_text(encoding="utf-8"))), encoding="utf-8")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
