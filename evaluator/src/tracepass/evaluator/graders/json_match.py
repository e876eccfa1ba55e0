"""`json_match`: JSON found in the answer has the expected values at the given paths.

`fields` maps paths (see `jsonpath`) to expected values; score = fraction of paths whose
value deep-equals the expected one (`jsonfind.json_equal`: 1 == 1.0, 1 != "1",
True != 1); passed = all of them. Without `fields` the whole JSON document found in the
answer must equal the JSON parsed from `expected_answer`.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from tracepass.evaluator.graders.base import GradeInput, Grader, GraderOptions, Verdict
from tracepass.evaluator.graders.jsonfind import find_json, json_equal
from tracepass.evaluator.graders.jsonpath import Path, parse_path, resolve


class JsonMatchOptions(GraderOptions):
    fields: dict[str, Any] | None = Field(default=None, min_length=1)
    markers: tuple[str, str] = ("```json", "```")


class JsonMatchGrader(Grader[JsonMatchOptions]):
    type_name = "json_match"
    options_model = JsonMatchOptions
    needs_loop = False
    uses_tool_results = False

    def __init__(self, options: JsonMatchOptions) -> None:
        super().__init__(options)
        self._paths: list[tuple[str, Path, Any]] = []
        for raw, value in (options.fields or {}).items():
            try:
                self._paths.append((raw, parse_path(raw), value))
            except ValueError as exc:
                raise ValueError(f"fields: {exc}") from None

    async def grade(self, inp: GradeInput) -> Verdict:
        return self.grade_sync(inp)

    def grade_sync(self, inp: GradeInput) -> Verdict:
        found, doc = find_json(inp.answer, self.options.markers)
        if not self._paths:
            if inp.expected is None:
                return Verdict.fail("no 'fields' option and no expected_answer to compare with")
            try:
                want = json.loads(inp.expected)
            except ValueError as exc:
                return Verdict.fail(f"expected_answer is not JSON: {exc}")
            if not found:
                return Verdict.ok(0.0, False, "no JSON found in the answer")
            ok = json_equal(doc, want)
            return Verdict.ok(
                1.0 if ok else 0.0, ok, "documents equal" if ok else "documents differ"
            )
        if not found:
            return Verdict.ok(0.0, False, "no JSON found in the answer")
        problems: list[str] = []
        for raw, path, want in self._paths:
            present, got = resolve(doc, path)
            if not present:
                problems.append(f"{raw}: missing")
            elif not json_equal(got, want):
                problems.append(f"{raw}: expected {want!r}, got {got!r}")
        n_ok = len(self._paths) - len(problems)
        reason = f"{n_ok}/{len(self._paths)} paths match" + (
            f"; {'; '.join(problems)}" if problems else ""
        )
        return Verdict.ok(n_ok / len(self._paths), not problems, reason)
