"""A deterministic, instrumented travel assistant: the agent `tracepass demo` runs.

Plain Python, no LLM and no network: a keyword "planner" picks tools and arguments,
so every run is reproducible from a seed. Five tools (weather, currency conversion,
flight search, booking, calculator), multi-turn conversations that rely on memory
("And in Fahrenheit?", "Book the cheapest one"), and a `regression` knob: the
probability that a tool call gets a wrong argument (the wrong unit, currency, date,
flight or number) — the kind of silent regression pass^k is meant to catch.

    # spans over OTLP/HTTP to a running `tracepass serve` (default localhost:4318)
    .venv/bin/python examples/travel_agent.py run --conversations 50 --version 1.1 --regression 0.3

    # as an HTTP agent for `tracepass probe --agent http://127.0.0.1:PORT/chat`
    .venv/bin/python examples/travel_agent.py serve-http --port 8080

    # as a stdin/stdout agent for `tracepass probe --agent 'cmd:python examples/travel_agent.py stdio'`
    .venv/bin/python examples/travel_agent.py stdio

For `tracepass probe --agent examples/travel_agent.py:answer` the module-level
`answer(query)` keeps one agent per active conversation (`TRAVEL_AGENT_REGRESSION`,
`TRAVEL_AGENT_VERSION`, `TRAVEL_AGENT_SEED` set the knobs). The reference sets that
describe the right behaviour are in `examples/references/`.
"""

from __future__ import annotations

import argparse
import ast
import json
import operator
import os
import random
import re
import sys
import threading
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from opentelemetry import trace

from tracepass.instrumentation import (
    agent,
    configure,
    conversation,
    current_conversation_id,
    shutdown,
    tool,
)

AGENT_NAME = "travel-assistant"
# The (scripted) model behind each version: 1.1 moved to a larger model, so the demo
# shows cost and latency per version next to pass^k (docs/cost-latency.md).
MODEL_BY_VERSION = {"1.0": "gpt-4o-mini", "1.1": "gpt-4o"}
_tracer = trace.get_tracer("travel-assistant")

# ----------------------------------------------------------------------------- world data

CELSIUS = {"oslo": 4.5, "lisbon": 21.0, "paris": 18.0, "rome": 24.0, "tokyo": 16.5}
# Units of currency per 1 EUR.
PER_EUR = {"EUR": 1.0, "USD": 1.08, "GBP": 0.85, "JPY": 162.0, "NOK": 11.5}
KNOWN_FLIGHTS: dict[tuple[str, str, str], list[tuple[str, int]]] = {
    ("Paris", "Lisbon", "2025-06-12"): [("TP433", 89), ("AF1024", 132), ("U27761", 104)],
    ("Oslo", "Rome", "2025-07-01"): [("SK4711", 149), ("DY1870", 121), ("AZ609", 188)],
}
_AIRLINES = ("TP", "AF", "U2", "SK", "DY", "AZ", "LH", "KL")


@tool
def get_weather(city: str, unit: str = "celsius") -> dict[str, Any]:
    """Current temperature of a city in celsius or fahrenheit."""
    c = CELSIUS.get(city.lower())
    if c is None:
        raise KeyError(f"unknown city: {city}")
    value = c if unit == "celsius" else round(c * 9 / 5 + 32, 1)
    return {"city": city, "temperature": value, "unit": unit}


@tool
def convert_currency(amount: float, from_currency: str, to_currency: str) -> dict[str, Any]:
    """Convert an amount between currencies (fixed demo rates)."""
    if from_currency not in PER_EUR or to_currency not in PER_EUR:
        raise KeyError(f"unknown currency: {from_currency} or {to_currency}")
    converted = round(amount / PER_EUR[from_currency] * PER_EUR[to_currency], 2)
    return {"amount": converted, "currency": to_currency}


@tool
def search_flights(origin: str, destination: str, date: str) -> list[dict[str, Any]]:
    """Flights on one day; unknown routes get stable pseudo-random flights."""
    flights = KNOWN_FLIGHTS.get((origin, destination, date))
    if flights is None:
        h = zlib.crc32(f"{origin}|{destination}|{date}".encode())
        flights = [
            (
                f"{_AIRLINES[(h >> (4 * i)) % len(_AIRLINES)]}{100 + (h >> (3 * i)) % 900}",
                80 + (h >> (5 * i)) % 150,
            )
            for i in range(3)
        ]
    return [{"flight_id": fid, "price_eur": price} for fid, price in flights]


@tool
def book_flight(flight_id: str) -> dict[str, str]:
    """Book a flight; the confirmation code is derived from the flight id."""
    return {
        "flight_id": flight_id,
        "confirmation": f"CNF-{zlib.crc32(flight_id.encode()) % 100000:05d}",
    }


_OPS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def _arith(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_arith(node.left), _arith(node.right))
    raise ValueError("only numbers and + - * / are supported")


@tool
def calculate(expression: str) -> float:
    """Arithmetic on numbers with + - * / (parsed, never eval'd)."""
    return round(_arith(ast.parse(expression, mode="eval").body), 4)


# ----------------------------------------------------------------------------- the agent


@dataclass
class TravelAgent:
    """One user's assistant. `regression` is the chance that any one tool call gets a
    wrong argument; `rng` makes those slips reproducible."""

    regression: float = 0.0
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    city: str | None = None
    flights: list[dict[str, Any]] = field(default_factory=list)
    last_amount: tuple[float, str] | None = None
    model: str = MODEL_BY_VERSION["1.0"]

    def _slip(self) -> bool:
        return self.rng.random() < self.regression

    @agent(name=AGENT_NAME)
    def respond(self, query: str) -> str:
        answer = self._route(query)
        self._model_call(query, answer)
        return answer

    def _model_call(self, query: str, answer: str) -> None:
        """The model call that wrote the answer, as a GenAI `chat` span with the token
        counts a provider reports (scripted: counted from the words)."""
        with _tracer.start_as_current_span(f"chat {self.model}") as span:
            span.set_attribute("gen_ai.operation.name", "chat")
            span.set_attribute("gen_ai.provider.name", "openai")
            span.set_attribute("gen_ai.request.model", self.model)
            span.set_attribute("gen_ai.response.model", self.model)
            span.set_attribute("gen_ai.usage.input_tokens", 180 + 4 * len(query.split()))
            span.set_attribute("gen_ai.usage.output_tokens", 8 + 2 * len(answer.split()))

    def _route(self, query: str) -> str:
        q = query.lower()
        if "weather" in q or "fahrenheit" in q or "celsius" in q:
            return self._weather(q)
        if "flight" in q:
            return self._flights(query)
        if "book" in q:
            return self._book()
        if m := re.search(r"([\d.]+)\s*([a-z]{3})\s+in\s+([a-z]{3})", q):
            return self._convert(float(m.group(1)), m.group(2).upper(), m.group(3).upper())
        if "cheapest" in q and "in" in q and (m := re.search(r"in ([a-z]{3})\b", q)):
            return self._cheapest_in(m.group(1).upper())
        if m := re.search(
            r"what is ([\d.]+ (?:divided by|times|plus|minus) [\d.]+|[\d.\s+\-*/()]+)", q
        ):
            return self._calc(m.group(1))
        return "Hello! I am your travel assistant: weather, flights, bookings and currencies."

    def _weather(self, q: str) -> str:
        city = next((c.title() for c in CELSIUS if c in q), self.city)
        if city is None:
            return "Which city do you mean?"
        self.city = city
        unit = "fahrenheit" if "fahrenheit" in q else "celsius"
        if self._slip():
            unit = "celsius" if unit == "fahrenheit" else "fahrenheit"
        report = get_weather(city=city, unit=unit)
        sign = "°F" if report["unit"] == "fahrenheit" else "°C"
        return f"It is {report['temperature']}{sign} in {city}."

    def _flights(self, query: str) -> str:
        m = re.search(r"from (\w+) to (\w+) on (\d{4}-\d{2}-\d{2})", query, re.IGNORECASE)
        if m is None:
            return "From where, to where, and on which date (YYYY-MM-DD)?"
        origin, destination, day = m.group(1).title(), m.group(2).title(), m.group(3)
        if self._slip():
            day = (date.fromisoformat(day) + timedelta(days=1)).isoformat()
        self.flights = sorted(
            search_flights(origin=origin, destination=destination, date=day),
            key=lambda f: f["price_eur"],
        )
        best = self.flights[0]
        return (
            f"{len(self.flights)} flights from {origin} to {destination}; the cheapest is "
            f"{best['flight_id']} at {best['price_eur']} EUR."
        )

    def _book(self) -> str:
        if not self.flights:
            return "Which flight should I book? Search for flights first."
        choice = self.flights[1 if self._slip() and len(self.flights) > 1 else 0]
        booking = book_flight(flight_id=choice["flight_id"])
        return f"Booked {booking['flight_id']}: confirmed, code {booking['confirmation']}."

    def _convert(self, amount: float, src: str, dst: str) -> str:
        if self._slip():
            dst = next(c for c in PER_EUR if c not in (src, dst))
        out = convert_currency(amount=amount, from_currency=src, to_currency=dst)
        self.last_amount = (out["amount"], out["currency"])
        return f"{amount:g} {src} is {out['amount']:.2f} {out['currency']}."

    def _cheapest_in(self, dst: str) -> str:
        if not self.flights:
            return "Search for flights first."
        price = float(self.flights[0]["price_eur"])
        return self._convert(price, "EUR", dst)

    def _calc(self, text: str) -> str:
        expr = (
            text.replace("divided by", "/")
            .replace("times", "*")
            .replace("plus", "+")
            .replace("minus", "-")
            .strip()
        )
        if self._slip():
            expr = re.sub(r"\d+", lambda m: str(int(m.group(0)) + 1), expr, count=1)
        return f"{expr} = {calculate(expression=expr):g}"


# ----------------------------------------------------------------------------- users


@dataclass(frozen=True)
class Scenario:
    """What a user says, turn by turn; `reference_id` names its ground truth ("": none)."""

    reference_id: str
    turns: tuple[str, ...]


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("weather-oslo", ("What's the weather in Oslo?",)),
    Scenario("weather-lisbon-fahrenheit", ("What's the weather in Lisbon?", "And in Fahrenheit?")),
    Scenario("convert-usd-eur", ("How much is 250 USD in EUR?",)),
    Scenario(
        "flights-paris-lisbon",
        ("Find flights from Paris to Lisbon on 2025-06-12", "Book the cheapest one"),
    ),
    Scenario(
        "flights-oslo-rome-budget",
        ("Find flights from Oslo to Rome on 2025-07-01", "How much is the cheapest in USD?"),
    ),
    Scenario("split-bill", ("What is 360 divided by 4?",)),
    Scenario("greeting", ("Hello!",)),
)
# No reference: traffic the agent handles the same way every time, which the collector
# proposes as a reference candidate (docs/reference-candidates.md). `tracepass demo`
# mixes these in; `run` plays only the referenced SCENARIOS.
CANDIDATE_SCENARIOS: tuple[Scenario, ...] = (Scenario("", ("What's the weather in Tokyo?",)),)


def conversation_rng(seed: int | str, conversation_key: str) -> random.Random:
    """One RNG per conversation, so results do not depend on scheduling or threads."""
    return random.Random(f"{seed}:{conversation_key}")


def run_conversation(
    scenario: Scenario,
    *,
    version: str,
    regression: float,
    rng: random.Random,
    conversation_id: str | None = None,
    reference_id: str | None = None,
) -> list[tuple[str, str]]:
    """Play one scenario inside `conversation(...)`; returns (query, answer) pairs."""
    bot = TravelAgent(
        regression=regression, rng=rng, model=MODEL_BY_VERSION.get(version, "gpt-4o-mini")
    )
    out = []
    with conversation(conversation_id, reference_id=reference_id, agent_version=version):
        for query in scenario.turns:
            out.append((query, bot.respond(query)))
    return out


# ----------------------------------------------------------------------------- probe target

_agents: dict[str, TravelAgent] = {}
_agents_lock = threading.Lock()


def _knob(name: str, default: str) -> str:
    return os.environ.get(name, default)


def agent_for(conversation_id: str | None) -> TravelAgent:
    """The agent holding this conversation's memory (bounded: oldest dropped)."""
    key = conversation_id or "default"
    with _agents_lock:
        bot = _agents.get(key)
        if bot is None:
            bot = TravelAgent(
                regression=float(_knob("TRAVEL_AGENT_REGRESSION", "0")),
                rng=conversation_rng(_knob("TRAVEL_AGENT_SEED", "0"), key),
            )
            _agents[key] = bot
            while len(_agents) > 10_000:
                _agents.pop(next(iter(_agents)))
        return bot


def answer(query: str) -> str:
    """`tracepass probe --agent examples/travel_agent.py:answer`: called once per turn
    inside the probe's `conversation(...)` block."""
    return agent_for(current_conversation_id()).respond(query)


def handle_request(payload: dict[str, Any]) -> dict[str, Any]:
    """One `{query, conversation_id}` → `{answer}` exchange (HTTP and stdio modes)."""
    query = payload.get("query")
    if not isinstance(query, str):
        return {"error": "query must be a string"}
    cid = payload.get("conversation_id")
    cid = cid if isinstance(cid, str) and cid else None
    with conversation(
        cid,
        reference_id=payload.get("reference_id") or None,
        agent_version=_knob("TRAVEL_AGENT_VERSION", "1.0"),
    ):
        text = agent_for(cid).respond(query)
    return {"answer": text}


# ----------------------------------------------------------------------------- entry points


def _configure(endpoint: str | None, protocol: str) -> None:
    configure(
        service_name=AGENT_NAME,
        endpoint=endpoint,
        protocol="grpc" if protocol == "grpc" else "http/protobuf",
    )


def _run(args: argparse.Namespace) -> None:
    _configure(args.endpoint, args.protocol)
    for i in range(args.conversations):
        rng = conversation_rng(args.seed, f"run-{i}")
        scenario = SCENARIOS[rng.randrange(len(SCENARIOS))]
        cid = f"{args.prefix}{i}" if args.prefix else None
        for query, text in run_conversation(
            scenario, version=args.version, regression=args.regression, rng=rng, conversation_id=cid
        ):
            if args.verbose:
                print(f"> {query}\n< {text}")
    shutdown()


def _serve_http(args: argparse.Namespace) -> None:
    import asyncio

    from aiohttp import web

    _configure(args.endpoint, args.protocol)

    async def chat(request: web.Request) -> web.Response:
        payload = await request.json()
        reply = await asyncio.to_thread(handle_request, payload)
        return web.json_response(reply, status=400 if "error" in reply else 200)

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/chat", chat)
        # Ctrl-C waits at most 5 s for open keep-alive connections (aiohttp waits 60).
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=5.0)
        await runner.setup()
        site = web.TCPSite(runner, args.host, args.port)
        await site.start()
        port = runner.addresses[0][1]
        print(
            json.dumps({"listening": f"http://{args.host}:{port}/chat", "port": port}), flush=True
        )
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
    finally:
        shutdown()


def _stdio(args: argparse.Namespace) -> None:
    _configure(args.endpoint, args.protocol)
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                payload = json.loads(line)
                reply = handle_request(payload if isinstance(payload, dict) else {})
            except ValueError as exc:
                reply = {"error": f"invalid JSON: {exc}"}
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()
    finally:
        shutdown()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", default=None, help="OTLP endpoint (default: OTEL_* env)")
    parser.add_argument("--protocol", default="http/protobuf", choices=["http/protobuf", "grpc"])
    sub = parser.add_subparsers(dest="mode", required=True)
    run = sub.add_parser("run", help="play random scenarios")
    run.add_argument("--conversations", type=int, default=20)
    run.add_argument("--version", default="1.0")
    run.add_argument("--regression", type=float, default=0.0)
    run.add_argument("--seed", default="0")
    run.add_argument("--prefix", default="", help="conversation ids PREFIX0, PREFIX1, …")
    run.add_argument("--verbose", "-v", action="store_true")
    http = sub.add_parser("serve-http", help="POST /chat {query, conversation_id} → {answer}")
    http.add_argument("--host", default="127.0.0.1")
    http.add_argument("--port", type=int, default=8080)
    sub.add_parser("stdio", help="one JSON request per stdin line, one reply per stdout line")
    args = parser.parse_args(argv)
    {"run": _run, "serve-http": _serve_http, "stdio": _stdio}[args.mode](args)


if __name__ == "__main__":
    main()
