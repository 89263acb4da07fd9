"""An agent that waits for a human's approval before each irreversible call, written from
the user docs as a team outside this project would, with the naive twin such a team writes.

Before an irreversible call it files a request with an approvals service, saves the
pending approval and returns ``"awaiting approval"`` (a clean stop: the checkpoint stays
``running``). A later run looks at the service: a human who has not answered yet leaves
it waiting again, doing nothing; an approval is recorded in the checkpoint, then taken
out of the service's inbox, then acted on under the call's idempotency key.

The human is slow: a request is approved on the third look, each from a run after the
one that filed it. A resume that found nothing to do was taken for the end of an agent
that never marks completion (an outside round's false alarm: ``completed_idempotent``
in the crash-free run); an agent that marks completion is judged by its status.

``pop_approval`` (the twin): takes the approval out of the inbox before recording it. A
crash in between loses it, and the task waits for ever (``resumes_to_completion``).

``delete_when_done``: deletes its checkpoint when the task is done, never marking it
``completed`` (sound, but a stop cannot be told from the end by its status).

``refresh_on_approval`` (the twin an outside round wrote): a save of the approval refused
with ``ConflictError`` loads the newer checkpoint and saves its own state on top, with the
newer version: it erases the work of a worker that took the task over (``no_lost_update``
in takeover, met only by a worker resumed after its pause).
"""

from __future__ import annotations

import uuid
from typing import Any

from pytest_agentckpt import Toolbox
from stores import Checkpoint, CheckpointStore, ConflictError

MODEL = "claude-sonnet-4-5"
#: The look (from a later run than the request's) on which the human approves.
APPROVED_ON_LOOK = 3


def lookup(order: str) -> str:
    """Look up an order."""
    return f"order {order}: open"


def send_invoice(order: str, idempotency_key: str | None = None) -> str:
    """Send the invoice of an order (the billing API drops a repeat with the same key)."""
    return f"invoice of {order} sent"


def approval_tools() -> Toolbox:
    return Toolbox.from_functions(
        lookup, send_invoice, kinds={"lookup": "read_only", "send_invoice": "keyed"},
        inputs={"lookup": [{"order": "A1"}], "send_invoice": [{"order": "A1"}, {"order": "B2"}]},
    )


class Approvals:
    """The approvals service: kept outside the agent, so a crash loses none of it."""

    def __init__(self) -> None:
        self.requested: dict[str, str] = {}  # request -> the run that filed it
        self.looks: dict[str, int] = {}
        self.inbox: set[str] = set()

    def request(self, key: str, run: str) -> None:
        self.requested.setdefault(key, run)

    def look(self, key: str, run: str) -> bool:
        if key in self.requested and self.requested[key] != run and key not in self.inbox:
            self.looks[key] = self.looks.get(key, 0) + 1
            if self.looks[key] == APPROVED_ON_LOOK:
                self.inbox.add(key)
        return key in self.inbox

    def take(self, key: str) -> None:
        self.inbox.discard(key)


SERVICE: dict[str, Approvals] = {}


def approval_agent(*, pop_approval: bool = False, refresh_on_approval: bool = False, delete_when_done: bool = False) -> Any:
    def save_approval(store: CheckpointStore, cp: Checkpoint) -> Checkpoint:
        try:
            return store.save(cp)
        except ConflictError:
            if not refresh_on_approval:
                raise
            newer = store.load(cp.task_id)  # the bug: the newer version, for its own state
            return store.save(cp.model_copy(update={"version": newer.version if newer else 0}))

    def run(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
        service = SERVICE.setdefault(task_id, Approvals())
        this_run = uuid.uuid4().hex
        cp = store.load(task_id) or store.save(
            Checkpoint(task_id=task_id, goal=goal, messages=[{"role": "user", "content": goal}])
        )
        if cp.status == "completed":
            return cp.final_answer or ""
        approved: list[str] = cp.artifacts.setdefault("approved", [])
        while True:
            last = cp.messages[-1]
            if last["role"] == "assistant":
                uses = [b for b in last["content"] if b["type"] == "tool_use"]
                if not uses:
                    text = "".join(b["text"] for b in last["content"] if b["type"] == "text")
                    if delete_when_done:
                        store.delete(task_id)
                        return text
                    cp.status, cp.final_answer = "completed", text
                    store.save(cp)
                    return text
                results = []
                for use in uses:
                    key = f"{task_id}|{use['id']}"
                    if tools.spec(use["name"]).kind != "read_only" and key not in approved:
                        if not service.look(key, this_run):
                            service.request(key, this_run)
                            if cp.artifacts.get("pending") != key:
                                cp.artifacts["pending"] = key
                                cp = store.save(cp)
                            return "awaiting approval"
                        if pop_approval:
                            service.take(key)  # the bug: taken before it is recorded
                        approved.append(key)
                        cp = save_approval(store, cp)
                        service.take(key)
                    result = tools.call(use["name"], use["input"], idempotency_key=f"{task_id}:{use['id']}")
                    results.append({"type": "tool_result", "tool_use_id": use["id"], "content": result.content})
                cp.messages.append({"role": "user", "content": results})
                cp.artifacts.pop("pending", None)
                cp = store.save(cp)
                approved = cp.artifacts.setdefault("approved", [])
                continue
            reply = client.messages.create(model=MODEL, max_tokens=1024, messages=cp.messages, tools=tools.definitions())
            cp.messages.append({"role": "assistant", "content": [b.model_dump(mode="json", exclude_none=True) for b in reply.content]})
            cp.iteration += 1
            cp = store.save(cp)
            approved = cp.artifacts.setdefault("approved", [])

    return run
