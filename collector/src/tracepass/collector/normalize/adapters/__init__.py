"""Framework adapters: what a framework wraps or adds on top of the convention its
instrumentation follows. One module per framework, each defining `ADAPTER` (see
`registry.Adapter`); every module of this package is picked up, so supporting another
framework means adding a module here (and its tests), nothing else."""

from __future__ import annotations

import importlib
import pkgutil

from tracepass.collector.normalize.registry import Adapter


def _discover() -> tuple[Adapter, ...]:
    found: list[Adapter] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        adapter = getattr(module, "ADAPTER", None)
        if not isinstance(adapter, Adapter):
            raise TypeError(f"{module.__name__} defines no ADAPTER (a registry.Adapter)")
        found.append(adapter)
    return tuple(found)


ADAPTERS: tuple[Adapter, ...] = _discover()

__all__ = ["ADAPTERS"]
