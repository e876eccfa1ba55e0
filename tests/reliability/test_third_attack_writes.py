"""Third attack, the write paths and hostile files (issue 33, items 7, 8, 13 and 14),
against a real `tracepass serve` fed over real OTLP/HTTP, and the real CLI.

- #7: two approvals sharing a reference id within the reload interval were both written
  (201), and from then on the watcher refused the whole reference directory, a person's
  new file included. Now the second is a 409, and a directory with one bad file keeps
  loading the others, naming the blocked file on `/readyz`, the UI and the listing.
- #8: an approved (edited) reference could name any importable callable as
  `argument_match` (`os.path:samefile` ran with span values). Code named by a reference
  file runs only when the operator allowed it, and never through an approval (400).
- #13: 3,000–5,000 levels of nesting in a config, a reference file or an approval body
  were a RecursionError (exit 1, or 500): now exit 2 with file:line, or 400.
- #14: "make this a reference" of a 3,000-call conversation blocked the event loop for
  seconds and yielded YAML an approval cannot take: now off the loop, and a 413. Review
  labels: `reviewer` bounded, turn keys strict (`{"0": "fail", "-0": "pass"}` is a 400).
"""

from __future__ import annotations

import http.client
import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from _serve import TRACEPASS, Serve, write_config
from test_normalize_basics import make_request, make_span

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

WRITE_TOKEN = "third-attack-write"
WRITE = {"Authorization": f"Bearer {WRITE_TOKEN}"}
PERSON = """\
name: person
references:
  - id: person-ref
    turns:
      - query: what a person wrote
        expected_answer: fine
"""
DEEP = 5000


def _call(
    serve: Serve, method: str, path: str, body: Any = None, **headers: str
) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", serve.port, timeout=120)
    try:
        data: bytes | None = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        try:
            return resp.status, json.loads(raw)
        except ValueError:
            return resp.status, raw.decode("utf-8", "replace")
    finally:
        conn.close()


def _conversation(cid: str, trace: int, query: str, calls: int = 1, arg_bytes: int = 10) -> bytes:
    root = make_span(
        "invoke_agent travel",
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "travel",
            "gen_ai.conversation.id": cid,
            "gen_ai.input.messages": [{"role": "user", "content": query}],
            "gen_ai.output.messages": [{"role": "assistant", "content": "done"}],
        },
        span_id=1,
        trace_id=trace.to_bytes(16, "big"),
        start=1_000,
        end=10_000_000,
    )
    tools = [
        make_span(
            "execute_tool lookup",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "lookup",
                "gen_ai.conversation.id": cid,
                "gen_ai.tool.call.arguments": {"n": i, "pad": "x" * arg_bytes},
            },
            span_id=i + 2,
            parent=1,
            trace_id=trace.to_bytes(16, "big"),
            start=2_000 + i,
            end=3_000 + i,
        )
        for i in range(calls)
    ]
    return make_request(root, *tools).SerializeToString()  # type: ignore[arg-type]


def _ingest(serve: Serve, body: bytes) -> None:
    status, answer = _call(
        serve, "POST", "/v1/traces", body, **{"Content-Type": "application/x-protobuf"}
    )
    assert status == 200, answer


def _wait(what: str, fn: Any, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _stored(serve: Serve, cid: str) -> dict[str, Any] | None:
    """The stored evaluation of `cid` from the listing (None until it is evaluated)."""
    status, body = _call(serve, "GET", "/api/v1/conversations")
    if status != 200:
        return None
    return next((c for c in body["conversations"] if c["conversation_id"] == cid), None)


@pytest.fixture(scope="module")
def refs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("refs")
    (d / "person.yaml").write_text(PERSON, encoding="utf-8")
    return d


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory, refs_dir: Path) -> Iterator[Serve]:
    tmp = tmp_path_factory.mktemp("serve")
    path = write_config(tmp, tmp / "state.db", api={"write_token": WRITE_TOKEN})
    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    config["references"] = [str(refs_dir)]
    config["matching"] = {"reload_interval_s": 0.5}
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    s = Serve(path)
    for n, cid in enumerate(("first", "second", "third"), 1):
        _ingest(s, _conversation(f"c-{cid}", n, f"task {cid}"))
    for cid in ("first", "second", "third"):
        _wait(f"c-{cid} stored", lambda cid=cid: _stored(s, f"c-{cid}"))
    yield s
    s.stop()


def _reloads(serve: Serve, outcome: str) -> float:
    return sum(
        v
        for (name, labels), v in serve.samples().items()
        if name == "tracepass_reference_reloads_total" and f'outcome="{outcome}"' in labels
    )


def _candidate(serve: Serve, cid: str) -> str:
    status, body = _call(serve, "POST", f"/api/v1/conversations/{cid}/reference", {}, **WRITE)
    assert status == 201, body
    return str(body["id"])


def _approve(serve: Serve, candidate: str, text: str) -> tuple[int, Any]:
    return _call(
        serve, "POST", f"/api/v1/reference-candidates/{candidate}/approve", {"yaml": text}, **WRITE
    )


def _one_reference(ref_id: str, query: str, extra: str = "") -> str:
    return (
        f"name: {ref_id}-set\nreferences:\n  - id: {ref_id}\n    turns:\n"
        f"      - query: {query}\n        expected_answer: done\n{extra}"
    )


# --------------------------------------------------------------------------- item 7


def test_two_approvals_sharing_an_id_write_one_file(serve: Serve, refs_dir: Path) -> None:
    a, b = _candidate(serve, "c-first"), _candidate(serve, "c-second")
    first = _approve(serve, a, _one_reference("shared", "task first"))
    second = _approve(serve, b, _one_reference("shared", "task second"))
    assert first[0] == 201, first
    assert second[0] == 409, second
    assert "'shared'" in second[1]["error"]
    assert not (refs_dir / f"{b}.yaml").exists()
    # The watcher loads the first; nothing is blocked, the person's file stays in service.
    _wait("reload", lambda: _reloads(serve, "ok") >= 2)
    assert _call(serve, "GET", "/readyz")[1] == {"status": "ready"}


def test_one_bad_file_blocks_only_itself(serve: Serve, refs_dir: Path) -> None:
    bad = refs_dir / "zz-broken.yaml"
    bad.write_text("references:\n  - id: broken\n    turns: 7\n", encoding="utf-8")
    clash = refs_dir / "zz-clash.yaml"
    clash.write_text(_one_reference("person-ref", "another task"), encoding="utf-8")
    (refs_dir / "zz-new.yaml").write_text(_one_reference("new-ref", "task new"), encoding="utf-8")

    def degraded() -> list[str] | None:
        body = _call(serve, "GET", "/readyz")[1]
        notes = body.get("degraded") if isinstance(body, dict) else None
        return notes if notes and any(str(clash) in n for n in notes) else None

    notes = " ".join(_wait("blocked files on /readyz", degraded))
    assert str(bad) in notes
    assert "turns" in notes
    assert "id 'person-ref' is already loaded from" in notes
    listing = _call(serve, "GET", "/api/v1/reference-candidates")[1]
    blocked = {b["file"] for b in listing["blocked_reference_files"]}
    assert blocked == {str(bad), str(clash)}
    status, page = _call(serve, "GET", "/ui/reference-candidates")
    assert status == 200
    assert "blocked-references" in page
    assert "zz-broken.yaml" in page
    # The person's new file loaded beside them: its conversation is scored against it.
    _ingest(serve, _conversation("c-new", 40, "task new"))
    stored = _wait("c-new stored", lambda: _stored(serve, "c-new"))
    assert stored["reference_id"] == "new-ref", stored
    assert _reloads(serve, "partial") >= 1
    bad.unlink()
    clash.unlink()
    _wait("unblocked", lambda: _call(serve, "GET", "/readyz")[1] == {"status": "ready"})


# --------------------------------------------------------------------------- item 8

CODE = {
    "argument_match callable": "        expected_tools:\n          - name: lookup\n"
    "            argument_match: os.path:samefile\n            arguments: {n: 0}\n",
    "command grader": "        graders: [{type: command, command: [/bin/true]}]\n",
}


@pytest.mark.parametrize("kind", list(CODE))
def test_an_approval_naming_code_is_refused(serve: Serve, refs_dir: Path, kind: str) -> None:
    candidate = _candidate(serve, "c-third")
    status, body = _approve(
        serve, candidate, _one_reference(f"code-{len(kind)}", "task third", CODE[kind])
    )
    assert status == 400, body
    assert "an approved reference may not name code" in body["error"]
    assert not (refs_dir / f"{candidate}.yaml").exists()


def test_a_reference_file_naming_code_is_blocked_unless_allowed(
    serve: Serve, refs_dir: Path
) -> None:
    code = refs_dir / "zz-code.yaml"
    code.write_text(_one_reference("code-file", "task code", CODE["argument_match callable"]))

    def blocked() -> str | None:
        listing = _call(serve, "GET", "/api/v1/reference-candidates")[1]
        return next(
            (b["reason"] for b in listing["blocked_reference_files"] if b["file"] == str(code)),
            None,
        )

    reason = _wait("the code file blocked", blocked)
    assert "argument_match 'os.path:samefile' runs code" in reason
    assert "evaluation.allow_command_graders" in reason
    code.unlink()
    _wait("unblocked", lambda: _call(serve, "GET", "/readyz")[1] == {"status": "ready"})


# --------------------------------------------------------------------------- item 13


def test_deep_approval_bodies_are_400(serve: Serve) -> None:
    candidate = _candidate(serve, "c-third")
    deep_yaml = "name: x\nreferences: " + "[" * DEEP + "]" * DEEP + "\n"
    status, body = _approve(serve, candidate, deep_yaml)
    assert status == 400, body
    assert "nested deeper than 100 levels" in body["error"]
    raw = b'{"yaml": ' + b"[" * DEEP + b"]" * DEEP + b"}"
    status, body = _call(
        serve, "POST", f"/api/v1/reference-candidates/{candidate}/approve", raw, **WRITE
    )
    assert status == 400, body
    status, body = _call(serve, "POST", "/api/v1/review/c-third/label", raw, **WRITE)
    assert status == 400, body


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("deep.yaml", "name: x\nreferences: " + "[" * DEEP + "]" * DEEP + "\n"),
        ("deep-block.yaml", "a:\n" + "".join(" " * (i + 1) + "b:\n" for i in range(3000))),
        ("deep.json", '{"references": ' + "[" * DEEP + "]" * DEEP + "}"),
        ("deep.jsonl", '{"id": "a", "turns": ' + "[" * DEEP + "]" * DEEP + "}\n"),
    ],
)
def test_deep_reference_files_are_exit_2(tmp_path: Path, name: str, text: str) -> None:
    ref = tmp_path / name
    ref.write_text(text, encoding="utf-8")
    done = subprocess.run(
        [str(TRACEPASS), "references", "validate", str(ref)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert f"{ref}" in done.stderr
    assert "nested deeper than 100 levels" in " ".join(done.stderr.split())


def test_deep_config_is_exit_2_with_its_line(tmp_path: Path) -> None:
    config = tmp_path / "deep.yaml"
    config.write_text("receiver:\n  host: 127.0.0.1\nstate: " + "[" * DEEP + "]" * DEEP + "\n")
    done = subprocess.run(
        [
            str(TRACEPASS),
            "serve",
            "--config",
            str(config),
            "--host",
            "127.0.0.1",
            "--grpc-port",
            "0",
            "--http-port",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert f"{config}:3:" in done.stderr
    assert "nested deeper than 100 levels" in done.stderr


# --------------------------------------------------------------------------- item 14


def test_reference_of_a_huge_conversation_is_413_off_the_loop(serve: Serve) -> None:
    _ingest(serve, _conversation("c-huge", 99, "task huge", calls=3000, arg_bytes=400))
    _wait("c-huge stored", lambda: _stored(serve, "c-huge"), timeout=300)
    answer: list[tuple[int, Any]] = []
    worker = threading.Thread(
        target=lambda: answer.append(
            _call(serve, "POST", "/api/v1/conversations/c-huge/reference", {}, **WRITE)
        )
    )
    worker.start()
    # While the candidate is built, the event loop keeps answering.
    answered_meanwhile = 0
    while worker.is_alive():
        if _call(serve, "GET", "/healthz")[0] == 200 and worker.is_alive():
            answered_meanwhile += 1
    worker.join()
    status, body = answer[0]
    assert status == 413, body
    assert "more than an approval takes" in body["error"]
    assert answered_meanwhile >= 1


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"turns": {"0": "fail", "-0": "pass"}}, "turns"),
        ({"turns": {"00": "pass"}}, "turns"),
        ({"turns": {"\u0660": "pass"}}, "turns"),
        ({"turns": {" 0": "pass"}}, "turns"),
        ({"passed": "pass", "reviewer": "r" * 10_000}, "reviewer"),
    ],
    ids=["minus-zero", "leading-zero", "arabic-indic", "space", "long-reviewer"],
)
def test_review_labels_are_strict(serve: Serve, doc: dict[str, Any], field: str) -> None:
    status, body = _call(serve, "POST", "/api/v1/review/c-third/label", doc, **WRITE)
    assert status == 400, body
    assert body["error"].startswith(field), body
    ok = _call(serve, "POST", "/api/v1/review/c-third/label", {"turns": {"0": "pass"}}, **WRITE)
    assert ok[0] == 200, ok
