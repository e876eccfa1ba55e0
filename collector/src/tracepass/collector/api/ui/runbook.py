"""The alert runbook as a UI page (`/ui/runbook`), so an alert's `runbook_url` can be
absolute on the UI's public address (`ui.external_url` + `/ui/runbook#<alert>`, built by
the shipped rules from `tracepass_ui_info`) and open for the person paged, wherever the
collector runs; a relative `docs/operations.md#…` opened nothing from Slack or e-mail.

The page is docs/operations.md itself (linked into the package as `bundled/`, copied
into the sdist), rendered with markdown-it (raw HTML off) and headings given GitHub's
anchors, so `#tracepasspasspowkbelowtarget` means the same on GitHub and here. Links to
other docs pages, which the UI does not serve, are kept as text.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from markdown_it import MarkdownIt
from markdown_it.token import Token

__all__ = ["RUNBOOK_SOURCE", "heading_anchor", "render_runbook"]

RUNBOOK_SOURCE = Path(__file__).resolve().parent / "bundled" / "operations.md"

_NOT_IN_ANCHOR = re.compile(r"[^\w\- ]")


def heading_anchor(text: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens."""
    return _NOT_IN_ANCHOR.sub("", text.strip().lower()).replace(" ", "-")


def _served(href: str) -> bool:
    """A link the page can follow: an anchor on it, or an absolute URL."""
    return href.startswith(("#", "http://", "https://"))


def _prepare(tokens: list[Token]) -> None:
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and i + 1 < len(tokens):
            token.attrSet("id", heading_anchor(tokens[i + 1].content))
        if token.type != "inline" or not token.children:
            continue
        kept: list[Token] = []
        dropping = 0
        for child in token.children:
            if child.type == "link_open" and not _served(str(child.attrGet("href") or "")):
                dropping += 1
                continue
            if child.type == "link_close" and dropping:
                dropping -= 1
                continue
            kept.append(child)
        token.children = kept


@functools.cache
def render_runbook(source: Path = RUNBOOK_SOURCE) -> str:
    """The runbook's HTML body (cached: the file ships with the package)."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(source.read_text(encoding="utf-8"))
    _prepare(tokens)
    return str(md.renderer.render(tokens, md.options, {}))
