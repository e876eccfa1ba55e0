"""`command`: an external program grades the answer.

The program (an argv list, no shell) receives one JSON object on stdin,
`{"query": ..., "answer": ..., "expected": ...}`, and answers in one of two ways:

* stdout holds a JSON object with a numeric `"score"` in [0, 1] (optionally `"passed"`
  and `"reasoning"`) and the exit code is 0 or 1 → that score; passed is the given
  `"passed"`, else score ≥ `threshold` (option, default: the turn's threshold);
* otherwise the exit code alone: 0 → pass (1.0), 1 → fail (0.0).

Everything else is an *error* result, never a 0.0: another exit code, death by signal,
a `"score"` outside [0, 1] or not a number, exceeding `timeout_s` (the process is killed
and reaped), or a program that cannot be started. The error carries the tail of stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import weakref
from typing import Any

from pydantic import Field

from tracepass.evaluator.graders.base import GradeInput, Grader, GraderOptions, Verdict

_STDERR_TAIL = 500


class CommandOptions(GraderOptions):
    argv: tuple[str, ...] = Field(min_length=1)
    timeout_s: float = Field(default=30.0, gt=0)
    threshold: float | None = Field(default=None, ge=0, le=1)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    # At most this many copies of the program run at once (per event loop); a suite of
    # thousands of turns must not fork thousands of processes.
    concurrency: int = Field(default_factory=lambda: os.cpu_count() or 2, ge=1)


def _tail(data: bytes) -> str:
    text = data.decode("utf-8", "replace").strip()
    return text[-_STDERR_TAIL:]


class CommandGrader(Grader[CommandOptions]):
    type_name = "command"
    options_model = CommandOptions

    def __init__(self, options: CommandOptions) -> None:
        super().__init__(options)
        self._slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        sem = self._slots.get(loop)
        if sem is None:
            sem = self._slots[loop] = asyncio.Semaphore(self.options.concurrency)
        return sem

    async def grade(self, inp: GradeInput) -> Verdict:
        async with self._semaphore():
            return await self._run(inp)

    async def _run(self, inp: GradeInput) -> Verdict:
        o = self.options
        payload = json.dumps(
            {"query": inp.query, "answer": inp.answer, "expected": inp.expected},
            ensure_ascii=False,
        ).encode()
        env = {**os.environ, **o.env} if o.env else None
        try:
            proc = await asyncio.create_subprocess_exec(
                *o.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                cwd=o.cwd,
            )
        except OSError as exc:
            return Verdict.fail(f"cannot start {o.argv[0]!r}: {exc}")
        try:
            out, err = await asyncio.wait_for(proc.communicate(payload), o.timeout_s)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            return Verdict.fail(f"{o.argv[0]!r} timed out after {o.timeout_s:g} s")
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            raise
        code = proc.returncode
        if code not in (0, 1):
            how = (
                f"was killed by signal {-code}"
                if code is not None and code < 0
                else f"exited {code}"
            )
            tail = _tail(err)
            return Verdict.fail(f"{o.argv[0]!r} {how}" + (f": {tail}" if tail else ""))
        return self._interpret(out, code, inp.threshold)

    def _interpret(self, out: bytes, code: int | None, turn_threshold: float) -> Verdict:
        text = out.decode("utf-8", "replace").strip()
        doc: Any = None
        if text:
            try:
                doc = json.loads(text)
            except ValueError:
                doc = None
        if isinstance(doc, dict) and "score" in doc:
            score = doc["score"]
            if isinstance(score, bool) or not isinstance(score, int | float):
                return Verdict.fail(f"'score' must be a number, got {score!r}")
            if not math.isfinite(score) or not 0.0 <= score <= 1.0:
                return Verdict.fail(f"'score' must be within [0, 1], got {score!r}")
            passed = doc.get("passed")
            if passed is not None and not isinstance(passed, bool):
                return Verdict.fail(f"'passed' must be true or false, got {passed!r}")
            if passed is None:
                line = (
                    self.options.threshold if self.options.threshold is not None else turn_threshold
                )
                passed = score >= line
            reasoning = doc.get("reasoning")
            return Verdict.ok(
                float(score), passed, reasoning if isinstance(reasoning, str) else None
            )
        ok = code == 0
        return Verdict.ok(1.0 if ok else 0.0, ok, f"exit code {code}")
