"""Entry point of the `tracepass` command (subcommands are registered in this package)."""

from __future__ import annotations

import typer

app = typer.Typer(
    no_args_is_help=True, help="tracepass: evaluate tool-using agents from their traces."
)


def main() -> None:
    app()
