"""Reference candidates: references proposed from conversations that matched none.

Live traffic mostly matches no reference, so its strongest scores (tool correctness,
pass^k per task) are never computed. When many conversations of one task behave the
same way, that behaviour is a reference a person only has to confirm. This module is
the pure part (no I/O): `CandidateMiner.add` takes one unreferenced conversation at a
time (incremental: a task's proposal is recomputed only when it got a new conversation),
`CandidateMiner.candidates()` returns the proposals.

Grouping: the task is the normalized first query (the matcher's `normalize_query`);
inside a task the conversations are grouped by behaviour: the number of turns and each
turn's tool-name multiset (order is compared separately: when every conversation of the
group calls the tools in one order, the reference says `tool_sequence_matters: true`).
A task becomes a candidate when its largest behaviour group has at least
`min_conversations` conversations and holds at least `min_agreement` of the task's
voting conversations. Conversations that failed a policy, a learned check or a
conversation judge do not vote.

The proposal: each turn's most common query, the group's tool trajectory with the
arguments that agreed (a key whose value, compared after the argument matchers'
JSON-minded normalization, is the same in at least `min_agreement` of the group; the
others are left out with a note and the call's `argument_match` is `subset`), a
`contains` grader of the terms common to every voting answer of the turn, and the
provenance (conversation ids, agent versions, counts, agreement share).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracepass.evaluator.models import Conversation, ConversationResult, Outcome
from tracepass.evaluator.references.matching import normalize_query
from tracepass.evaluator.scoring.failure_signatures import judge_failures

__all__ = [
    "Candidate",
    "CandidateMiner",
    "CandidateTool",
    "CandidateTurn",
    "Observation",
    "canonical",
    "observation_bytes",
    "observe",
    "single_candidate",
    "task_key",
]

MAX_OBSERVATIONS_PER_TASK = 200
# A task key longer than this is its first MAX_TASK_KEY_CHARS characters plus a digest of
# the whole (the key's size is fixed; two long queries still group only when equal).
MAX_TASK_KEY_CHARS = 512
# What all kept observations may hold (their queries, answers and arguments, estimated):
# a count bound alone let unique 500 KB first queries grow RSS ~1 MB per conversation
# (issue 33); past the budget the least recently seen tasks go (`dropped_tasks`).
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
_OBSERVATION_OVERHEAD = 256
MAX_EXAMPLES = 20
MAX_TERMS = 5
_TERM = re.compile(r"[^\W_][\w.,:/°%€$£-]*[^\W_%°€$£]|[^\W_]", re.UNICODE)
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "has",
        "have",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "were",
        "will",
        "with",
        "you",
        "your",
        "i",
        "we",
        "our",
    ]
)


def canonical(value: Any) -> str:
    """One string per argument value under the matchers' deep equality (`argmatch`):
    1 and 1.0 agree, True and 1 or "1" and 1 do not; dict key order does not matter."""

    def norm(v: Any) -> Any:
        if isinstance(v, bool) or v is None or isinstance(v, str):
            return v
        if isinstance(v, int | float):
            return ["#num", float(v)]
        if isinstance(v, Mapping):
            return {str(k): norm(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [norm(x) for x in v]
        return ["#repr", repr(v)]

    return json.dumps(norm(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class Observation:
    """What one conversation contributes: small, so many can be kept per task."""

    conversation_id: str
    agent_version: str | None
    queries: tuple[str | None, ...]
    # Per turn, the calls in order: (tool name, {argument key: (canonical, value)}).
    calls: tuple[tuple[tuple[str, dict[str, tuple[str, Any]]], ...], ...]
    answers: tuple[str | None, ...]
    votes: bool

    @property
    def behaviour(self) -> tuple[tuple[str, ...], ...]:
        """Turn count and each turn's tool-name multiset (sorted names)."""
        return tuple(tuple(sorted(name for name, _ in turn)) for turn in self.calls)

    @property
    def order(self) -> tuple[tuple[str, ...], ...]:
        return tuple(tuple(name for name, _ in turn) for turn in self.calls)


def observe(conversation: Conversation, result: ConversationResult | None) -> Observation:
    """The observation of one conversation; it votes unless its result shows a broken
    policy rule, a failed learned check or a conversation judge's no."""
    votes = True
    if result is not None and (
        result.violations
        or any(t.violations for t in result.turns)
        or result.policy_outcome == Outcome.FAIL
        or judge_failures(result)
    ):
        votes = False
    return Observation(
        conversation_id=conversation.id,
        agent_version=conversation.agent_version,
        queries=tuple(t.query for t in conversation.turns),
        calls=tuple(
            tuple(
                (c.name, {str(k): (canonical(v), v) for k, v in c.arguments.items()})
                for c in t.tool_calls
            )
            for t in conversation.turns
        ),
        answers=tuple(t.answer for t in conversation.turns),
        votes=votes,
    )


@dataclass(frozen=True, slots=True)
class CandidateTool:
    name: str
    arguments: dict[str, Any]
    # Keys left out because the conversations disagreed on their value.
    left_out: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CandidateTurn:
    query: str
    tools: tuple[CandidateTool, ...]
    ordered: bool
    contains: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Candidate:
    id: str
    query: str
    turns: tuple[CandidateTurn, ...]
    agreement: float
    conversations: int
    voters: int
    conversation_ids: tuple[str, ...]
    agent_versions: dict[str, int] = field(default_factory=dict)

    @property
    def tools(self) -> list[str]:
        return [t.name for turn in self.turns for t in turn.tools]


def _terms(answers: Iterable[str | None]) -> tuple[str, ...]:
    """Terms found in every answer (case-insensitively), in the first answer's order:
    words of 3+ characters that are not stopwords, or holding a digit."""
    texts = [a for a in answers if a]
    if not texts:
        return ()
    lowered = [t.casefold() for t in texts[1:]]
    out: list[str] = []
    for term in _TERM.findall(texts[0]):
        low = term.casefold()
        if low in _STOPWORDS or (len(term) < 3 and not any(ch.isdigit() for ch in term)):
            continue
        if all(low in text for text in lowered) and term not in out:
            out.append(term)
        if len(out) >= MAX_TERMS:
            break
    return tuple(out)


def _candidate_id(task: str, behaviour: Sequence[Sequence[str]]) -> str:
    digest = hashlib.sha256(json.dumps([task, behaviour]).encode("utf-8")).hexdigest()[:10]
    slug = "-".join(re.findall(r"[a-z0-9]+", task.encode("ascii", "ignore").decode()))[:40]
    return f"cand-{slug.strip('-') or 'task'}-{digest}"


def _build(
    task: str,
    group: Sequence[Observation],
    voters: int,
    min_agreement: float,
    candidate_id: str | None = None,
) -> Candidate:
    """The proposal for one behaviour group (`group` non-empty, all the same behaviour)."""
    first = group[0]
    turns: list[CandidateTurn] = []
    for i in range(len(first.calls)):
        queries = Counter(o.queries[i] for o in group if o.queries[i])
        query = queries.most_common(1)[0][0] if queries else ""
        orders = Counter(o.order[i] for o in group)
        order, _ = orders.most_common(1)[0]
        ordered = len(orders) == 1 and len(order) > 1
        tools: list[CandidateTool] = []
        # The k-th call of a name in the chosen order pairs with each conversation's
        # k-th call of that name.
        seen: Counter[str] = Counter()
        for name in order:
            k = seen[name]
            seen[name] += 1
            argsets = []
            for o in group:
                same = [args for n, args in o.calls[i] if n == name]
                argsets.append(same[k] if k < len(same) else {})
            keys: dict[str, None] = {}
            for args in argsets:
                for key in args:
                    keys.setdefault(key, None)
            agreed: dict[str, Any] = {}
            left_out: list[str] = []
            for key in keys:
                values = Counter(args[key][0] for args in argsets if key in args)
                best, n = values.most_common(1)[0]
                if n / len(group) >= min_agreement:
                    agreed[key] = next(a[key][1] for a in argsets if a.get(key, ("",))[0] == best)
                else:
                    left_out.append(key)
            tools.append(CandidateTool(name, agreed, tuple(left_out)))
        turns.append(
            CandidateTurn(
                query=str(query),
                tools=tuple(tools),
                ordered=ordered,
                contains=_terms(o.answers[i] for o in group),
            )
        )
    versions = Counter(o.agent_version or "" for o in group)
    return Candidate(
        id=candidate_id or _candidate_id(task, first.behaviour),
        query=turns[0].query if turns else task,
        turns=tuple(turns),
        agreement=len(group) / voters if voters else 0.0,
        conversations=len(group),
        voters=voters,
        conversation_ids=tuple(o.conversation_id for o in group[-MAX_EXAMPLES:]),
        agent_versions=dict(sorted(versions.items())),
    )


def single_candidate(conversation: Conversation, candidate_id: str) -> Candidate:
    """The proposal for one conversation ("make this a reference"): its queries, its
    calls with all their arguments, the terms of its answers."""
    obs = observe(conversation, None)
    task = normalize_query(obs.queries[0] or "") if obs.queries else ""
    return _build(task, [obs], 1, 1.0, candidate_id)


def task_key(query: str | None) -> str:
    """The task a first query names: normalized, and a fixed size when long."""
    key = normalize_query(query or "")
    if len(key) <= MAX_TASK_KEY_CHARS:
        return key
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{key[:MAX_TASK_KEY_CHARS]}#{digest}"


def observation_bytes(obs: Observation) -> int:
    """What `obs` holds, estimated for the miner's byte budget: Python's size of each
    text (queries, answers, tool names, argument keys and canonical forms, the values
    counted as large as their canonical form) plus a fixed overhead."""
    size = _OBSERVATION_OVERHEAD + sys.getsizeof(obs.conversation_id)
    size += sum(sys.getsizeof(q) for q in obs.queries if q)
    size += sum(sys.getsizeof(a) for a in obs.answers if a)
    for turn in obs.calls:
        for name, arguments in turn:
            size += sys.getsizeof(name)
            size += sum(sys.getsizeof(k) + 2 * sys.getsizeof(c) for k, (c, _) in arguments.items())
    return size


class _Task:
    __slots__ = ("bytes", "candidate", "dirty", "observations")

    def __init__(self) -> None:
        self.observations: OrderedDict[str, Observation] = OrderedDict()
        self.dirty = True
        self.candidate: Candidate | None = None
        self.bytes = 0


class CandidateMiner:
    """Unreferenced conversations grouped by task, proposals computed on demand for the
    tasks that changed since the last call. Bounded: the latest
    MAX_OBSERVATIONS_PER_TASK conversations per task, `max_tasks` tasks (the least
    recently seen dropped first, counted in `dropped_tasks`) and `max_bytes` of kept
    observations (`observation_bytes`; the least recently seen tasks dropped first)."""

    def __init__(
        self,
        min_conversations: int = 5,
        *,
        min_agreement: float = 0.8,
        max_tasks: int = 10000,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self.min_conversations = min_conversations
        self.min_agreement = min_agreement
        self.max_tasks = max_tasks
        self.max_bytes = max_bytes
        self.bytes = 0  # observation_bytes of everything kept
        self._tasks: OrderedDict[str, _Task] = OrderedDict()
        self.dropped_tasks = 0
        self.closed: set[str] = set()  # tasks no longer mined (approved or referenced)

    def __len__(self) -> int:
        return len(self._tasks)

    def add(self, conversation: Conversation, result: ConversationResult | None) -> bool:
        """Take one unreferenced, complete conversation; False when it is not usable
        (no turns or no first query, or its task is closed)."""
        if not conversation.turns or not conversation.complete:
            return False
        key = task_key(conversation.turns[0].query)
        if not key or key in self.closed:
            return False
        obs = observe(conversation, result)
        size = observation_bytes(obs)
        if size > self.max_bytes:  # alone over the whole budget: never kept
            self.dropped_tasks += 1
            return False
        task = self._tasks.get(key)
        if task is None:
            task = self._tasks[key] = _Task()
            if len(self._tasks) > self.max_tasks:
                self._drop_oldest()
        else:
            self._tasks.move_to_end(key)
        old = task.observations.pop(conversation.id, None)  # a later revision replaces it
        if old is not None:
            self._forget(task, old)
        task.observations[conversation.id] = obs
        task.bytes += size
        self.bytes += size
        if len(task.observations) > MAX_OBSERVATIONS_PER_TASK:
            self._forget(task, task.observations.popitem(last=False)[1])
        task.dirty = True
        while self.bytes > self.max_bytes and len(self._tasks) > 1:
            self._drop_oldest()
        return True

    def _forget(self, task: _Task, obs: Observation) -> None:
        size = observation_bytes(obs)
        task.bytes -= size
        self.bytes -= size

    def _drop_oldest(self) -> None:
        _, dropped = self._tasks.popitem(last=False)
        self.bytes -= dropped.bytes
        self.dropped_tasks += 1

    def close(self, task: str) -> None:
        """Stop mining `task` (a first query, normalized or not): it has a reference now."""
        key = task_key(task)
        self.closed.add(key)
        dropped = self._tasks.pop(key, None)
        if dropped is not None:
            self.bytes -= dropped.bytes

    def candidates(self) -> list[Candidate]:
        """Current proposals, most conversations first (ties by id)."""
        out: list[Candidate] = []
        for key, task in self._tasks.items():
            if task.dirty:
                task.candidate = self._propose(key, task)
                task.dirty = False
            if task.candidate is not None:
                out.append(task.candidate)
        out.sort(key=lambda c: (-c.conversations, c.id))
        return out

    def _propose(self, key: str, task: _Task) -> Candidate | None:
        voters = [o for o in task.observations.values() if o.votes]
        if len(voters) < self.min_conversations:
            return None
        groups: dict[tuple[tuple[str, ...], ...], list[Observation]] = {}
        for o in voters:
            groups.setdefault(o.behaviour, []).append(o)
        _, group = max(groups.items(), key=lambda kv: (len(kv[1]), kv[0]))
        if len(group) < self.min_conversations or len(group) / len(voters) < self.min_agreement:
            return None
        return _build(key, group, len(voters), self.min_agreement)
