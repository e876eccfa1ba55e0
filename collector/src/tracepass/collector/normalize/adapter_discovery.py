"""`ADAPTERS`: every framework adapter of the `adapters` package, found by listing its
modules (each defines `ADAPTER`, a `registry.Adapter`; modules starting with `_` are
shared helpers, not adapters). Supporting another framework means adding a module
there (and its tests), nothing else."""

from __future__ import annotations

import importlib
import pkgutil

from tracepass.collector.normalize import adapters
from tracepass.collector.normalize.registry import Adapter

__all__ = ["ADAPTERS", "discover_adapters"]


def discover_adapters() -> tuple[Adapter, ...]:
    """The `ADAPTER` of every module of the `adapters` package, by module name."""
    found: list[Adapter] = []
    for info in sorted(pkgutil.iter_modules(adapters.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{adapters.__name__}.{info.name}")
        adapter = getattr(module, "ADAPTER", None)
        if not isinstance(adapter, Adapter):
            raise TypeError(f"{module.__name__} defines no ADAPTER (a registry.Adapter)")
        found.append(adapter)
    return tuple(found)


ADAPTERS: tuple[Adapter, ...] = discover_adapters()
