"""The project's gateway for real: the built distribution (`make otelcol`) on the static
config (deploy/otelcol/static-two-replicas.yaml, ports rewritten to loopback, the
replica list set), three `tracepass serve` replicas sharing one PostgreSQL results
store, traffic from real instrumentation (the project's decorators in their own process;
real OTel SDK spans with the conversation id on every span, on the root only, on a child
only, as OpenInference `session.id`, as a Traceloop association property; traces naming
no conversation; a turn's span sent after its trace was released; content only in
GenAI log events). Shows, in one run:

- every conversation is evaluated once, complete (each passes its reference, which needs
  every tool call and every event), on exactly one replica: each replica's count is the
  one the loadbalancing exporter's hash ring predicts for the conversations' routing
  keys, and the counts add up to the conversations sent;
- every replica's API lists every conversation;
- a real Prometheus scraping the three replicas and one scraping a single replica fed
  the same traffic directly compute the same pooled counts and pass^k from the project's
  recording rules (deploy/prometheus/tracepass.rules.yaml, unchanged);
- `kill -9` of a replica mid-traffic: the gateway's persistent queue (file_storage)
  keeps what it acknowledged, the replica's conversations complete after its restart;
- a fourth replica (the gateway restarted with the longer list): new conversations
  spread over four, a conversation whose key moved has its next trace evaluated on its
  new replica as a conversation of its own (counted once more, as docs/operations.md
  says), one that did not move is re-evaluated where it was (counted once).
"""

from __future__ import annotations

import contextlib
import time
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _gateway_support import (
    AGENT,
    GROUP_WAIT_S,
    REFERENCES,
    SHAPES,
    Conversation,
    Gateway,
    Replica,
    Ring,
    Sender,
    make_conversation,
    make_logs_conversation,
    make_traceless,
    require_gateway,
    routing_key,
    run_decorated_agent,
    wait_until,
)
from test_prometheus_e2e import prometheus

pytestmark = [
    pytest.mark.slow,
    pytest.mark.system,
    pytest.mark.xdist_group("postgres"),
    pytest.mark.timeout(900),
]
DEADLINE_S = 180.0


def phase_a() -> list[Conversation]:
    convs: list[Conversation] = []
    for shape in SHAPES:
        for i in range(3):
            fail = i == 2 and shape in {"root", "traceloop"}
            convs.append(make_conversation(f"a-{shape}-{i}", shape, fail=fail))
    convs += [make_conversation(f"a-late-{i}", "root", late=True) for i in range(2)]
    convs += [make_logs_conversation(f"a-logs-{i}") for i in range(2)]
    convs += [make_traceless(i) for i in range(3)]
    return convs


def send_all(sender: Sender, convs: list[Conversation]) -> None:
    for conv in convs:
        sender.conversation(conv)
    late = [s for c in convs for s in c.late]
    if late:
        time.sleep(GROUP_WAIT_S + 1.0)  # the traces were released without these spans
        sender.spans(late)


def expected_outcome(conv: Conversation) -> str:
    return "pass" if conv.passing else "fail"


def wait_listed(replicas: list[Replica], ids: set[str]) -> None:
    for replica in replicas:
        wait_until(
            lambda r=replica: ids <= r.listed(),
            DEADLINE_S,
            f"every conversation in {replica.endpoint}'s list",
            interval=1.0,
        )


def wait_counts(replicas: list[Replica], want: dict[str, float], what: str) -> None:
    def settled() -> bool:
        got = {r.endpoint: r.evaluated() for r in replicas}
        return got == want

    try:
        wait_until(settled, DEADLINE_S, what, interval=1.0)
    except AssertionError:
        got = {r.endpoint: r.evaluated() for r in replicas}
        raise AssertionError(f"{what}: got {got}, want {want}") from None


def outcome_of(replica: Replica, cid: str, want: tuple[str, bool] = ("pass", True)) -> Any:
    """The conversation's latest evaluation, once it is `want` (late spans cause a
    revision: the first evaluation may miss them); the last one seen otherwise."""
    seen: list[Any] = []

    def latest() -> bool:
        view = replica.json(f"/api/v1/conversations/{urllib.parse.quote(cid)}")
        ev = view.get("evaluation") or {}
        seen.append((ev.get("outcome"), bool(view.get("complete", True)), ev.get("revision")))
        return seen[-1][:2] == want

    with contextlib.suppress(AssertionError):
        wait_until(latest, 60, f"{cid} to be {want}", interval=1.0)
    return seen[-1][:2] if seen else None


@contextlib.contextmanager
def running(*procs: Any) -> Iterator[None]:
    try:
        yield
    finally:
        for proc in procs:
            proc.stop()


def test_gateway_keeps_conversations_whole_across_replicas(
    tmp_path: Path, postgres_url: str
) -> None:
    require_gateway()
    refs = tmp_path / "refs.yaml"
    refs.write_text(REFERENCES, encoding="utf-8")
    replicas = [Replica(tmp_path / f"r{i}", refs, postgres_url) for i in range(3)]
    solo = Replica(tmp_path / "solo", refs, "")
    gateway = Gateway(tmp_path / "gateway")
    extra = Replica(tmp_path / "r3", refs, postgres_url)
    with running(gateway, solo, extra, *replicas):
        for r in [*replicas, solo]:
            r.start()
        gateway.start([r.endpoint for r in replicas])
        try:
            check_all(tmp_path, replicas, solo, gateway, extra)
        except AssertionError as exc:
            logs = gateway.stderr() + "".join(
                f"\n--- {r.endpoint}:\n{r.stderr()[-3000:]}" for r in [*replicas, extra]
            )
            raise AssertionError(f"{exc}\n--- gateway:\n{logs}") from None


def warm_up(replicas: list[Replica]) -> None:
    """Each replica evaluates, sent directly, a failing, a revised (late span) and a
    logs conversation of its own before Prometheus starts: every counter series the
    measured traffic touches then exists, and `increase()` sees all of that traffic (a
    series born mid-window loses its first value to Prometheus's extrapolation)."""
    for i, replica in enumerate(replicas):
        convs = [
            make_conversation(f"w{i}-fail", "every", fail=True),
            make_conversation(f"w{i}-late", "every", late=True),
            make_logs_conversation(f"w{i}-logs"),
        ]
        send_all(Sender(replica.endpoint), convs)
        wait_counts([replica], {replica.endpoint: 3.0}, f"{replica.endpoint}'s warm-up")
        for conv in convs:
            want = ("pass" if conv.passing else "fail", True)
            assert outcome_of(replica, conv.id, want) == want, conv.id


def check_all(
    tmp_path: Path, replicas: list[Replica], solo: Replica, gateway: Gateway, extra: Replica
) -> None:
    ring3 = Ring(r.endpoint for r in replicas)
    sender = Sender(gateway.endpoint)
    warm_up([*replicas, solo])
    # Prometheus watches from before the traffic (the rules count increases).
    with contextlib.ExitStack() as stack:
        pooled = stack.enter_context(
            prometheus(tmp_path / "prom3", [r.metrics_port for r in replicas], short=False)
        )
        single = stack.enter_context(
            prometheus(tmp_path / "prom1", [solo.metrics_port], short=False)
        )
        # Both have scraped the warm-up (every series exists) before the traffic.
        for prom, want in ((pooled, 9.0), (single, 3.0)):

            def scraped(prom: Any = prom, want: float = want) -> bool:
                rows = prom.query("sum(tracepass_conversations_total)")
                return bool(rows) and float(rows[0]["value"][1]) >= want

            wait_until(scraped, DEADLINE_S, "Prometheus to scrape the warm-up", interval=1.0)
        time.sleep(3)  # a few more samples of the settled counters
        check_phases(tmp_path, replicas, solo, gateway, extra, ring3, sender, pooled, single)


def check_phases(
    tmp_path: Path,
    replicas: list[Replica],
    solo: Replica,
    gateway: Gateway,
    extra: Replica,
    ring3: Ring,
    sender: Sender,
    pooled: Any,
    single: Any,
) -> None:

    # ---- phase A: every shape through the gateway, the same traffic to `solo`.
    convs = phase_a()
    decorated = [f"a-decorated-{i}" for i in range(3)]
    send_all(sender, convs)
    run_decorated_agent(tmp_path, gateway.endpoint, decorated)
    send_all(Sender(solo.endpoint), convs)
    run_decorated_agent(tmp_path, solo.endpoint, decorated)
    sent_spans = sum(len(c.spans) + len(c.late) for c in convs)
    assert sender.acked_spans == sent_spans
    ids = {c.id for c in convs} | set(decorated)
    keys = {c.id: c.key for c in convs} | {d: routing_key(d) for d in decorated}
    predicted = Counter(ring3.owner(keys[i]) for i in ids)
    assert len(predicted) == 3, predicted  # the traffic spreads over the three
    want = {r.endpoint: 3.0 + predicted[r.endpoint] for r in replicas}  # + the warm-up
    wait_listed([*replicas, solo], ids)
    wait_counts(replicas, want, "each replica to evaluate the conversations the ring gives it")
    wait_counts([solo], {solo.endpoint: 3.0 + len(ids)}, "the single replica's evaluations")
    outcomes = {c.id: expected_outcome(c) for c in convs} | dict.fromkeys(decorated, "pass")
    for cid, outcome in outcomes.items():
        assert outcome_of(solo, cid, (outcome, True)) == (outcome, True), ("solo", cid)
    for cid, outcome in outcomes.items():
        for replica in (replicas[0], replicas[2]):  # any replica: the shared store
            assert outcome_of(replica, cid, (outcome, True)) == (outcome, True), (
                cid,
                replica.endpoint,
            )
    traceless = [c.id for c in convs if c.shape == "traceless"]
    assert len({ring3.owner(routing_key(t)) for t in traceless}) >= 1

    agents = {c.id: ("weather" if c.shape == "logs" else AGENT) for c in convs}
    rates: dict[str, float] = {}
    for agent in set(agents.values()):
        mine = [o for cid, o in outcomes.items() if agents.get(cid, AGENT) == agent]
        # The rules' minimum-sample guard (tracepass:min_conversations, 5): below it
        # pass^k is absent, pooled or not.
        if len(mine) >= 5:
            rates[agent] = sum(o == "pass" for o in mine) / len(mine)
    check_prometheus(pooled, single, len(ids), sum(o != "pass" for o in outcomes.values()), rates)

    # ---- phase B: kill -9 of the replica that owns the most, mid-traffic.
    batch_b = [make_conversation(f"b-{i}", SHAPES[i % len(SHAPES)]) for i in range(9)]
    owners_b = Counter(ring3.owner(c.key) for c in batch_b)
    victim = next(r for r in replicas if r.endpoint == owners_b.most_common(1)[0][0])
    send_all(sender, batch_b[:3])
    victim.kill()
    send_all(sender, batch_b[3:])  # acknowledged by the gateway, queued on disk
    time.sleep(GROUP_WAIT_S + 2.0)
    victim.start()
    ids_b = ids | {c.id for c in batch_b}
    for r in replicas:
        want[r.endpoint] += owners_b[r.endpoint]
    wait_listed(replicas, ids_b)
    # The victim's counter restarted from its state file: compare the pooled total.
    wait_until(
        lambda: (
            sum(r.evaluated() for r in replicas if r is not victim)
            == sum(v for e, v in want.items() if e != victim.endpoint)
        ),
        DEADLINE_S,
        "the other replicas' counts after the kill",
        interval=1.0,
    )
    for conv in batch_b:
        assert outcome_of(replicas[0], conv.id) == ("pass", True), conv.id
    assert sender.acked_spans == sent_spans + sum(len(c.spans) for c in batch_b)

    # ---- phase C: a fourth replica; the gateway restarts with the longer list.
    extra.start()
    gateway.stop()
    four = [*replicas, extra]
    gateway.start([r.endpoint for r in four])
    ring4 = Ring(r.endpoint for r in four)
    before = {r.endpoint: r.evaluated() for r in four}
    batch_c = [make_conversation(f"c-{i}", SHAPES[i % len(SHAPES)]) for i in range(12)]
    every_a = [c for c in convs if c.shape == "every"]
    moved = [c for c in every_a if ring4.owner(c.key) != ring3.owner(c.key)]
    stayed = [c for c in every_a if ring4.owner(c.key) == ring3.owner(c.key)]
    continued = moved[:1] + stayed[:1]
    # A further turn (a new trace) of conversations evaluated before the change.
    follow_ups = [make_conversation(c.id, "every") for c in continued]
    send_all(sender, batch_c)
    for f in follow_ups:
        sender.spans(f.spans)
    owners_c = Counter(ring4.owner(c.key) for c in batch_c)
    owners_c.update(ring4.owner(c.key) for c in moved[:1])  # a conversation of its own there
    wait_listed(four, ids_b | {c.id for c in batch_c})
    want_c = {r.endpoint: before[r.endpoint] + owners_c[r.endpoint] for r in four}
    wait_counts(four, want_c, "new conversations spread over four, moved ones counted again")
    for conv in batch_c:
        assert outcome_of(extra, conv.id) == ("pass", True), conv.id


def check_prometheus(
    pooled: Any, single: Any, n: int, failing: int, rates: dict[str, float]
) -> None:
    """The pooled recording rules over the three replicas equal one replica's, agent by
    agent (the rules keep `agent_name`)."""
    # Net counts (revisions netted out): every conversation once, with its latest outcome.
    net = (
        "sum(tracepass_conversations_total{{{sel}}})"
        " - (sum(tracepass_conversations_superseded_total{{{sel}}}) or vector(0))"
    )

    def counts(prom: Any) -> tuple[float, float] | None:
        rows = [prom.query(net.format(sel=sel)) for sel in ("", 'outcome="pass"')]
        if not all(rows):
            return None
        return float(rows[0][0]["value"][1]), float(rows[1][0]["value"][1])

    # Both count their replicas' warm-up (3 conversations each, 2 passing) besides.
    def same_counts() -> tuple[float, float] | None:
        a, b = counts(pooled), counts(single)
        if a is None or b is None:
            return None
        a, b = (a[0] - 9, a[1] - 6), (b[0] - 3, b[1] - 2)
        return a if a == b and a[0] == n else None

    got = wait_until(same_counts, DEADLINE_S, "both Prometheus to count every conversation")
    assert got == (n, n - failing), got

    def pass_pow(prom: Any, k: str) -> dict[str, float] | None:
        rows = prom.query(f'tracepass:pass_pow_k:pooled{{k="{k}",window="1h"}}')
        by_agent = {r["metric"].get("agent_name", ""): float(r["value"][1]) for r in rows}
        return by_agent if set(by_agent) == set(rates) else None

    for k in ("1", "3"):
        try:
            a = wait_until(lambda k=k: pass_pow(pooled, k), 60, "pooled pass^k")
        except AssertionError:
            rules = pooled.api("/api/v1/rules")
            bad = [
                (r.get("name"), r.get("health"), r.get("lastError"))
                for g in rules["groups"]
                for r in g["rules"]
                if r.get("health") != "ok"
            ]
            seen = [
                (r["metric"], r["value"][1])
                for q in (
                    f'tracepass:pass_pow_k:pooled{{k="{k}"}}',
                    "tracepass:min_conversations",
                    "increase(tracepass_conversations_total[1h])",
                )
                for r in pooled.query(q)
            ]
            raise AssertionError(f"no pooled pass^k: unhealthy rules {bad}; {seen}") from None
        b = wait_until(lambda k=k: pass_pow(single, k), DEADLINE_S, "single pass^k")

        # The increase() chain settles a few evaluations after the raw counts do.
        def settled(k: str = k) -> tuple[dict[str, float], dict[str, float]] | None:
            got = pass_pow(pooled, k), pass_pow(single, k)
            if got[0] is None or got[1] is None:
                return None
            near = all(abs(got[0][x] - got[1][x]) <= 0.05 for x in rates)
            return got if near else None

        with contextlib.suppress(AssertionError):
            a, b = wait_until(settled, 60, "pooled and single pass^k to settle", interval=1.0)
        for agent, rate in rates.items():
            # increase() over the window extrapolates each series from its first sample:
            # the same traffic, the same estimate, up to that extrapolation.
            assert a[agent] == pytest.approx(b[agent], abs=0.05), (k, agent, a, b)
            assert a[agent] == pytest.approx(rate ** int(k), abs=0.1), (k, agent, a)
