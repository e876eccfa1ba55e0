"""Start-up errors a user meets with `tracepass serve`: a busy port names the flag and
the port (and gRPC's C core prints nothing of its own)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # starts a process or a server

TRACEPASS = str(Path(sys.executable).with_name("tracepass"))


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("flag", "setting"),
    [
        ("--grpc-port", "receiver.grpc_port"),
        ("--http-port", "receiver.http_port"),
        ("--metrics-port", "metrics.prometheus_port"),
    ],
)
def test_busy_port_names_the_flag_and_port(
    tmp_path: Path, busy_port: int, flag: str, setting: str
) -> None:
    ports = {"--grpc-port": "0", "--http-port": "0", "--metrics-port": "0"}
    ports[flag] = str(busy_port)
    args = [TRACEPASS, "serve", "--host", "127.0.0.1", "--state", str(tmp_path / "s.sqlite")]
    for name, value in ports.items():
        args += [name, value]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env, check=False)
    assert out.returncode == 2
    assert f"{flag} {busy_port} ({setting}): address already in use" in out.stderr
    # One error line; besides it only tracepass's own INFO log lines (no C-core log
    # lines such as "E0000 ... Failed to add port", no traceback).
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    others = [line for line in lines if not line.startswith("error:") and " INFO " not in line]
    assert len(errors) == 1
    assert others == []


def test_second_serve_on_one_state_file_refuses_to_start(tmp_path: Path) -> None:
    from tracepass.collector.state import StateError, StateStore

    state = tmp_path / "state.sqlite"
    first = StateStore(state)
    first.open()
    try:
        with pytest.raises(StateError, match="in use by another tracepass process"):
            StateStore(state).open()
        args = [TRACEPASS, "serve", "--host", "127.0.0.1", "--state", str(state)]
        args += ["--grpc-port", "0", "--http-port", "0", "--metrics-port", "0"]
        out = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
        assert out.returncode == 2
        assert f"in use by another tracepass process (pid {os.getpid()})" in out.stderr
    finally:
        first.close()
    again = StateStore(state)  # released on close
    again.open()
    again.close()


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            "assembly:\n  idle_timeout: 5\n",
            ":2:3: assembly.idle_timeout: unknown key; did you mean 'idle_timeout_s'?",
        ),
        ("metric:\n  ks: [1]\n", ":1:1: metric: unknown key; did you mean 'metrics'?"),
        (
            "sampling:\n  zzz: 1\n",
            "sampling.zzz: unknown key (expected one of adaptive, rate, rules, seed)",
        ),
    ],
)
def test_unknown_config_key_suggests_the_closest(
    tmp_path: Path, config: str, expected: str
) -> None:
    from tracepass.collector.config import ConfigError, load_config

    path = tmp_path / "tracepass.yaml"
    path.write_text(config, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert expected in str(info.value)
    assert str(info.value).startswith(f"{path}:")


def test_ui_default_window_must_be_a_metrics_window(tmp_path: Path) -> None:
    from tracepass.collector.config import ConfigError, load_config

    path = tmp_path / "tracepass.yaml"
    path.write_text("ui:\n  default_window: 24m\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert "ui.default_window '24m' is not one of the metrics.windows (1h, 24h)" in str(info.value)
    path.write_text("ui:\n  default_window: 24h\n", encoding="utf-8")
    assert load_config(path).ui.default_window == "24h"


def test_ui_external_url_must_be_absolute(tmp_path: Path) -> None:
    from tracepass.collector.config import ConfigError, load_config

    path = tmp_path / "tracepass.yaml"
    path.write_text("ui:\n  external_url: tracepass.example.com\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="must be an absolute http:// or https:// URL"):
        load_config(path)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("metrics:\n  ks:\n    - 1\n    min_conversations: 5\n", ":4:5:"),
        ("metrics:\n  ks: [1]\n min_conversations: 5\n", ":3:2:"),
    ],
)
def test_yaml_indentation_error_names_indentation_not_a_token(
    tmp_path: Path, text: str, where: str
) -> None:
    """PyYAML's "expected <block end>, but found '?'" for a file without any `?`."""
    from tracepass.collector.config import ConfigError, load_config

    path = tmp_path / "tracepass.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}{where} invalid YAML: bad indentation: a key"), message
    assert "'?'" not in message
    assert "<block" not in message


def test_headline_k_must_be_one_of_ks(tmp_path: Path) -> None:
    from tracepass.collector.config import ConfigError, load_config

    path = tmp_path / "tracepass.yaml"
    path.write_text("metrics:\n  ks: [1, 5]\n  headline_k: 3\n", encoding="utf-8")
    with pytest.raises(
        ConfigError, match=r"metrics.headline_k 3 is not one of metrics.ks \(1, 5\)"
    ):
        load_config(path)
    path.write_text("metrics:\n  ks: [1, 5]\n", encoding="utf-8")
    assert load_config(path).metrics.headline_k == 3  # unset: not checked (the UI uses 5)
    path.write_text("metrics:\n  ks: [1, 5]\n  headline_k: 5\n", encoding="utf-8")
    assert load_config(path).metrics.headline_k == 5
