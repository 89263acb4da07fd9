"""A stateless step worker: it loads the task afresh at the top of every step and saves
with the version it loaded, so that a worker that was paused and wakes up goes on from
the newest checkpoint, not from the state it held (an outside round's design). Its
irreversible calls go through a write-ahead ledger (``checkpoint.actions``), the intent
saved before the call, keys from the task and the ``tool_use`` id.

Two workers can then share a task: whichever saves from a version first has it, and the
other's next save, from a version no longer stored, conflicts and it stops. ``takeover``
used to call this a lost update (worker A, woken while worker B was paused, "wrote over"
B's checkpoint: it had loaded it and gone on from it).

``no_intent``: the twin that saves a step only after its tools ran. A worker that was
paused mid-step goes on from the state it held and makes its irreversible calls before
its save conflicts: both workers act on the task. Caught by ``stops_after_conflict``.
"""

from __future__ import annotations

import contextlib
from typing import Any

from stores import ActionRecord, Checkpoint, ConflictError, RecordedResult

MODEL = "claude-sonnet-4-5"
UNKNOWN = "outcome unknown (the worker restarted during the call): check before repeating it"


class StepWorker:
    #: Bug: a step is saved only after its tools ran (no intent saved before a call).
    no_intent = False

    def __init__(self, task_id: str, client: Any, store: Any, tools: Any) -> None:
        self.task_id, self.client, self.store, self.tools = task_id, client, store, tools

    def run(self, goal: str) -> str:
        if self.store.load(self.task_id) is None:
            with contextlib.suppress(ConflictError):  # another worker created it first: go on from it
                self.store.save(Checkpoint(task_id=self.task_id, goal=goal, messages=[{"role": "user", "content": goal}]))
        for _ in range(40):
            cp = self.store.load(self.task_id)  # every step from the newest checkpoint
            if cp is None or cp.status == "completed":
                return "" if cp is None else cp.final_answer or ""
            try:
                self.step(cp)
            except ConflictError:
                return "another worker has the task"
        raise RuntimeError("step budget spent")

    def step(self, cp: Checkpoint) -> None:
        last = cp.messages[-1]
        uses = [b for b in last["content"] if b["type"] == "tool_use"] if last["role"] == "assistant" else []
        if not uses:
            reply = self.client.messages.create(model=MODEL, max_tokens=1024, messages=cp.messages,
                                                tools=self.tools.definitions())
            content = [b.model_dump(mode="json", exclude_none=True) for b in reply.content]
            cp.messages.append({"role": "assistant", "content": content})
            cp.iteration += 1
            if reply.stop_reason != "tool_use":
                cp.status, cp.final_answer = "completed", "".join(b.get("text", "") for b in content)
            self.store.save(cp)
            return
        blocks = []
        for use in uses:
            spec = self.tools.spec(use["name"])
            record = cp.action(use["id"])
            if record is not None and record.result is not None:
                blocks.append({"type": "tool_result", "tool_use_id": use["id"], "content": record.result.content,
                               **({"is_error": True} if record.result.is_error else {})})
                continue
            if record is not None and spec.irreversible and not spec.idempotent:
                record.state, record.result = "unknown", RecordedResult(content=UNKNOWN, is_error=True)
                blocks.append({"type": "tool_result", "tool_use_id": use["id"], "content": UNKNOWN, "is_error": True})
                continue
            key = f"{self.task_id}:{use['id']}"
            if spec.irreversible and record is None:
                cp.actions.append(ActionRecord(tool_use_id=use["id"], tool_name=use["name"], input=use["input"],
                                               idempotency_key=key))
                if not self.no_intent:
                    cp = self.store.save(cp)  # the intent, with the version loaded: a stale worker stops here
            result = self.tools.call(use["name"], use["input"], idempotency_key=key if spec.idempotent else None)
            done = cp.action(use["id"])
            if done is not None:
                done.state, done.result = "done", RecordedResult(content=result.content, is_error=result.is_error)
                if not self.no_intent:
                    cp = self.store.save(cp)
            blocks.append(result.to_block(use["id"]))
        cp.messages.append({"role": "user", "content": blocks})
        self.store.save(cp)


def step_worker(**bugs: bool) -> Any:
    design = type("StepWorker", (StepWorker,), bugs)

    def run(task_id: str, goal: str, *, client: Any, store: Any, tools: Any) -> str:
        return design(task_id, client, store, tools).run(goal)  # type: ignore[no-any-return]

    return run
