"""An async agent loop that runs each turn's tool calls at once, with ``asyncio.gather``.

The design of many quick-start agents: one ``async def`` loop on ``AsyncAnthropic``, the
tools ``async def`` too, all the calls of a turn started together. What makes it survive
a crash is small and local:

- the checkpoint's ``messages`` is the history, saved after every model reply and every
  tool result (each as it arrives, so a crash loses as little as possible);
- every tool that changes the world gets a write-ahead record in ``checkpoint.actions``
  (the intent, durable before the call; the outcome, durable after it);
- on resume, the calls of the last turn that have no result yet (any of them: a crash
  can leave a turn answered in part) are settled: from the ledger
  when the outcome is recorded, again when a repeat is harmless (read-only, repeat-safe,
  keyed with the same key), and otherwise answered "outcome unknown, check first";
- completion keeps the checkpoint (``status="completed"``), so running the task again
  returns the answer without a model call.
"""

from __future__ import annotations

import asyncio
from typing import Any

from stores import ActionRecord, Checkpoint, CheckpointStore, RecordedResult

MODEL = "claude-sonnet-4-5"


# --8<-- [start:tools]
async def fetch_page(url: str) -> str:
    """Fetch a web page and return its text.

    Args:
        url: the page's address
    """
    await asyncio.sleep(0)  # a real tool awaits the network here
    return f"text of {url}"


async def put_record(key: str, value: str) -> str:
    """Store ``value`` under ``key`` in the CRM, replacing what was there."""
    await asyncio.sleep(0)
    return f"{key} = {value}"


async def send_invoice(customer: str, amount: int, idempotency_key: str | None = None) -> str:
    """Send an invoice to a customer. The billing API drops a repeat with the same key."""
    await asyncio.sleep(0)
    return f"invoice of {amount} EUR sent to {customer}"


# --8<-- [end:tools]


# --8<-- [start:loop]
async def run(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
    checkpoint = store.load(task_id)
    if checkpoint is None:
        checkpoint = store.save(Checkpoint(task_id=task_id, goal=goal, messages=[{"role": "user", "content": goal}]))
    if checkpoint.status == "completed":
        return checkpoint.final_answer or ""
    state = _State(task_id, checkpoint, store, tools)
    while True:
        pending = _unanswered(state.cp.messages)
        if pending:
            await asyncio.gather(*(state.settle(use) for use in pending))
        reply = await client.messages.create(
            model=MODEL, max_tokens=1024, messages=state.cp.messages, tools=tools.definitions()
        )
        content = [block.model_dump(mode="json", exclude_none=True) for block in reply.content]
        state.cp.messages.append({"role": "assistant", "content": content})
        state.cp.iteration += 1
        if reply.stop_reason != "tool_use":
            answer = "".join(block.get("text", "") for block in content if block["type"] == "text")
            state.cp.status, state.cp.final_answer = "completed", answer
            state.save()
            return answer
        state.save()


# --8<-- [end:loop]


# --8<-- [start:settle]
class _State:
    """The checkpoint of one attempt, shared by the calls of a turn: each save is a
    compare-and-set on its version, and the returned checkpoint carries the next one."""

    def __init__(self, task_id: str, cp: Checkpoint, store: CheckpointStore, tools: Any) -> None:
        self.task_id, self.cp, self.store, self.tools = task_id, cp, store, tools

    def save(self) -> None:
        self.cp = self.store.save(self.cp)

    def answer(self, use_id: str, result: RecordedResult) -> None:
        """The result into the history, durably (with its ledger entry, if any)."""
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": use_id, "content": result.content}
        if result.is_error:
            block["is_error"] = True
        _answer(self.cp.messages, block)
        self.save()

    async def settle(self, use: dict[str, Any]) -> None:
        name, tool_input, use_id = use["name"], use.get("input") or {}, use["id"]
        kind = self.tools.spec(name).kind if name in self.tools else "read_only"
        if kind == "read_only":
            result = await self.tools.call(name, tool_input)
            return self.answer(use_id, RecordedResult(content=result.content, is_error=result.is_error))
        record = self.cp.action(use_id)
        if record is not None and record.result is not None:
            return self.answer(use_id, record.result)
        if record is not None and kind == "unkeyed":
            # Started, outcome unknown, and no way to ask twice safely: say so.
            record.state = "unknown"
            record.result = RecordedResult(
                content=f"The outcome of {name} is unknown (the agent stopped while it ran). "
                "Check whether it happened before doing it again.",
                is_error=True,
            )
            return self.answer(use_id, record.result)
        if record is None:
            record = ActionRecord(
                tool_use_id=use_id, tool_name=name, input=tool_input, idempotency_key=f"{self.task_id}:{use_id}"
            )
            self.cp.actions.append(record)
            self.save()  # write-ahead: no durable intent, no effect
        result = await self.tools.call(name, tool_input, idempotency_key=record.idempotency_key)
        record.state = "done"
        record.result = RecordedResult(content=result.content, is_error=result.is_error)
        self.answer(use_id, record.result)


# --8<-- [end:settle]


def _unanswered(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``tool_use`` blocks of the last assistant turn that have no ``tool_result``."""
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=None)
    if last is None:
        return []
    content = messages[last]["content"]
    uses = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
    answered = {
        b.get("tool_use_id")
        for m in messages[last + 1 :]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    }
    return [u for u in uses if u["id"] not in answered]


def _answer(messages: list[dict[str, Any]], block: dict[str, Any]) -> None:
    """Add a result to the user turn after the last reply (a new one if there is none)."""
    if messages[-1]["role"] == "user" and isinstance(messages[-1]["content"], list):
        messages[-1]["content"].append(block)
    else:
        messages.append({"role": "user", "content": [block]})
