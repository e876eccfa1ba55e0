"""`tracepass evaluate`: offline evaluation and CI gate."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from tracepass.collector.app.cli.common import (
    EXIT_GATE,
    ConversationIdKeyOption,
    FailUnderOption,
    GateOnOption,
    LevelOption,
    MultiValueCommand,
    OutputOption,
    ReadinessGateOption,
    dump_json_bytes,
    emit_json_or_table,
    fail,
    fmt_num,
    load_chat_model,
    plain,
    report_gates,
    stderr_console,
    stdout_console,
    write_text,
)
from tracepass.collector.app.cli.scoring_options import (
    DefaultGrader,
    DefaultGraderOption,
    ProfileOption,
    RepeatedCallLimitOption,
    SingleToolUseOption,
    ThresholdOption,
    ToolThresholdOption,
    TrajectoryMatchOption,
    UtilizationOption,
    WeightsOption,
    scoring_fields,
)
from tracepass.collector.app.cli.serve import tuned_gc
from tracepass.evaluator.offline import gates
from tracepass.evaluator.vocabulary import K_METRIC_SYMBOLS

log = logging.getLogger(__name__)

_TOOL_DIMENSIONS = ("selection", "parameters", "sequence", "utilization", "overall")

EPILOG = """\
Examples:

  tracepass evaluate traces.jsonl --references refs/

  tracepass evaluate traces.jsonl --references refs/ --k 1,3,5 --format json -o run.json

  tracepass evaluate traces.pb --references refs/ --format html -o report.html

  tracepass evaluate --dataset fair_forge.json --profile fair-forge

  tracepass evaluate traces.jsonl -r refs/ --config tracepass.yaml --format html -o report.html

  tracepass evaluate traces.jsonl --references refs/ --fail-under pass_pow_k@3=0.8 --fail-under tool_correctness=0.9 --gate-on lower

Exit codes: 0 ok, 1 a --fail-under gate failed (without one: readiness "needs
improvement"), 2 usage or input error.
"""


class EvalFormat(StrEnum):
    TABLE = "table"
    JSON = "json"
    HTML = "html"


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG, cls=MultiValueCommand)(evaluate)


@tuned_gc()
def evaluate(
    files: Annotated[
        list[Path] | None,
        typer.Argument(
            help="OTLP trace files: JSON lines (collector file exporter), OTLP JSON "
            "documents or length-prefixed protobuf.",
            show_default=False,
        ),
    ] = None,
    references: Annotated[
        list[Path] | None,
        typer.Option(
            "--references",
            "-r",
            help="Reference set files or folders: --references a b (after the trace FILEs) or -r a -r b.",
            show_default=False,
        ),
    ] = None,
    dataset: Annotated[
        list[Path] | None,
        typer.Option(
            "--dataset",
            help="Fair Forge dataset or ADK eval set holding agent outputs (repeatable); "
            "no traces needed.",
            show_default=False,
        ),
    ] = None,
    k: Annotated[str, typer.Option("--k", help="Comma-separated k values.")] = "1,3,5",
    profile: ProfileOption = None,
    default_grader: DefaultGraderOption = None,
    judge: Annotated[
        str | None,
        typer.Option(
            "--judge",
            help="module:attr of a langchain-core BaseChatModel instance or factory "
            "(needed by llm graders).",
        ),
    ] = None,
    config_file: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="A `tracepass serve` config file: its evaluation.conversation_judges judge "
            "every conversation, with its evaluation.judge model unless --judge is given; "
            "readiness uses its metrics.headline_k and metrics.pass_pow_k_target; the files "
            "are read with its conventions.custom mappings, assembly.conversation_id_keys "
            "and (without --pricing) its pricing.models, as `serve` reads them.",
            show_default=False,
        ),
    ] = None,
    threshold: ThresholdOption = None,
    tool_threshold: ToolThresholdOption = None,
    trajectory_match: TrajectoryMatchOption = None,
    utilization: UtilizationOption = None,
    weights: WeightsOption = None,
    single_tool_use: SingleToolUseOption = None,
    repeated_call_limit: RepeatedCallLimitOption = None,
    output_format: Annotated[
        EvalFormat, typer.Option("--format", help="table, json or html.")
    ] = EvalFormat.TABLE,
    output: OutputOption = None,
    fail_under: FailUnderOption = None,
    gate_on: GateOnOption = gates.GateOn.POINT,
    readiness_gate: ReadinessGateOption = True,
    level: LevelOption = 0.95,
    conversation_id_key: ConversationIdKeyOption = None,
    concurrency: Annotated[
        int, typer.Option("--concurrency", min=1, help="Conversations graded in parallel.")
    ] = 8,
    sample_rate: Annotated[
        float,
        typer.Option(
            "--sample-rate",
            min=0.0,
            max=1.0,
            help="Evaluate only the conversations production's sampling keeps at this rate.",
        ),
    ] = 1.0,
    sample_seed: Annotated[
        str, typer.Option("--sample-seed", help="The collector's sampling.seed.")
    ] = "",
    progress: Annotated[
        bool | None,
        typer.Option(
            "--progress/--no-progress",
            help="Progress bar on stderr (default: when stderr is a terminal).",
            show_default=False,
        ),
    ] = None,
    allow_command_graders: Annotated[
        bool,
        typer.Option(
            "--allow-command-graders",
            help="Let references use `command` graders, which run programs as you "
            "(off by default: a reference file alone cannot run commands).",
        ),
    ] = False,
    pricing: Annotated[
        Path | None,
        typer.Option(
            "--pricing",
            help="A config file whose pricing.models prices the models (else the "
            "genai-prices library's prices only).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Score conversations against references, with optional CI gates.

    Tool correctness, trajectory, answers, pass@k / pass^k with credible intervals and a readiness verdict, from OTLP trace files or from a dataset that holds agent outputs.
    """
    # Imported here: scipy, rapidfuzz and the evaluator cost seconds; `--help` should not.
    from tracepass.collector.app.cli import sources
    from tracepass.collector.matching import ReferenceCatalog
    from tracepass.evaluator.offline import evaluation_run
    from tracepass.evaluator.scoring.evaluator import EvaluationConfig, Evaluator

    files = files or []
    # ---- validate options before any heavy work
    try:
        ks = evaluation_run.parse_ks(k)
    except ValueError as exc:
        fail(str(exc))
    try:
        gate_list = [gates.parse_gate(text, ks) for text in fail_under or []]
    except gates.GateError as exc:
        fail(str(exc))
    if output_format is EvalFormat.HTML:
        from tracepass.collector.app.report_extra import missing_report_extra

        if (missing := missing_report_extra("--format html")) is not None:
            fail(missing)
    if dataset and (files or references):
        fail("--dataset cannot be combined with trace FILEs or --references")
    if not dataset:
        if not files:
            fail("give OTLP trace FILEs with --references PATH, or --dataset FILE")
        if not references:
            fail("--references PATH is required with trace FILEs")
    conversation_judges: list[Any] = []
    file_settings = None
    rule = None
    conventions = None
    config_prices = None
    id_keys = list(conversation_id_key or ())
    if config_file is not None:
        from tracepass.collector.config import ConfigError, load_config

        try:
            loaded = load_config(config_file)
        except ConfigError as exc:
            fail(str(exc))
        settings = file_settings = loaded.evaluation
        rule = loaded.metrics.readiness_rule()  # the serve config's headline_k and target
        conversation_judges = list(settings.conversation_judges)
        # Read the files as `serve` and `inspect --config` would with this config.
        conventions = loaded.conventions
        config_prices = loaded.pricing.book()
        id_keys = [*loaded.assembly.conversation_id_keys, *id_keys]
        if judge is None:
            judge = settings.judge
        if conversation_judges and judge is None:
            fail(
                f"{config_file}: evaluation.conversation_judges needs a model: "
                "evaluation.judge in the file, or --judge module:attr"
            )
    try:
        scoring = scoring_fields(
            {
                "profile": profile,
                "threshold": threshold,
                "tool_threshold": tool_threshold,
                "default_grader": default_grader,
                "trajectory_match": trajectory_match,
                "utilization": utilization,
                "weights": weights,
                "single_tool_use": single_tool_use,
                "repeated_call_limit": repeated_call_limit,
            },
            file_settings,
        )
        config = EvaluationConfig.model_validate(scoring)
    except ValueError as exc:  # pydantic's ValidationError is one
        fail(str(exc))
    judge_obj = None
    if judge is not None:
        from tracepass.evaluator.judge.llm_judge import LLMJudge

        judge_obj = LLMJudge(load_chat_model(judge), pass_threshold=config.threshold)
    elif config.default_grader == DefaultGrader.LLM.value:
        fail("--default-grader llm needs --judge module:attr")

    # ---- inputs
    if dataset:
        sets, conversations, skipped = sources.datasets(dataset)
        for line in skipped:
            stderr_console().print(f"[yellow]skipped:[/] {escape(line)}", highlight=False)
        source = ", ".join(map(str, dataset))
    else:
        sets = sources.reference_sets(references or [], allow_command_graders=allow_command_graders)
        conversations = sources.conversations_from_otlp(
            files, id_keys, sources.price_book(pricing) or config_prices, conventions
        )
        source = ", ".join(map(str, files))
    if not conversations:
        # Nothing read is never a passing gate: a CI job whose spans stopped being read
        # (a renamed attribute, a new framework) must go red, not green.
        stderr_console().print(
            f"[bold red]error:[/] no conversations read from {escape(source)}"
            + ("" if dataset else " (`tracepass inspect FILE` says what the spans carry)"),
            highlight=False,
        )
        raise typer.Exit(EXIT_GATE)
    if sample_rate < 1.0:
        # The collector's decision (docs/configuration.md, "Sampling"), so CI reproduces
        # exactly what production evaluated.
        from tracepass.evaluator.stats.conversation_sampling import keep_conversation

        total = len(conversations)
        conversations = [
            c for c in conversations if keep_conversation(c.id, sample_rate, sample_seed)
        ]
        stderr_console().print(
            f"sampling: {len(conversations)} of {total} conversations kept "
            f"(rate {sample_rate:g}, seed {sample_seed!r})",
            highlight=False,
        )

    evaluator = Evaluator(config, judge=judge_obj, conversation_judges=conversation_judges)
    catalog = ReferenceCatalog(sets)

    show = progress if progress is not None else sys.stderr.isatty()
    unscored: list[Any] = []
    with _progress_bar(show, len(conversations)) as advance:
        results, unmatched = asyncio.run(
            evaluation_run.evaluate_all(
                conversations,
                catalog,
                evaluator,
                concurrency=concurrency,
                on_done=advance,
                unscored=unscored,
            )
        )

    # The result models themselves: `--format json` writes them through
    # `report_default`; the other formats read the entries as dicts.
    document = evaluation_run.build_document(
        results,
        ks,
        unmatched_ids=unmatched,
        level=level,
        metadata={
            "source": source,
            "profile": config.profile,
            "trajectory_match": config.trajectory_match,
            "utilization": config.utilization,
            "gate_on": gate_on.value,
            "sample_rate": sample_rate,
            "sample_seed": sample_seed,
        },
        unscored=unscored,
        as_models=True,
        rule=rule,
    )
    from tracepass.evaluator.offline.cost_report import cost_latency_by_version

    document["cost_latency"] = cost_latency_by_version(conversations)
    outcomes = gates.gate_run(
        document["summary"], gate_list, gate_on, readiness_default=readiness_gate
    )
    if outcomes:
        document["gates"] = [o.as_json() for o in outcomes]

    if output_format is EvalFormat.JSON:
        # bytes: a 2,700-turn report is ~7 MB, not worth decoding to re-encode it
        write_text(dump_json_bytes(document, default=evaluation_run.report_default), output)
        _finish_gates(outcomes)
        return
    if output_format is EvalFormat.TABLE and output is None:
        # The table lists only the failed conversations: dump only those.
        shown = [r for r in results if not r.correct]
    else:
        shown = list(results)
    document["conversations"] = [evaluation_run.conversation_json(r) for r in shown]
    if output_format is EvalFormat.HTML:
        from tracepass.collector.app.report import render_report

        html = render_report(document)
        if output is None:
            sys.stdout.write(html)
        else:
            write_text(html, output)
    else:
        emit_json_or_table(
            document, as_json=False, output=output, print_table=lambda: print_summary(document)
        )
    _finish_gates(outcomes)


@contextmanager
def _progress_bar(show: bool, total: int) -> Iterator[Callable[[], None]]:
    """What to call per evaluated conversation: a transient progress bar on stderr when
    `show`, else nothing (rich's progress module is then not even imported: it costs
    every non-interactive run, CI's above all, its start-up)."""
    if not show:
        yield _no_progress
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    with Progress(
        TextColumn("evaluating"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=stderr_console(),
        transient=True,
    ) as bar:
        task = bar.add_task("evaluate", total=total)
        yield lambda: bar.advance(task)


def _no_progress() -> None:
    return None


def _finish_gates(outcomes: list[gates.GateOutcome]) -> None:
    report_gates(outcomes)
    if any(not o.passed for o in outcomes):
        raise typer.Exit(EXIT_GATE)


def print_summary(document: dict[str, Any]) -> None:
    from rich.table import Table

    console = stdout_console()
    s = document["summary"]
    console.print(
        f"conversations {s['conversations']} · matched {s['matched']} · policy "
        f"{s.get('policy_scored', 0)} · unmatched "
        f"{s['unmatched']} · correct {s['correct']} · errors {s['errors']} · "
        f"incomplete {s['incomplete']} · tasks {s['tasks']}",
        highlight=False,
    )
    table = Table(title=f"pass@k / pass^k ({s['level']:.0%} credible interval, pooled)")
    for col in ("metric", "k", "unbiased", "plug-in", "mean", "lower", "upper"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    for metric, symbol in K_METRIC_SYMBOLS.items():
        for key, block in s[metric].items():
            table.add_row(
                f"{symbol}k",
                key,
                fmt_num(block["unbiased"]),
                fmt_num(block["plugin"]),
                fmt_num(block["mean"]),
                fmt_num(block["lower"]),
                fmt_num(block["upper"]),
            )
    console.print(table)
    tc = s["tool_correctness"]
    console.print(
        "tool correctness: "
        + " · ".join(f"{dim} {fmt_num(tc[dim])}" for dim in _TOOL_DIMENSIONS)
        + f" · tool-correct turns {tc['correct']}/{tc['n']}",
        highlight=False,
    )
    if s.get("violations"):
        console.print(
            "violations: " + " · ".join(f"{rule} {n}" for rule, n in s["violations"].items()),
            highlight=False,
        )
    from tracepass.evaluator.offline.evaluation_run import readiness_line

    console.print(readiness_line(s["readiness"]), highlight=False, soft_wrap=True)
    failed = [c for c in document["conversations"] if not c["correct"]]
    if failed:
        table = Table(title=f"Failed conversations ({len(failed)})")
        for col in ("conversation", "reference", "outcome", "turns correct"):
            table.add_column(col)
        for conv in failed[:50]:
            turns = conv["turns"]
            table.add_row(
                plain(conv["conversation_id"]),
                plain(conv["reference_id"]),
                str(conv.get("outcome")),
                f"{sum(1 for t in turns if t.get('correct'))}/{len(turns)}",
            )
        console.print(table)
