"""A local stdio MCP server serving the harness's three travel tools (FastMCP, from the
`mcp` SDK). Started by `generate.py` through `langchain-mcp-adapters`; offline.

`book_flight("FL-404")` raises, which FastMCP returns as a `CallToolResult` with
`isError=True`: the failing tool of the scenario reaches the agent only as that flag.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import harness
from mcp.server.fastmcp import FastMCP

server = FastMCP("travel")


@server.tool()
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return harness.get_weather(city)


@server.tool()
def search_flights(origin: str, destination: str, filters: dict[str, Any]) -> list[dict[str, Any]]:
    """Search flights between two cities; `filters` has `max_price` (EUR) and `cabin`."""
    return harness.search_flights(origin, destination, filters)


@server.tool()
def book_flight(flight_id: str) -> dict[str, Any]:
    """Book a flight by id."""
    return harness.book_flight(flight_id)


if __name__ == "__main__":
    server.run("stdio")
