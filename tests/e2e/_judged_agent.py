"""A tiny instrumented agent for the conversation-judge end-to-end test: real
`tracepass.instrumentation` decorators exporting real OTLP/HTTP. Each conversation has
three turns, each with one tool call whose arguments and result name the conversation,
so the test can find every one of them in the judge's prompt.

    python _judged_agent.py ENDPOINT FIRST COUNT
"""

from __future__ import annotations

import sys
from typing import Any

from tracepass.instrumentation import agent, configure, conversation, shutdown, tool


@tool
def get_weather(city: str) -> dict[str, Any]:
    return {"city": city, "celsius": 18 + len(city) % 7, "sky": "clear"}


@tool
def convert_currency(amount: float, to_currency: str) -> dict[str, Any]:
    return {"amount": round(amount * 1.08, 2), "currency": to_currency}


@tool
def book_hotel(city: str, nights: int) -> dict[str, Any]:
    return {"booking": f"H-{city[:3].upper()}-{nights}", "status": "confirmed"}


@agent(name="judged-agent")
def respond(query: str, n: int, turn: int) -> str:
    city = f"Town{n}"
    if turn == 0:
        w = get_weather(city)
        return f"It is {w['celsius']} C and {w['sky']} in {city}."
    if turn == 1:
        c = convert_currency(100 + n, "USD")
        return f"{100 + n} EUR is {c['amount']} USD."
    b = book_hotel(city, 2)
    return f"Booked: {b['booking']} ({b['status']})."


QUERIES = (
    "What is the weather in Town{n}?",
    "Convert {amount} EUR to USD for trip {n}",
    "Book me a hotel in Town{n} for two nights",
)


def main() -> None:
    endpoint, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    configure("judged-agent", endpoint=endpoint, protocol="http/protobuf")
    for n in range(first, first + count):
        with conversation(f"judged-{n}", agent_version="1.0"):
            for turn, template in enumerate(QUERIES):
                respond(template.format(n=n, amount=100 + n), n, turn)
    shutdown()


if __name__ == "__main__":
    main()
