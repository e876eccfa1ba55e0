"""Which tests start a process or a server (the `slow` lane, `make test-fast` skips them).

A test starts one when its code (or a module-level helper it may call) runs a subprocess,
the `tracepass` executable, a system tool or a PostgreSQL cluster. tests/test_layout.py
checks that every such test carries `pytest.mark.slow` or `pytest.mark.system`, so
`-m "not slow and not system"` stays the in-process unit layer."""

from __future__ import annotations

import ast
import re

PROC = re.compile(
    r"_serve import|from _serve|_live_support|subprocess\.(run|Popen|check_output|check_call)"
    r"|create_subprocess_exec|sys\.executable|require_tool\(|postgres_url|postgres_cluster"
)
_TEST_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _marked(decorators: list[ast.expr]) -> bool:
    return any(re.search(r"mark\.(slow|system)\b", ast.unparse(d)) for d in decorators)


def module_marked(tree: ast.Module) -> bool:
    """True when the module's `pytestmark` names slow or system."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            return bool(re.search(r"mark\.(slow|system)\b", ast.unparse(node.value)))
    return False


def needs(source: str) -> tuple[bool, list[ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(the whole module must be marked, the unmarked test functions that must be).

    The whole module when a non-test top-level statement (a helper, a fixture, an
    import) starts processes; else each test function whose own code does."""
    tree = ast.parse(source)
    if module_marked(tree):
        return False, []
    helpers = [
        n
        for n in tree.body
        if not (isinstance(n, _TEST_FUNCS) and n.name.startswith("test_"))
        and not isinstance(n, ast.ClassDef)
    ]
    if any(PROC.search(ast.get_source_segment(source, n) or "") for n in helpers):
        return True, []
    funcs = [
        n
        for n in ast.walk(tree)
        if isinstance(n, _TEST_FUNCS)
        and n.name.startswith("test_")
        and not _marked(n.decorator_list)
        and PROC.search(ast.get_source_segment(source, n) or "")
    ]
    return False, funcs
