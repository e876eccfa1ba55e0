"""The `command` grader runs a real subprocess (the current Python) per answer."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from tracepass.evaluator.graders import GradeInput, GraderConfigError, Verdict, build_grader
from tracepass.evaluator.models import GraderSpec, ReferenceTurn
from tracepass.evaluator.scoring.answers import grade_answer

pytestmark = pytest.mark.slow  # starts a process or a server


def script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "grader.py"
    path.write_text("import json, sys\nreq = json.load(sys.stdin)\n" + body)
    return [sys.executable, str(path)]


async def run(
    argv: list[str], answer: str = "42", expected: str | None = "42", **opts: Any
) -> Verdict:
    grader = build_grader(GraderSpec(type="command", argv=argv, **opts))
    return await grader.grade(
        GradeInput(query="q?", answer=answer, expected=expected, threshold=0.7)
    )


async def test_receives_json_and_returns_score(tmp_path: Path) -> None:
    argv = script(
        tmp_path,
        "ok = req == {'query': 'q?', 'answer': '42', 'expected': '42'}\n"
        "print(json.dumps({'score': 0.9 if ok else 0.1, 'reasoning': 'checked'}))\n",
    )
    v = await run(argv)
    assert (v.score, v.passed, v.reasoning) == (0.9, True, "checked")


async def test_score_below_threshold_and_explicit_passed(tmp_path: Path) -> None:
    v = await run(script(tmp_path, "print(json.dumps({'score': 0.5}))\n"))
    assert (v.score, v.passed) == (0.5, False)
    v = await run(script(tmp_path, "print(json.dumps({'score': 0.5, 'passed': True}))\n"))
    assert (v.score, v.passed) == (0.5, True)
    v = await run(script(tmp_path, "print(json.dumps({'score': 0.5}))\n"), threshold=0.4)
    assert v.passed is True


async def test_exit_code_only(tmp_path: Path) -> None:
    argv = script(tmp_path, "sys.exit(0 if req['answer'] == req['expected'] else 1)\n")
    assert (await run(argv)).passed is True
    v = await run(argv, answer="41")
    assert (v.score, v.passed, v.error) == (0.0, False, None)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("sys.stderr.write('boom'); sys.exit(3)\n", "exited 3: boom"),
        ("print(json.dumps({'score': 1.5}))\n", "within [0, 1]"),
        ("print(json.dumps({'score': 'high'}))\n", "must be a number"),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)\n", "killed by signal 9"),
    ],
)
async def test_errors(tmp_path: Path, body: str, message: str) -> None:
    v = await run(script(tmp_path, body))
    assert v.score is None
    assert v.error is not None
    assert message in v.error


async def test_timeout_kills_the_process(tmp_path: Path) -> None:
    v = await run(script(tmp_path, "import time; time.sleep(30)\n"), timeout_s=0.3)
    assert v.error is not None
    assert "timed out after 0.3 s" in v.error


async def test_missing_program() -> None:
    v = await run(["/nonexistent/grader-program"])
    assert v.error is not None
    assert "cannot start" in v.error


def test_options_validated() -> None:
    with pytest.raises(GraderConfigError, match="option 'argv'"):
        build_grader(GraderSpec(type="command", argv=[]))
    with pytest.raises(GraderConfigError, match="option 'timeout_s'"):
        build_grader(GraderSpec(type="command", argv=["x"], timeout_s=0))


async def test_command_error_makes_the_turn_an_error(tmp_path: Path) -> None:
    argv = script(tmp_path, "sys.exit(5)\n")
    turn = ReferenceTurn(
        query="q", expected_answer="a", graders=(GraderSpec(type="command", argv=argv),)
    )
    res = await grade_answer(turn, query="q", answer="a", threshold=0.7)
    assert res.correct is None
    assert res.score is None
    assert res.error is not None
    assert "exited 5" in res.error


async def test_program_that_ignores_stdin(tmp_path: Path) -> None:
    v = await run([sys.executable, "-c", "print('{\"score\": 1}')"], answer="x" * 1_000_000)
    assert (v.score, v.passed) == (1.0, True)


async def test_concurrency_limit(tmp_path: Path) -> None:
    log = tmp_path / "log"
    argv = script(
        tmp_path,
        f"import time\nopen({str(log)!r}, 'a').write('start\\n')\ntime.sleep(0.1)\n"
        f"open({str(log)!r}, 'a').write('end\\n')\n",
    )
    grader = build_grader(GraderSpec(type="command", argv=argv, concurrency=1))
    inp = GradeInput(query="q", answer="a", expected="a", threshold=0.7)
    verdicts = await asyncio.gather(*(grader.grade(inp) for _ in range(3)))
    assert all(v.passed for v in verdicts)
    assert log.read_text().split() == ["start", "end"] * 3
