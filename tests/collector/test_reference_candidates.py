"""Reference candidates below the service: the miner's grouping and voting, the writer's
guarantees on a real filesystem (validated first, never over a file, nothing left on
failure), and the UI pages over a real aiohttp server with hostile text escaped."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tracepass.collector.api.candidates import ReferenceCandidates
from tracepass.collector.api.reference_writer import ApprovalError, write_reference
from tracepass.collector.api.ui.triage import TriagePages
from tracepass.collector.api.write_access import WriteAccess
from tracepass.evaluator.models import (
    Conversation,
    ConversationResult,
    Outcome,
    ToolCall,
    Turn,
    Violation,
)
from tracepass.evaluator.references import load_dataset
from tracepass.evaluator.references.candidate_mining import CandidateMiner
from tracepass.evaluator.references.candidate_yaml import candidate_yaml

HOSTILE = "Book <script>alert(1)</script> now\n# forged: key"


def _conv(
    cid: str, query: str, calls: list[tuple[str, dict[str, Any]]], answer: str
) -> Conversation:
    return Conversation(
        id=cid,
        agent_name="a",
        agent_version="1.0",
        turns=(
            Turn(
                query=query,
                answer=answer,
                tool_calls=tuple(ToolCall(name=n, arguments=a) for n, a in calls),
            ),
        ),
    )


def _unscored(conv: Conversation, *, violation: bool = False) -> ConversationResult:
    return ConversationResult(
        conversation_id=conv.id,
        reference_id=None,
        correct=False,
        outcome=Outcome.UNSCORED,
        violations=(Violation(rule="forbidden_tool", turn=0, tool_call=0, message="no"),)
        if violation
        else (),
    )


def test_miner_groups_votes_and_leaves_disagreeing_arguments_out() -> None:
    miner = CandidateMiner(5)
    for i in range(6):
        conv = _conv(
            f"c{i}",
            "Convert 100 EUR to NOK!" if i % 2 else "convert 100 eur to nok",
            [("fx", {"amount": 100 if i else 100.0, "to": "NOK", "request": f"r{i}"})],
            f"100 EUR is 1150 NOK (quote {i})",
        )
        assert miner.add(conv, _unscored(conv))
    # Four conversations of another task do different things: never proposed.
    for i in range(8):
        conv = _conv(f"d{i}", "Plan a day", [(f"tool{i % 3}", {})], "ok")
        miner.add(conv, _unscored(conv))
    (cand,) = miner.candidates()
    assert cand.conversations == 6
    assert cand.agreement == 1.0
    (tool,) = cand.turns[0].tools
    assert tool.arguments == {"amount": 100, "to": "NOK"}  # 100 and 100.0 agree
    assert tool.left_out == ("request",)
    assert cand.turns[0].contains == ("100", "EUR", "1150", "NOK", "quote")
    text = candidate_yaml(cand)
    assert "argument_match: subset" in text
    # Policy-failing conversations do not vote: four more failing ones change nothing,
    # and enough of them with another behaviour cannot outvote the agreeing ones.
    for i in range(4):
        conv = _conv(f"p{i}", "convert 100 eur to nok", [("other", {})], "x")
        miner.add(conv, _unscored(conv, violation=True))
    (again,) = miner.candidates()
    assert again.voters == 6
    assert again.id == cand.id
    # Incomplete conversations and a closed task are not taken.
    assert not miner.add(conv.model_copy(update={"complete": False, "id": "z"}), None)
    miner.close("convert 100 eur to nok")
    assert miner.candidates() == []
    assert not miner.add(conv, None)


def test_writer_validates_never_overwrites_and_leaves_nothing(tmp_path: Path) -> None:
    good = candidate_yaml(_miner_candidate())
    with pytest.raises(ApprovalError) as bad:
        write_reference(tmp_path, "c.yaml", "name: x\nreferences:\n  - id: y\n    turns: 3\n")
    assert bad.value.status == 400
    assert f"{tmp_path / 'c.yaml'}:4" in str(bad.value)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ApprovalError) as clash:
        write_reference(tmp_path, "c.yaml", good, known_ids=lambda _: True)
    assert clash.value.status == 409
    first = write_reference(tmp_path, "c.yaml", good)
    assert first.created
    assert load_dataset(first.path).reference_set.references
    (tmp_path / "mine.yaml").write_text("# a person's file\n", encoding="utf-8")
    again = write_reference(tmp_path, "c.yaml", good.replace("tracepass", "edited"))
    assert not again.created
    assert first.path.read_text(encoding="utf-8") == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml", "mine.yaml"]
    with pytest.raises(ApprovalError) as missing:
        write_reference(tmp_path / "nope", "c.yaml", good)
    assert missing.value.status == 500
    if Path("/proc/self").is_dir():  # a directory no one may create files in, root included
        with pytest.raises(ApprovalError) as denied:
            write_reference(Path("/proc/self"), "c.yaml", good)
        assert denied.value.status == 500
        assert "cannot write /proc/self/c.yaml" in str(denied.value)


@pytest.mark.slow  # starts a process or a server
def test_a_directory_that_cannot_take_the_file_is_a_clear_error(tmp_path: Path) -> None:
    """A file size limit (RLIMIT_FSIZE) makes the write fail as a full disk would; run in
    a subprocess so the limit binds nothing else."""
    text = candidate_yaml(_miner_candidate())
    script = textwrap.dedent(
        f"""
        import json, resource, signal, sys
        from pathlib import Path
        from tracepass.collector.api.reference_writer import ApprovalError, write_reference
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))
        try:
            write_reference(Path({str(tmp_path)!r}), "c.yaml", sys.stdin.read())
        except ApprovalError as exc:
            print(json.dumps([exc.status, str(exc)]))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], input=text, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    status, message = json.loads(done.stdout)
    assert status in (500, 507)
    assert "nothing was written" in message
    assert list(tmp_path.iterdir()) == []


def _miner_candidate() -> Any:
    miner = CandidateMiner(2)
    for i in range(3):
        miner.add(_conv(f"c{i}", "weather in Oslo", [("w", {"city": "Oslo"})], "4 C in Oslo"), None)
    return miner.candidates()[0]


@pytest.fixture
async def ui(tmp_path: Path) -> AsyncIterator[tuple[str, ReferenceCandidates]]:
    miner = CandidateMiner(2)
    for i in range(3):
        conv = _conv(f"h<{i}>", HOSTILE, [("book<b>", {"x": "<i>y</i>"})], "Booked <b>A</b>")
        miner.add(conv, _unscored(conv))
    candidates = ReferenceCandidates(miner, tmp_path)
    pages = TriagePages(None, candidates, WriteAccess("t"))
    app = web.Application()
    for path, handler in pages.read_routes():
        app.router.add_get(path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}", candidates
    finally:
        await runner.cleanup()


async def test_pages_escape_hostile_text(ui: tuple[str, ReferenceCandidates]) -> None:
    base, candidates = ui
    (cand,) = candidates.proposals()
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{base}/ui/reference-candidates") as r:
            listing = await r.text()
        async with s.get(f"{base}/ui/reference-candidates/{cand.id}") as r:
            page = await r.text()
            assert "tracepass_session" in r.cookies
        async with s.get(f"{base}/ui/failure-modes") as r:
            assert r.status == 503  # no state file here
    for html in (listing, page):
        assert "<script>" not in html
        assert "&lt;script&gt;" in html
        assert "<b>" not in html.replace("<b>approve", "")
    assert 'name="csrf_token"' in page
    # The YAML's comments keep the ids on one ASCII line each.
    comments = [
        line for line in cand_yaml(candidates, cand.id).splitlines() if line.startswith("#")
    ]
    assert all(line.isascii() for line in comments)
    assert all("forged" not in line for line in comments)


def cand_yaml(candidates: ReferenceCandidates, cid: str) -> str:
    body = candidates.one(cid)
    assert body is not None
    return str(body["yaml"])
