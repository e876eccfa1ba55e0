"""How many connections each OTLP port may hold, from the process's file limit.

Every connection is a file descriptor. With `receiver.max_connections` at 1024 and the
usual soft limit of 1024, the process ran out of descriptors before either receiver
reached its own limit: `accept()` failed with EMFILE (gRPC logged it for every retry:
145 MB of log in 47 s), `/healthz` stopped answering, and the state file, the logs and
the API could not open anything. So at start-up the soft `RLIMIT_NOFILE` is raised to
the hard one (what Go and the OpenTelemetry Collector do; no privilege needed), and the
default cap per port is what fits under it after a reserve for everything else:

    max_connections = min(1024, (soft limit − RESERVED_FDS) // 2)

(2: the HTTP and the gRPC port each get that many). A configured value that does not
fit is kept (the operator asked for it) but logged at start-up.
"""

from __future__ import annotations

import logging
import resource

__all__ = ["DEFAULT_MAX_CONNECTIONS", "RESERVED_FDS", "connection_cap", "raise_nofile_limit"]

log = logging.getLogger("tracepass.collector.receiver")

# Descriptors kept for everything but the OTLP connections: 128 for the state file
# (+ WAL, SHM, journal), log files, the /metrics and API listeners and their clients,
# reference file watching, recordings, the event loop's own pipes, grpc's internal
# ones, the judge's HTTP client; and 128 for one burst of accepts (asyncio accepts up
# to its listen backlog at a time, and a connection over the cap holds its descriptor
# until its 503 is written and it is closed).
RESERVED_FDS = 256
DEFAULT_MAX_CONNECTIONS = 1024
_PORTS = 2


def raise_nofile_limit() -> int:
    """Raise the soft file limit to the hard one (where allowed); the soft limit now."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):  # pragma: no cover - no such limit on this platform
        return DEFAULT_MAX_CONNECTIONS * _PORTS + RESERVED_FDS
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (OSError, ValueError):
            pass
    return int(soft) if soft != resource.RLIM_INFINITY else 1 << 20


def connection_cap(configured: int | None, nofile: int) -> int:
    """Connections one port may hold: `configured`, or the default fitted to `nofile`."""
    fits = max(1, (nofile - RESERVED_FDS) // _PORTS)
    if configured is None:
        return min(DEFAULT_MAX_CONNECTIONS, fits)
    if configured > fits:
        log.warning(
            "receiver.max_connections %d per port does not fit under the file limit %d "
            "(%d reserved for the state file, logs and the API): the process will run "
            "out of descriptors before refusing connections; %d would fit",
            configured,
            nofile,
            RESERVED_FDS,
            fits,
        )
    return configured
