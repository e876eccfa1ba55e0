"""docs/judges.md prints every built-in conversation-judge template exactly as the code
sends it, under its version (the templates are documented contracts)."""

from __future__ import annotations

from pathlib import Path

from tracepass.evaluator.judge._rubric_templates import BUILTIN_TEMPLATES

DOC = Path(__file__).resolve().parents[2] / "docs" / "judges.md"


def test_every_template_is_documented_verbatim() -> None:
    text = DOC.read_text(encoding="utf-8")
    for t in BUILTIN_TEMPLATES.values():
        assert f"### `{t.name}` — `{t.version}`\n\n```text\n{t.text}\n```" in text, t.name
