"""Installing OpenTelemetry instrumentors on a `harness.Capture`'s providers.

Why explicit providers: instrumentors that default to the global providers would miss a
`Capture` created after them, and passing the providers keeps each generator's wiring
visible in one call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Installer = Callable[[Any], Any]


def installer(factory: Callable[[], Any], *, logs: bool = False, **options: Any) -> Installer:
    """`install(capture)` that instruments with `factory()` and returns the instrumentor.

    `logs` also passes the capture's logger provider, for instrumentations that emit GenAI
    events as log records; `options` go to `instrument(...)` as they are.
    """

    def install(capture: Any) -> Any:
        providers = {"tracer_provider": capture.tracer_provider}
        if logs:
            providers["logger_provider"] = capture.logger_provider
        instrumentor = factory()
        instrumentor.instrument(**providers, **options)
        return instrumentor

    return install


class _Together:
    """Instrumentors taken off together, the last installed first."""

    def __init__(self, instrumentors: list[Any]) -> None:
        self.instrumentors = instrumentors

    def uninstrument(self) -> None:
        for instrumentor in reversed(self.instrumentors):
            instrumentor.uninstrument()


def together(*installers: Installer) -> Installer:
    """One installer for several instrumentations used side by side."""

    def install(capture: Any) -> Any:
        return _Together([install_one(capture) for install_one in installers])

    return install
