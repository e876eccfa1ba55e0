"""The command line every framework generator shares: `generate.py --list | SCENARIO...`.

Why each scenario runs in a process of its own: instrumentations patch the framework
globally (callback managers, trace processors, class methods) and most cannot be fully
taken off again, so two instrumentations in one process would both record each other's
runs. With several scenario names the script re-runs itself once per name.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence

Generator = Callable[[str], object]


def main(scenarios: Mapping[str, Generator], argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--list"]:
        print("\n".join(scenarios))
        return 0
    unknown = [name for name in args if name not in scenarios]
    if not args or unknown or "--list" in args:
        if unknown:
            print(f"unknown scenario(s): {', '.join(unknown)}", file=sys.stderr)
        print(f"usage: {sys.argv[0]} --list | SCENARIO [SCENARIO...]", file=sys.stderr)
        print(f"scenarios: {', '.join(scenarios)}", file=sys.stderr)
        return 2
    if len(args) == 1:
        written = scenarios[args[0]](args[0])
        print(f"{args[0]}: wrote {written}")
        return 0
    failed = [name for name in args if subprocess.call([sys.executable, sys.argv[0], name]) != 0]
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0
