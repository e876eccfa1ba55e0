"""The three distributions share the `tracepass` namespace package."""

import importlib


def test_namespace_packages_import() -> None:
    for sub in ("instrumentation", "evaluator", "collector"):
        importlib.import_module(f"tracepass.{sub}")
