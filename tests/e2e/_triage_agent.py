"""A scripted agent for the failure-modes and reference-candidates end-to-end test,
instrumented with tracepass's own decorators and exporting over real OTLP/HTTP (only
the model is scripted).

Plans (each a conversation of one turn):

* `weather`, `fx`, `hotels`: unreferenced tasks the agent always handles the same way
  (`fx` adds a random `request_id` argument, which the conversations disagree on);
* `dayplan`: an unreferenced task handled inconsistently (one of three tool sets);
* `flight` and its faults against examples' reference `flights-oslo-rome-budget`-like
  reference of the test: `flight-ok`, `flight-date` (wrong date), `flight-noseat`
  (seat never picked), `flight-answer` (wrong answer), `flight-side` (wrong seat side).

    python _triage_agent.py HTTP_ENDPOINT --plan weather:75,fx:75 [--version V] [--prefix P]
"""

from __future__ import annotations

import argparse
import random
from typing import Any

from tracepass.instrumentation import agent, configure, conversation, force_flush, tool

AGENT = "triage-agent"
FLIGHT_QUERY = "Find flights from Oslo to Rome on 2025-07-01"


@tool
def get_weather(city: str, unit: str) -> str:
    return f"7 {unit} in {city}"


@tool
def convert_currency(amount: float, source: str, target: str, request_id: str) -> float:
    return amount * 11.5


@tool
def search_hotels(city: str) -> list[str]:
    return ["Hotel A", "Hotel B"]


@tool
def rank(by: str) -> str:
    return "Hotel A"


@tool
def search_flights(origin: str, destination: str, date: str) -> list[str]:
    return ["DY1870"]


@tool
def pick_seat(flight: str, side: str) -> str:
    return f"{flight} {side}"


@tool
def find_museums(city: str) -> list[str]:
    return ["Vatican Museums"]


@tool
def find_restaurants(city: str, cuisine: str) -> list[str]:
    return ["Roscioli"]


def _weather(rng: random.Random) -> tuple[str, str]:
    get_weather(city="Bergen", unit="celsius")
    return "What's the weather in Bergen?", "It is 7°C and rainy in Bergen."


def _fx(rng: random.Random) -> tuple[str, str]:
    convert_currency(amount=100, source="EUR", target="NOK", request_id=f"r{rng.random():.6f}")
    return "Convert 100 EUR to NOK", "100 EUR is 1150 NOK today."


def _hotels(rng: random.Random) -> tuple[str, str]:
    search_hotels(city="Porto")
    rank(by="price")
    return "Find me a cheap hotel in Porto", "The cheapest is Hotel A, 60 EUR a night."


def _dayplan(rng: random.Random) -> tuple[str, str]:
    choice = rng.randrange(3)
    if choice == 0:
        find_museums(city="Rome")
    elif choice == 1:
        find_restaurants(city="Rome", cuisine=rng.choice(["roman", "pizza", "any"]))
    else:
        get_weather(city="Rome", unit=rng.choice(["celsius", "fahrenheit"]))
        find_museums(city="Rome")
    return "Plan a day in Rome for me", f"Plan number {rng.randrange(1000)}: have fun."


def _flight(
    date: str = "2025-07-01", seat: bool = True, side: str = "aisle", answer: str = ""
) -> Any:
    def run(rng: random.Random) -> tuple[str, str]:
        search_flights(origin="Oslo", destination="Rome", date=date)
        if seat:
            pick_seat(flight="DY1870", side=side)
        return FLIGHT_QUERY, answer or "The cheapest is DY1870 at 121 EUR, aisle seat."

    return run


QUERIES = {
    "weather": "What's the weather in Bergen?",
    "fx": "Convert 100 EUR to NOK",
    "hotels": "Find me a cheap hotel in Porto",
    "dayplan": "Plan a day in Rome for me",
}
PLANS = {
    "weather": _weather,
    "fx": _fx,
    "hotels": _hotels,
    "dayplan": _dayplan,
    "flight-ok": _flight(),
    "flight-date": _flight(date="2025-07-02"),
    "flight-noseat": _flight(seat=False),
    "flight-answer": _flight(answer="Sorry, no flights found."),
    "flight-side": _flight(side="window"),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("endpoint")
    parser.add_argument("--plan", required=True, help="name:count,name:count,…")
    parser.add_argument("--version", default="1.0")
    parser.add_argument("--prefix", default="")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    configure(service_name=AGENT, endpoint=args.endpoint, protocol="http/protobuf")
    rng = random.Random(args.seed)
    for part in args.plan.split(","):
        name, _, count = part.partition(":")
        for i in range(int(count or 1)):
            with conversation(f"{args.prefix}{name}-{i}", agent_version=args.version):
                # `@agent` records its first str argument as the turn's query.
                _run(QUERIES.get(name, FLIGHT_QUERY), name, rng)
    assert force_flush(), "OTLP export did not flush"


@agent(name=AGENT)
def _run(query: str, plan: str, rng: random.Random) -> str:
    _, answer = PLANS[plan](rng)
    return answer


if __name__ == "__main__":
    main()
