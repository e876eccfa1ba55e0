"""A scripted agent for τ²-bench's mock domain (task management), instrumented with
tracepass's decorators: the `tracepass probe` target of the τ² replay test.

    answer(query) -> str    # probe's module target

Keyword rules stand in for the model: "called 'T' for user_N" creates a task, "task_N
… completed" updates one, "delete" is not possible with these tools and goes to a human.
`TAU2_MOCK_AGENT_BUG=1` makes it create every task for user_2 (a wrong argument).
"""

from __future__ import annotations

import os
import re

from tracepass.instrumentation import agent, tool

_TASKS: dict[str, dict[str, str]] = {"task_1": {"title": "Existing", "status": "pending"}}


@tool
def create_task(user_id: str, title: str) -> dict[str, str]:
    task_id = f"task_{len(_TASKS) + 1}"
    _TASKS[task_id] = {"title": title, "status": "pending", "user_id": user_id}
    return {"task_id": task_id, "title": title, "status": "pending"}


@tool
def update_task_status(task_id: str, status: str) -> dict[str, str]:
    return {"task_id": task_id, "status": status}


@tool
def transfer_to_human_agents(summary: str) -> str:
    return "Transfer successful"


@agent(name="tau2-mock-agent", version="1")
def answer(query: str) -> str:
    if m := re.search(r"called '([^']+)' for (user_\d+)", query):
        user = "user_2" if os.environ.get("TAU2_MOCK_AGENT_BUG") else m.group(2)
        task = create_task(user_id=user, title=m.group(1))
        return f"Created {task['task_id']} '{task['title']}' for {user}."
    if (m := re.search(r"(task_\d+)", query)) and "completed" in query:
        done = update_task_status(task_id=m.group(1), status="completed")
        return f"{done['task_id']} is now {done['status']}."
    if "delete" in query.lower():
        transfer_to_human_agents(summary=f"User asks: {query}")
        return "I cannot delete tasks; I transferred you to a human agent."
    return "How can I help with your tasks?"
