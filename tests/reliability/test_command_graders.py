"""Issue 21, `command` graders: they run programs with the collector's privileges, so a
reference folder alone (hot-reloaded, perhaps writable by others) cannot turn them on.
Off unless `evaluation.allow_command_graders: true` in the collector config; offline,
`tracepass evaluate --allow-command-graders`. Real `tracepass serve` and `evaluate`."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from _serve import REFERENCES, TRACEPASS, Serve, write_config
from test_normalize_basics import make_request, make_span

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _command_refs(marker: Path) -> str:
    argv = [sys.executable, "-c", f"open({str(marker)!r}, 'w').write('ran')"]
    return yaml.safe_dump(
        {
            "name": "cmd",
            "version": "1",
            "references": [
                {
                    "id": "cmd-ref",
                    "turns": [
                        {
                            "query": "what is 2 + 2?",
                            "expected_answer": "4",
                            "graders": [{"type": "command", "argv": argv}],
                        }
                    ],
                }
            ],
        }
    )


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(TRACEPASS), *args], capture_output=True, text=True, timeout=240)


def test_serve_refuses_command_graders_unless_configured(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    refs = tmp_path / "cmd.yaml"
    refs.write_text(_command_refs(marker), encoding="utf-8")
    config = write_config(tmp_path, tmp_path / "state.db")
    data = yaml.safe_load(config.read_text())
    data["references"] = [str(refs)]
    config.write_text(yaml.safe_dump(data))
    done = _run("serve", "--config", str(config))
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"{refs}:" in done.stderr
    assert "command graders are off" in done.stderr
    assert "allow_command_graders" in done.stderr
    # Turned on in the config: the same folder loads.
    data["evaluation"] = {"allow_command_graders": True}
    config.write_text(yaml.safe_dump(data))
    serve = Serve(config)
    serve.stop()


def test_hot_reload_cannot_turn_them_on(tmp_path: Path) -> None:
    refs_dir = tmp_path / "refs"
    refs_dir.mkdir()
    (refs_dir / "plain.yaml").write_text(REFERENCES, encoding="utf-8")
    config = write_config(tmp_path, tmp_path / "state.db", matching={"reload_interval_s": 0.2})
    data = yaml.safe_load(config.read_text())
    data["references"] = [str(refs_dir)]
    config.write_text(yaml.safe_dump(data))
    serve = Serve(config)
    try:
        (refs_dir / "cmd.yaml").write_text(_command_refs(tmp_path / "ran"), encoding="utf-8")
        deadline = time.monotonic() + 120
        while True:
            errors = sum(
                v
                for (name, labels), v in serve.samples().items()
                # The file alone is blocked (issue 33 #7): the others keep loading.
                if name == "tracepass_reference_reloads_total" and 'outcome="partial"' in labels
            )
            if errors >= 1:
                break
            assert time.monotonic() < deadline, "the file was not blocked"
            time.sleep(0.2)
        assert serve.request("GET", "/healthz")[0] == 200
    finally:
        serve.stop()
    assert serve.proc.stderr is not None
    assert "command graders are off" in serve.proc.stderr.read()


def _traces(path: Path) -> Path:
    spans = [
        make_span(
            "invoke_agent calc",
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "calc",
                "tracepass.reference.id": "cmd-ref",
                "gen_ai.input.messages": [{"role": "user", "content": "what is 2 + 2?"}],
                "gen_ai.output.messages": [{"role": "assistant", "content": "4"}],
            },
        )
    ]
    body = make_request(*spans).SerializeToString()  # type: ignore[arg-type]
    path.write_bytes(len(body).to_bytes(4, "big") + body)  # length-prefixed protobuf
    return path


def test_evaluate_needs_the_flag(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    refs = tmp_path / "cmd.yaml"
    refs.write_text(_command_refs(marker), encoding="utf-8")
    traces = _traces(tmp_path / "traces.binpb")
    done = _run("evaluate", str(traces), "-r", str(refs), "--format", "json")
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"{refs}:" in done.stderr
    assert "command graders are off" in done.stderr
    assert not marker.exists()
    done = _run(
        "evaluate", str(traces), "-r", str(refs), "--format", "json", "--allow-command-graders",
        "--no-readiness-gate",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["summary"]["conversations"] == 1
    assert marker.read_text() == "ran"
    # Validation runs nothing: the file is valid, the gate is where graders run.
    assert _run("references", "validate", str(refs)).returncode == 0
