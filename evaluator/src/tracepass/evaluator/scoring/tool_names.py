"""Qualified tool names matched to a reference's plain names.

Why: frameworks register a tool under a qualified name (Semantic Kernel's
`Plugin-function`, an MCP client's `server.tool`, `server/tool`, `ns:tool`,
`server__tool`) while a reference names the tool as its author knows it (`function`,
`tool`). Scored as they are, every call would be a wrong tool.

Rule (docs/references.md, "Qualified tool names"): a called name that the reference
does not name itself, and whose part after a separator (`.`, `-`, `/`, `:`, or `__`) is
a name the reference does, is scored as that plain name (the longest such part). A name the reference
names as it is never changes (a reference may expect `Plugin-function` itself), and a
single `_` is not a separator (`get_weather` never becomes `weather`).
"""

from __future__ import annotations

from collections.abc import Collection

from tracepass.evaluator.models import Turn

__all__ = ["SEPARATORS", "align_turns", "plain_name"]

SEPARATORS = ("__", ".", "-", "/", ":")


MAX_NAME = 512  # longer names are left as they are (bounded work per call)


def plain_name(name: str, expected: Collection[str]) -> str:
    """`name`, or the expected plain name it qualifies (see the module docstring): the
    longest part after a separator that the reference names."""
    if name in expected or len(name) > MAX_NAME:
        return name
    for at in range(1, len(name)):
        for sep in SEPARATORS:
            if name.startswith(sep, at):
                tail = name[at + len(sep) :]
                if tail in expected:
                    return tail
    return name


def align_turns(turns: tuple[Turn, ...], expected: Collection[str]) -> tuple[Turn, ...]:
    """`turns` with each qualified call name replaced by its plain expected name (the same
    tuple, unchanged, when no name needs it: the usual case costs one lookup per call)."""
    if not expected:
        return turns
    out: list[Turn] | None = None
    for i, turn in enumerate(turns):
        calls = turn.tool_calls
        renamed = None
        for k, call in enumerate(calls):
            if call.name in expected:
                continue
            plain = plain_name(call.name, expected)
            if plain != call.name:
                if renamed is None:
                    renamed = list(calls)
                renamed[k] = call.model_copy(update={"name": plain})
        if renamed is not None:
            if out is None:
                out = list(turns[:i])
            out.append(turn.model_copy(update={"tool_calls": tuple(renamed)}))
        elif out is not None:
            out.append(turn)
    return turns if out is None else tuple(out)
