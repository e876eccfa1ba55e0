"""Scoring throughput: 10,000 conversations × 3 turns × ~2 tool calls, deterministic
graders (contains / exact), scored with `Evaluator.evaluate`.

Prints conversations/s and µs per turn, the ratio against Fair Forge's frequentist path
(≈ 52 µs per turn, the figure in issue 3; target ≥ 50×), and the ratio against a naive
scorer measured in this same run on the same data: validated pydantic construction of
every result, matchers rebuilt per call, scipy for every pairing and `asyncio.run` per
conversation — i.e. what the obvious implementation costs.

    .venv/bin/python bench/bench_scoring.py [--conversations N]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from collections.abc import Sequence

from tracepass.evaluator.answers import grade_answer
from tracepass.evaluator.argmatch import match_arguments
from tracepass.evaluator.models import (
    Conversation,
    ConversationResult,
    ExpectedTool,
    GraderSpec,
    Outcome,
    Reference,
    ReferenceTurn,
    ToolCall,
    ToolCorrectness,
    TrajectoryScores,
    Turn,
    TurnResult,
)
from tracepass.evaluator.scoring import Evaluator

FAIR_FORGE_US_PER_TURN = 52.0
TOOLS = ("search", "lookup", "calc", "weather", "convert")


def make_data(n: int, seed: int = 7) -> list[tuple[Conversation, Reference]]:
    rng = random.Random(seed)
    refs = []
    for r in range(50):
        turns = []
        for t in range(3):
            k = rng.choice((1, 2, 2, 3))
            tools = tuple(
                ExpectedTool(name=rng.choice(TOOLS), arguments={"q": f"v{r}{t}{j}", "n": j})
                for j in range(k)
            )
            grader = (GraderSpec(type="exact"),) if t == 2 else ()
            turns.append(
                ReferenceTurn(
                    query=f"question {r}.{t}",
                    expected_answer=f"answer {r}.{t}",
                    graders=grader,
                    expected_tools=tools,
                    tool_sequence_matters=t == 1,
                )
            )
        refs.append(Reference(id=f"ref-{r}", turns=tuple(turns)))
    out = []
    for c in range(n):
        ref = refs[c % len(refs)]
        turns = []
        for rt in ref.turns:
            calls = [
                ToolCall(
                    name=e.name,
                    arguments=dict(e.arguments or {}) if rng.random() < 0.8 else {"q": "x"},
                    result=f"result {rng.randrange(100)}",
                )
                for e in rt.expected_tools or ()
            ]
            if rng.random() < 0.2:
                rng.shuffle(calls)
            ok = rng.random() < 0.8
            answer = (rt.expected_answer or "") if ok else "no idea"
            turns.append(Turn(query=rt.query, answer=answer, tool_calls=tuple(calls)))
        out.append((Conversation(id=f"c{c}", turns=tuple(turns), reference_id=ref.id), ref))
    return out


# --------------------------------------------------------------------------- naive baseline


def _naive_tool(calls: Sequence[ToolCall], rt: ReferenceTurn) -> ToolCorrectness | None:
    from scipy.optimize import linear_sum_assignment

    expected = rt.expected_tools
    if expected is None or (not expected and not calls):
        return None
    if not expected or not calls:
        return ToolCorrectness(
            selection=0, parameters=0, sequence=0, utilization=0, overall=0, correct=False
        )
    sim = [
        [
            (2.0 + match_arguments(e.arguments, c.arguments, e.argument_match))
            if c.name == e.name
            else 0.0
            for e in expected
        ]
        for c in calls
    ]
    rows, cols = linear_sum_assignment(sim, maximize=True)
    pairs = [(i, j, sim[i][j] - 2.0) for i, j in zip(rows, cols, strict=True) if sim[i][j] > 0]
    p = len(pairs)
    sel = p / (len(calls) + len(expected) - p)
    par = sum(x[2] for x in pairs) / len(expected)
    seq = 1.0
    if rt.tool_sequence_matters:
        js = [j for _, j, _ in sorted(pairs)]
        best = [1] * len(js)
        for a in range(len(js)):
            for b in range(a):
                if js[b] < js[a]:
                    best[a] = max(best[a], best[b] + 1)
        seq = max(best, default=0) / len(expected)
    overall = 0.25 * (sel + par + seq + 1.0)
    return ToolCorrectness(
        selection=sel,
        parameters=par,
        sequence=seq,
        utilization=1.0,
        overall=overall,
        correct=overall >= 1.0,
    )


async def _naive(conv: Conversation, ref: Reference) -> ConversationResult:
    results = []
    ok = True
    for i, (turn, rt) in enumerate(zip(conv.turns, ref.turns, strict=True)):
        ans = await grade_answer(rt, query=turn.query, answer=turn.answer, threshold=0.7)
        tc = _naive_tool(turn.tool_calls, rt)
        names = [c.name for c in turn.tool_calls]
        exp = [e.name for e in rt.expected_tools or ()]
        matched = sum(min(names.count(n), exp.count(n)) for n in set(exp))
        traj = TrajectoryScores(
            exact=names == exp,
            in_order=False,
            any_order=matched == len(exp),
            precision=matched / len(names) if names else 1.0,
            recall=matched / len(exp) if exp else 1.0,
            f1=0.0,
        )
        correct = bool(ans.correct) and (tc is None or tc.correct)
        ok = ok and correct
        results.append(
            TurnResult(
                index=i,
                query=turn.query,
                answer=turn.answer,
                answer_score=ans.score,
                answer_correct=ans.correct,
                graders=ans.graders,
                tool_correctness=tc,
                trajectory=traj,
                tool_calls=turn.tool_calls,
                correct=correct,
            )
        )
    return ConversationResult(
        conversation_id=conv.id,
        reference_id=ref.id,
        correct=ok,
        outcome=Outcome.PASS if ok else Outcome.FAIL,
        turns=tuple(results),
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--conversations", type=int, default=10_000)
    ap.add_argument("--naive", type=int, default=2_000, help="conversations for the naive baseline")
    args = ap.parse_args()
    data = make_data(args.conversations)
    n_turns = sum(len(c.turns) for c, _ in data)
    n_calls = sum(len(t.tool_calls) for c, _ in data for t in c.turns)

    ev = Evaluator()
    for conv, ref in data[:200]:  # warm caches (compiled references, graders, imports)
        ev.evaluate(conv, ref)
        asyncio.run(_naive(conv, ref))

    t0 = time.perf_counter()
    passed = 0
    for conv, ref in data:
        passed += ev.evaluate(conv, ref).correct
    fast = time.perf_counter() - t0

    naive_data = data[: args.naive]
    t0 = time.perf_counter()
    for conv, ref in naive_data:
        asyncio.run(_naive(conv, ref))
    naive = time.perf_counter() - t0
    naive_us_turn = naive / sum(len(c.turns) for c, _ in naive_data) * 1e6

    us_turn = fast / n_turns * 1e6
    print(
        f"conversations: {len(data):,}  turns: {n_turns:,}  tool calls: {n_calls:,}  passed: {passed:,}"
    )
    print(
        f"tracepass Evaluator.evaluate: {len(data) / fast:,.0f} conversations/s, {us_turn:.2f} µs/turn"
    )
    print(
        f"naive baseline (same run):    {naive_us_turn:.2f} µs/turn → {naive_us_turn / us_turn:.1f}× faster"
    )
    print(
        f"vs Fair Forge frequentist path ({FAIR_FORGE_US_PER_TURN:.0f} µs/turn, issue 3): "
        f"{FAIR_FORGE_US_PER_TURN / us_turn:.1f}× (target ≥ 50×)"
    )


if __name__ == "__main__":
    main()
