"""A customer-service agent loop that counts tokens before every turn.

The design of cookbook agents that watch their context window: before each
``messages.create`` the loop asks ``messages.count_tokens`` how big the request is and
stops cleanly (resumable, nothing lost) when it would not fit. ``count_tokens`` is not
a model turn: it generates nothing, and the harness does not count it as one.

Its checkpoint is the plain one: ``messages`` is the history; the ledger of calls that
change the world lives in ``artifacts["calls"]`` (tool_use id -> started / result), and
finished tool_use ids in ``completed_tasks``. Sound because every call that changes
the world is recorded as started before it runs and with its result after; on resume a
started call is run again only when a repeat is harmless (keyed, with the same key, or
repeat-safe), and an unkeyed one is answered "outcome unknown: check before retrying"
(never "please retry"); the checkpoint is kept on completion.
"""

from __future__ import annotations

from typing import Any

from stores import Checkpoint, CheckpointStore

MODEL = "claude-sonnet-4-5"
CONTEXT_LIMIT = 150_000


class ContextFullError(RuntimeError):
    """The next request would not fit the context window; the task stays resumable."""


# --8<-- [start:tools]
def lookup_order(order_id: str) -> str:
    """Look an order up: its items, status and amount."""
    return f"order {order_id}: 1 kettle, delivered, 40 EUR"


def refund(order_id: str, amount: int, idempotency_key: str | None = None) -> str:
    """Refund part or all of an order. The payment API drops a repeat with the same key."""
    return f"refunded {amount} EUR on order {order_id}"


def send_sms(phone: str, text: str) -> str:
    """Text the customer. The SMS gateway has no idempotency key."""
    return f"sms to {phone} sent"


# --8<-- [end:tools]


# --8<-- [start:loop]
def run(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
    cp = store.load(task_id) or store.save(
        Checkpoint(task_id=task_id, goal=goal, messages=[{"role": "user", "content": goal}], artifacts={"calls": {}})
    )
    while cp.status != "completed":
        cp = _answer_pending(cp, store, tools)
        request = {"model": MODEL, "messages": cp.messages, "tools": tools.definitions()}
        if client.messages.count_tokens(**request).input_tokens > CONTEXT_LIMIT:
            raise ContextFullError(f"task {task_id}: the history no longer fits; compact it and resume")
        reply = client.messages.create(max_tokens=1024, **request)
        content = [block.model_dump(mode="json", exclude_none=True) for block in reply.content]
        update: dict[str, Any] = {"messages": [*cp.messages, {"role": "assistant", "content": content}]}
        update["iteration"] = cp.iteration + 1
        if reply.stop_reason != "tool_use":
            update["status"] = "completed"
            update["final_answer"] = "".join(b.get("text", "") for b in content if b["type"] == "text")
        cp = store.save(cp.model_copy(update=update))
    return cp.final_answer or ""


def _answer_pending(cp: Checkpoint, store: CheckpointStore, tools: Any) -> Checkpoint:
    """Answer the last turn's tool calls, one by one, each answer saved."""
    last = cp.messages[-1]
    if last["role"] != "assistant":
        return cp
    for use in [b for b in last["content"] if b.get("type") == "tool_use"]:
        if use["id"] in cp.completed_tasks:
            continue
        cp, block = _call(cp, store, tools, use)
        cp = store.save(cp.model_copy(update={
            "artifacts": {"calls": {**cp.artifacts["calls"], use["id"]: {"result": block}}},
            "completed_tasks": [*cp.completed_tasks, use["id"]],
        }))
    results = [cp.artifacts["calls"][b["id"]]["result"] for b in last["content"] if b.get("type") == "tool_use"]
    return store.save(cp.model_copy(update={"messages": [*cp.messages, {"role": "user", "content": results}]}))


def _call(cp: Checkpoint, store: CheckpointStore, tools: Any, use: dict[str, Any]) -> tuple[Checkpoint, Any]:
    name, tool_input, use_id = use["name"], use.get("input") or {}, use["id"]
    kind = tools.spec(name).kind if name in tools else "read_only"
    key = f"{cp.task_id}.{use_id}"
    if kind != "read_only":
        if use_id in cp.artifacts["calls"] and kind == "unkeyed":
            return cp, {
                "type": "tool_result", "tool_use_id": use_id, "is_error": True,
                "content": f"{name} may or may not have happened (the agent restarted while it ran): "
                "check before retrying.",
            }
        calls = {**cp.artifacts["calls"], use_id: {"started": key}}
        cp = store.save(cp.model_copy(update={"artifacts": {"calls": calls}}))  # before the effect
    return cp, tools.call(name, tool_input, idempotency_key=key).to_block(use_id)


# --8<-- [end:loop]
