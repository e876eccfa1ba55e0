"""Human review of LLM-judged turns: export a sample for labelling, read the labels back.

The exported file has one row per judged turn (a turn with an ``llm`` grader result) and
an empty ``human_label`` column. Labels are read by `tracepass.evaluator.judge.agreement`
(pass/fail, yes/no, true/false, 1/0, …); an empty cell means "not labelled" and the row
is skipped (counted). The judge's label is its ``judge_passed`` verdict.

People open the CSV in a spreadsheet, and its cells hold what agents and users wrote: a
cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return would be read as
a formula (``=HYPERLINK(…)``), so such cells, and cells already starting with ``'``, are
written with a leading ``'`` (`neutralize_cell`), which spreadsheets show as text and
`review import` strips back (`restore_cell`): the round trip is lossless. A cell is at
most `MAX_CELL_CHARS` characters on both sides, so `review import` reads every file
`review export` writes.
"""

from __future__ import annotations

import csv
import io
import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracepass.evaluator.judge import agreement
from tracepass.evaluator.vocabulary import GRADER_LLM

COLUMNS = (
    "conversation_id",
    "reference_id",
    "turn_index",
    "query",
    "answer",
    "expected",
    "judge_score",
    "judge_passed",
    "judge_reasoning",
    "human_label",
)


# The longest cell export writes and import reads: the default size of one recorded
# file (`receiver.record_max_file_bytes`), far above any answer a span carries.
MAX_CELL_CHARS = 64 * 1024 * 1024
# Characters a spreadsheet reads as the start of a formula (or that hide one behind
# whitespace), and the quote that marks a neutralized cell.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_TEXT_MARK = "'"


def neutralize_cell(value: str) -> str:
    """`value` as a spreadsheet shows it as text: a leading `'` before a formula start
    (or before a `'`, so `restore_cell` is its exact inverse)."""
    if value.startswith(_FORMULA_START) or value.startswith(_TEXT_MARK):
        return _TEXT_MARK + value
    return value


def restore_cell(value: str) -> str:
    """The inverse of `neutralize_cell`."""
    return value[1:] if value.startswith(_TEXT_MARK) else value


class ReviewError(ValueError):
    """Bad results or labels file (exit code 2); the message names file and line."""


def is_judge(grader: Mapping[str, Any]) -> bool:
    """Whether a grader result is an LLM judge's (its name: `llm…` or containing `judge`)."""
    name = str(grader.get("grader") or "").lower()
    return name.startswith(GRADER_LLM) or "judge" in name


def judged_turns(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per turn that carries a judge verdict (score or pass/fail)."""
    rows: list[dict[str, Any]] = []
    for conv in doc.get("conversations") or []:
        for i, turn in enumerate(conv.get("turns") or []):
            for grader in turn.get("graders") or []:
                if not is_judge(grader) or grader.get("passed") is None:
                    continue
                rows.append(
                    {
                        "conversation_id": conv.get("conversation_id"),
                        "reference_id": conv.get("reference_id"),
                        "turn_index": turn.get("index", i),
                        "query": turn.get("query"),
                        "answer": turn.get("answer"),
                        "expected": turn.get("expected_answer"),
                        "judge_score": grader.get("score"),
                        "judge_passed": bool(grader.get("passed")),
                        "judge_reasoning": grader.get("reasoning"),
                        "human_label": "",
                    }
                )
                break
    return rows


def sample_rows(rows: Sequence[dict[str, Any]], n: int, seed: int) -> list[dict[str, Any]]:
    """A uniform sample without replacement (all rows if n ≥ len), in original order so
    labellers see conversations' turns together."""
    if n >= len(rows):
        return list(rows)
    picked = sorted(random.Random(seed).sample(range(len(rows)), n))
    return [rows[i] for i in picked]


def write_rows(rows: Iterable[Mapping[str, Any]], path: Path) -> None:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        buffer = io.StringIO()
        # CRLF (RFC 4180): with "\n" alone, a cell holding a CR would go out unquoted
        # and read back as a line break.
        writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\r\n")
        writer.writeheader()
        for n, row in enumerate(rows, 2):
            cells = {k: _cell(row.get(k)) for k in COLUMNS}
            too_long = next((k for k, v in cells.items() if len(v) > MAX_CELL_CHARS), None)
            if too_long is not None:
                raise ReviewError(
                    f"{path}:{n}: {too_long} of {row.get('conversation_id')!r} is longer "
                    f"than {MAX_CELL_CHARS:,} characters (a CSV cell's limit); export .jsonl"
                )
            writer.writerow(cells)
        text = buffer.getvalue()
    elif suffix in (".jsonl", ".ndjson"):
        text = "".join(
            json.dumps({k: row.get(k) for k in COLUMNS}, ensure_ascii=False) + "\n" for row in rows
        )
    else:
        raise ReviewError(f"{path}: output must end in .csv or .jsonl")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return neutralize_cell(value if isinstance(value, str) else str(value))


def parse_label(value: Any, where: str) -> bool | None:
    """None for an empty cell (not labelled); otherwise the label, or ReviewError."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        return agreement.parse_label(value)
    except ValueError as exc:
        raise ReviewError(f"{where}: {exc}") from None


@dataclass(frozen=True)
class LabelledPair:
    judge: bool
    human: bool


@dataclass(frozen=True)
class Labels:
    pairs: tuple[LabelledPair, ...]
    unlabelled: int


def _read_records(path: Path) -> list[tuple[str, Mapping[str, Any]]]:
    # Bytes decoded, not `read_text`: universal newlines would turn a cell's CR into LF.
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ReviewError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ReviewError(f"{path}: cannot read: {exc}") from None
    suffix = path.suffix.lower()
    records: list[tuple[str, Mapping[str, Any]]] = []
    if suffix == ".csv":
        records = _read_csv(path, text)
    elif suffix in (".jsonl", ".ndjson"):
        # Split on LF only: `splitlines` also splits at U+2028 and others, which
        # `json.dumps(ensure_ascii=False)` leaves raw inside strings.
        for lineno, line in enumerate(text.split("\n"), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ReviewError(f"{path}:{lineno}: invalid JSON: {exc.msg}") from None
            except RecursionError:
                raise ReviewError(f"{path}:{lineno}: invalid JSON: nested too deeply") from None
            if not isinstance(obj, dict):
                raise ReviewError(f"{path}:{lineno}: expected a JSON object")
            records.append((f"{path}:{lineno}", obj))
    else:
        raise ReviewError(f"{path}: labels must be a .csv or .jsonl file")
    return records


def _read_csv(path: Path, text: str) -> list[tuple[str, Mapping[str, Any]]]:
    """The rows of a labelled CSV, cells restored (`restore_cell`); a malformed file is
    a ReviewError naming the line. The field limit is process-wide in `csv`: raised for
    this read only."""
    records: list[tuple[str, Mapping[str, Any]]] = []
    reader = csv.DictReader(io.StringIO(text, newline=""))
    previous = csv.field_size_limit(MAX_CELL_CHARS)
    read_up_to = 0  # the last line of the last record read: the next one starts after it
    try:
        try:
            fields = reader.fieldnames or ()
            read_up_to = reader.line_num
            missing = {"judge_passed", "human_label"} - set(fields)
            if missing:
                raise ReviewError(f"{path}:1: missing column(s) {', '.join(sorted(missing))}")
            for row in reader:
                cells = {
                    k: restore_cell(v) if isinstance(v, str) else v
                    for k, v in row.items()
                    if k is not None
                }
                records.append((f"{path}:{read_up_to + 1}", cells))
                read_up_to = reader.line_num
        except csv.Error as exc:
            raise ReviewError(f"{path}:{read_up_to + 1}: not a readable CSV: {exc}") from None
    finally:
        csv.field_size_limit(previous)
    return records


def read_labels(path: Path) -> Labels:
    pairs: list[LabelledPair] = []
    unlabelled = 0
    for where, record in _read_records(path):
        human = parse_label(record.get("human_label"), f"{where}: human_label")
        if human is None:
            unlabelled += 1
            continue
        judge = parse_label(record.get("judge_passed"), f"{where}: judge_passed")
        if judge is None:
            raise ReviewError(f"{where}: judge_passed is empty (the row was not exported?)")
        pairs.append(LabelledPair(judge=judge, human=human))
    return Labels(tuple(pairs), unlabelled)


def judge_pass_rate(doc: Mapping[str, Any]) -> tuple[int, int]:
    """(judged turns, judge passes) over a whole results document, for Rogan–Gladen."""
    rows = judged_turns(doc)
    return len(rows), sum(1 for r in rows if r["judge_passed"])


def agreement_report(
    labels: Labels, population: tuple[int, int] | None = None
) -> agreement.AgreementReport:
    """Judge–human agreement; with ``population`` = (judged turns, judge passes) of the
    whole run, the Rogan–Gladen correction is applied to the run's judge pass rate."""
    rate = size = None
    if population is not None and population[0] > 0:
        rate = population[1] / population[0]
        # The run's judge pass rate is itself a sample of `population[0]` turns: its
        # binomial noise belongs in the corrected rate's interval.
        size = population[0]
    return agreement.agreement(
        [p.judge for p in labels.pairs],
        [p.human for p in labels.pairs],
        population_pass_rate=rate,
        population_size=size,
    )


# --------------------------------------------------------------------------- live labels
# The review queue (`tracepass serve`) stores a person's label per conversation: a
# verdict on the conversation and on some of its turns. The functions below turn those
# labels and the stored evaluations (`ConversationResult` as JSON) into this module's
# export rows and into agreement per judge, with the statistics above.

CONVERSATION_JUDGE = "outcome"  # tracepass's own verdict on the whole conversation


def _human(value: bool) -> str:
    return "pass" if value else "fail"


def labelled_rows(result: Mapping[str, Any], turns: Mapping[int, bool]) -> list[dict[str, Any]]:
    """The export rows (`COLUMNS`) of one labelled conversation: its judged turns, with
    `human_label` filled for the turns the person labelled (empty for the others)."""
    rows = judged_turns({"conversations": [result]})
    for row in rows:
        human = turns.get(int(row["turn_index"]))
        row["human_label"] = "" if human is None else _human(human)
    return rows


def judge_pairs(
    result: Mapping[str, Any], passed: bool | None, turns: Mapping[int, bool]
) -> dict[tuple[str, str], list[LabelledPair]]:
    """(judge, level) → (judge, human) pairs from one labelled conversation: every LLM
    judge's verdict on each labelled turn (level `turn`), tracepass's verdict on the
    conversation against the person's (`outcome`, level `conversation`), and each
    conversation judge's (`judge:<name>`, level `conversation`)."""
    pairs: dict[tuple[str, str], list[LabelledPair]] = {}
    for i, turn in enumerate(result.get("turns") or []):
        human = turns.get(int(turn.get("index", i)))
        if human is None:
            continue
        for grader in turn.get("graders") or []:
            if is_judge(grader) and grader.get("passed") is not None:
                key = (str(grader.get("grader")), "turn")
                pairs.setdefault(key, []).append(LabelledPair(bool(grader["passed"]), human))
    if passed is not None and result.get("correct") is not None:
        key = (CONVERSATION_JUDGE, "conversation")
        pairs.setdefault(key, []).append(LabelledPair(bool(result["correct"]), passed))
    # Conversation judges (`judgements`): their verdict on the whole conversation.
    for judgement in result.get("judgements") or []:
        if passed is not None and judgement.get("passed") is not None:
            key = (f"judge:{judgement.get('name')}", "conversation")
            pairs.setdefault(key, []).append(LabelledPair(bool(judgement["passed"]), passed))
    return pairs


def live_agreement(
    labelled: Iterable[tuple[Mapping[str, Any], bool | None, Mapping[int, bool]]],
) -> list[dict[str, Any]]:
    """Agreement between people and each judge over labelled conversations, given as
    (stored result, conversation label, turn labels): one entry per (judge, level) with
    `n`, `kappa`, `accuracy`, `sensitivity`, `specificity`, the confusion `matrix` and
    `notes` (`agreement.agreement`, the statistics `review import` reports)."""
    pooled: dict[tuple[str, str], list[LabelledPair]] = {}
    for result, passed, turns in labelled:
        for key, found in judge_pairs(result, passed, turns).items():
            pooled.setdefault(key, []).extend(found)
    out: list[dict[str, Any]] = []
    for (judge, level), found in sorted(pooled.items()):
        report = agreement.agreement([p.judge for p in found], [p.human for p in found])
        out.append(
            {
                "judge": judge,
                "level": level,
                "n": report.n,
                "kappa": report.kappa,
                "accuracy": report.accuracy,
                "sensitivity": report.sensitivity,
                "specificity": report.specificity,
                "matrix": report.matrix.model_dump(),
                "notes": list(report.notes),
            }
        )
    return out
