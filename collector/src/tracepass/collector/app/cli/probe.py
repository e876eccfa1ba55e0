"""`tracepass probe`: replay references K times against an agent, report pass@k / pass^k."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from tracepass.collector.app.cli.common import (
    EXIT_GATE,
    EXIT_INPUT,
    FailUnderOption,
    GateOnOption,
    LevelOption,
    MultiValueCommand,
    OutputFormat,
    OutputOption,
    ReadinessGateOption,
    dump_json,
    fail,
    fmt_num,
    plain,
    report_gates,
    stderr_console,
    stdout_console,
    write_text,
)
from tracepass.evaluator.offline import gates
from tracepass.evaluator.vocabulary import K_METRIC_SYMBOLS

EPILOG = """\
Examples:

  tracepass probe -r examples/references --agent examples/travel_agent.py:answer --trials 5

  tracepass probe -r refs/ --agent mypkg.bot:answer --trials 10 --concurrency 8 --format json -o probe.json

  tracepass probe -r refs/ --agent http://localhost:8080/chat --trials 5 --collector http://localhost:4318

  tracepass probe -r refs/ --agent 'cmd:python my_agent.py' --trials 3 --checkpoint probe.ckpt

  tracepass probe -r refs/ --agent 'cmd:python my_agent.py' --trials 3 --checkpoint probe.ckpt --resume

  tracepass probe -r refs/ --agent mypkg.bot:answer --trials 5 --fail-under pass_pow_k@3=0.8

TARGET: module:callable or file.py:callable (called once per turn inside
conversation(reference_id=...)), an HTTP endpoint (POST {query, conversation_id,
reference_id} -> {answer}), or cmd:COMMAND (one JSON request per stdin line, one JSON
reply per stdout line). HTTP and cmd agents trace themselves; cmd agents get
OTEL_EXPORTER_OTLP_ENDPOINT pointing at the collector.
Exit codes: 0 done, 1 a --fail-under gate failed (without one: readiness "needs
improvement"), 2 usage or input error,
130 interrupted (resume with --resume).
"""


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG, cls=MultiValueCommand)(probe)


def _ks(text: str | None, trials: int) -> list[int]:
    from tracepass.evaluator.offline.evaluation_run import parse_ks

    if text is None:
        return sorted({k for k in (1, 3, 5) if k <= trials} | {trials})
    try:
        ks = parse_ks(text)
    except ValueError as exc:
        fail(str(exc))
    too_big = [k for k in ks if k > trials]
    if too_big:
        fail(f"--k {text!r}: k={too_big[0]} is more than --trials {trials}")
    return ks


def _simulator(spec: str | None, all_trials: list[Any]) -> tuple[Any, dict[str, Any] | None]:
    """The simulator and what the run records of it (None without one). References with
    a `user:` scenario need one: without, exit 2 naming them."""
    scenarios = sorted({t.reference.id for t in all_trials if t.reference.user is not None})
    if spec is None:
        if scenarios:
            fail(
                f"reference(s) {', '.join(scenarios[:5])} have a simulated `user:` scenario: "
                "give --user-simulator MODULE:ATTR (docs/probe.md)"
            )
        return None, None
    from tracepass.collector.app.probe.simulation import SimulatorError, load_simulator

    try:
        simulator = load_simulator(spec)
    except SimulatorError as exc:
        fail(str(exc))
    if not scenarios:
        stderr_console().print(
            "[yellow]warning:[/] --user-simulator given, but no reference has a `user:` "
            "scenario: every reference plays its fixed queries",
            highlight=False,
        )
    return simulator, simulator.describe()


def probe(
    references: Annotated[
        list[Path],
        typer.Option(
            "--references",
            "-r",
            help="Reference set files or folders: --references a b, or -r a -r b.",
        ),
    ],
    agent_spec: Annotated[
        str,
        typer.Option(
            "--agent", help="module:callable, file.py:callable, http(s)://URL or cmd:COMMAND."
        ),
    ],
    trials: Annotated[int, typer.Option("--trials", min=1, help="Trials (K) per reference.")] = 5,
    k: Annotated[
        str | None,
        typer.Option(
            "--k",
            help="Comma-separated k values (each <= trials) [default: 1,3,5,K].",
            show_default=False,
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Trials in flight.")] = 4,
    rate: Annotated[
        float | None,
        typer.Option("--rate", min=0.001, help="Max trial starts per second.", show_default=False),
    ] = None,
    retries: Annotated[
        int, typer.Option("--retries", min=0, help="Retries of transport errors (with backoff).")
    ] = 3,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.1, help="Seconds per agent request.")
    ] = 60.0,
    result_timeout: Annotated[
        float,
        typer.Option("--result-timeout", min=0.1, help="Seconds to wait for a trial's evaluation."),
    ] = 60.0,
    checkpoint: Annotated[
        Path | None,
        typer.Option(
            "--checkpoint", help="JSON-lines checkpoint of finished trials.", show_default=False
        ),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the run recorded in --checkpoint.")
    ] = False,
    collector: Annotated[
        str | None,
        typer.Option(
            "--collector",
            help="Base URL of a running collector's HTTP port (default: an embedded one).",
            show_default=False,
        ),
    ] = None,
    grpc_port: Annotated[
        int,
        typer.Option("--grpc-port", min=0, max=65535, help="Embedded collector OTLP/gRPC port."),
    ] = 0,
    http_port: Annotated[
        int,
        typer.Option("--http-port", min=0, max=65535, help="Embedded collector OTLP/HTTP port."),
    ] = 0,
    output_format: Annotated[
        OutputFormat, typer.Option("--format", help="table or json.")
    ] = OutputFormat.TABLE,
    output: OutputOption = None,
    progress: Annotated[
        bool | None,
        typer.Option(
            "--progress/--no-progress",
            help="Progress bar on stderr (default: on a terminal).",
            show_default=False,
        ),
    ] = None,
    level: LevelOption = 0.95,
    fail_under: FailUnderOption = None,
    gate_on: GateOnOption = gates.GateOn.POINT,
    readiness_gate: ReadinessGateOption = True,
    allow_command_graders: Annotated[
        bool,
        typer.Option(
            "--allow-command-graders",
            help="Let references use `command` graders, which run programs as you "
            "(the embedded collector's evaluation.allow_command_graders).",
        ),
    ] = False,
    user_simulator: Annotated[
        str | None,
        typer.Option(
            "--user-simulator",
            help="MODULE:ATTR (or file.py:ATTR) playing the `user:` scenario of references "
            "that have one: a langchain-core chat model, a factory of one, or an object "
            "with reply() (a scripted user, examples/simulated/user.py).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Replay every reference K times against an agent; per-reference pass@k / pass^k."""
    from tracepass.collector.app.cli import sources
    from tracepass.collector.app.probe.runner import Checkpoint, CheckpointError, plan
    from tracepass.collector.app.probe.targets import TargetError, parse_target

    ks = _ks(k, trials)
    try:
        gate_list = [gates.parse_gate(text, ks) for text in fail_under or []]
    except gates.GateError as exc:
        fail(str(exc))
    if resume and checkpoint is None:
        fail("--resume needs --checkpoint PATH")
    sets = sources.reference_sets(references, allow_command_graders=allow_command_graders)
    all_trials = plan(sets, trials)
    simulator, simulator_info = _simulator(user_simulator, all_trials)
    ckpt = Checkpoint(checkpoint) if checkpoint is not None else None
    run_id = uuid.uuid4().hex[:8]
    done: list[Any] = []
    header = {
        "tracepass_probe": 1,
        "run_id": run_id,
        "agent": agent_spec,
        "trials": trials,
        "references": sorted(t.reference.id for t in all_trials if t.index == 0),
        "simulator": simulator_info,
    }
    if ckpt is not None and resume:
        try:
            old, done = ckpt.load()
        except CheckpointError as exc:
            fail(str(exc))
        if old.get("trials") != trials or old.get("agent") != agent_spec:
            fail(
                f"{checkpoint}: recorded --agent {old.get('agent')!r} --trials {old.get('trials')}; "
                f"resume with the same values (got {agent_spec!r}, {trials})"
            )
        if old.get("simulator") != simulator_info:
            fail(
                f"{checkpoint}: recorded with simulator {old.get('simulator')!r}; resume "
                f"with the same --user-simulator (got {simulator_info!r})"
            )
        run_id = str(old["run_id"])
        header["run_id"] = run_id
        known = {t.reference.id for t in all_trials}
        done = [r for r in done if r.reference_id in known and r.trial < trials]
    try:
        target = parse_target(agent_spec, slots=concurrency, timeout_s=timeout)
    except TargetError as exc:
        fail(str(exc))
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    if ckpt is not None:
        ckpt.open(header, done)
    try:
        run = asyncio.run(
            _run(
                target=target,
                references=references,
                allow_command_graders=allow_command_graders,
                all_trials=all_trials,
                done=done,
                run_id=run_id,
                ckpt=ckpt,
                collector=collector,
                ports=(grpc_port, http_port),
                opts=dict(
                    trials=trials,
                    concurrency=concurrency,
                    rate=rate,
                    retries=retries,
                    result_timeout_s=result_timeout,
                ),
                show_progress=progress if progress is not None else sys.stderr.isatty(),
                simulator=simulator,
            )
        )
    finally:
        if ckpt is not None:
            ckpt.close()

    from tracepass.collector.app.probe.summary import probe_document

    document = probe_document(
        run.results,
        ks,
        run={
            "run_id": run.run_id,
            "agent": agent_spec,
            "trials": trials,
            "collector": collector or "embedded",
            "interrupted": run.interrupted,
            "simulator": simulator_info,
        },
        level=level,
    )
    outcomes = gates.gate_run(
        document["summary"], gate_list, gate_on, readiness_default=readiness_gate
    )
    if outcomes:
        document["gates"] = [o.as_json() for o in outcomes]
    if output_format is OutputFormat.JSON:
        write_text(dump_json(document), output)
    else:
        _print_tables(document, ks, output)
    report_gates(outcomes)
    if run.interrupted:
        stderr_console().print(
            "[yellow]interrupted[/]"
            + (f": resume with --checkpoint {checkpoint} --resume" if checkpoint else ""),
            highlight=False,
        )
        raise typer.Exit(130)
    if any(not o.passed for o in outcomes):
        raise typer.Exit(EXIT_GATE)


async def _run(
    *,
    target: Any,
    references: list[Path],
    allow_command_graders: bool,
    all_trials: list[Any],
    done: list[Any],
    run_id: str,
    ckpt: Any,
    collector: str | None,
    ports: tuple[int, int],
    opts: dict[str, Any],
    show_progress: bool,
    simulator: Any = None,
) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from tracepass.collector.app.probe.collectors import (
        CollectorUnavailable,
        EmbeddedSource,
        RemoteSource,
        embedded_config,
    )
    from tracepass.collector.app.probe.runner import ProbeOptions, run_probe
    from tracepass.collector.service import CollectorService, startup_error

    options = ProbeOptions(**opts)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
    service: CollectorService | None = None
    remote: RemoteSource | None = None
    traced_here = False
    with tempfile.TemporaryDirectory(prefix="tracepass-probe-") as tmp:
        try:
            if collector is None:
                service = CollectorService(
                    embedded_config(
                        references,
                        Path(tmp),
                        grpc_port=ports[0],
                        http_port=ports[1],
                        allow_command_graders=allow_command_graders,
                    ),
                    end_grace_s=1.0,
                    persist_interval_s=3600.0,
                )
                try:
                    await service.start()
                except Exception as exc:
                    message = startup_error(exc)
                    if message is None:
                        raise
                    fail(message)
                endpoint = service.endpoint("http")
                source: Any = EmbeddedSource(service)
                if target.kind == "http":
                    stderr_console().print(
                        f"embedded collector: OTLP/HTTP {endpoint}, OTLP/gRPC "
                        f"{service.endpoint('grpc')} — point the agent's exporter there "
                        "(or fix the ports with --http-port/--grpc-port)",
                        highlight=False,
                    )
            else:
                remote = RemoteSource(collector)
                try:
                    await remote.start()
                except CollectorUnavailable as exc:
                    fail(str(exc))
                endpoint = collector.rstrip("/")
                source = remote
            env = {
                "OTEL_EXPORTER_OTLP_ENDPOINT": str(endpoint),
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                "OTEL_BSP_SCHEDULE_DELAY": os.environ.get("OTEL_BSP_SCHEDULE_DELAY", "200"),
            }
            if not target.traces_itself:
                os.environ.setdefault("OTEL_BSP_SCHEDULE_DELAY", "200")
                from tracepass import instrumentation

                instrumentation.configure(service_name="tracepass-probe", endpoint=endpoint)
                traced_here = True
            await target.start(env)
            with Progress(
                TextColumn("probing"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[status]}"),
                TimeElapsedColumn(),
                console=stderr_console(),
                disable=not show_progress,
                transient=True,
            ) as bar:
                tally = {"pass": 0, "fail": 0, "other": 0}
                for r in done:
                    tally[r.outcome if r.outcome in ("pass", "fail") else "other"] += 1
                task = bar.add_task("probe", total=len(all_trials), completed=len(done), status="")

                def on_done(result: Any) -> None:
                    tally[result.outcome if result.outcome in ("pass", "fail") else "other"] += 1
                    bar.update(
                        task,
                        advance=1,
                        status=f"pass {tally['pass']} fail {tally['fail']} other {tally['other']}",
                    )

                return await run_probe(
                    all_trials,
                    target,
                    source,
                    options,
                    run_id=run_id,
                    done=done,
                    checkpoint=ckpt,
                    on_done=on_done,
                    stop=stop,
                    simulator=simulator,
                )
        finally:
            await target.close()
            if traced_here:
                from tracepass import instrumentation

                await asyncio.to_thread(instrumentation.shutdown)
            if remote is not None:
                await remote.close()
            if service is not None:
                await service.stop()
            for sig in installed:
                loop.remove_signal_handler(sig)


def _with_interval(block: dict[str, Any]) -> str:
    """`0.80 [0.45, 0.97]`: the unbiased estimate with the credible interval the table's
    title promises."""
    point = fmt_num(block.get("unbiased"), 2)
    if block.get("lower") is None or block.get("upper") is None:
        return point
    return f"{point} [{fmt_num(block['lower'], 2)}, {fmt_num(block['upper'], 2)}]"


def _print_tables(document: dict[str, Any], ks: list[int], output: Path | None) -> None:
    table = Table(title="Per reference (unbiased over the trials; [95% credible interval])")
    table.add_column("reference")
    table.add_column("trials", justify="right")
    table.add_column("correct", justify="right")
    for kk in ks:
        table.add_column(f"pass@{kk}", justify="right")
    for kk in ks:
        table.add_column(f"pass^{kk}", justify="right")
    table.add_column("not counted")
    for row in document["references"]:
        cells: list[str | Text] = [
            plain(row["reference_id"]),
            str(row["trials"]),
            str(row["correct"]),
        ]
        cells += [_with_interval(row["pass_at_k"][str(kk)]) for kk in ks]
        cells += [_with_interval(row["pass_pow_k"][str(kk)]) for kk in ks]
        nc = row["not_counted"]
        cells.append(", ".join(f"{v} {key}" for key, v in sorted(nc.items())) or "")
        table.add_row(*cells)
    s = document["summary"]
    suite = Table(title="Suite")
    suite.add_column("metric")
    suite.add_column("unbiased", justify="right")
    suite.add_column("mean [interval]", justify="right")
    for metric, symbol in K_METRIC_SYMBOLS.items():
        for kk in ks:
            b = s[metric][str(kk)]
            suite.add_row(
                f"{symbol}{kk}",
                fmt_num(b["unbiased"]),
                f"{fmt_num(b['mean'])} [{fmt_num(b['lower'])}, {fmt_num(b['upper'])}]",
            )
    from tracepass.evaluator.offline.evaluation_run import readiness_line

    verdict = readiness_line(s["readiness"])
    if output is not None:
        from io import StringIO

        from rich.console import Console

        buf = StringIO()
        console = Console(file=buf, width=160)
        console.print(table, suite)
        console.print(verdict, highlight=False, soft_wrap=True)
        write_text(buf.getvalue(), output)
        return
    console = stdout_console()
    if not console.is_terminal:
        console.width = max(console.width, 140)
    console.print(table)
    console.print(suite)
    console.print(
        f"trials counted {s['trials']} of {s['trials'] + s['not_counted']}", highlight=False
    )
    if (faults := s.get("simulator_faults")) is not None:
        console.print(
            f"simulator faults {faults['count']} of {faults['of']} simulated trials "
            f"({faults['share']:.0%}), not counted against the agent",
            highlight=False,
        )
    console.print(verdict, highlight=False, soft_wrap=True)


__all__ = ["EXIT_INPUT", "probe", "register"]
