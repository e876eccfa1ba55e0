"""Framework adapters: what a framework wraps or adds on top of the convention its
instrumentation follows. One module per framework, each defining `ADAPTER` (see
`registry.Adapter`); `normalize/adapter_discovery.py` picks up every module of this
package (`ADAPTERS`), so supporting another framework means adding a module here (and
its tests), nothing else."""

__all__: list[str] = []
