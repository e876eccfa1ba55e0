"""Issue 21 #7: an agent version is data, not markup. Matplotlib parses text between two
`$` as mathtext: a version like `$x^$` raised a parse error while the charts were drawn,
so `tracepass evaluate --format html` lost the report and exited 1 (which means "gate
failed"). Every label from the data is now escaped; the report renders and shows it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cli"))
from _cli_factories import conversation

from tracepass.collector.app.report import render_report
from tracepass.evaluator.offline.evaluation_run import build_document

HOSTILE_VERSIONS = ["$x^$", "$\\frac{$", "a$b$c$", "$$", "\\$x$"]


@pytest.mark.parametrize("version", HOSTILE_VERSIONS)
def test_version_with_dollars_renders(version: str) -> None:
    results = [conversation(f"a{i}", "ref-$1$", i % 2 == 0, version=version) for i in range(4)]
    results += [conversation(f"b{i}", "b", True, version="1.0") for i in range(4)]
    html = render_report(build_document(results, (1, 3)))
    assert html.count("data:image/png;base64,") >= 3
    assert version.replace("&", "&amp;").replace("<", "&lt;") in html
