"""An event-sourced agent: its history is rebuilt from an event log in ``checkpoint.artifacts``.

``checkpoint.messages`` stays empty, so the harness finds the history only where the team
tells it (``agentckpt_history``). ``run_redoes_a_turn`` has a planted bug: on load, it drops
a saved reply whose tool calls have not started and asks the model again.
"""

from __future__ import annotations

import functools
from typing import Any

from stores import Checkpoint, CheckpointStore

MODEL = "claude-sonnet-4-5"


def rebuild(goal: str, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Messages-API history the event log stands for."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": goal}]
    finished = {e["id"]: e for e in events if e["type"] == "tool_finished"}
    for event in events:
        if event["type"] != "model_replied":
            continue
        messages.append({"role": "assistant", "content": event["content"]})
        uses = [b for b in event["content"] if b.get("type") == "tool_use"]
        if uses and all(u["id"] in finished for u in uses):
            blocks = []
            for use in uses:
                done = finished[use["id"]]
                block = {"type": "tool_result", "tool_use_id": use["id"], "content": done["content"]}
                if done["is_error"]:
                    block["is_error"] = True
                blocks.append(block)
            messages.append({"role": "user", "content": blocks})
    return messages


def history_of(checkpoint: Checkpoint) -> list[dict[str, Any]]:
    """Where this agent keeps its history: for ``agentckpt_history``."""
    return rebuild(checkpoint.goal or "", checkpoint.artifacts.get("events", []))


class _Log:
    def __init__(self, store: CheckpointStore, checkpoint: Checkpoint) -> None:
        self.store, self.cp = store, checkpoint
        self.events: list[dict[str, Any]] = list(checkpoint.artifacts.get("events", []))

    def append(self, *events: dict[str, Any], **fields: Any) -> None:
        new = self.events + list(events)
        self.cp = self.store.save(self.cp.model_copy(update={"artifacts": {**self.cp.artifacts, "events": new}, **fields}))
        self.events = new

    def find(self, kind: str, use_id: str) -> dict[str, Any] | None:
        return next((e for e in self.events if e["type"] == kind and e["id"] == use_id), None)


def _settle(task_id: str, log: _Log, tools: Any, use: dict[str, Any]) -> None:
    name, args, use_id = use["name"], use.get("input") or {}, use["id"]
    kind = tools.spec(name).kind if name in tools else "read_only"
    if kind in ("read_only", "repeat_safe"):
        result = tools.call(name, args)
        log.append({"type": "tool_finished", "id": use_id, "content": result.content, "is_error": result.is_error})
        return
    started = log.find("tool_started", use_id)
    if started is not None and kind == "unkeyed":
        log.append(
            {"type": "tool_finished", "id": use_id, "is_error": True, "content": f"{name}: outcome unknown, check first"}
        )
        return
    if started is None:
        started = {"type": "tool_started", "id": use_id, "key": f"{task_id}:{use_id}"}
        log.append(started)  # the intent, durable before the effect
    if kind == "keyed":
        result = tools.call(name, args, idempotency_key=started["key"])
    else:
        result = tools.call(name, args)
    log.append({"type": "tool_finished", "id": use_id, "content": result.content, "is_error": result.is_error})


def _run(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any, redo_turn: bool) -> str:
    checkpoint = store.load(task_id)
    if checkpoint is None:
        checkpoint = store.save(Checkpoint(task_id=task_id, goal=goal, artifacts={"events": []}))
    if checkpoint.status == "completed":
        return checkpoint.final_answer or ""
    log = _Log(store, checkpoint)
    if redo_turn and log.events and log.events[-1]["type"] == "model_replied":
        log.events = log.events[:-1]  # BUG: "redo the turn we have no results for"
    while True:
        replies = [e for e in log.events if e["type"] == "model_replied"]
        uses = [b for b in replies[-1]["content"] if b.get("type") == "tool_use"] if replies else []
        for use in uses:
            if log.find("tool_finished", use["id"]) is None:
                _settle(task_id, log, tools, use)
        reply = client.messages.create(
            model=MODEL, max_tokens=1024, messages=rebuild(goal, log.events), tools=tools.definitions()
        )
        content = [b.model_dump(mode="json", exclude_none=True) for b in reply.content]
        event = {"type": "model_replied", "content": content}
        iteration = log.cp.iteration + 1
        if reply.stop_reason != "tool_use":
            answer = "".join(b.get("text", "") for b in content if b["type"] == "text")
            log.append(event, iteration=iteration, status="completed", final_answer=answer)
            return answer
        log.append(event, iteration=iteration)


run = functools.partial(_run, redo_turn=False)
run_redoes_a_turn = functools.partial(_run, redo_turn=True)
