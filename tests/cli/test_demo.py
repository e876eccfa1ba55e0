"""`tracepass demo` option errors and pieces; the short live run is tests/e2e/test_demo_e2e.py."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tracepass.collector.app.cli.main import app
from tracepass.collector.app.demo.examples import ExamplesNotFound, find_examples
from tracepass.collector.app.demo.runner import DemoOptions, choose_ports

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_regression_after_end_exit_2() -> None:
    res = runner.invoke(app, ["demo", "--duration", "10", "--regression-at", "20"])
    assert res.exit_code == 2
    assert "--regression-at 20 is after the end" in res.output


def test_missing_examples_exit_2(tmp_path: Path) -> None:
    res = runner.invoke(app, ["demo", "--examples", str(tmp_path)])
    assert res.exit_code == 2
    assert "travel_agent.py" in res.output


def test_find_examples() -> None:
    assert find_examples(EXAMPLES) == EXAMPLES
    with pytest.raises(ExamplesNotFound, match=r"travel_agent\.py"):
        find_examples(EXAMPLES / "references")


def test_busy_port_falls_back_and_says_so() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        ports, notes = choose_ports(DemoOptions(grpc_port=port, http_port=0, metrics_port=0))
    assert ports == {"grpc": 0, "http": 0, "metrics": 0}
    assert notes == [f"port {port} (grpc) is busy; using a free port instead"]


def test_example_agent_is_deterministic_given_a_seed() -> None:
    """Same seed → same answers (one RNG per conversation, not per thread or run);
    the regression knob changes tool arguments and therefore answers."""
    from tracepass.collector.app.demo.examples import load_agent

    agent = load_agent(EXAMPLES)

    def play(seed: int, regression: float) -> list[list[tuple[str, str]]]:
        return [
            agent.run_conversation(
                scenario,
                version="1.0",
                regression=regression,
                rng=agent.conversation_rng(seed, f"demo-{i}"),
                conversation_id=f"c-{seed}-{i}",
            )
            for i, scenario in enumerate(agent.SCENARIOS * 3)
        ]

    first = play(7, 0.5)
    assert play(7, 0.5) == first
    assert play(7, 0.0) != play(7, 1.0)
    # Several tools and multi-turn conversations.
    assert any(len(s.turns) > 1 for s in agent.SCENARIOS)
    assert (EXAMPLES / "travel_agent.py").read_text(encoding="utf-8").count("@tool") >= 3


def test_demo_ui_opens_on_a_window_that_outlives_the_run(tmp_path: Path) -> None:
    """The web UI's default window is the whole run, long enough to browse it for a day
    with --keep-serving (a 1m default read n 0 a minute after the run)."""
    from tracepass.collector.app.demo.runner import demo_config

    ports = {"grpc": 0, "http": 0, "metrics": 0}
    config = demo_config(EXAMPLES / "references", tmp_path, ports, duration=75.0)
    windows = {w.name: w.seconds for w in config.metrics.windows}
    assert config.ui.default_window == "run"
    assert windows["run"] >= 86400
