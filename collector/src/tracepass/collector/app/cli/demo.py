"""`tracepass demo`: the README's "run it" command (no network, no API keys)."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from tracepass.collector.app.cli.common import fail, plain, stderr_console, stdout_console

EPILOG = """\
Examples:

  tracepass demo

  tracepass demo --duration 120 --rate 8 --regression-at 40 --regression-rate 0.5

  tracepass demo --duration 20 --no-live --report /tmp/demo.html

Starts a collector in this process (OTLP on 4317/4318, /metrics on 9464, or free ports
when those are busy), runs the example travel agent from examples/ — version 1.0, then
a regressed 1.1 — and shows pass@k / pass^k per version live. Ctrl-C ends it early.
Exit codes: 0 finished or ended with Ctrl-C (report written), 2 bad option, examples
not found or a port that cannot be bound.
"""


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG)(demo)


def demo(
    duration: Annotated[
        float, typer.Option("--duration", min=1.0, help="Seconds the agent runs.")
    ] = 75.0,
    rate: Annotated[
        float, typer.Option("--rate", min=0.1, max=1000.0, help="Conversations per second.")
    ] = 4.0,
    regression_at: Annotated[
        float | None,
        typer.Option(
            "--regression-at",
            min=0.0,
            help="Seconds after which version 1.1 (regressed) runs [default: duration/2].",
            show_default=False,
        ),
    ] = None,
    regression_rate: Annotated[
        float,
        typer.Option(
            "--regression-rate",
            min=0.0,
            max=1.0,
            help="Probability that a 1.1 tool call gets a wrong argument.",
        ),
    ] = 0.35,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the agent and users.")] = 0,
    grpc_port: Annotated[int, typer.Option("--grpc-port", min=0, max=65535)] = 4317,
    http_port: Annotated[int, typer.Option("--http-port", min=0, max=65535)] = 4318,
    metrics_port: Annotated[int, typer.Option("--metrics-port", min=0, max=65535)] = 9464,
    report: Annotated[
        Path, typer.Option("--report", help="Where to write the HTML report.")
    ] = Path("tracepass-demo-report.html"),
    live: Annotated[
        bool,
        typer.Option("--live/--no-live", help="Live terminal view, or plain status lines."),
    ] = True,
    examples: Annotated[
        Path | None,
        typer.Option(
            "--examples",
            help="Folder with travel_agent.py and references/ [default: ./examples].",
            show_default=False,
        ),
    ] = None,
    protocol: Annotated[
        str, typer.Option("--protocol", help="OTLP protocol of the agent: http/protobuf or grpc.")
    ] = "http/protobuf",
    ports_file: Annotated[
        Path | None,
        typer.Option("--ports-file", help="Write the bound ports as JSON here once listening."),
    ] = None,
    keep_serving: Annotated[
        bool,
        typer.Option(
            "--keep-serving",
            help="After the run, keep the web UI, API and /metrics up until Ctrl-C.",
        ),
    ] = False,
) -> None:
    """Run a collector and an instrumented example agent; watch pass^k fall."""
    from tracepass.collector.app.demo.examples import ExamplesNotFound, find_examples
    from tracepass.collector.app.demo.runner import DemoOptions

    if protocol not in ("http/protobuf", "grpc"):
        fail(f"--protocol {protocol!r}: expected http/protobuf or grpc")
    if regression_at is not None and regression_at > duration:
        fail(f"--regression-at {regression_at:g} is after the end (--duration {duration:g})")
    try:
        find_examples(examples)
    except ExamplesNotFound as exc:
        fail(str(exc))
    options = DemoOptions(
        duration=duration,
        rate=rate,
        regression_at=regression_at,
        regression_rate=regression_rate,
        seed=seed,
        grpc_port=grpc_port,
        http_port=http_port,
        metrics_port=metrics_port,
        report=report,
        live=live,
        examples=examples,
        protocol=protocol,
        ports_file=ports_file,
        keep_serving=keep_serving,
    )
    # Collector logs would tear the live view; warnings and errors still show.
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    outcome = asyncio.run(_run(options))
    from tracepass.collector.app.demo.view import summary_table

    console = _console()
    state = outcome.state
    console.print(summary_table(outcome))
    how = "interrupted" if state.interrupted else "finished"
    console.print(
        f"demo {how}: {state.sent} conversations sent, {len(state.results)} evaluated",
        highlight=False,
    )
    for line in outcome.triage:  # top failure modes, reference candidates
        console.print(plain(line), highlight=False)
    if outcome.report is not None:
        console.print(f"report: {outcome.report}", highlight=False)
    else:
        stderr_console().print(f"[yellow]{outcome.report_error}[/]")


def _console() -> Any:
    console = stdout_console()
    if not console.is_terminal:
        # Logs and CI: do not squeeze the tables into 80 columns.
        console.width = max(console.width, 120)
    return console


async def _run(options: Any) -> Any:
    from rich.live import Live

    from tracepass.collector.app.cli.serve import (
        listening_event,
        startup_errors_reported,
        write_ports_file,
    )
    from tracepass.collector.app.demo import view
    from tracepass.collector.app.demo.runner import run_demo

    console = _console()
    last_line = [0.0]
    serving_said: list[bool] = []

    def on_listening(service: Any) -> None:
        info = listening_event(service, report=str(options.report))
        if options.ports_file is not None:
            write_ports_file(options.ports_file, info)
        if not options.live:
            print(json.dumps(info), flush=True)
            print(
                f"web UI: {service.ui_url} (while the demo runs; --keep-serving keeps it up)",
                file=sys.stderr,
                flush=True,
            )

    with startup_errors_reported(options.ports_file):
        if options.live:
            with Live(console=console, refresh_per_second=4, transient=False) as live:
                outcome = await run_demo(
                    options,
                    lambda state, service: live.update(view.live_panel(state, service)),
                    on_listening,
                )
        else:

            def plain(state: Any, service: Any) -> None:
                if last_line[0] == 0.0:
                    for note in state.notes:  # e.g. a busy default port was replaced
                        print(f"note: {note}", file=sys.stderr, flush=True)
                if state.serving:
                    # One line, not a status line every 2 s while it waits for Ctrl-C.
                    if not serving_said:
                        serving_said.append(True)
                        print(
                            f"run complete: {len(state.results)} evaluated; serving the web "
                            f"UI at {service.ui_url} until Ctrl-C",
                            flush=True,
                        )
                    return
                now = time.monotonic()
                if now - last_line[0] >= 2.0:
                    last_line[0] = now
                    print(view.status_line(state), flush=True)

            outcome = await run_demo(options, plain, on_listening)
    return outcome
