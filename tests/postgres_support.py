"""A throw-away PostgreSQL cluster for the tests (`postgres_cluster` fixture, conftest.py).

`initdb` in a temporary directory, `postgres` on a free loopback port with its unix
socket in that directory; stopped and deleted at the end. PostgreSQL refuses to run as
root, and CI runs as root: then the cluster runs as the `postgres` system user (via
`runuser`) and the directory is handed to it. Without PostgreSQL installed the tests
skip locally and fail in CI (`TRACEPASS_REQUIRE_SYSTEM_TOOLS=1`, set by `.ci/run`).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

START_DEADLINE_S = 300.0


def find_pg_bin() -> Path | None:
    """The newest installed server's bin directory (Debian: /usr/lib/postgresql/N/bin)."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def require_postgres() -> Path:
    pg_bin = find_pg_bin()
    if pg_bin is None:
        if os.environ.get("TRACEPASS_REQUIRE_SYSTEM_TOOLS") == "1":
            pytest.fail("postgresql (initdb, postgres) is required in CI but not installed")
        pytest.skip("postgresql not installed")
    return pg_bin


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresCluster:
    """One cluster: `start()`, `url(database)`, `create_database(name)`, `stop()`."""

    def __init__(self, pg_bin: Path) -> None:
        self.pg_bin = pg_bin
        self.dir = Path(tempfile.mkdtemp(prefix="tracepass-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self.running = False
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.dir, user.pw_uid, user.pw_gid)
            self._as_user = ["runuser", "-u", "postgres", "--"]
        self.log = self.dir / "postgres.log"

    def _run(self, *args: str) -> None:
        subprocess.run([*self._as_user, *args], check=True, capture_output=True, timeout=300)

    def init(self) -> None:
        self._run(
            str(self.pg_bin / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "tracepass",
            "--auth=trust",
            "--encoding=UTF8",
            "--no-sync",
        )

    def start(self) -> None:
        """Start the server (`pg_ctl start`, which returns once it accepts connections)."""
        options = (
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c max_connections=100"
        )
        self._run(
            str(self.pg_bin / "pg_ctl"),
            "start",
            "-D",
            str(self.data),
            "-w",
            "-t",
            str(int(START_DEADLINE_S)),
            "-o",
            options,
            "-l",
            str(self.log),
        )
        self.running = True

    def stop(self) -> None:
        """Fast shutdown (connections are cut, like a database going away); returns once
        the server is gone. Signals go to the server itself, not through `runuser`."""
        if not self.running:
            return
        self._run(str(self.pg_bin / "pg_ctl"), "stop", "-D", str(self.data), "-m", "fast", "-w")
        self.running = False

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://tracepass@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class _RunningCluster(PostgresCluster):
    """A cluster someone else started (`TRACEPASS_TEST_PG_PORT`, for quick local runs):
    used as is, never stopped or deleted."""

    def __init__(self, pg_bin: Path, port: int) -> None:
        self.pg_bin = pg_bin
        self.port = port
        self.running = True

    def destroy(self) -> None:
        return None


@contextlib.contextmanager
def postgres_cluster_running() -> Iterator[PostgresCluster]:
    port = os.environ.get("TRACEPASS_TEST_PG_PORT")
    if port:
        yield _RunningCluster(require_postgres(), int(port))
        return
    cluster = PostgresCluster(require_postgres())
    try:
        cluster.init()
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()
