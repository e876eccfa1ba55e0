"""Match a rebuilt conversation to its ground-truth reference.

Order of evidence, strongest first: the explicit `tracepass.reference.id` the agent put
on its spans (`id` or `set:id`); the normalized first user query equal to a reference's
`match.query` (default: its first turn's query) or one of its `match.aliases`; finally,
when enabled, the closest normalized query above `fuzzy_threshold` (rapidfuzz
`token_sort_ratio`, so word order and repeated spaces do not matter). The catalog is
immutable and built once per reload, so matching is a dict lookup plus, at worst, one
`extractOne` over precomputed strings.

Reference files are polled for changes; a file that fails to load keeps the previously
loaded sets in service and the error is logged and counted.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from opentelemetry import metrics
from opentelemetry.metrics import Meter
from rapidfuzz import fuzz, process

from tracepass.evaluator.models import Conversation, Policy, Reference, ReferenceSet
from tracepass.evaluator.policies import find_policy
from tracepass.evaluator.references import (
    ReferenceLoadError,
    iter_reference_files,
    load_reference_sets,
)

log = logging.getLogger(__name__)

_PUNCT_OR_SPACE = re.compile(r"[\W_]+", re.UNICODE)


def normalize_query(text: str) -> str:
    """NFKC + casefold, every run of punctuation/symbols/whitespace folded to one space.

    NFKC first so compatibility forms (full-width letters, ligatures) compare equal;
    casefold rather than lower so e.g. German ß matches ss.
    """
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


Loader = Callable[[Sequence[Path]], list[ReferenceSet]]


def _signature(paths: Sequence[Path]) -> tuple[tuple[str, int, int, int], ...]:
    """(file, inode, mtime_ns, size) of every file the loader would read, found by the
    loader's own folder walk so the two never disagree on what a reference file is.
    The inode catches an atomic replace (editors, Kubernetes ConfigMap swaps) that keeps
    size and a coarse mtime."""
    out: list[tuple[str, int, int, int]] = []
    for path in paths:
        try:
            files = list(iter_reference_files([path]))
        except (ReferenceLoadError, OSError):
            out.append((str(path), -1, -1, -1))  # missing: the loader will say why
            continue
        for f in files:
            try:
                st = f.stat()
            except OSError:
                out.append((str(f), -1, -1, -1))
                continue
            out.append((str(f), st.st_ino, st.st_mtime_ns, st.st_size))
    return tuple(out)


class ReferenceSource:
    """Holds the current `ReferenceCatalog` and rebuilds it when reference files change.

    `poll()` is cheap (a stat per file) and is called by the pipeline every
    `reload_interval_s`; a failed load keeps the last good catalog.
    """

    def __init__(
        self,
        paths: Sequence[Path],
        *,
        fuzzy: bool = True,
        fuzzy_threshold: float = 90.0,
        loader: Loader | None = None,
        meter: Meter | None = None,
    ) -> None:
        self.paths = [Path(p) for p in paths]
        self.fuzzy = fuzzy
        self.fuzzy_threshold = fuzzy_threshold
        self.loader: Loader = loader or load_reference_sets
        self._custom_loader = loader is not None
        m = meter or metrics.get_meter("tracepass.collector")
        self._reloads = m.create_counter(
            "tracepass_reference_reloads",
            description="Reference set (re)loads by outcome (ok | error)",
        )
        self.catalog = ReferenceCatalog(fuzzy=fuzzy, fuzzy_threshold=fuzzy_threshold)
        self.last_error: str | None = None
        self._signature: tuple[tuple[str, int, int, int], ...] | None = None

    def load(self) -> None:
        """First load: errors propagate (a collector must not start on a broken file)."""
        self._signature = _signature(self.paths)
        sets = self.loader(self.paths) if self.paths or self._custom_loader else []
        self.catalog = ReferenceCatalog(
            sets, fuzzy=self.fuzzy, fuzzy_threshold=self.fuzzy_threshold
        )
        self._reloads.add(1, {"outcome": "ok"})

    def poll(self) -> bool:
        """Reload if any file changed; True when a new catalog was installed."""
        sig = _signature(self.paths)
        if sig == self._signature:
            return False
        self._signature = sig
        try:
            sets = self.loader(self.paths)
        except Exception as exc:  # keep serving the previous sets whatever went wrong
            self.last_error = str(exc)
            self._reloads.add(1, {"outcome": "error"})
            log.error("reference reload failed, keeping the previous sets: %s", exc)
            return False
        self.catalog = ReferenceCatalog(
            sets, fuzzy=self.fuzzy, fuzzy_threshold=self.fuzzy_threshold
        )
        self.last_error = None
        self._reloads.add(1, {"outcome": "ok"})
        log.info("reference sets reloaded: %d references", len(self.catalog))
        return True
