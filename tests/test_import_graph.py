"""The collector's data flows one way: a module imports only from its own stage or an
earlier one (CONTRIBUTING.md), and the evaluator never imports the collector. Checked
on the source text (ast), so a late import inside a function counts too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COLLECTOR = ROOT / "collector" / "src" / "tracepass" / "collector"
EVALUATOR = ROOT / "evaluator" / "src" / "tracepass" / "evaluator"

# Stages in data-flow order. `config` and `instruments` are the foundation every stage may
# use (settings in, operational counters out); `__init__` is the package itself.
FOUNDATION = ("__init__", "config", "instruments")
STAGES = (
    "receiver",
    "normalize",
    "assembly",
    "state",
    "matching",
    "pipeline",
    "export",
    "api",
    "service",
    "app",
)


def rank(part: str) -> int:
    if part in FOUNDATION:
        return -1
    return STAGES.index(part)


def stage_of(path: Path) -> str:
    rel = path.relative_to(COLLECTOR)
    return rel.parts[0].removesuffix(".py")


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = _package_of(path).split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, module] if module else base)
            if module in ("tracepass.collector", "tracepass.evaluator"):
                # `from tracepass.collector import x`: the imported names are modules.
                out.extend((node.lineno, f"{module}.{a.name}") for a in node.names)
            else:
                out.append((node.lineno, module))
    return out


def _package_of(path: Path) -> str:
    src = path
    while src.name != "src":
        src = src.parent
    parts = path.relative_to(src).with_suffix("").parts
    return ".".join(parts[:-1])


def collector_modules() -> list[Path]:
    return sorted(COLLECTOR.rglob("*.py"))


def test_every_top_level_collector_module_is_a_known_stage() -> None:
    for path in collector_modules():
        assert stage_of(path) in FOUNDATION + STAGES, f"{path}: not in the stage list"


@pytest.mark.parametrize("path", collector_modules(), ids=lambda p: str(p.relative_to(COLLECTOR)))
def test_collector_imports_only_earlier_stages(path: Path) -> None:
    own = rank(stage_of(path))
    upward = []
    for line, module in imported_modules(path):
        parts = module.split(".")
        if parts[:2] != ["tracepass", "collector"] or len(parts) < 3:
            continue
        target = parts[2]
        if rank(target) > own:
            upward.append(f"{path.relative_to(ROOT)}:{line}: imports {module}")
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_evaluator_never_imports_the_collector() -> None:
    bad = [
        f"{path.relative_to(ROOT)}:{line}: imports {module}"
        for path in sorted(EVALUATOR.rglob("*.py"))
        for line, module in imported_modules(path)
        if module.split(".")[:2] == ["tracepass", "collector"]
    ]
    assert not bad, "\n".join(bad)


def test_the_checker_sees_upward_imports(tmp_path: Path) -> None:
    """The check itself works: absolute, relative and `from package import module`
    imports of a later stage are all seen from a receiver module."""
    module = tmp_path / "src" / "tracepass" / "collector" / "receiver" / "fake.py"
    module.parent.mkdir(parents=True)
    module.write_text(
        "from tracepass.collector.api import views\n"
        "from ..pipeline import Pipeline\n"
        "from tracepass.collector import service\n"
        "def late():\n"
        "    import tracepass.collector.app.cli.main\n",
        encoding="utf-8",
    )
    found = [m for _, m in imported_modules(module)]
    assert found == [
        "tracepass.collector.api",
        "tracepass.collector.pipeline",
        "tracepass.collector.service",
        "tracepass.collector.app.cli.main",
    ]
    own = rank("receiver")
    assert all(rank(m.split(".")[2]) > own for m in found)
