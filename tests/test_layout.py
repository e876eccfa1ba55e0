"""Layout: the three distributions share the `tracepass` namespace package; module names
are unique across them; the evaluator keeps its modules in rooms (CONTRIBUTING.md)."""

import ast
import importlib
from collections import defaultdict
from pathlib import Path


def test_namespace_packages_import() -> None:
    for sub in ("instrumentation", "evaluator", "collector"):
        importlib.import_module(f"tracepass.{sub}")


# ------------------------------------------------------------------ module names and rooms

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [ROOT / d / "src" / "tracepass" for d in ("instrumentation", "evaluator", "collector")]
EVALUATOR = ROOT / "evaluator" / "src" / "tracepass" / "evaluator"

# Same-named modules inside the collector that predate this check, each named after the
# command, page or stage it serves (a CLI command module, its UI page and its API route
# share the command's name). No new twin may join them.
KNOWN_COLLECTOR_TWINS = frozenset(
    {"results", "review", "runner", "timeline", "triage", "vercel_ai"}
)


def _modules() -> dict[str, list[Path]]:
    by_name: dict[str, list[Path]] = defaultdict(list)
    for src in SOURCES:
        for path in src.rglob("*.py"):
            if path.name != "__init__.py" and "bundled" not in path.parts:
                by_name[path.stem].append(path)
    return by_name


def test_no_two_modules_share_a_name() -> None:
    """A module's name says what it holds: no `policies.py` in two packages (issue 22)."""
    twins = {
        name: sorted(str(p.relative_to(ROOT)) for p in paths)
        for name, paths in _modules().items()
        if len(paths) > 1
        and not (
            name in KNOWN_COLLECTOR_TWINS
            and all("collector" in p.relative_to(ROOT).parts[:1] for p in paths)
        )
    }
    assert not twins, twins


def test_evaluator_rooms_init_only_re_exports() -> None:
    """The rooms' `__init__.py` hold a docstring, imports and `__all__`: no logic."""
    for path in sorted(EVALUATOR.rglob("__init__.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for i, node in enumerate(tree.body):
            docstring = (
                i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            )
            imports = isinstance(node, ast.Import | ast.ImportFrom)
            all_ = isinstance(node, ast.Assign | ast.AnnAssign) and "__all__" in ast.unparse(
                node.targets[0] if isinstance(node, ast.Assign) else node.target
            )
            assert docstring or imports or all_, f"{path.relative_to(ROOT)}:{node.lineno}"


def test_evaluator_top_level_is_foundation_only() -> None:
    """The evaluator's flat top level holds only the foundation every room imports; the
    rest lives in rooms (CONTRIBUTING.md, layout)."""
    flat = sorted(p.stem for p in EVALUATOR.glob("*.py") if p.name != "__init__.py")
    assert flat == [
        "bounded_cache",
        "construct",
        "cost_latency",
        "models",
        "pricing",
        "ratelimited_log",
        "schema_guard",
        "strict_yaml",
        "vocabulary",
    ]
    rooms = sorted(p.name for p in EVALUATOR.iterdir() if (p / "__init__.py").exists())
    assert rooms == ["graders", "judge", "offline", "references", "scoring", "stats"]


def test_tests_that_start_processes_are_out_of_the_fast_lane() -> None:
    """`make test-fast` runs `-m "not slow and not system"`: every test that starts a
    process or a server (tests/_process_marks.py says how that is recognised) must carry
    `slow` or `system`, so the fast lane stays the in-process unit layer."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from _process_marks import needs

    unmarked: list[str] = []
    for path in sorted(Path(__file__).parent.rglob("test_*.py")):
        whole_module, functions = needs(path.read_text())
        if whole_module:
            unmarked.append(f"{path}: a module-level helper starts processes; mark the module")
        unmarked += [f"{path}:{fn.lineno}: {fn.name}" for fn in functions]
    assert not unmarked, "not marked slow/system:\n" + "\n".join(unmarked)
