"""The agents `tracepass probe` can drive, behind one interface: play one conversation
(a reference's queries, turn by turn) under a given conversation id.

* `module:callable` (or `path/to/file.py:callable`): called in-process, each trial
  inside `conversation(id, reference_id=…)`, so the spans carry the exact reference id.
* `http://…` / `https://…`: POST `{"query", "conversation_id", "reference_id"}` → `{"answer"}`.
* `cmd:COMMAND`: a long-running process per concurrency slot; one JSON request per stdin
  line, one JSON reply per stdout line.

Remote agents trace themselves: they receive the conversation id so their spans match.
Transport failures (connection errors, timeouts, HTTP 429/5xx, a dead process) raise
`TransportError` and are retried by the runner; anything else the agent says is its
answer, right or wrong.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import json
import os
import sys
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "CmdTarget",
    "HttpTarget",
    "ModuleTarget",
    "NextQuery",
    "Target",
    "TargetError",
    "TransportError",
    "fixed_queries",
    "parse_target",
]


# Asked before each turn with the answers so far: the next query, or None to end. A
# reference's fixed queries (`fixed_queries`) or a simulated user (simulation.py).
NextQuery = Callable[[Sequence[str]], Coroutine[Any, Any, str | None]]


def fixed_queries(queries: Sequence[str]) -> NextQuery:
    async def next_query(answers: Sequence[str]) -> str | None:
        return queries[len(answers)] if len(answers) < len(queries) else None

    return next_query


class TargetError(ValueError):
    """A TARGET that cannot be used (bad spec, import error): exit code 2."""


class TransportError(Exception):
    """Reaching the agent failed; retrying may help."""


class Target(Protocol):
    kind: str
    traces_itself: bool  # False: probe must configure tracing in this process

    async def start(self, env: Mapping[str, str]) -> None: ...

    async def play(
        self, conversation_id: str, reference_id: str, queries: Sequence[str]
    ) -> list[str]: ...

    async def converse(
        self, conversation_id: str, reference_id: str, next_query: NextQuery
    ) -> list[str]: ...

    async def close(self) -> None: ...


# ----------------------------------------------------------------------------- module


def _resolve_callable(spec: str) -> Callable[..., Any]:
    module_part, sep, attr = spec.rpartition(":")
    if not sep or not module_part or not attr:
        raise TargetError(f"--agent {spec!r}: expected module:callable or file.py:callable")
    try:
        if module_part.endswith(".py") or "/" in module_part:
            path = Path(module_part)
            if not path.is_file():
                raise TargetError(f"--agent {spec!r}: {path}: no such file")
            from tracepass.collector.app.demo.examples import load_module

            module: Any = load_module(path, f"tracepass_probe_target_{path.stem}")
        else:
            if os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(module_part)
    except TargetError:
        raise
    except Exception as exc:
        raise TargetError(
            f"--agent {spec!r}: cannot import {module_part!r}: {type(exc).__name__}: {exc}"
        ) from exc
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise TargetError(f"--agent {spec!r}: {module_part!r} has no attribute {attr!r}")
        target = getattr(target, part)
    if not callable(target):
        raise TargetError(f"--agent {spec!r}: {attr!r} is not callable")
    fn: Callable[..., Any] = target
    return fn


class ModuleTarget:
    kind = "module"
    traces_itself = False

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.fn = _resolve_callable(spec)
        self._async = inspect.iscoroutinefunction(self.fn)

    async def start(self, env: Mapping[str, str]) -> None:
        return None

    async def play(
        self, conversation_id: str, reference_id: str, queries: Sequence[str]
    ) -> list[str]:
        return await self.converse(conversation_id, reference_id, fixed_queries(queries))

    async def converse(
        self, conversation_id: str, reference_id: str, next_query: NextQuery
    ) -> list[str]:
        from tracepass.instrumentation import conversation

        answers: list[str] = []
        if self._async:
            async with conversation(conversation_id, reference_id=reference_id):
                while (q := await next_query(answers)) is not None:
                    answers.append(_text(await self.fn(q)))
            return answers
        loop = asyncio.get_running_loop()

        def run() -> list[str]:
            # The agent runs on this worker thread inside its conversation; the next
            # query (perhaps a simulated user) is asked for on the event loop.
            with conversation(conversation_id, reference_id=reference_id):
                while True:
                    q: str | None = asyncio.run_coroutine_threadsafe(
                        next_query(answers), loop
                    ).result()
                    if q is None:
                        break
                    answers.append(_text(self.fn(q)))
            return answers

        return await asyncio.to_thread(run)

    async def close(self) -> None:
        return None


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, default=str)


# ----------------------------------------------------------------------------- http


class HttpTarget:
    kind = "http"
    traces_itself = True

    def __init__(self, url: str, *, timeout_s: float = 60.0) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self._session: Any = None

    async def start(self, env: Mapping[str, str]) -> None:
        import aiohttp

        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s))

    async def ask(self, payload: dict[str, Any]) -> str:
        import aiohttp

        assert self._session is not None, "start() first"
        try:
            async with self._session.post(self.url, json=payload) as resp:
                body = await resp.text()
                if resp.status == 429 or resp.status >= 500:
                    raise TransportError(f"{self.url}: HTTP {resp.status}: {body[:200]}")
                if resp.status >= 400:
                    return f"[agent error: HTTP {resp.status}: {body[:200]}]"
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise TransportError(f"{self.url}: {type(exc).__name__}: {exc}") from exc
        return _answer(body, self.url)

    async def play(
        self, conversation_id: str, reference_id: str, queries: Sequence[str]
    ) -> list[str]:
        return await self.converse(conversation_id, reference_id, fixed_queries(queries))

    async def converse(
        self, conversation_id: str, reference_id: str, next_query: NextQuery
    ) -> list[str]:
        answers: list[str] = []
        while (q := await next_query(answers)) is not None:
            answers.append(
                await self.ask(
                    {"query": q, "conversation_id": conversation_id, "reference_id": reference_id}
                )
            )
        return answers

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _answer(body: str, where: str) -> str:
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise TransportError(f"{where}: reply is not JSON: {body[:200]!r}") from exc
    if not isinstance(data, dict) or "answer" not in data:
        if isinstance(data, dict) and "error" in data:
            return f"[agent error: {data['error']}]"
        raise TransportError(f"{where}: reply has no 'answer': {body[:200]!r}")
    return _text(data["answer"])


# ----------------------------------------------------------------------------- cmd


class _Proc:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc


class CmdTarget:
    kind = "cmd"
    traces_itself = True

    def __init__(self, command: str, *, slots: int = 1, timeout_s: float = 60.0) -> None:
        if not command.strip():
            raise TargetError("--agent 'cmd:': empty command")
        self.command = command
        self.timeout_s = timeout_s
        self._env: dict[str, str] = {}
        self._idle: asyncio.Queue[_Proc | None] = asyncio.Queue()
        self._all: list[_Proc] = []
        for _ in range(max(1, slots)):
            self._idle.put_nowait(None)  # started lazily

    async def start(self, env: Mapping[str, str]) -> None:
        self._env = {**os.environ, **env}

    async def _spawn(self) -> _Proc:
        proc = await asyncio.create_subprocess_shell(
            self.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=self._env,
        )
        p = _Proc(proc)
        self._all.append(p)
        return p

    async def _exchange(self, p: _Proc, payload: dict[str, Any]) -> str:
        proc = p.proc
        assert proc.stdin is not None
        assert proc.stdout is not None
        if proc.returncode is not None:
            raise TransportError(f"cmd:{self.command}: exited with {proc.returncode}")
        try:
            proc.stdin.write((json.dumps(payload) + "\n").encode())
            await proc.stdin.drain()
            line = await asyncio.wait_for(proc.stdout.readline(), self.timeout_s)
        except (OSError, TimeoutError) as exc:
            raise TransportError(f"cmd:{self.command}: {type(exc).__name__}: {exc}") from exc
        if not line:
            raise TransportError(f"cmd:{self.command}: closed its stdout")
        return _answer(line.decode(errors="replace"), f"cmd:{self.command}")

    async def play(
        self, conversation_id: str, reference_id: str, queries: Sequence[str]
    ) -> list[str]:
        return await self.converse(conversation_id, reference_id, fixed_queries(queries))

    async def converse(
        self, conversation_id: str, reference_id: str, next_query: NextQuery
    ) -> list[str]:
        slot = await self._idle.get()
        try:
            if slot is None or slot.proc.returncode is not None:
                slot = await self._spawn()
            answers: list[str] = []
            while (q := await next_query(answers)) is not None:
                payload = {
                    "query": q,
                    "conversation_id": conversation_id,
                    "reference_id": reference_id,
                }
                try:
                    answers.append(await self._exchange(slot, payload))
                except TransportError:
                    await _kill(slot.proc)
                    slot = None
                    raise
            return answers
        finally:
            self._idle.put_nowait(slot)

    async def close(self) -> None:
        for p in self._all:
            if p.proc.stdin is not None and p.proc.returncode is None:
                with contextlib.suppress(OSError):
                    p.proc.stdin.close()
        for p in self._all:
            try:
                await asyncio.wait_for(p.proc.wait(), 10.0)
            except TimeoutError:
                await _kill(p.proc)
        self._all.clear()


async def _kill(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        with contextlib.suppress(Exception):
            await proc.wait()


def parse_target(spec: str, *, slots: int = 1, timeout_s: float = 60.0) -> Target:
    if spec.startswith("cmd:"):
        return CmdTarget(spec[4:], slots=slots, timeout_s=timeout_s)
    if spec.startswith(("http://", "https://")):
        return HttpTarget(spec, timeout_s=timeout_s)
    return ModuleTarget(spec)
