"""The document printed by `tracepass evaluate --format json` and read back by
`compare`, `review` and the HTML report.

How conversations become pass@k trials (documented in docs/cli.md):

* every conversation matched to a reference is one trial of that reference ("task");
  several conversations matched to the same reference are repeated trials of one task;
* a conversation matched to no reference but covered by its agent's policy is one trial
  of the task ``policy:<policy id>`` (docs/statistics.md: each conversation is one
  Bernoulli trial of the agent version under the policy);
* conversations whose outcome is ``error`` (a grader or the judge gave no verdict) are
  not trials: the agent was not at fault and the failure is not evidence either way.
  They are counted in ``summary.errors``. ``incomplete`` conversations (fewer turns
  than the reference) *are* failed trials;
* ``unbiased`` is the tau-bench mean of the per-task unbiased estimator over tasks with
  at least k trials (``tasks_used``), ``null`` when no task has k trials;
* ``plugin``, ``mean``, ``lower`` and ``upper`` pool all trials into one group: plug-in
  ``1-(1-p)^k`` / ``p^k`` with p = Σc/Σn, and the Beta(Σc + 1, Σn - Σc + 1) posterior
  mean with its exact equal-tailed credible bounds.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from tracepass.evaluator.models import Conversation, ConversationResult, TurnResult
from tracepass.evaluator.offline.estimates import passk_blocks, proportion
from tracepass.evaluator.offline.judges_report import judge_summary, judgement_rows
from tracepass.evaluator.references.matching import ReferenceCatalog
from tracepass.evaluator.scoring.evaluator import Evaluator, PendingEvaluation
from tracepass.evaluator.stats import readiness

TOOL_DIMENSIONS = ("selection", "parameters", "sequence", "utilization", "overall")


def parse_ks(text: str) -> list[int]:
    """``"1,3,5"`` → ``[1, 3, 5]`` (sorted, unique); ValueError with the bad item."""
    ks: set[int] = set()
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            raise ValueError(f"--k {text!r}: empty item (expected e.g. 1,3,5)")
        try:
            k = int(item)
        except ValueError:
            raise ValueError(f"--k {text!r}: {item!r} is not an integer") from None
        if k < 1:
            raise ValueError(f"--k {text!r}: k must be >= 1, got {k}")
        ks.add(k)
    return sorted(ks)


TRAJECTORY_KEYS = ("exact", "in_order", "any_order", "precision", "recall", "f1")
#: A turn's ``trajectory`` when its tools are not checked (no reference turn, no
#: ``expected_tools``, or a matcher error): the contract's object, every value null.
NO_TRAJECTORY: dict[str, None] = dict.fromkeys(TRAJECTORY_KEYS)


def conversation_json(result: ConversationResult) -> dict[str, Any]:
    """One entry of ``conversations``: the contract keys plus the extra fields the
    report, `review` and `compare` need (expected answers/tools, graders, outcome).

    The contract makes ``tool_correctness`` nullable but a turn's ``trajectory`` an
    object; the result model says "not checked" with None for both, so here the turn's
    trajectory becomes an object of nulls (consumers read ``trajectory["f1"]`` either
    way and never confuse "not checked" with a score of 0)."""
    data = result.model_dump(mode="json")
    for turn in data["turns"]:
        if turn.get("trajectory") is None:
            turn["trajectory"] = dict(NO_TRAJECTORY)
    return data


_FIELDS: dict[type[BaseModel], tuple[str, ...] | None] = {}
# Result models written as their `__dict__` as is: every field serialized, no rewriting.
_AS_IS: set[type[BaseModel]] = set()
# Fields left out of `model_dump` when their value says so (`exclude_if`), by model.
_CONDITIONAL: dict[type[BaseModel], tuple[tuple[str, Callable[[Any], bool]], ...]] = {}


def _serialized_fields(cls: type[BaseModel]) -> tuple[str, ...] | None:
    """The fields `model_dump` writes, or None when that is every field (then the
    instance's ``__dict__``, which holds exactly its fields, is the entry as is)."""
    if cls not in _FIELDS:
        names = tuple(n for n, f in cls.model_fields.items() if not f.exclude)
        conditional = tuple(
            (n, f.exclude_if) for n, f in cls.model_fields.items() if f.exclude_if is not None
        )
        _CONDITIONAL[cls] = conditional
        whole = len(names) == len(cls.model_fields) and not conditional
        _FIELDS[cls] = None if whole else names
        if _FIELDS[cls] is None and cls is not TurnResult:
            _AS_IS.add(cls)
    return _FIELDS[cls]


def report_default(obj: Any) -> Any:
    """The encoder hook (orjson's ``default``) that writes the result models of a
    `build_document(as_models=True)` document as `conversation_json` would: a model
    becomes its fields (excluded ones left out), a turn's null trajectory the object of
    nulls, anything else pydantic's JSON form. The entries parse to exactly
    `conversation_json`'s (tests/cli/test_cli_json_output.py); the report skips
    building those dicts, which cost as much as scoring the conversations."""
    if type(obj) in _AS_IS:  # most calls: one per model object in the report
        return obj.__dict__
    if isinstance(obj, BaseModel):
        data: dict[str, Any] = obj.__dict__
        names = _serialized_fields(type(obj))
        if names is not None:
            data = {n: data[n] for n in names}
            for n, leave_out in _CONDITIONAL[type(obj)]:
                if n in data and leave_out(data[n]):
                    del data[n]
        if type(obj) is TurnResult and data["trajectory"] is None:
            data = {**data, "trajectory": NO_TRAJECTORY}
        return data
    return to_jsonable_python(obj)


def task_of(conv: Mapping[str, Any]) -> str | None:
    """The pass@k task of a conversation entry: its reference, else its policy's set
    (``policy:<id>``), else None (not a trial)."""
    ref = conv.get("reference_id")
    if ref is None and conv.get("policy_id") is not None:
        ref = conv.get("reference_set")
    return None if ref is None else str(ref)


def violation_counts(results: Iterable[ConversationResult]) -> dict[str, int]:
    """rule → violations over every evaluated conversation (scored or not)."""
    counts: dict[str, int] = defaultdict(int)
    for result in results:
        for v in result.violations:
            counts[v.rule] += 1
    return dict(sorted(counts.items()))


def task_groups(conversations: Iterable[Mapping[str, Any]]) -> dict[str, tuple[int, int]]:
    """task (reference id or policy:<id>) → (trials, successes); see the module
    docstring for what counts."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for conv in conversations:
        ref = task_of(conv)
        if ref is None or conv.get("outcome") in ("error", "unscored"):
            continue
        counts[str(ref)][0] += 1
        counts[str(ref)][1] += int(bool(conv.get("correct")))
    return {ref: (n, c) for ref, (n, c) in counts.items()}


def _turn_values(conversations: Sequence[Mapping[str, Any]], key: str) -> Iterator[Any]:
    """Every turn's `key`, skipping nulls: a turn the check did not apply to (no expected
    tools, no expected answer) carries null and counts in neither numerator nor total.
    Turns are JSON entries or `TurnResult`s (`build_document` summarizes the models)."""
    for conv in conversations:
        for turn in conv.get("turns") or []:
            value = (turn if type(turn) is dict else turn.__dict__).get(key)
            if value is not None:
                yield value


def _tool_block(conversations: Sequence[Mapping[str, Any]], level: float) -> dict[str, Any]:
    sums = dict.fromkeys(TOOL_DIMENSIONS, 0.0)
    turns = correct = 0
    for value in _turn_values(conversations, "tool_correctness"):
        tc = value if type(value) is dict else value.__dict__
        turns += 1
        correct += int(bool(tc.get("correct")))
        for dim in TOOL_DIMENSIONS:
            sums[dim] += float(tc.get(dim) or 0.0)
    block = proportion(turns, correct, level)
    block.update({dim: (sums[dim] / turns if turns else None) for dim in TOOL_DIMENSIONS})
    return block


def _answer_block(conversations: Sequence[Mapping[str, Any]], level: float) -> dict[str, Any]:
    verdicts = [bool(v) for v in _turn_values(conversations, "answer_correct")]
    return proportion(len(verdicts), sum(verdicts), level)


def readiness_verdict(
    groups: Sequence[tuple[int, int]],
    level: float = 0.95,
    rule: readiness.ReadinessRule | None = None,
) -> dict[str, Any]:
    """The readiness rule (`tracepass.evaluator.stats.readiness`, default k 3, target 0.7)
    on the pooled credible interval of pass^k: the `readiness` object of the summary."""
    rule = rule or readiness.ReadinessRule()
    _at, pw, _used = passk_blocks(groups, (rule.k,), level)
    block = pw[str(rule.k)]
    return rule.verdict(block["lower"], block["upper"], level).as_json()


def readiness_line(verdict: Mapping[str, Any]) -> str:
    """The one readiness sentence of every command (`evaluate`, `probe`)."""
    return readiness.Verdict.from_json(dict(verdict)).sentence()


def summarize(
    conversations: Sequence[Mapping[str, Any]],
    ks: Sequence[int],
    *,
    unmatched: int = 0,
    level: float = 0.95,
    rule: readiness.ReadinessRule | None = None,
) -> dict[str, Any]:
    """The ``summary`` object from the matched conversations' JSON entries; `rule`: the
    readiness rule (`metrics.headline_k` and `metrics.pass_pow_k_target`)."""
    groups = task_groups(conversations)
    at, pw, used = passk_blocks(list(groups.values()), ks, level)
    trials = sum(n for n, _ in groups.values())
    successes = sum(c for _, c in groups.values())
    # "matched": scored against a reference or, failing that, its agent's policy (so
    # conversations = matched + unmatched still holds); policy_scored: the latter.
    matched = [c for c in conversations if task_of(c) is not None]
    scored = matched
    return {
        "conversations": len(conversations) + unmatched,
        "correct": sum(1 for c in scored if c.get("correct")),
        "matched": len(matched),
        "policy_scored": sum(1 for c in scored if c.get("reference_id") is None),
        "unmatched": unmatched,
        "pass_at_k": at,
        "pass_pow_k": pw,
        "readiness": readiness_verdict(list(groups.values()), level, rule),
        "ks": list(ks),
        "level": level,
        "tasks": len(groups),
        "tasks_used": used,
        "trials": trials,
        "errors": sum(1 for c in scored if c.get("outcome") == "error"),
        "incomplete": sum(1 for c in scored if c.get("outcome") == "incomplete"),
        "conversation_correctness": proportion(trials, successes, level),
        "tool_correctness": _tool_block(matched, level),
        "answer_correctness": _answer_block(matched, level),
    }


def build_document(
    results: Sequence[ConversationResult],
    ks: Sequence[int],
    *,
    unmatched_ids: Sequence[str] = (),
    level: float = 0.95,
    metadata: Mapping[str, Any] | None = None,
    unscored: Sequence[ConversationResult] = (),
    as_models: bool = False,
    rule: readiness.ReadinessRule | None = None,
) -> dict[str, Any]:
    """The whole `evaluate --format json` document. `unscored`: the reference-free
    results of the unmatched conversations, whose learned-check violations are counted
    in ``summary.violations``. `as_models`: ``conversations`` holds the result models
    themselves, for an encoder that writes them through `report_default`
    (`evaluate --format json`), instead of their `conversation_json` entries."""
    summary = summarize(
        [r.__dict__ for r in results], ks, unmatched=len(unmatched_ids), level=level, rule=rule
    )
    summary["violations"] = violation_counts([*results, *unscored])
    document: dict[str, Any] = {
        "summary": summary,
        "conversations": list(results) if as_models else [conversation_json(r) for r in results],
        "unmatched_conversations": list(unmatched_ids),
    }
    if any(r.judgements for r in (*results, *unscored)):
        summary["judges"] = judge_summary([*results, *unscored], ks, level)
        document["judgements"] = judgement_rows([*results, *unscored])
    if metadata:
        document["run"] = dict(metadata)
    return document


# --------------------------------------------------------------------------- running


async def evaluate_all(
    conversations: Sequence[Conversation],
    catalog: ReferenceCatalog,
    evaluator: Evaluator,
    *,
    concurrency: int = 8,
    on_done: Callable[[], None] | None = None,
    unscored: list[ConversationResult] | None = None,
) -> tuple[list[ConversationResult], list[str]]:
    """Match every conversation to its reference and its agent's policy, and score the
    ones that have either (the same rules as `tracepass serve`).

    Returns (results of scored conversations in input order, ids of the others).
    `unscored`, when given, receives the others' reference-free results (their learned
    checks). Concurrency only matters for LLM judging; deterministic graders finish
    inline.
    """
    semaphore = asyncio.Semaphore(max(1, concurrency))
    unmatched: list[str] = []
    results: list[ConversationResult | None] = []
    pending: list[Awaitable[None]] = []

    async def finish(
        slot: int, conv: Conversation, done: PendingEvaluation, ref_set: str | None
    ) -> None:
        async with semaphore:
            results[slot] = await evaluator.complete(conv, done, reference_set=ref_set)
        if on_done is not None:
            on_done()

    async def judge_unscored(slot: int, conv: Conversation, done: PendingEvaluation) -> None:
        assert unscored is not None
        async with semaphore:
            unscored[slot] = await evaluator.complete(conv, done)
        if on_done is not None:
            on_done()

    for conv in conversations:
        match = catalog.match(conv)
        policy = catalog.policy_for(conv)
        if match is None and policy is None:
            unmatched.append(conv.id)
            if unscored is not None:
                alone = evaluator.try_evaluate(conv, None)  # no grader: plain calls
                if isinstance(alone, ConversationResult):
                    unscored.append(alone)
                else:  # conversation judges read it: on the loop, with the others
                    assert alone.finished is not None  # reference-free: scored already
                    unscored.append(alone.finished)
                    pending.append(judge_unscored(len(unscored) - 1, conv, alone))
                    continue
            if on_done is not None:
                on_done()
            continue
        ref_set = None if match is None else match.reference_set
        # Plain calls first: deterministic graders finish here, without a task each (the
        # tasks cost a quarter of scoring a Fair Forge dataset); only conversations whose
        # graders await (LLM judge, command) go to the event loop, `concurrency` at a time.
        done = evaluator.try_evaluate(
            conv,
            None if match is None else match.reference,
            reference_set=ref_set,
            policy=policy,
        )
        if isinstance(done, ConversationResult):
            results.append(done)
            if on_done is not None:
                on_done()
        else:
            results.append(None)
            pending.append(finish(len(results) - 1, conv, done, ref_set))
    await asyncio.gather(*pending)
    return [r for r in results if r is not None], unmatched
