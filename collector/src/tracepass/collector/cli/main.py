"""Entry point of the `tracepass` command (subcommands are registered in this package)."""

from __future__ import annotations

import typer

app = typer.Typer(
    no_args_is_help=True, help="tracepass: evaluate tool-using agents from their traces."
)


def main() -> None:
    app()


# Offline workflows (each module registers its commands).
from tracepass.collector.cli import compare as _compare  # noqa: E402

_compare.register(app)
from tracepass.collector.cli import evaluate as _evaluate  # noqa: E402

_evaluate.register(app)
from tracepass.collector.cli import conversations as _conversations  # noqa: E402

_conversations.register(app)
from tracepass.collector.cli import references as _references  # noqa: E402

_references.register(app)
from tracepass.collector.cli import review as _review  # noqa: E402

_review.register(app)
