"""`tracepass references validate|import|show`."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from tracepass.collector.app.cli.main import app
from tracepass.evaluator.references import load_reference_sets

DATASET = Path(__file__).resolve().parents[1] / "data" / "fair-forge" / "dataset_agentic.json"
runner = CliRunner()

GOOD = """\
name: calc
references:
  - id: add
    turns:
      - query: What is 15 + 27?
        expected_answer: "42"
        expected_tools:
          - name: calculator
            arguments: {a: 15, b: 27}
"""


def test_import_fair_forge_roundtrips(tmp_path: Path) -> None:
    out = tmp_path / "refs" / "ff.yaml"
    res = runner.invoke(
        app, ["references", "import", "--from", "fair-forge", str(DATASET), "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    sets = load_reference_sets([out])
    assert sets[0].name == "dataset_agentic"
    assert len(sets[0].references[0].turns) == 3
    res = runner.invoke(app, ["references", "validate", str(out)])
    assert res.exit_code == 0, res.output
    assert "1 reference set(s), 1 reference(s)" in res.stdout
    res = runner.invoke(app, ["references", "import", "--from", "fair-forge", str(DATASET)])
    assert res.exit_code == 0
    assert res.stdout.startswith("name: dataset_agentic")


def test_import_errors(tmp_path: Path) -> None:
    res = runner.invoke(app, ["references", "import", "--from", "adk", str(DATASET)])
    assert res.exit_code == 2
    assert "dataset_agentic.json" in res.stderr
    res = runner.invoke(
        app, ["references", "import", "--from", "fair-forge", str(tmp_path / "x.json")]
    )
    assert res.exit_code == 2
    assert "no such file" in res.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("[\n  {oops}\n]", encoding="utf-8")
    res = runner.invoke(app, ["references", "import", "--from", "fair-forge", str(bad)])
    assert res.exit_code == 2
    assert "bad.json:2:" in res.stderr
    res = runner.invoke(app, ["references", "import", "--from", "csv", str(bad)])
    assert res.exit_code == 2


def test_validate_reports_precise_errors(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(GOOD, encoding="utf-8")
    res = runner.invoke(app, ["references", "validate", str(good)])
    assert res.exit_code == 0, res.output
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("    turns:\n", "    turnz:\n"), encoding="utf-8")
    res = runner.invoke(app, ["references", "validate", str(bad)])
    assert res.exit_code == 2
    assert "bad.yaml" in res.stderr
    res = runner.invoke(app, ["references", "validate", str(tmp_path / "missing")])
    assert res.exit_code == 2
    assert "missing: no such file or directory" in res.stderr


def test_show_lists_references(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(GOOD, encoding="utf-8")
    res = runner.invoke(app, ["references", "show", str(good)])
    assert res.exit_code == 0, res.output
    assert "add" in res.stdout
    assert "calculator" in res.stdout


def test_import_adk_evalset_roundtrips(tmp_path: Path) -> None:
    evalset = DATASET.parents[1] / "adk" / "home_automation.evalset.json"
    out = tmp_path / "home.yaml"
    res = runner.invoke(
        app, ["references", "import", "--from", "adk", str(evalset), "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    # The user-simulation case cannot become a static reference: reported, not dropped.
    assert "skipped:" in res.stderr
    assert "simulated_user_booking" in res.stderr
    (rs,) = load_reference_sets([out])
    assert rs.name == "home_automation"
    first = rs.references[0]
    assert first.id == "turn_off_then_check"
    assert first.turns[0].expected_tools is not None
    assert first.turns[0].expected_tools[0].name == "set_device_info"
    res = runner.invoke(app, ["references", "show", str(out)])
    assert res.exit_code == 0, res.output
    assert "set_device_info" in res.stdout


def test_show_bad_input_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("    turns:\n", "    turnz:\n"), encoding="utf-8")
    res = runner.invoke(app, ["references", "show", str(bad)])
    assert res.exit_code == 2
    assert f"{bad}:" in res.stderr
    assert "references[0].turnz: unknown field" in res.stderr
    empty = tmp_path / "empty.yaml"
    empty.write_text("name: e\nreferences: []\n", encoding="utf-8")
    res = runner.invoke(app, ["references", "show", str(empty)])
    assert res.exit_code == 2
    assert "no references or policies found" in res.stderr


POLICY = """\
name: travel
policies:
  - id: travel-agent-policy
    agent: travel-agent
    tools:
      book_flight: {arguments_schema: {type: object, required: [flight_id]}}
    rules:
      - {type: order, first: search_flights, then: book_flight}
"""


def test_validate_policies(tmp_path: Path) -> None:
    good = tmp_path / "policy.yaml"
    good.write_text(GOOD + POLICY.removeprefix("name: travel\n"), encoding="utf-8")
    res = runner.invoke(app, ["references", "validate", str(good)])
    assert res.exit_code == 0, res.output
    assert "1 reference set(s), 1 reference(s), 1 policy" in res.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text(POLICY.replace("then: book_flight", "than: book_flight"), encoding="utf-8")
    res = runner.invoke(app, ["references", "validate", str(bad)])
    assert res.exit_code == 2
    assert f"{bad}:8: policies[0].rules[0].than: unknown field" in res.stderr
    bad.write_text(POLICY.replace("type: object,", "type: objekt,"), encoding="utf-8")
    res = runner.invoke(app, ["references", "validate", str(bad)])
    assert res.exit_code == 2
    assert (
        f"{bad}:6: policies[0].tools.book_flight.arguments_schema: invalid JSON Schema"
        in res.stderr
    )
