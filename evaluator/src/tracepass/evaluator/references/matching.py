"""Match a rebuilt conversation to its ground-truth reference (pure: no files, no I/O).

Order of evidence, strongest first: the explicit `tracepass.reference.id` the agent put
on its spans (`id` or `set:id`); the normalized first user query equal to a reference's
`match.query` (default: its first turn's query) or one of its `match.aliases`; finally,
when enabled, the closest normalized query above `fuzzy_threshold` (rapidfuzz
`token_sort_ratio`, so word order and repeated spaces do not matter). The catalog is
immutable and built once per reload, so matching is a dict lookup plus, at worst, one
`extractOne` over precomputed strings. It lives in the evaluator because offline runs
(`tracepass evaluate`) match too; the collector only adds file watching.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from tracepass.evaluator.models import Conversation, Policy, Reference, ReferenceSet
from tracepass.evaluator.scoring.agent_policies import find_policy

__all__ = ["Match", "ReferenceCatalog", "normalize_query"]

log = logging.getLogger(__name__)

_PUNCT_OR_SPACE = re.compile(r"[\W_]+", re.UNICODE)
# ASCII text, one byte table: letters lower-cased (ASCII's casefold), digits kept, every
# other character (`[\W_]` on ASCII) a space; `split`/`join` then fold the runs. The same
# words as the regex at a third of its cost (its Unicode class test per character was
# most of `normalize_query`, which runs twice per live conversation: turn target, match).
_ASCII_FOLD = bytes(
    (c | 0x20 if chr(c).isalpha() else c) if c < 128 and chr(c).isalnum() else 0x20
    for c in range(256)
)


def normalize_query(text: str) -> str:
    """NFKC + casefold, every run of punctuation/symbols/whitespace folded to one space.

    NFKC first so compatibility forms (full-width letters, ligatures) compare equal;
    casefold rather than lower so e.g. German ß matches ss.
    """
    if text.isascii():  # NFKC leaves ASCII as it is
        return " ".join(text.encode("ascii").translate(_ASCII_FOLD).decode("ascii").split())
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _PUNCT_OR_SPACE.sub(" ", folded).strip()


@dataclass(frozen=True, slots=True)
class Match:
    reference: Reference
    reference_set: str
    method: str  # id | query | alias | fuzzy
    score: float = 100.0


class ReferenceCatalog:
    def __init__(
        self,
        sets: Sequence[ReferenceSet] = (),
        *,
        fuzzy: bool = True,
        fuzzy_threshold: float = 90.0,
    ) -> None:
        self.sets = tuple(sets)
        self.fuzzy = fuzzy
        self.fuzzy_threshold = fuzzy_threshold
        self._by_id: dict[str, tuple[Reference, str]] = {}
        self._by_query: dict[str, tuple[Reference, str, str]] = {}
        self._choices: list[str] = []
        self._choice_refs: list[tuple[Reference, str]] = []
        # Agent policies of every set, in load order (the first whose globs match wins).
        self.policies: tuple[Policy, ...] = tuple(p for s in self.sets for p in s.policies)
        # Earlier sets win ties, so a catalog's behaviour does not depend on dict order.
        for rset in self.sets:
            for ref in rset.references:
                self._by_id.setdefault(f"{rset.name}:{ref.id}", (ref, rset.name))
                self._by_id.setdefault(ref.id, (ref, rset.name))
                main = ref.match.query
                if main is None and ref.turns:
                    main = ref.turns[0].query
                texts = [(main, "query")] if main is not None else []
                texts += [(alias, "alias") for alias in ref.match.aliases]
                for text, method in texts:
                    norm = normalize_query(text)
                    if not norm:
                        continue
                    if norm not in self._by_query:
                        self._by_query[norm] = (ref, rset.name, method)
                        self._choices.append(norm)
                        self._choice_refs.append((ref, rset.name))

    def __len__(self) -> int:
        return sum(len(s.references) for s in self.sets)

    def by_id(self, reference_id: str) -> tuple[Reference, str] | None:
        return self._by_id.get(reference_id)

    def match_query(self, query: str | None) -> Match | None:
        if not query:
            return None
        norm = normalize_query(query)
        if not norm:
            return None
        hit = self._by_query.get(norm)
        if hit is not None:
            return Match(hit[0], hit[1], hit[2])
        if self.fuzzy and self._choices:
            # Imported on the first fuzzy lookup: exact matches, the common case, and
            # every command start-up do without rapidfuzz.
            from rapidfuzz import fuzz, process

            best = process.extractOne(
                norm,
                self._choices,
                scorer=fuzz.token_sort_ratio,
                processor=None,
                score_cutoff=self.fuzzy_threshold,
            )
            if best is not None:
                ref, set_name = self._choice_refs[best[2]]
                return Match(ref, set_name, "fuzzy", float(best[1]))
        return None

    def match(self, conversation: Conversation) -> Match | None:
        if conversation.reference_id:
            found = self.by_id(conversation.reference_id)
            if found is not None:
                return Match(found[0], found[1], "id")
            log.info(
                "conversation %s names unknown reference %r; trying its query",
                conversation.id,
                conversation.reference_id,
            )
        query = next((t.query for t in conversation.turns if t.query), None)
        return self.match_query(query)

    def policy_for(self, conversation: Conversation) -> Policy | None:
        """The agent policy that applies to `conversation` (matched or not)."""
        if not self.policies:
            return None
        return find_policy(self.policies, conversation.agent_name, conversation.agent_version)

    def turn_target(self, reference_id: str | None, query: str | None) -> int | None:
        """Turns the conversation should have (the assembler's `TurnTarget` hook)."""
        if reference_id:
            found = self.by_id(reference_id)
            if found is not None:
                return len(found[0].turns)
        hit = self.match_query(query)
        return len(hit.reference.turns) if hit is not None else None
