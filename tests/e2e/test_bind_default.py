"""`tracepass serve` binds loopback unless told otherwise, and says what it exposes
(issue 40: the README's walkthrough served conversation contents to the network without
a token). The listening sockets are read from the kernel (`/proc/net/tcp`), not from
what the collector reports."""

from __future__ import annotations

import ipaddress
import json
import subprocess
from pathlib import Path

import pytest
from _live_support import START_TIMEOUT, TRACEPASS, clean_env, wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc/net/tcp"),
]


def _listening_addresses(port: int) -> set[str]:
    """The addresses a socket LISTENs on at `port` (state 0A), IPv4 and IPv6; an
    IPv4-mapped IPv6 address reads as its IPv4 one."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        path = Path(table)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            addr_hex, port_hex = fields[1].split(":")
            if fields[3] != "0A" or int(port_hex, 16) != port:
                continue
            raw = b"".join(
                bytes.fromhex(addr_hex[i : i + 8])[::-1] for i in range(0, len(addr_hex), 8)
            )
            address = ipaddress.ip_address(raw)
            if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
                address = address.ipv4_mapped
            found.add(str(address))
    return found


def _start(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[bytes], dict[str, int], Path]:
    ports_file, err = tmp_path / "ports.json", tmp_path / "serve.stderr"
    cmd = [
        TRACEPASS, "serve", "--grpc-port", "0", "--http-port", "0", "--metrics-port", "0",
        "--state", str(tmp_path / "state.sqlite"), "--ports-file", str(ports_file), *args,
    ]  # fmt: skip
    with err.open("wb") as err_f:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err_f, env=clean_env())

    def ready() -> dict[str, int] | None:
        if proc.poll() is not None:
            raise AssertionError(f"serve exited {proc.returncode}:\n{err.read_text()}")
        if not ports_file.exists() or "bound to" not in err.read_text():
            return None
        info = json.loads(ports_file.read_text())
        return {name: int(info[f"{name}_port"]) for name in ("grpc", "http", "metrics")}

    return proc, wait_until(ready, START_TIMEOUT, "tracepass serve to listen"), err


@pytest.mark.parametrize(
    ("args", "loopback", "said"),
    [
        ((), True, "bound to 127.0.0.1: reachable from this machine only"),
        (("--host", "0.0.0.0"), False, "warning: bound to 0.0.0.0 without receiver.bearer_token"),
    ],
)
def test_serve_binds_loopback_by_default_and_says_what_it_exposes(
    tmp_path: Path, args: tuple[str, ...], loopback: bool, said: str
) -> None:
    proc, ports, err = _start(tmp_path, *args)
    try:
        for name in ("grpc", "http", "metrics"):
            addresses = {ipaddress.ip_address(a) for a in _listening_addresses(ports[name])}
            assert addresses, name
            if loopback:
                assert all(a.is_loopback for a in addresses), (name, addresses)
            else:  # every interface: 0.0.0.0, or [::] dual-stack (gRPC)
                assert all(a.is_unspecified for a in addresses), (name, addresses)
        assert said in " ".join(err.read_text().split())
    finally:
        proc.terminate()
        proc.wait(timeout=120)
