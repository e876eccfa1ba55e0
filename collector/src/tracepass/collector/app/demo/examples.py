"""Finding and loading `examples/` (the example agent and its reference sets).

The examples are plain files in the repository's `examples/`, easy to read and copy; the
demo looks for them above the current directory and above this package (an editable
install from a checkout), and last in the copy a wheel carries (`bundled/`, linked to
`examples/` in the checkout), so `tracepass demo` works from an installed wheel too."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

AGENT_FILE = "travel_agent.py"
JUDGE_FILE = "scripted_judge.py"  # a deterministic chat model, the demo's conversation judge
JUDGE_MODULE = "tracepass_demo_scripted_judge"
REFERENCES_DIR = "references"
BUNDLED = Path(__file__).resolve().parent / "bundled"


class ExamplesNotFound(LookupError):
    pass


def _candidates(start: Path) -> list[Path]:
    return [p / "examples" for p in (start, *start.parents)]


def find_examples(explicit: Path | None = None) -> Path:
    """The examples folder: `explicit`, else the nearest `examples/` holding the agent
    and references above the current directory or this package."""
    if explicit is not None:
        if not (explicit / AGENT_FILE).is_file() or not (explicit / REFERENCES_DIR).is_dir():
            raise ExamplesNotFound(
                f"{explicit}: expected {AGENT_FILE} and {REFERENCES_DIR}/ in this folder"
            )
        return explicit
    for base in (Path.cwd(), Path(__file__).resolve().parent):
        for cand in [*_candidates(base), BUNDLED] if base != Path.cwd() else _candidates(base):
            if (cand / AGENT_FILE).is_file() and (cand / REFERENCES_DIR).is_dir():
                return cand
    raise ExamplesNotFound(
        "cannot find the examples/ folder (travel_agent.py and references/); run from a "
        "tracepass checkout or pass --examples PATH"
    )


def load_module(path: Path, name: str) -> ModuleType:
    """Import a Python file by path (the examples folder is not a package)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve annotations through sys.modules
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def load_agent(examples: Path) -> ModuleType:
    return load_module(examples / AGENT_FILE, "tracepass_example_travel_agent")


def load_scripted_judge(examples: Path) -> str | None:
    """Import the examples' scripted judge model and return its `module:attr` spec for
    `evaluation.judge`, or None when this examples folder has none (an older copy) or
    langchain-core (the `tracepass-evaluator[judge]` extra) is not installed."""
    path = examples / JUDGE_FILE
    if not path.is_file() or importlib.util.find_spec("langchain_core") is None:
        return None
    load_module(path, JUDGE_MODULE)
    return f"{JUDGE_MODULE}:model"
