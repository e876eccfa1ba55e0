"""Components with a lifecycle, and the one chain every evaluation result runs through.

The collector is built the way the OpenTelemetry Collector's service is: `service.py`
builds a list of components and starts them; it does no work of their own. Every
consumer of results (the results store, the rolling windows with their restore, replay
and persist, the metrics, the evaluation events, the failure log line, and whatever is
added later: judges, failure modes) is a `ResultComponent`:

- `start()` runs before the pipeline produces its first result (state recovery
  included), in chain order, so no component waits on another's start-up event;
- `on_result(result, info)` is called for every evaluation, in chain order, one at a
  time per result; it may return a `ResultInfo` that replaces `info` for the links after
  it (the results store hands on the window-journal sequence number it wrote, the
  metrics whether the result was stale);
- `shutdown()` runs after the pipeline stopped producing results, in reverse order
  (so the windows are persisted while the state file is still open).

A component that raises in `on_result` is logged and skipped: the others still get the
result (one broken consumer must not cost the metrics or the stored result).

Batches: the pipeline hands the conversations one loop iteration completed down the
chain together (`run_batch`): every result visits a link before any visits the next. A
link with an `on_results(results, infos)` method takes the whole batch in one call (the
results store: one writer operation for all of them) and returns the infos for the next
links (None: unchanged); the others get `on_result` once per result.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, runtime_checkable

from tracepass.collector.pipeline.scheduling import ResultInfo
from tracepass.evaluator.models import ConversationResult

__all__ = [
    "Component",
    "ListenerComponent",
    "ResultChain",
    "ResultComponent",
    "ResultStep",
]

log = logging.getLogger(__name__)

# What `on_result` may return: nothing (info unchanged) or the info for the next links.
ResultStep = ResultInfo | None | Awaitable[ResultInfo | None]


@runtime_checkable
class Component(Protocol):
    """Something with a lifecycle the service starts and shuts down."""

    async def start(self) -> None: ...

    async def shutdown(self) -> None: ...


class ResultComponent:
    """Base of a result consumer: no-op lifecycle, `on_result` to override."""

    name = "component"

    async def start(self) -> None:
        return None

    async def shutdown(self) -> None:
        return None

    def on_result(self, result: ConversationResult, info: ResultInfo) -> ResultStep:
        raise NotImplementedError

    def journal_encoder(self) -> Callable[[ConversationResult], str] | None:
        """What the state file's window journal should keep of each result, when this
        component owns something rebuilt from the journal after a crash (the rolling
        windows); None: nothing. The chain hands the first one offered to every link
        (`use_journal_encoder`) before it starts them."""
        return None

    def use_journal_encoder(self, encoder: Callable[[ConversationResult], str]) -> None:
        """Take the chain's journal encoder (the results store writes the journal)."""
        return None


class ListenerComponent(ResultComponent):
    """A plain `(result, info)` callable (sync or async) as a chain link: the extension
    point for code that only wants to see results (tests, embedders, `listeners=`)."""

    name = "listener"

    def __init__(self, fn: Callable[[ConversationResult, ResultInfo], object]) -> None:
        self.fn = fn

    async def on_result(self, result: ConversationResult, info: ResultInfo) -> None:
        ret = self.fn(result, info)
        if inspect.isawaitable(ret):
            await ret


class ResultChain:
    """The ordered result consumers, called as the pipeline's one `ResultListener`."""

    def __init__(self, components: Sequence[ResultComponent] = ()) -> None:
        self.components: list[ResultComponent] = list(components)
        self._started: list[ResultComponent] = []

    def append(self, component: ResultComponent) -> None:
        self.components.append(component)

    async def start(self) -> None:
        """Start every component in order; on a failure the ones already started are
        shut down again before it propagates. First, the journal encoder a link offers
        goes to every link (see `ResultComponent.journal_encoder`)."""
        encoders = [e for c in self.components if (e := c.journal_encoder()) is not None]
        if encoders:
            for component in self.components:
                component.use_journal_encoder(encoders[0])
        for component in self.components:
            try:
                await component.start()
            except BaseException:
                await self.shutdown()
                raise
            self._started.append(component)

    async def shutdown(self) -> None:
        """Shut the started components down in reverse order (each failure logged)."""
        while self._started:
            component = self._started.pop()
            try:
                await component.shutdown()
            except Exception:
                log.exception("shutting down %s failed", component.name)

    async def run_batch(self, pairs: Sequence[tuple[ConversationResult, ResultInfo]]) -> None:
        """Hand several results down the chain, link by link (see the module docstring)."""
        results = [result for result, _ in pairs]
        infos: list[ResultInfo] = [info for _, info in pairs]
        for component in self.components:
            batch = getattr(component, "on_results", None)
            if batch is not None:
                try:
                    steps = batch(results, infos)
                    if inspect.isawaitable(steps):
                        steps = await steps
                except Exception:
                    log.exception("result component %s failed for a batch", component.name)
                    continue
                infos = [new or old for new, old in zip(steps, infos, strict=True)]
                continue
            for n, result in enumerate(results):
                try:
                    step = component.on_result(result, infos[n])
                    if inspect.isawaitable(step):
                        step = await step
                except Exception:
                    log.exception(
                        "result component %s failed for conversation %s",
                        component.name,
                        result.conversation_id,
                    )
                    continue
                if step is not None:
                    infos[n] = step

    async def __call__(self, result: ConversationResult, info: ResultInfo) -> None:
        await self.run_batch([(result, info)])
