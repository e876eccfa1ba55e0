"""The reliability suite reuses the receiver tests' support module (real SDK spans, a
recording sink, metric readers) rather than copying it."""

from __future__ import annotations

import sys
from pathlib import Path

_COLLECTOR_TESTS = str(Path(__file__).resolve().parent.parent / "collector")
if _COLLECTOR_TESTS not in sys.path:
    sys.path.insert(0, _COLLECTOR_TESTS)
