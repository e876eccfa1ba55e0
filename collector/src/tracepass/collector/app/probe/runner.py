"""Replay every reference K times against an agent and collect the evaluations.

One trial = one conversation with a fresh id (`probe-<run>-<reference>-<trial>`, with an
`-r<n>` suffix on transport retries so a half-played attempt never mixes into the next).
The agent's spans reach a collector — the embedded `CollectorService` (default) or a
running one (`--collector URL`) — and the trial's result is the collector's evaluation
of that conversation, fetched by id. A trial whose evaluation never arrives is recorded
as `missing` and, like `error` outcomes, is not a trial for pass@k (no evidence about
the agent); it is reported and not checkpointed, so `--resume` retries it.

Checkpoint: JSON lines, a header with the run id and settings, then one line per
finished trial (flushed immediately), so a killed run resumes where it stopped.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tracepass.collector.app.probe.simulation import UserSimulator, audit, simulate
from tracepass.collector.app.probe.targets import Target, TransportError
from tracepass.evaluator.models import Reference, ReferenceSet

__all__ = [
    "SIMULATOR_FAULT",
    "Checkpoint",
    "ProbeOptions",
    "ProbeRun",
    "Trial",
    "TrialResult",
    "run_probe",
]

# A trial whose simulated user strayed from its instructions (the audit): not counted.
SIMULATOR_FAULT = "simulator_fault"

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Trial:
    reference: Reference
    reference_set: str
    index: int

    @property
    def key(self) -> str:
        return f"{self.reference.id}#{self.index}"


@dataclass
class TrialResult:
    reference_id: str
    reference_set: str
    trial: int
    conversation_id: str
    outcome: str  # pass | fail | error | incomplete | missing | transport | simulator_fault
    correct: bool
    evaluation: dict[str, Any] | None = None
    answers: list[str] = field(default_factory=list)
    error: str | None = None
    # A simulated user's trial: its messages, why it ended, the audit's problems.
    simulation: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "reference_id": self.reference_id,
            "reference_set": self.reference_set,
            "trial": self.trial,
            "conversation_id": self.conversation_id,
            "outcome": self.outcome,
            "correct": self.correct,
            "answers": self.answers,
            "error": self.error,
            "evaluation": self.evaluation,
            **({} if self.simulation is None else {"simulation": self.simulation}),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TrialResult:
        return cls(
            reference_id=str(d["reference_id"]),
            reference_set=str(d.get("reference_set") or ""),
            trial=int(d["trial"]),
            conversation_id=str(d["conversation_id"]),
            outcome=str(d["outcome"]),
            correct=bool(d["correct"]),
            evaluation=d.get("evaluation"),
            answers=list(d.get("answers") or []),
            error=d.get("error"),
            simulation=d.get("simulation"),
        )


class ResultSource(Protocol):
    async def get(self, conversation_id: str) -> dict[str, Any] | None: ...


@dataclass
class ProbeOptions:
    trials: int = 5
    concurrency: int = 4
    rate: float | None = None  # trial starts per second
    retries: int = 3
    backoff_s: float = 0.5
    result_timeout_s: float = 60.0
    poll_interval_s: float = 0.1


class CheckpointError(ValueError):
    pass


class Checkpoint:
    """Append-only JSON lines: header, then one finished trial per line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: Any = None

    def load(self) -> tuple[dict[str, Any], list[TrialResult]]:
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            raise CheckpointError(f"{self.path}: no such checkpoint to resume") from None
        if not lines:
            raise CheckpointError(f"{self.path}: empty checkpoint")
        try:
            header = json.loads(lines[0])
        except ValueError as exc:
            raise CheckpointError(f"{self.path}:1: not a probe checkpoint header: {exc}") from exc
        if not isinstance(header, dict) or header.get("tracepass_probe") != 1:
            raise CheckpointError(f"{self.path}:1: not a tracepass probe checkpoint")
        done = []
        for i, line in enumerate(lines[1:], start=2):
            if not line.strip():
                continue
            try:
                done.append(TrialResult.from_json(json.loads(line)))
            except (ValueError, KeyError, TypeError) as exc:
                if i == len(lines):  # a line cut by the interruption: redo that trial
                    log.warning("%s:%d: incomplete last line ignored", self.path, i)
                    break
                raise CheckpointError(f"{self.path}:{i}: bad trial record: {exc}") from exc
        return header, done

    def open(self, header: dict[str, Any] | None, done: Sequence[TrialResult]) -> None:
        """Rewrite the file (header + kept trials), then append as trials finish."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with tmp.open("w", encoding="utf-8") as f:
            f.write(json.dumps(header) + "\n")
            for r in done:
                f.write(json.dumps(r.to_json()) + "\n")
        tmp.replace(self.path)
        self._fh = self.path.open("a", encoding="utf-8")

    def append(self, result: TrialResult) -> None:
        if self._fh is not None:
            self._fh.write(json.dumps(result.to_json()) + "\n")
            self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def plan(sets: Sequence[ReferenceSet], trials: int) -> list[Trial]:
    return [Trial(ref, rs.name, i) for rs in sets for ref in rs.references for i in range(trials)]


class RateLimiter:
    """At most `rate` trial starts per second (evenly spaced)."""

    def __init__(self, rate: float | None) -> None:
        self.interval = 1.0 / rate if rate else 0.0
        self._next = time.monotonic()
        self._lock = asyncio.Lock()

    async def wait(self) -> None:
        if not self.interval:
            return
        async with self._lock:
            now = time.monotonic()
            if self._next > now:
                await asyncio.sleep(self._next - now)
            self._next = max(self._next, now) + self.interval


@dataclass
class ProbeRun:
    run_id: str
    results: list[TrialResult]
    interrupted: bool = False


async def _await_evaluation(
    source: ResultSource, conversation_id: str, turns: int, opts: ProbeOptions
) -> dict[str, Any] | None:
    """The collector's evaluation once it covers every played turn (an agent that
    opens a `conversation` per request closes it after each turn; later turns arrive
    as revisions), or the latest one at the deadline."""
    deadline = time.monotonic() + opts.result_timeout_s
    latest: dict[str, Any] | None = None
    while time.monotonic() < deadline:
        view = await source.get(conversation_id)
        if view is not None and view.get("evaluation") is not None:
            latest = view
            if view.get("status") == "evaluated" and len(view.get("turns") or []) >= turns:
                return view
        await asyncio.sleep(opts.poll_interval_s)
    return latest


async def _play(
    trial: Trial, cid: str, target: Target, simulator: UserSimulator | None
) -> tuple[list[str], dict[str, Any] | None]:
    """The answers, and for a simulated user what the simulation recorded."""
    ref = trial.reference
    if ref.user is None or simulator is None:
        return await target.play(cid, ref.id, [t.query for t in ref.turns]), None
    sim = await simulate(
        lambda next_query: target.converse(cid, ref.id, next_query),
        simulator,
        ref.user,
        ref.id,
        ref.turns[0].query,
    )
    problems = audit(ref.user, sim)
    return sim.answers, {
        "user_messages": sim.user_messages,
        "ended_by": sim.ended_by,
        "audit": {"followed": not problems, "problems": problems},
    }


async def run_trial(
    trial: Trial,
    run_id: str,
    target: Target,
    source: ResultSource,
    opts: ProbeOptions,
    simulator: UserSimulator | None = None,
) -> TrialResult:
    base = f"probe-{run_id}-{trial.reference.id}-{trial.index}"
    last_error = ""
    for attempt in range(opts.retries + 1):
        cid = base if attempt == 0 else f"{base}-r{attempt}"
        try:
            answers, simulation = await _play(trial, cid, target, simulator)
        except TransportError as exc:
            last_error = str(exc)
            log.warning("trial %s attempt %d: %s", trial.key, attempt + 1, exc)
            if attempt < opts.retries:
                delay = opts.backoff_s * 2**attempt
                await asyncio.sleep(delay * (0.5 + random.random()))
            continue
        view = await _await_evaluation(source, cid, len(answers), opts)
        evaluation = None if view is None else view.get("evaluation")
        if evaluation is None:
            return TrialResult(
                trial.reference.id, trial.reference_set, trial.index, cid, "missing", False,
                answers=answers,
                error=f"no evaluation of conversation {cid} within {opts.result_timeout_s:g}s "
                "(is the agent sending its traces to the collector?)",
                simulation=simulation,
            )  # fmt: skip
        outcome, correct = str(evaluation.get("outcome")), bool(evaluation.get("correct"))
        error = None
        if simulation is not None and not simulation["audit"]["followed"]:
            # The simulated user strayed: the trial says nothing about the agent.
            outcome, correct = SIMULATOR_FAULT, False
            error = "; ".join(simulation["audit"]["problems"])
        return TrialResult(
            trial.reference.id,
            trial.reference_set,
            trial.index,
            cid,
            outcome,
            correct,
            evaluation=evaluation,
            answers=answers,
            error=error,
            simulation=simulation,
        )
    return TrialResult(
        trial.reference.id, trial.reference_set, trial.index, base, "transport", False,
        error=f"gave up after {opts.retries + 1} attempts: {last_error}",
    )  # fmt: skip


async def run_probe(
    trials: Sequence[Trial],
    target: Target,
    source: ResultSource,
    opts: ProbeOptions,
    *,
    run_id: str | None = None,
    done: Sequence[TrialResult] = (),
    checkpoint: Checkpoint | None = None,
    on_done: Callable[[TrialResult], None] | None = None,
    stop: asyncio.Event | None = None,
    simulator: UserSimulator | None = None,
) -> ProbeRun:
    """Run the trials not in `done` with bounded concurrency and rate."""
    run_id = run_id or uuid.uuid4().hex[:8]
    finished = {(r.reference_id, r.trial) for r in done}
    todo = [t for t in trials if (t.reference.id, t.index) not in finished]
    results = list(done)
    sem = asyncio.Semaphore(opts.concurrency)
    limiter = RateLimiter(opts.rate)
    stop = stop or asyncio.Event()

    async def one(trial: Trial) -> None:
        async with sem:
            if stop.is_set():
                return
            await limiter.wait()
            if stop.is_set():
                return
            result = await run_trial(trial, run_id, target, source, opts, simulator)
        results.append(result)
        if checkpoint is not None and result.outcome not in ("missing", "transport"):
            checkpoint.append(result)
        if on_done is not None:
            on_done(result)

    tasks = [asyncio.create_task(one(t)) for t in todo]
    try:
        await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    results.sort(key=lambda r: (r.reference_set, r.reference_id, r.trial))
    return ProbeRun(run_id, results, interrupted=stop.is_set())
