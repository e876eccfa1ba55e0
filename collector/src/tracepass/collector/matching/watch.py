"""Watch reference files and keep the current `ReferenceCatalog` in service.

Reference files are polled for changes; a file that fails to load keeps the previously
loaded sets in service and the error is logged and counted. Matching itself is pure and
lives in `tracepass.evaluator.references.matching`.
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
    load_reference_sets,
)
from tracepass.evaluator.references.matching import ReferenceCatalog

log = logging.getLogger(__name__)


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
