"""The demo's toolbox and plan: read-only research tools and three irreversible ones.

- ``search`` and ``fetch_page`` read the offline corpus (:data:`~reference_agent.world.DEMO_CORPUS`);
  they change nothing, so the agent simply re-runs them after a crash.
- ``write_record`` and ``send_message`` are irreversible and honour idempotency keys: a
  repeated call with the same key returns the first result and has no second effect.
- ``create_file`` is irreversible and takes no key: the "unsafe tool". When a crash hides
  whether it happened, the agent must report the outcome as unknown, never retry it blindly.

>>> from reference_agent.world import World
>>> world = World()
>>> tools = demo_toolbox(world)
>>> tools.call("send_message", {"to": "team", "body": "hi"}, idempotency_key="k").content
'message #1 to team queued in the outbox'
>>> tools.call("send_message", {"to": "team", "body": "hi"}, idempotency_key="k").content
'message #1 to team queued in the outbox'
>>> len(world.effects("send_message"))
1
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .toolbox import Toolbox, ToolResult, tool
from .world import DEMO_CORPUS, World

if TYPE_CHECKING:
    from .scripted import Plan

__all__ = ["DEMO_GOAL", "demo_plan", "demo_toolbox"]

#: The goal of the demo task.
DEMO_GOAL = (
    "Research how agents survive crashes, record a summary, tell the team, "
    "and file a short report."
)


def demo_toolbox(world: World) -> Toolbox:
    """The demo's five tools, acting on ``world``.

    >>> sorted(demo_toolbox(World()).names())
    ['create_file', 'fetch_page', 'search', 'send_message', 'write_record']
    """

    @tool()
    def search(query: str) -> str:
        """Search the offline corpus; returns matching page titles and URLs."""
        words = [w for w in query.lower().split() if w]
        hits = [
            f"{page.title} <{page.url}>"
            for page in DEMO_CORPUS
            if any(w in (page.title + " " + page.text).lower() for w in words)
        ]
        return "\n".join(hits) if hits else "no results"

    @tool()
    def fetch_page(url: str) -> ToolResult:
        """Fetch one page of the offline corpus by URL."""
        for page in DEMO_CORPUS:
            if page.url == url:
                return ToolResult(f"# {page.title}\n{page.text}")
        return ToolResult(f"no page at {url}", is_error=True)

    @tool(irreversible=True, idempotent=True)
    def write_record(key: str, value: str, idempotency_key: str | None = None) -> str:
        """Write a record to the database (irreversible; honours idempotency keys)."""
        seq = len(world.effects("write_record")) + 1
        return world.perform(
            "write_record",
            {"key": key, "value": value},
            idempotency_key=idempotency_key,
            honour_key=True,
            effect=lambda: f"record #{seq} {key!r} written",
        )

    @tool(irreversible=True, idempotent=True)
    def send_message(to: str, body: str, idempotency_key: str | None = None) -> str:
        """Send a message to the outbox (irreversible; honours idempotency keys)."""
        seq = len(world.effects("send_message")) + 1
        return world.perform(
            "send_message",
            {"to": to, "body": body},
            idempotency_key=idempotency_key,
            honour_key=True,
            effect=lambda: f"message #{seq} to {to} queued in the outbox",
        )

    @tool(irreversible=True, idempotent=False)
    def create_file(name: str, content: str) -> str:
        """Create a file (irreversible; takes no idempotency key)."""
        return world.perform(
            "create_file",
            {"name": name, "content": content},
            idempotency_key=None,
            honour_key=False,
            effect=lambda: f"file {name} created ({len(content)} bytes)",
        )

    return Toolbox([search, fetch_page, write_record, send_message, create_file])


def demo_plan() -> Plan:
    """The demo task as a scripted plan: six steps, two of them parallel, then an answer.

    >>> plan = demo_plan()
    >>> len(plan.steps), plan.steps[1].calls[0].name
    (6, 'fetch_page')
    """
    from .scripted import Plan, Step, ToolCall

    summary = "Checkpoint every step; record intents before irreversible actions."
    return Plan(
        steps=(
            Step((ToolCall("search", {"query": "checkpoint idempotency"}),)),
            Step(
                (
                    ToolCall("fetch_page", {"url": "docs://checkpointing"}),
                    ToolCall("fetch_page", {"url": "docs://idempotency"}),
                )
            ),
            Step((ToolCall("write_record", {"key": "summary", "value": summary}),)),
            Step(
                (ToolCall("create_file", {"name": "report.md", "content": "# Report\n" + summary}),)
            ),
            Step(
                (
                    ToolCall("send_message", {"to": "team", "body": "Report filed: report.md"}),
                    ToolCall("write_record", {"key": "status", "value": "reported"}),
                )
            ),
            Step((ToolCall("search", {"query": "write-ahead"}),)),
        ),
        final_answer="Summary recorded, report.md filed and the team told.",
    )
