"""Watch reference files and keep the current `ReferenceCatalog` in service.

Reference files are polled for changes. A reload takes each file on its own: a file that
fails to load, or whose ids clash with a file loaded before it, is *blocked* (its
previous version, if it had one that still fits, stays in service) while every other
file loads; each blocked file is logged, counted (`outcome="partial"`) and named by
`blocked` (shown by `/readyz` and the reference-candidates page). Before this, one bad
file (two approvals sharing an id, say) refused the whole directory, a person's new
file included. Matching itself is pure and lives in
`tracepass.evaluator.references.matching`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from opentelemetry import metrics
from opentelemetry.metrics import Meter

from tracepass.evaluator.models import ReferenceSet
from tracepass.evaluator.references import (
    ReferenceLoadError,
    iter_reference_files,
    load_reference_file,
    load_reference_sets,
)
from tracepass.evaluator.references.matching import ReferenceCatalog

log = logging.getLogger(__name__)


Loader = Callable[[Sequence[Path]], list[ReferenceSet]]
# Blocked files named in `/readyz` (the rest counted): a directory of broken files must
# not make the readiness answer unbounded.
MAX_BLOCKED_SHOWN = 10


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
        allow_command_graders: bool = False,
    ) -> None:
        self.paths = [Path(p) for p in paths]
        self.fuzzy = fuzzy
        self.fuzzy_threshold = fuzzy_threshold
        # `command` graders only when the collector config allows them (the reference
        # folder alone cannot): evaluation.allow_command_graders.
        self.loader: Loader = loader or functools.partial(
            load_reference_sets, allow_command_graders=allow_command_graders
        )
        self._custom_loader = loader is not None
        m = meter or metrics.get_meter("tracepass.collector")
        self._reloads = m.create_counter(
            "tracepass_reference_reloads",
            description="Reference set (re)loads by outcome (ok | error)",
        )
        self.allow_command_graders = allow_command_graders
        self.catalog = ReferenceCatalog(fuzzy=fuzzy, fuzzy_threshold=fuzzy_threshold)
        self.last_error: str | None = None
        # file → why it is blocked (latest reload); file → the sets it loaded last time.
        self.blocked: dict[str, str] = {}
        self._loaded: dict[str, ReferenceSet | None] = {}
        self._signature: tuple[tuple[str, int, int, int], ...] | None = None

    def load(self) -> None:
        """First load: errors propagate (a collector must not start on a broken file)."""
        self._signature = _signature(self.paths)
        if self._custom_loader:
            sets = self.loader(self.paths)
        else:
            sets = self._reload_each()
            if self.blocked:
                # The whole load's collected, located errors (a broken file is fatal).
                self.loader(self.paths)
                raise ReferenceLoadError("; ".join(f"{f}: {w}" for f, w in self.blocked.items()))
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
            sets = self.loader(self.paths) if self._custom_loader else self._reload_each()
        except Exception as exc:  # keep serving the previous sets whatever went wrong
            self.last_error = str(exc)
            self._reloads.add(1, {"outcome": "error"})
            log.error("reference reload failed, keeping the previous sets: %s", exc)
            return False
        self.catalog = ReferenceCatalog(
            sets, fuzzy=self.fuzzy, fuzzy_threshold=self.fuzzy_threshold
        )
        if self.blocked:
            self.last_error = "; ".join(f"{f}: {why}" for f, why in self.blocked.items())
            self._reloads.add(1, {"outcome": "partial"})
            for file, why in self.blocked.items():
                log.error("reference file %s blocked (the other files loaded): %s", file, why)
        else:
            self.last_error = None
            self._reloads.add(1, {"outcome": "ok"})
        log.info("reference sets reloaded: %d references", len(self.catalog))
        return True

    def readiness(self) -> str | None:
        """The blocked reference files, for `/readyz`'s `degraded` list (None: none)."""
        if not self.blocked:
            return None
        shown = [f"{f} ({why})" for f, why in list(self.blocked.items())[:MAX_BLOCKED_SHOWN]]
        more = len(self.blocked) - len(shown)
        return (
            "reference files blocked, the others loaded: "
            + "; ".join(shown)
            + (f"; and {more} more" if more > 0 else "")
        )

    # ------------------------------------------------------------------ per file

    def _files(self, blocked: dict[str, str]) -> list[Path]:
        files: list[Path] = []
        for path in self.paths:
            try:
                files += iter_reference_files([path])
            except (ReferenceLoadError, OSError) as exc:
                blocked[str(path)] = getattr(exc, "message", None) or str(exc)
        return files

    def _previous_under(self, path: str) -> dict[str, ReferenceSet | None]:
        """The files last loaded from a configured path that cannot be read now."""
        root = Path(path)
        return {k: v for k, v in self._loaded.items() if root == Path(k) or root in Path(k).parents}

    def _reload_each(self) -> list[ReferenceSet]:
        """Every file loaded on its own; ids claimed by files already in service first
        (a new file cannot take an id from one people rely on), then in path order."""
        blocked: dict[str, str] = {}
        loaded: dict[str, ReferenceSet | None] = {}
        for f in self._files(blocked):
            key = str(f)
            try:
                loaded[key] = load_reference_file(
                    f, allow_command_graders=self.allow_command_graders
                )
            except ReferenceLoadError as exc:
                previous = self._loaded.get(key)
                if previous is None:
                    blocked[key] = _one_line(exc)
                    continue
                blocked[key] = _one_line(exc) + " (its previous version stays in service)"
                loaded[key] = previous
        for path in list(blocked):
            if path not in loaded and (previous_files := self._previous_under(path)):
                blocked[path] += " (the files loaded from it before stay in service)"
                loaded.update(previous_files)
        walk = {k: i for i, k in enumerate(loaded)}
        order = sorted(loaded, key=lambda k: (k not in self._loaded, walk[k]))
        owner: dict[str, str] = {}
        policy_owner: dict[str, str] = {}
        sets: list[ReferenceSet] = []
        kept: dict[str, ReferenceSet | None] = {}
        for key in order:
            rs = loaded[key]
            if rs is None:
                kept[key] = None
                continue
            clash = _clash(rs.references, owner) or _clash(rs.policies, policy_owner)
            if clash is not None:
                blocked[key] = clash
                continue
            for ref in rs.references:
                owner[ref.id] = key
            for policy in rs.policies:
                policy_owner[policy.id] = key
            sets.append(rs)
            kept[key] = rs
        self._loaded = {k: v for k, v in kept.items() if k not in blocked or v is not None}
        self.blocked = blocked
        return sets


def _clash(items: Sequence[object], owner: dict[str, str]) -> str | None:
    for item in items:
        item_id = str(getattr(item, "id", ""))
        if item_id in owner:
            return f"id {item_id!r} is already loaded from {owner[item_id]}"
    return None


def _one_line(exc: ReferenceLoadError) -> str:
    text = " | ".join(str(exc).splitlines())
    return text if len(text) <= 500 else text[:499] + "…"
