"""`tracepass review export|import`: sampling, file formats, labels, agreement numbers."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from _cli_factories import results_doc, write_doc
from typer.testing import CliRunner

from tracepass.collector.app.cli.main import app
from tracepass.evaluator.judge.agreement import agreement
from tracepass.evaluator.offline.human_review import (
    COLUMNS,
    LabelledPair,
    Labels,
    agreement_report,
    judged_turns,
    sample_rows,
)

runner = CliRunner()


def _results(tmp_path: Path) -> Path:
    doc = results_doc({f"r{i}": [i % 3 != 0] for i in range(12)}, judged=True)
    return write_doc(tmp_path / "run.json", doc)


def test_judged_turns_and_sampling_are_reproducible() -> None:
    rows = judged_turns(results_doc({f"r{i}": [True] for i in range(10)}, judged=True))
    assert len(rows) == 10
    assert rows[0]["judge_reasoning"] == "matches"
    assert rows[0]["human_label"] == ""
    a = sample_rows(rows, 4, seed=3)
    b = sample_rows(rows, 4, seed=3)
    assert a == b
    assert len(a) == 4
    assert sample_rows(rows, 50, seed=3) == rows
    assert judged_turns(results_doc({"r": [True]}, judged=False)) == []


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_export_then_import_agreement(tmp_path: Path, suffix: str) -> None:
    results = _results(tmp_path)
    out = tmp_path / f"labels{suffix}"
    res = runner.invoke(
        app, ["review", "export", str(results), "--sample", "8", "--seed", "1", "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert "wrote 8 of 12 judged turns" in res.stderr
    if suffix == ".csv":
        with out.open(encoding="utf-8", newline="") as fh:
            rows = list(csv.DictReader(fh))
        assert tuple(rows[0]) == COLUMNS
    else:
        rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 8
    assert all(r["human_label"] in ("", None) for r in rows)
    # Humans agree with the judge except on two rows; one row left unlabelled.
    judge = [str(r["judge_passed"]).lower() == "true" for r in rows]
    human = list(judge)
    human[0] = not human[0]
    human[1] = not human[1]
    for r, h in zip(rows, human, strict=True):
        r["human_label"] = "pass" if h else "fail"
    rows[-1]["human_label"] = ""
    if suffix == ".csv":
        with out.open("w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
    else:
        out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")

    res = runner.invoke(app, ["review", "import", str(out), "--format", "json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["n"] == 7
    assert report["unlabelled"] == 1
    m = report["matrix"]
    assert m["tp"] + m["fp"] + m["fn"] + m["tn"] == 7
    assert m["fp"] + m["fn"] == 2
    assert report["accuracy"] == pytest.approx(5 / 7)

    res = runner.invoke(app, ["review", "import", str(out), "--results", str(_results(tmp_path))])
    assert res.exit_code == 0, res.output
    assert "Rogan–Gladen" in res.stdout
    assert "over 12 judged turns" in res.stdout


def test_review_errors(tmp_path: Path) -> None:
    results = _results(tmp_path)
    res = runner.invoke(
        app, ["review", "export", str(results), "--sample", "3", "-o", str(tmp_path / "x.txt")]
    )
    assert res.exit_code == 2
    assert "must end in .csv or .jsonl" in res.stderr
    plain = write_doc(tmp_path / "plain.json", results_doc({"a": [True]}))
    res = runner.invoke(
        app, ["review", "export", str(plain), "--sample", "3", "-o", str(tmp_path / "x.csv")]
    )
    assert res.exit_code == 2
    assert "no LLM-judged turns" in res.stderr
    res = runner.invoke(
        app, ["review", "export", str(results), "--sample", "0", "-o", str(tmp_path / "x.csv")]
    )
    assert res.exit_code == 2

    bad = tmp_path / "bad.csv"
    bad.write_text("judge_passed,human_label\nTrue,pass\nFalse,maybe\n", encoding="utf-8")
    res = runner.invoke(app, ["review", "import", str(bad)])
    assert res.exit_code == 2
    assert "bad.csv:3: human_label" in res.stderr
    assert "'maybe'" in res.stderr
    nolabel = tmp_path / "none.csv"
    nolabel.write_text("judge_passed,human_label\nTrue,\n", encoding="utf-8")
    res = runner.invoke(app, ["review", "import", str(nolabel)])
    assert res.exit_code == 2
    assert "no labelled rows" in res.stderr
    nocol = tmp_path / "nocol.csv"
    nocol.write_text("a,b\n1,2\n", encoding="utf-8")
    res = runner.invoke(app, ["review", "import", str(nocol)])
    assert res.exit_code == 2
    assert "missing column(s) human_label, judge_passed" in res.stderr
    badjson = tmp_path / "bad.jsonl"
    badjson.write_text('{"judge_passed": true, "human_label": "pass"}\n{oops\n', encoding="utf-8")
    res = runner.invoke(app, ["review", "import", str(badjson)])
    assert res.exit_code == 2
    assert "bad.jsonl:2: invalid JSON" in res.stderr


def test_corrected_rate_interval_includes_the_runs_own_noise() -> None:
    """With --results, the run's judge pass rate over N judged turns is itself an
    estimate: its binomial noise widens the Rogan–Gladen interval (smaller N, wider)."""
    judge = [True] * 40 + [False] * 20 + [True] * 5 + [False] * 15
    human = [True] * 40 + [False] * 20 + [False] * 5 + [True] * 15
    labels = Labels(tuple(LabelledPair(j, h) for j, h in zip(judge, human, strict=True)), 0)
    exact = agreement(judge, human, population_pass_rate=0.6).corrected_pass_rate
    small = agreement_report(labels, (50, 30)).corrected_pass_rate
    large = agreement_report(labels, (5000, 3000)).corrected_pass_rate
    assert small.value == pytest.approx(exact.value)
    assert large.value == pytest.approx(exact.value)
    widths = []
    for r in (small, large, exact):
        assert r.lower is not None
        assert r.upper is not None
        widths.append(r.upper - r.lower)
    assert widths[0] > widths[1] > widths[2]


def test_export_from_a_state_file_refuses_bad_input(tmp_path: Path) -> None:
    out = tmp_path / "out.csv"
    res = runner.invoke(app, ["review", "export", "-o", str(out)])
    assert res.exit_code == 2
    assert "either RESULTS" in res.output
    res = runner.invoke(app, ["review", "export", str(_results(tmp_path)), "-o", str(out)])
    assert res.exit_code == 2
    assert "--sample" in res.output
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not sqlite at all" * 100)
    res = runner.invoke(app, ["review", "export", "--state", str(junk), "-o", str(out)])
    assert res.exit_code == 2
    assert "not a tracepass state file" in res.output
    res = runner.invoke(app, ["review", "export", "--state", str(tmp_path / "no"), "-o", str(out)])
    assert res.exit_code == 2
    assert "no such state file" in res.output


def test_export_from_a_state_file_without_labels(tmp_path: Path) -> None:
    from tracepass.collector.state import StateStore

    store = StateStore(tmp_path / "state.sqlite")
    store.open()
    store.close()
    out = tmp_path / "out.csv"
    res = runner.invoke(app, ["review", "export", "--state", str(store.path), "-o", str(out)])
    assert res.exit_code == 2
    assert "no labelled judged turns" in res.output
    assert not out.exists()


def test_export_from_a_results_database_that_cannot_be_reached(tmp_path: Path) -> None:
    out = tmp_path / "out.csv"
    url = "postgresql://tracepass:s3cret@127.0.0.1:1/tracepass"
    res = runner.invoke(app, ["review", "export", "--results-url", url, "-o", str(out)])
    assert res.exit_code == 2
    assert "cannot read the results database" in res.output
    assert "s3cret" not in res.output  # the password is not echoed
    assert not out.exists()
    res = runner.invoke(
        app,
        ["review", "export", "-o", str(out)],
        env={"TRACEPASS_RESULTS_URL": url},
    )
    assert res.exit_code == 2
    assert "cannot read the results database" in res.output
