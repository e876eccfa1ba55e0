"""What every answer grader shares: its input, its option model and its error type.

A grader is configured once from a `GraderSpec` (options validated by a pydantic model so
a typo in a reference file fails with the option's name, not later with a KeyError) and
then called once per turn. Graders are async because two of them (`command`, `llm`) wait
on I/O; the deterministic ones simply never await.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, NamedTuple, TypeVar

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from tracepass.evaluator.judge.llm_judge import LLMJudge


class GraderConfigError(ValueError):
    """A grader spec that cannot be used: unknown type or invalid options.

    `path` locates the offending option inside the spec (e.g. ``"keywords[2]"``) so a
    reference loader can prefix it with the file and the turn's position.
    """

    def __init__(self, grader: str, message: str, path: str = "") -> None:
        self.grader = grader
        self.path = path
        self.message = message
        where = f" option {path!r}" if path else ""
        super().__init__(f"grader {grader!r}{where}: {message}")


class NeedsEventLoop(RuntimeError):
    """`Grader.grade_sync` found that the grader suspends: it must be awaited inside an
    event loop after all (a custom grader that set `needs_loop = False` but awaits)."""


class GraderOptions(BaseModel):
    """Base of every grader's option model: frozen, and unknown options are errors."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class GradeInput(NamedTuple):
    """Everything a grader may look at for one turn.

    `answer` is never None here: `grade_answer` decides what a missing answer means
    before any grader runs. `threshold` is the turn's answer threshold, used as the pass
    line by graders whose score is continuous (llm, command) unless they set their own.
    A NamedTuple (immutable, and several times cheaper to build than a frozen
    dataclass) because one is built per graded turn.
    """

    query: str | None
    answer: str
    expected: str | None
    threshold: float
    tool_results: Sequence[Any] = ()
    judge: LLMJudge | None = None


class Verdict(NamedTuple):
    """A grader's raw verdict; `answers.grade_answer` turns it into a `GraderResult`.

    Exactly one of (`score`, `error`) is meaningful: an error means "no verdict", which
    must never be read as a score of 0.0.
    """

    score: float | None
    passed: bool | None
    reasoning: str | None = None
    error: str | None = None

    @classmethod
    def ok(cls, score: float, passed: bool, reasoning: str | None = None) -> Verdict:
        score = float(score)
        if not 0.0 <= score <= 1.0:
            score = min(1.0, max(0.0, score))
        return cls(score, passed, reasoning)

    @classmethod
    def fail(cls, error: str) -> Verdict:
        return cls(None, None, None, error)


OptionsT = TypeVar("OptionsT", bound=GraderOptions)


class Grader(ABC, Generic[OptionsT]):
    """One configured grader. Subclasses set `type_name` and `options_model`."""

    type_name: ClassVar[str]
    options_model: ClassVar[type[GraderOptions]]
    # False promises that `grade` never awaits anything that needs an event loop, so a
    # caller may drive the coroutine by hand (`coro.send(None)`) on a hot path. Custom
    # graders are assumed to need a loop unless they say otherwise.
    needs_loop: ClassVar[bool] = True
    # False promises that `grade` never reads `GradeInput.tool_results`, so the caller
    # may pass () instead of collecting the turn's tool results.
    uses_tool_results: ClassVar[bool] = True

    def __init__(self, options: OptionsT) -> None:
        self.options = options
        # Shown in results; `build_grader` sets it from the spec's optional `name`.
        self.name: str = self.type_name

    @abstractmethod
    async def grade(self, inp: GradeInput) -> Verdict:
        """Grade one answer. Raising is allowed: the caller records it as an error."""

    def grade_sync(self, inp: GradeInput) -> Verdict:
        """Grade without an event loop, for graders with `needs_loop = False`.

        The default drives `grade` by hand and raises `NeedsEventLoop` if it suspends.
        Deterministic built-ins override this with their plain implementation (and their
        `grade` calls it), which spares a coroutine per graded turn on the hot path."""
        coro = self.grade(inp)
        try:
            coro.send(None)
        except StopIteration as stop:
            verdict: Verdict = stop.value
            return verdict
        coro.close()
        raise NeedsEventLoop(f"grader {self.name!r} awaited; it needs an event loop")
