"""The YAML a reference candidate would write: a reference set of one reference, in the
native format the strict loader reads (docs/references.md), with the provenance as
comments.

Everything that came from agents or users (queries, tool names, argument values,
conversation ids, versions) is either inside the YAML data, where `yaml.safe_dump`
quotes and escapes it, or in a comment as a JSON string with every non-ASCII and
control character escaped, so nothing can end the comment line, forge YAML keys or
reorder text with bidirectional controls.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from tracepass.evaluator.references.candidate_mining import Candidate
from tracepass.evaluator.vocabulary import GRADER_CONTAINS

__all__ = ["CANDIDATE_TAG", "candidate_yaml", "comment_text"]

CANDIDATE_TAG = "candidate"


def comment_text(value: Any) -> str:
    """`value` as an ASCII-only JSON string, safe inside a YAML comment line."""
    return json.dumps(str(value), ensure_ascii=True)


def _reference(candidate: Candidate) -> dict[str, Any]:
    turns: list[dict[str, Any]] = []
    for turn in candidate.turns:
        entry: dict[str, Any] = {"query": turn.query}
        if turn.contains:
            entry["graders"] = [{"type": GRADER_CONTAINS, "keywords": list(turn.contains)}]
        tools: list[dict[str, Any]] = []
        for tool in turn.tools:
            spec: dict[str, Any] = {"name": tool.name, "arguments": dict(tool.arguments)}
            if tool.left_out:
                spec["argument_match"] = "subset"
            tools.append(spec)
        entry["expected_tools"] = tools
        if turn.ordered:
            entry["tool_sequence_matters"] = True
        turns.append(entry)
    return {"id": candidate.id, "tags": [CANDIDATE_TAG], "turns": turns}


def candidate_yaml(candidate: Candidate, *, source: str = "conversations") -> str:
    """The file's text: provenance comments, then `name`, `version`, `references`."""
    lines = [
        f"# Reference proposed by tracepass from {candidate.conversations} {source} "
        f"(agreement {candidate.agreement:.2f} of {candidate.voters} voting).",
        "# Review it, edit what is wrong, then approve; this file is never rewritten.",
    ]
    if candidate.agent_versions:
        versions = ", ".join(f"{comment_text(v)} x{n}" for v, n in candidate.agent_versions.items())
        lines.append(f"# agent versions: {versions}")
    ids = ", ".join(comment_text(c) for c in candidate.conversation_ids)
    lines.append(f"# conversations: {ids}")
    for i, turn in enumerate(candidate.turns, start=1):
        for tool in turn.tools:
            if tool.left_out:
                keys = ", ".join(comment_text(k) for k in tool.left_out)
                lines.append(
                    f"# turn {i}: {comment_text(tool.name)}: arguments left out "
                    f"(the conversations disagreed): {keys}"
                )
    body = yaml.safe_dump(
        {"name": candidate.id, "version": "1", "references": [_reference(candidate)]},
        sort_keys=False,
        allow_unicode=False,
        default_flow_style=False,
        width=100,
    )
    return "\n".join(lines) + "\n" + body
