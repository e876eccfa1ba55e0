"""A tiny instrumented agent: two tools, one three-turn conversation, spans on stdout.

    .venv/bin/python examples/console_agent.py

The "LLM" is a keyword router so the example runs offline; what matters is the spans:
one `invoke_agent` per turn, `execute_tool` children, and the
`tracepass.conversation.end` marker when the conversation block exits.
"""

from __future__ import annotations

from opentelemetry.sdk.trace.export import ConsoleSpanExporter

from tracepass.instrumentation import agent, configure, conversation, shutdown, tool

FORECASTS = {"paris": 18.0, "oslo": 4.5, "lima": 22.0}


@tool
def get_weather(city: str) -> dict[str, object]:
    """Current temperature in Celsius."""
    key = city.lower()
    if key not in FORECASTS:
        raise KeyError(f"unknown city: {city}")
    return {"city": city, "celsius": FORECASTS[key]}


@tool
def to_fahrenheit(celsius: float) -> float:
    return round(celsius * 9 / 5 + 32, 1)


@agent(name="weather-assistant", version="0.1.0")
def weather_assistant(question: str) -> str:
    city = next((c for c in FORECASTS if c in question.lower()), None)
    if city is None:
        return "Which city do you mean?"
    report = get_weather(city.title())
    celsius = float(report["celsius"])  # type: ignore[arg-type]
    if "fahrenheit" in question.lower():
        return f"It is {to_fahrenheit(celsius)}°F in {city.title()}."
    return f"It is {celsius}°C in {city.title()}."


def main() -> None:
    configure(service_name="console-agent", exporter=ConsoleSpanExporter(), batch=False)
    with conversation(reference_id="weather-paris"):
        for question in (
            "What's the weather like?",
            "In Paris, please.",
            "And in Fahrenheit, for Paris?",
        ):
            print(f"> {question}\n< {weather_assistant(question)}")
    shutdown()


if __name__ == "__main__":
    main()
