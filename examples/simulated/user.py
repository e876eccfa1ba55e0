"""A scripted simulated user for examples/simulated/references.yaml: no model needed.

`tracepass probe --user-simulator examples/simulated/user.py:user` plays each
reference's `user:` scenario with these rules: it opens with the reference's first
line, then answers the agent's last message with the first rule whose pattern matches
it and whose message it has not sent yet; when no rule is left (the goal is met, or cannot be), it ends the conversation with
the stop marker. It reacts to what the agent says, as a model-played user would, but
the same agent answers always get the same user message, so runs are reproducible.

`careless_user` plays the Lisbon booking the way a poorly pinned simulator does: it
never gives the date its instructions name. Its trials are audited as
`simulator_fault` (the user strayed), not as failures of the agent.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

STOP = "###STOP###"

# reference id → (opening message, [(pattern on the agent's last answer, reply)])
Script = tuple[str | None, list[tuple[str, str]]]
SCRIPTS: dict[str, Script] = {
    "sim-book-lisbon": (
        "Hi, I need a flight.",
        [
            (r"(?i)from where", "A flight from Paris to Lisbon on 2025-06-12, please."),
            (r"(?i)cheapest is", "Book the cheapest one."),
            (r"(?i)booked .*confirmed", STOP),
        ],
    ),
    # Opened by the reference's own `query:`; the rules take it from there.
    "sim-weather-fahrenheit": (
        None,
        [
            (r"Paris", "And in Fahrenheit?"),  # whatever unit came first, as instructed
            (r".", f"Thanks! {STOP}"),
        ],
    ),
}
CARELESS: dict[str, Script] = {
    "sim-book-lisbon": (
        "Hi, I need a flight.",
        [
            (r"(?i)from where", "A flight from Paris to Lisbon next Thursday."),
            (r"(?i)cheapest is", "Book the cheapest one."),
        ],
    ),
}


class ScriptedUser:
    """`reply(scenario, reference_id, transcript)`: the probe's simulator interface."""

    def __init__(self, scripts: dict[str, Script], name: str = "scripted-user") -> None:
        self.scripts = scripts
        self.name = name

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "scripted",
            "model": self.name,
            "settings": {"references": sorted(self.scripts)},
            "prompt_version": "examples/simulated/user.py 1",
        }

    def reply(self, scenario: Any, reference_id: str, transcript: Sequence[tuple[str, str]]) -> str:
        opening, rules = self.scripts.get(reference_id) or SCRIPTS.get(reference_id, (None, []))
        if not transcript:
            return opening or STOP
        last = next((text for role, text in reversed(transcript) if role == "agent"), "")
        sent = {text for role, text in transcript if role == "user"}
        for pattern, message in rules:
            if message not in sent and re.search(pattern, last):
                return message
        return STOP


user = ScriptedUser(SCRIPTS)
careless_user = ScriptedUser({**SCRIPTS, **CARELESS}, name="careless-scripted-user")
