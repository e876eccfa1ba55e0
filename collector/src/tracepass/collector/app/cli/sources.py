"""Loading the CLI's inputs with precise errors: OTLP trace files → conversations,
reference sets, datasets that carry agent outputs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tracepass.collector.app.cli.common import fail
from tracepass.evaluator.models import Conversation, ReferenceSet
from tracepass.evaluator.references import ReferenceLoadError, load_dataset, load_reference_sets

if TYPE_CHECKING:
    from tracepass.collector.config import ConventionsConfig
    from tracepass.collector.receiver import OtlpFileRequest
    from tracepass.evaluator.pricing import PriceBook


def _check_file(path: Path, what: str) -> None:
    if not path.exists():
        fail(f"{path}: no such file ({what})")
    if path.is_dir():
        fail(f"{path}: is a directory, expected a file ({what})")


def requests_from_otlp(files: Sequence[Path]) -> list[OtlpFileRequest]:
    """Every export request (traces, and logs in JSON files) of the OTLP files, in order;
    an unreadable file fails with its name and line (exit 2)."""
    from tracepass.collector.receiver import EXPECTED_FORMATS, read_otlp_file

    requests: list[OtlpFileRequest] = []
    for path in files:
        _check_file(path, "OTLP trace file")
        try:
            found = list(read_otlp_file(path))
        except (ValueError, OSError) as exc:
            message = str(exc)
            fail(message if str(path) in message else f"{path}: {message}")
        if not any(map(_holds_items, found)):
            fail(f"{path}: no spans (nor GenAI log events) in this file; {EXPECTED_FORMATS}")
        requests.extend(found)
    return requests


def _holds_items(request: OtlpFileRequest) -> bool:
    """A span (traces request) or a log record (logs request: GenAI events) in it."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    if isinstance(request, ExportTraceServiceRequest):
        return any(ss.spans for rs in request.resource_spans for ss in rs.scope_spans)
    return any(sl.log_records for rl in request.resource_logs for sl in rl.scope_logs)


def conversations_from_otlp(
    files: Sequence[Path],
    conversation_id_keys: Sequence[str] = (),
    prices: PriceBook | None = None,
    conventions: ConventionsConfig | None = None,
) -> list[Conversation]:
    """Read OTLP files (JSON lines, single JSON documents, length-prefixed protobuf) and
    rebuild conversations across all of them (a conversation may span files); logs
    requests in them (GenAI events as log records) are joined to their spans.
    `conventions` (a config's section) adds its `custom` mappings, as `serve` and
    `inspect --config` read them."""
    from tracepass.collector.pipeline import assemble_offline, default_normalizer

    normalizer = default_normalizer(conversation_id_keys, custom=conventions)
    return assemble_offline(
        requests_from_otlp(files),
        conversation_id_keys=conversation_id_keys,
        normalizer=normalizer,
        prices=prices,
    )


def price_book(path: Path | None) -> PriceBook | None:
    """`--pricing FILE`: a `tracepass serve` config file whose `pricing` section prices
    the models (`pricing.models: {name: {input_per_mtok, output_per_mtok, ...}}`; the
    other sections are checked, not used); exit 2 with file:line when unusable."""
    if path is None:
        return None
    _check_file(path, "config file with a pricing section")
    from tracepass.collector.config import ConfigError, load_config

    try:
        config = load_config(path)
    except ConfigError as exc:
        fail(str(exc))
    return config.pricing.book()


def reference_sets(
    paths: Sequence[Path], *, allow_command_graders: bool = False
) -> list[ReferenceSet]:
    """Load `paths` or exit 2; `command` graders only with `allow_command_graders`
    (they run programs as this user: the commands that grade ask for a flag)."""
    for path in paths:
        if not path.exists():
            fail(f"{path}: no such file or directory (--references)")
    try:
        sets = load_reference_sets(paths, allow_command_graders=allow_command_graders)
    except ReferenceLoadError as exc:
        fail(str(exc))
    if not any(rs.references or rs.policies for rs in sets):
        fail(f"no references or policies found in {', '.join(map(str, paths))}")
    return sets


def datasets(paths: Sequence[Path]) -> tuple[list[ReferenceSet], list[Conversation], list[str]]:
    """Fair Forge datasets / ADK eval sets with agent outputs: (sets, conversations,
    skipped parts)."""
    sets: list[ReferenceSet] = []
    conversations: list[Conversation] = []
    skipped: list[str] = []
    for path in paths:
        _check_file(path, "--dataset")
        try:
            imported = load_dataset(path)
        except ReferenceLoadError as exc:
            fail(str(exc))
        if not imported.conversations:
            fail(
                f"{path}: holds no agent outputs to evaluate (a reference set? "
                "use FILE… --references PATH instead)"
            )
        sets.append(imported.reference_set)
        conversations.extend(imported.conversations)
        skipped.extend(f"{path}: {s}" for s in imported.skipped)
    return sets, conversations, skipped
