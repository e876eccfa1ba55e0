"""The collector's data flows one way: a module imports only from its own stage or an
earlier one (CONTRIBUTING.md), through the other package's face (its `__init__.py`,
which only re-exports), without import cycles, and the evaluator never imports the
collector. Checked on the source text (ast), so a late import inside a function counts
too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COLLECTOR = ROOT / "collector" / "src" / "tracepass" / "collector"
EVALUATOR = ROOT / "evaluator" / "src" / "tracepass" / "evaluator"

# Stages in data-flow order. `config`, `instruments` and `records` are the foundation every
# stage may use (settings in, operational counters out, `SpanRecord` the shape between
# the stages); `__init__` is the package itself.
FOUNDATION = ("__init__", "config", "instruments", "records")
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


# ---------------------------------------------------------------------------- faces

# A package's face is its `__init__.py`: what it re-exports (`__all__`) is what the rest
# of the collector may use. The faced packages are the stage packages and the foundation
# package `records` (CONTRIBUTING.md, "Package faces"); `app` exports nothing and is
# imported by nobody, so it has no face. A module outside package P imports P's names
# from `tracepass.collector.P` itself: not from `tracepass.collector.P.module` (or a
# sub-package), and not a module through the face (`from tracepass.collector.P import
# module`) unless `__all__` lists it. Inside P, modules import each other directly.
FACED = ("records", "receiver", "normalize", "assembly", "state", "matching", "pipeline")
FACED += ("export", "api")
# Modules kept out of their package's face on purpose, each imported only where it is
# needed: re-exporting them would load psycopg with every import of the package,
# although only `state.results_url: postgresql://…` uses it.
BEHIND_THE_FACE = {
    "tracepass.collector.state.postgres": "psycopg loads only for a PostgreSQL results store",
    "tracepass.collector.pipeline.forwarding": "imports state.postgres (outbox → PostgreSQL)",
}


def face_exports(package_dir: Path) -> set[str]:
    """The names a package's `__init__.py` lists in `__all__`."""
    tree = ast.parse((package_dir / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else None
        if isinstance(node, ast.AnnAssign):
            target = node.target
        if isinstance(target, ast.Name) and target.id == "__all__":
            value = node.value  # type: ignore[union-attr]
            assert isinstance(value, ast.List | ast.Tuple)
            return {e.value for e in value.elts if isinstance(e, ast.Constant)}
    return set()


def face_bypasses(path: Path, root: Path = COLLECTOR) -> list[tuple[int, str]]:
    """(line, what) of every import in `path` that goes around a faced package's face
    (`root` is the collector package directory the path lies in)."""
    own = path.relative_to(root).parts[0].removesuffix(".py")
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        modules: list[tuple[str, list[str]]] = []
        if isinstance(node, ast.Import):
            modules = [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative: resolved against the importing module's package
                base = _package_of(path).split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, module] if module else base)
            modules = [(module, [alias.name for alias in node.names])]
        for module, names in modules:
            parts = module.split(".")
            if parts[:2] != ["tracepass", "collector"] or len(parts) < 3:
                continue
            package = parts[2]
            if package == own or package not in FACED or module in BEHIND_THE_FACE:
                continue
            if len(parts) > 3:
                found.append(
                    (node.lineno, f"imports {module} (import it from {'.'.join(parts[:3])})")
                )
                continue
            exported = face_exports(root / package)
            for name in names:
                is_module = (root / package / f"{name}.py").exists() or (
                    root / package / name
                ).is_dir()
                if is_module and name not in exported:
                    found.append(
                        (node.lineno, f"imports the module {module}.{name} through the face")
                    )
    return found


@pytest.mark.parametrize("path", collector_modules(), ids=lambda p: str(p.relative_to(COLLECTOR)))
def test_collector_imports_other_packages_through_their_faces(path: Path) -> None:
    bad = [f"{path.relative_to(ROOT)}:{line}: {what}" for line, what in face_bypasses(path)]
    assert not bad, "imports around a package's face (__init__.py):\n" + "\n".join(bad)


def test_every_faced_package_exists_and_exports_something() -> None:
    for package in FACED:
        assert face_exports(COLLECTOR / package), f"{package}/__init__.py: no __all__"


def test_package_inits_only_re_export() -> None:
    """A package's `__init__.py` holds a docstring, imports and `__all__`: its code lives
    in named modules (a reader looking for where a name is defined never lands there)."""
    code = []
    for init in sorted(COLLECTOR.rglob("__init__.py")):
        tree = ast.parse(init.read_text(encoding="utf-8"))
        for i, node in enumerate(tree.body):
            if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # the docstring
            if isinstance(node, ast.Import | ast.ImportFrom):
                continue
            target = node.targets[0] if isinstance(node, ast.Assign) else None
            if isinstance(node, ast.AnnAssign):
                target = node.target
            if isinstance(target, ast.Name) and target.id == "__all__":
                continue
            code.append(f"{init.relative_to(ROOT)}:{node.lineno}: {type(node).__name__}")
    assert not code, "code in package faces:\n" + "\n".join(code)


def test_the_checker_sees_face_bypasses(tmp_path: Path) -> None:
    root = tmp_path / "src" / "tracepass" / "collector"
    (root / "state").mkdir(parents=True)
    (root / "state" / "__init__.py").write_text(
        'from tracepass.collector.state.store import Store\n__all__ = ["Store"]\n'
    )
    (root / "state" / "store.py").write_text("class Store: ...\n")
    (root / "state" / "codec.py").write_text("def f(): ...\n")
    module = root / "api" / "fake.py"
    module.parent.mkdir()
    module.write_text(
        "from tracepass.collector.state import Store\n"  # fine: through the face
        "from tracepass.collector.state.store import Store as S\n"  # around it
        "from tracepass.collector.state import codec\n"  # a module through the face
        "from ..state.codec import f\n"  # relative, around it
        "def late():\n"
        "    import tracepass.collector.state.store\n"  # late, around it
        "    from tracepass.collector.state.postgres import P\n",  # behind the face on purpose
        encoding="utf-8",
    )
    assert [line for line, _ in face_bypasses(module, root)] == [2, 3, 4, 6]


# ---------------------------------------------------------------------------- cycles


def _module_names() -> dict[str, Path]:
    """Every module of the collector and the evaluator by dotted name (a package by its
    own name, for its `__init__.py`)."""
    out: dict[str, Path] = {}
    for base, root in (("tracepass.collector", COLLECTOR), ("tracepass.evaluator", EVALUATOR)):
        for path in root.rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([base, *parts])] = path
    return out


def import_edges(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module → the modules it imports at run time (at the top or inside a function;
    not under `if TYPE_CHECKING:`): `from pkg
    import name` goes to `pkg.name` when that is a module, else to `pkg`."""
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        # Imports under `if TYPE_CHECKING:` never run: annotations only, no cycle.
        typing_only = {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.If)
            and isinstance(node.test, ast.Name)
            and node.test.id == "TYPE_CHECKING"
            for stmt in node.body
            for inner in ast.walk(stmt)
        }
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - (node.level - 1)]
                    base = ".".join([*parts, base] if base else parts)
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.append(full if full in modules else base)
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges[name].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in edges:
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(edges[nxt])))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycles() -> None:
    """No module reaches itself through imports, counting imports inside functions (a
    late import only hides a cycle from the interpreter, not from the reader)."""
    found = cycles(import_edges(_module_names()))
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_checker_sees_cycles_through_late_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "src" / "tracepass" / "collector" / "normalize"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from tracepass.collector.normalize.logs import f\n")
    (pkg / "logs.py").write_text(
        "def f():\n    from tracepass.collector.normalize import g\n", encoding="utf-8"
    )
    (pkg / "other.py").write_text("import tracepass.collector.normalize.logs\n")
    modules = {
        "tracepass.collector.normalize": pkg / "__init__.py",
        "tracepass.collector.normalize.logs": pkg / "logs.py",
        "tracepass.collector.normalize.other": pkg / "other.py",
    }
    assert cycles(import_edges(modules)) == [
        ["tracepass.collector.normalize", "tracepass.collector.normalize.logs"]
    ]


# ---------------------------------------------------------------------------- class size

MAX_CLASS_LINES = 400
# Known hubs still to split (issue 22; 742 and 421 lines when this was written), each
# at most this long: lower the caps as they are split, never raise them much.
OVERSIZED: dict[str, int] = {}


def test_no_collector_class_over_400_lines() -> None:
    too_long = []
    for path in collector_modules():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > OVERSIZED.get(node.name, MAX_CLASS_LINES):
                    too_long.append(f"{path.relative_to(ROOT)}: {node.name} {lines} lines")
    assert not too_long, "\n".join(too_long)


def test_service_builds_and_starts_but_keeps_no_window_state() -> None:
    """`service.py` only builds and starts components: the rolling windows' restore,
    replay and persistence are `export/windows/window_persistence.py`'s, and no start-order events."""
    text = (COLLECTOR / "service.py").read_text(encoding="utf-8")
    for word in ("put_blob", "get_blob", "window_journal", "_lock", "asyncio.Event", "capture("):
        assert word not in text, word
