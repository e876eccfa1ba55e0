"""Entry point of the `tracepass` command (subcommands are registered in this package)."""

from __future__ import annotations

import typer

app = typer.Typer(
    no_args_is_help=True, help="tracepass: evaluate tool-using agents from their traces."
)


def main() -> None:
    app()


# Offline workflows: each module registers its commands.
from tracepass.collector.app.cli import (  # noqa: E402
    compare,
    conversations,
    evaluate,
    references,
    review,
)

for _module in (conversations, evaluate, references, review, compare):
    _module.register(app)

# Live workflows: the collector, the demo, probing an agent.
from tracepass.collector.app.cli import demo as _demo  # noqa: E402
from tracepass.collector.app.cli import probe as _probe  # noqa: E402
from tracepass.collector.app.cli import serve as _serve  # noqa: E402

_serve.register(app)
_demo.register(app)
_probe.register(app)
