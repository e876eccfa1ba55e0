"""`tracepass serve`: the long-running collector + evaluator."""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import json
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tracepass.collector.app.cli.common import MultiValueCommand, fail, stderr_console

if TYPE_CHECKING:
    from tracepass.collector.config import CollectorConfig

EPILOG = """\
Examples:

  tracepass serve --references examples/references

  tracepass serve --config tracepass.yaml --state /var/lib/tracepass/state.sqlite

  tracepass serve --references refs/ --grpc-port 0 --http-port 0 --metrics-port 0 --ports-file ports.json

When it is listening, one JSON line goes to stdout:
{"event": "listening", "grpc_port": 4317, "http_port": 4318, "metrics_port": 9464, ...}
SIGINT / SIGTERM stop it cleanly.
Exit codes: 0 stopped by SIGINT/SIGTERM, 2 bad option, config, reference or state file,
or a port that cannot be bound.
"""

LOG_LEVELS = ("debug", "info", "warning", "error")


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG, cls=MultiValueCommand)(serve)


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def write_ports_file(path: Path, data: dict[str, Any]) -> None:
    """Atomically (rename), so a reader polling for the file never sees half of it."""
    tmp = path.with_name(path.name + ".tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_text(json.dumps(data) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def listening_event(service: Any, **extra: Any) -> dict[str, Any]:
    """The `listening` line (and ports file) both `serve` and `demo` announce: scripts and
    tests read the bound ports from it, so its keys must stay the same in both."""
    ports = service.ports
    return {
        "event": "listening",
        "grpc_port": ports.grpc,
        "http_port": ports.http,
        "metrics_port": ports.metrics,
        "metrics_url": service.metrics_url,
        "ui_url": service.ui_url,
        **extra,
    }


@contextmanager
def startup_errors_reported(ports_file: Path | None) -> Iterator[None]:
    """Turn a known start-up failure (busy port, unreadable state...) into a precise
    exit-2 error instead of a traceback, and remove the ports file however the run ends
    so a poller never reads the ports of a collector that is gone."""
    from tracepass.collector.service import startup_error

    try:
        yield
    except Exception as exc:
        message = startup_error(exc)
        if message is None:
            raise
        fail(message)
    finally:
        if ports_file is not None:
            ports_file.unlink(missing_ok=True)


async def run_until_signal(
    service: Any, on_started: Callable[[], Awaitable[None] | None] | None = None
) -> None:
    """Start `service`, call `on_started`, wait for SIGINT/SIGTERM, stop."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
        except (NotImplementedError, RuntimeError):  # not the main thread / platform
            pass
    try:
        await service.start()
        try:
            if on_started is not None:
                ret = on_started()
                if ret is not None:
                    await ret
            await stop.wait()
        finally:
            await service.stop()
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


# Young-generation threshold of the cyclic garbage collector while a pipeline runs.
GC_GEN0_THRESHOLD = 10_000


def tune_gc(gen0: int = GC_GEN0_THRESHOLD) -> None:
    """Raise the GC's young-generation threshold to `gen0` (never lower it).

    Why: the collector holds every buffered span as a long-lived record, and ingest
    allocates several container objects per span (records, protobuf wrappers, decoded
    JSON); with CPython's default threshold (700) a young collection runs every ~100
    spans and the older generations, which scan everything buffered, follow in
    proportion. That cost 2-3 us per span at ~50k buffered spans (measured: about 15%
    of ingest CPU); 10,000 takes most of it away for a few MB of extra young garbage.
    Process-wide, like any GC setting, so only this entry point sets it: a library user
    (tests, the demo, an embedding application) keeps its own GC policy."""
    t0, t1, t2 = gc.get_threshold()
    if 0 < t0 < gen0:
        gc.set_threshold(gen0, t1, t2)


def freeze_startup_objects() -> None:
    """Move everything alive once the service has started (modules, pydantic schemas,
    the loaded reference sets, compiled conventions: ~110k objects) out of the cyclic
    GC's reach for good.

    Why: a full collection scans every tracked object, and these live as long as the
    process; scanning them again in every full collection made each one pause the event
    loop longer (measured: 355 ms at ~800k tracked objects). They are still freed by
    reference counting if they ever become unreferenced; only a reference cycle among
    them would outlive its use, and start-up builds nothing that is thrown away later.
    `gc.collect()` first so start-up garbage is not frozen with them."""
    gc.collect()
    gc.freeze()


@contextmanager
def tuned_gc(gen0: int = GC_GEN0_THRESHOLD) -> Iterator[None]:
    """`tune_gc` for the length of one command (`tracepass evaluate`), then the previous
    thresholds again, so an in-process caller (tests, a notebook) keeps its GC policy.

    Why `evaluate` needs it too: scoring a dataset allocates a handful of models per
    turn while every conversation and result stays alive until the report, so with the
    default threshold young collections ran every ~50 turns and the older generations
    rescanned everything loaded (measured: GC was most of `evaluate`'s CPU per turn)."""
    before = gc.get_threshold()
    tune_gc(gen0)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def exposure_line(config: CollectorConfig) -> str:
    """What the bind address exposes, said at start-up: the API and UI serve conversation
    contents, so a bind beyond loopback without a token is called out, not implied."""
    host = config.receiver.host
    if is_loopback_host(host):
        return (
            f"bound to {host}: reachable from this machine only "
            "(--host 0.0.0.0 or receiver.host to accept other machines)"
        )
    if config.receiver.bearer_token:
        return f"bound to {host}: other machines can reach it; the API and UI need the bearer token"
    return (
        f"warning: bound to {host} without receiver.bearer_token: every machine that reaches "
        "this address can read conversation contents through the API and UI"
    )


def alert_links_line(base: Any) -> str:
    """Where the alerts' links (`tracepass_ui_info`) point, and why they might not work."""
    if base.url is None:
        return "alert links: relative (/ui/...): no web UI on this collector"
    line = f"alert links: {base.url}/ (from {base.source})"
    return line if base.warning is None else f"{line}\nwarning: {base.warning}"


def is_loopback_host(host: str) -> bool:
    """`localhost` or a loopback address (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def serve(
    config_file: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="YAML config file (docs/configuration.md)."),
    ] = None,
    references: Annotated[
        list[Path] | None,
        typer.Option(
            "--references",
            "-r",
            help="Reference set files or folders: --references a b, or -r a -r b.",
            show_default=False,
        ),
    ] = None,
    host: Annotated[
        str | None,
        typer.Option(
            "--host",
            help="Bind address of the receivers, the API and /metrics (unless "
            "metrics.prometheus_host is set).  [default: receiver.host, 127.0.0.1: loopback only; 0.0.0.0 for every interface]",
            show_default=False,
        ),
    ] = None,
    grpc_port: Annotated[
        int | None,
        typer.Option(
            "--grpc-port",
            min=0,
            max=65535,
            help="OTLP/gRPC port (0: any free).  [default: receiver.grpc_port, 4317]",
            show_default=False,
        ),
    ] = None,
    http_port: Annotated[
        int | None,
        typer.Option(
            "--http-port",
            min=0,
            max=65535,
            help="OTLP/HTTP + API + UI port (0: any free).  [default: receiver.http_port, 4318]",
            show_default=False,
        ),
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            "--metrics-port",
            min=0,
            max=65535,
            help="Prometheus /metrics port (0: any free).  "
            "[default: metrics.prometheus_port, 9464]",
            show_default=False,
        ),
    ] = None,
    state: Annotated[
        Path | None,
        typer.Option(
            "--state",
            help="SQLite state file.  [default: state.path, tracepass-state/state.sqlite]",
            show_default=False,
        ),
    ] = None,
    durability: Annotated[
        str | None,
        typer.Option(
            "--durability",
            help="batch (acknowledged spans survive kill -9) or none.  "
            "[default: state.durability, batch]",
            show_default=False,
        ),
    ] = None,
    results_url: Annotated[
        str | None,
        typer.Option(
            "--results-url",
            envvar="TRACEPASS_RESULTS_URL",
            metavar="URL",
            help="postgresql:// URL of a results database shared by several replicas "
            "(also from $TRACEPASS_RESULTS_URL, e.g. a secret).  "
            "[default: state.results_url, the state file]",
            show_default=False,
        ),
    ] = None,
    record: Annotated[
        Path | None,
        typer.Option(
            "--record",
            metavar="DIR",
            help="Also write every accepted export request to size-rotated files in "
            "this folder (length-prefixed protobuf, read by `tracepass evaluate`).",
            show_default=False,
        ),
    ] = None,
    ports_file: Annotated[
        Path | None,
        typer.Option("--ports-file", help="Write the bound ports as JSON here once listening."),
    ] = None,
    log_level: Annotated[
        str, typer.Option("--log-level", help="debug, info, warning or error.")
    ] = "info",
) -> None:
    """Run the collector: OTLP receivers, conversation assembly, evaluation, /metrics."""
    from tracepass.collector.config import ConfigError, load_config
    from tracepass.collector.pipeline import batch_gc_pause
    from tracepass.collector.service import CollectorService, with_overrides

    if log_level.lower() not in LOG_LEVELS:
        fail(f"--log-level {log_level!r}: expected one of {', '.join(LOG_LEVELS)}")
    if durability is not None and durability not in ("batch", "none"):
        fail(f"--durability {durability!r}: expected batch or none")
    for path in references or []:
        if not path.exists():
            fail(f"{path}: no such file or directory (--references)")
    if config_file is not None and not config_file.is_file():
        fail(f"{config_file}: no such file (--config)")
    try:
        config = with_overrides(
            load_config(config_file),
            references=references,
            host=host,
            grpc_port=grpc_port,
            http_port=http_port,
            metrics_port=metrics_port,
            state=state,
            durability=durability,
            record_dir=record,
            results_url=results_url or None,
        )
    except ConfigError as exc:
        fail(str(exc))
    for path in config.references:
        if not Path(path).exists():
            fail(f"{path}: no such file or directory (references in {config_file})")
    setup_logging(log_level.lower())
    tune_gc()
    batch_gc_pause.enable()  # serve's GC policy: none mid-batch (pipeline/gc_pause.py)
    service = CollectorService(config)
    console = stderr_console()

    def announce() -> None:
        freeze_startup_objects()
        ports = service.ports
        info = listening_event(service, pid=os.getpid())
        if ports_file is not None:
            write_ports_file(ports_file, info)
        sys.stdout.write(json.dumps(info) + "\n")
        sys.stdout.flush()
        console.print(
            f"tracepass collector: OTLP gRPC :{ports.grpc}, OTLP HTTP :{ports.http}, "
            f"metrics {service.metrics_url or 'off'}, web UI {service.ui_url or 'off'} "
            "(Ctrl-C to stop)",
            highlight=False,
        )
        console.print(exposure_line(config), highlight=False)
        console.print(alert_links_line(service.ui_base), highlight=False)

    with startup_errors_reported(ports_file):
        asyncio.run(run_until_signal(service, announce))
    console.print("tracepass collector stopped", highlight=False)
