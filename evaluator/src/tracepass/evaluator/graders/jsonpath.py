"""Dotted / bracket paths into JSON values: `a.b[0].c`, `$.items[2]`, `["key.with.dots"]`.

Grammar: an optional leading `$`, then segments separated by `.`; a segment is a bare
name (`[^.[\\]]+`), `[N]` (array index, negative counts from the end) or `["name"]` /
`['name']` (an object key that may contain dots or brackets). Parsing happens when the
grader is built so a malformed path is a configuration error, not a failed answer.
"""

from __future__ import annotations

import json
import re
from typing import Any

_BARE = re.compile(r"[^.\[\]]+")
_INDEX = re.compile(r"\[(-?\d+)\]")
_QUOTED = re.compile(r"""\[(?:"((?:[^"\\]|\\.)*)"|'([^']*)')\]""")

Path = tuple[str | int, ...]
_MISSING = object()


def parse_path(path: str) -> Path:
    s = path.strip()
    if s.startswith("$"):
        s = s[1:]
    out: list[str | int] = []
    i = 0
    expect_sep = False
    while i < len(s):
        if s[i] == ".":
            if not expect_sep and out:
                raise ValueError(f"empty segment at position {i} in path {path!r}")
            i += 1
            expect_sep = False
            m = _BARE.match(s, i)
            if m is None:
                raise ValueError(f"expected a name after '.' at position {i} in path {path!r}")
            out.append(m.group(0))
            i = m.end()
            expect_sep = True
            continue
        if s[i] == "[":
            m_idx = _INDEX.match(s, i)
            if m_idx is not None:
                out.append(int(m_idx.group(1)))
                i = m_idx.end()
                expect_sep = True
                continue
            m_q = _QUOTED.match(s, i)
            if m_q is not None:
                if m_q.group(1) is not None:
                    out.append(json.loads(f'"{m_q.group(1)}"'))
                else:
                    out.append(m_q.group(2))
                i = m_q.end()
                expect_sep = True
                continue
            raise ValueError(f"malformed bracket at position {i} in path {path!r}")
        if expect_sep:
            raise ValueError(f"expected '.' or '[' at position {i} in path {path!r}")
        m = _BARE.match(s, i)
        if m is None:  # pragma: no cover - _BARE matches any non-separator char
            raise ValueError(f"unexpected character at position {i} in path {path!r}")
        out.append(m.group(0))
        i = m.end()
        expect_sep = True
    return tuple(out)


def resolve(doc: Any, path: Path) -> tuple[bool, Any]:
    """(found, value). Integer segments index arrays; string segments index objects."""
    cur = doc
    for seg in path:
        if isinstance(seg, int):
            if not isinstance(cur, list) or not -len(cur) <= seg < len(cur):
                return False, None
            cur = cur[seg]
        else:
            if not isinstance(cur, dict) or seg not in cur:
                return False, None
            cur = cur[seg]
    return True, cur
