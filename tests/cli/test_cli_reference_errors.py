"""A reference file with several mistakes reports all of them (up to 20), each on its own
`error: file:line: path: message` line, with exit 2."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from tracepass.collector.app.cli.main import app

runner = CliRunner()

REFERENCE = """\
  - id: ref-{n}
    turns:
      - query: question {n}?
        expected_tools:
          - name: lookup
            argument_match: {matcher}
"""


def _file(tmp_path: Path, bad: list[int], total: int) -> Path:
    body = "".join(
        REFERENCE.format(n=n, matcher="fuzzy" if n in bad else "exact") for n in range(total)
    )
    path = tmp_path / "refs.yaml"
    path.write_text("name: many\nreferences:\n" + body, encoding="utf-8")
    return path


def test_every_mistake_is_reported_with_its_line(tmp_path: Path) -> None:
    path = _file(tmp_path, bad=[1, 4, 7], total=9)
    res = runner.invoke(app, ["references", "validate", str(path)])
    assert res.exit_code == 2
    lines = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 3
    text = path.read_text().splitlines()
    for line, n in zip(lines, [1, 4, 7], strict=True):
        where = line.split(": ")[1]
        file, lineno = where.rsplit(":", 1)
        assert file == str(path)
        assert f"references[{n}]" in line
        assert "fuzzy" in text[int(lineno) - 1] or f"ref-{n}" in "\n".join(
            text[int(lineno) - 3 : int(lineno)]
        )


def test_at_most_twenty_then_a_count(tmp_path: Path) -> None:
    path = _file(tmp_path, bad=list(range(25)), total=25)
    res = runner.invoke(app, ["references", "validate", str(path)])
    assert res.exit_code == 2
    lines = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 21
    assert lines[-1].endswith("… and 5 more error(s)")


def test_mistakes_in_several_files_are_all_reported(tmp_path: Path) -> None:
    a = _file(tmp_path, bad=[0], total=2)
    b = tmp_path / "b" / "refs.yaml"
    b.parent.mkdir()
    b.write_text(a.read_text().replace("ref-", "other-"), encoding="utf-8")
    res = runner.invoke(app, ["references", "validate", str(tmp_path)])
    assert res.exit_code == 2
    lines = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 2
    assert {line.split(": ")[1].rsplit(":", 1)[0] for line in lines} == {str(a), str(b)}
