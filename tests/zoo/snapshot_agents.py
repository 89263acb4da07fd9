"""An agent that never overwrites a checkpoint: every save is a new snapshot under
``f"{task_id}@{n}"`` (saved with version 0, so it must not exist yet), tagged with the task
in its metadata; a load lists the task's snapshots and takes the newest. That is how
LangGraph keeps its checkpoint history, written here on the SDK as a team would, with a
write-ahead ledger (``checkpoint.actions``) for its irreversible tools and keys made from
the task and the ``tool_use`` id.

Its naive twin numbers its snapshots without padding and takes the largest id as text for
the newest: past nine saves, ``task@10`` sorts before ``task@9``, and a resume goes on from
an older snapshot. Caught by ``no_duplicate_effect``, whose report says that the reply
asking for the call had been saved and the resume went on from a checkpoint without it
(it said, before, that the agent had never saved the reply).
"""

from __future__ import annotations

from typing import Any

from stores import ActionRecord, Checkpoint, CheckpointSummary, RecordedResult

MODEL = "claude-sonnet-4-5"
UNKNOWN = "outcome unknown (the agent restarted during the call): check before repeating it"


class Snapshots:
    #: Bug: unpadded numbers, the newest taken as the largest id as text.
    sorts_as_text = False

    def __init__(self, client: Any, store: Any, tools: Any, task_id: str) -> None:
        self.client, self.store, self.tools, self.task_id = client, store, tools, task_id
        self.n = 0

    def number(self, snapshot: CheckpointSummary) -> int:
        return int(snapshot.task_id.rsplit("@", 1)[1])

    def load(self) -> Checkpoint | None:
        snapshots = self.store.list_checkpoints(metadata={"task": self.task_id})
        if not snapshots:
            return None
        self.n = max(self.number(s) for s in snapshots)
        newest = max(snapshots, key=lambda s: s.task_id) if self.sorts_as_text else max(snapshots, key=self.number)
        return self.store.load(newest.task_id)  # type: ignore[no-any-return]

    def save(self, cp: Checkpoint) -> Checkpoint:
        self.n += 1
        name = f"{self.task_id}@{self.n}" if self.sorts_as_text else f"{self.task_id}@{self.n:05d}"
        data = cp.model_dump()
        data.update(task_id=name, version=0, metadata={"task": self.task_id})
        return self.store.save(Checkpoint.model_validate(data))  # type: ignore[no-any-return]

    def run(self, goal: str) -> str:
        cp = self.load()
        if cp is None:
            cp = self.save(Checkpoint(task_id=self.task_id, goal=goal, messages=[{"role": "user", "content": goal}]))
        if cp.status == "completed":
            return cp.final_answer or ""
        while cp.iteration < 30:
            last = cp.messages[-1]
            uses = [b for b in last["content"] if b["type"] == "tool_use"] if last["role"] == "assistant" else []
            if uses:
                cp = self.answer(cp, uses)
                continue
            reply = self.client.messages.create(
                model=MODEL, max_tokens=1024, messages=cp.messages, tools=self.tools.definitions()
            )
            content = [b.model_dump(mode="json", exclude_none=True) for b in reply.content]
            cp.messages.append({"role": "assistant", "content": content})
            cp.iteration += 1
            if reply.stop_reason != "tool_use":
                cp.status, cp.final_answer = "completed", "".join(b.get("text", "") for b in content)
                self.save(cp)
                return cp.final_answer
            cp = self.save(cp)
        raise RuntimeError("turn budget spent")

    def answer(self, cp: Checkpoint, uses: list[dict[str, Any]]) -> Checkpoint:
        blocks = []
        for use in uses:
            spec = self.tools.spec(use["name"])
            record = cp.action(use["id"])
            if record is not None and record.result is not None:
                error = {"is_error": True} if record.result.is_error else {}
                blocks.append({"type": "tool_result", "tool_use_id": use["id"], "content": record.result.content, **error})
                continue
            if spec.irreversible and record is not None and not spec.idempotent:
                record.state, record.result = "unknown", RecordedResult(content=UNKNOWN, is_error=True)
                cp = self.save(cp)
                blocks.append({"type": "tool_result", "tool_use_id": use["id"], "content": UNKNOWN, "is_error": True})
                continue
            key = f"{self.task_id}:{use['id']}"
            if spec.irreversible and record is None:
                cp.actions.append(
                    ActionRecord(tool_use_id=use["id"], tool_name=use["name"], input=use["input"], idempotency_key=key)
                )
                cp = self.save(cp)
            result = self.tools.call(use["name"], use["input"], idempotency_key=key if spec.idempotent else None)
            if spec.irreversible:
                done = cp.action(use["id"])
                assert done is not None
                done.state, done.result = "done", RecordedResult(content=result.content, is_error=result.is_error)
                cp = self.save(cp)
            blocks.append(result.to_block(use["id"]))
        cp.messages.append({"role": "user", "content": blocks})
        return self.save(cp)


def snapshot_agent(**bugs: bool) -> Any:
    design = type("Snapshots", (Snapshots,), bugs)

    def run(task_id: str, goal: str, *, client: Any, store: Any, tools: Any) -> str:
        return design(client, store, tools, task_id).run(goal)

    return run
