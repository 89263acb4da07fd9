"""An agent that saves in batches: a design from outside the project (written from the
docs alone, as a user would).

The checkpoint is written every third model turn, write-ahead around calls that change
the world (the reply and the turn's intents in one save before its first such call; an
unkeyed call's outcome right after it), and on completion. A turn of read-only calls is
not saved: a crash loses it, and the resume asks the model again (a new reply), which
redoes only read-only work. Keyed and repeat-safe outcomes are recorded lazily: on resume
they run again under the same key. With ``budget``, a turn past it is refused (the stored
iteration counts turns across restarts), so one crash may cost up to three turns.

Twins (class switches):

- ``keys_without_intents``: no write-ahead save; keys come from the ids of a reply never
  saved, so a resume does a keyed action again under a new key (``no_duplicate_effect``);
- ``reruns_unkeyed``: on resume, every started call runs again, unkeyed ones included
  ("the key protects us"; ``no_duplicate_effect``).
"""

from __future__ import annotations

from typing import Any

from stores import ActionRecord, Checkpoint, CheckpointStore, RecordedResult

MODEL = "claude-sonnet-4-5"
SAVE_EVERY = 3


def _kind(tools: Any, name: str) -> str:
    return str(tools.spec(name).kind) if name in tools else "read_only"


def _block(use_id: str, content: Any, is_error: bool) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": use_id, "content": content}
    return {**block, "is_error": True} if is_error else block


class Batched:
    budget: int | None = None
    keys_without_intents = False  # twin
    reruns_unkeyed = False  # twin

    def __init__(self, task_id: str, client: Any, store: CheckpointStore, tools: Any) -> None:
        self.task_id, self.client, self.store, self.tools = task_id, client, store, tools

    def save(self) -> None:
        self.cp = self.store.save(self.cp)

    def execute(self, uses: list[dict[str, Any]], *, resuming: bool) -> list[dict[str, Any]]:
        """Run a turn's calls in order; their tool_result blocks."""
        if not self.keys_without_intents:
            fresh = [u for u in uses if _kind(self.tools, u["name"]) != "read_only" and self.cp.action(u["id"]) is None]
            for use in fresh:
                self.cp.actions.append(
                    ActionRecord(
                        tool_use_id=use["id"], tool_name=use["name"], input=use.get("input") or {},
                        idempotency_key=f"{self.task_id}:{use['id']}",
                    )
                )
            if fresh:
                self.save()  # the reply and every intent of the turn, before any effect
        results = []
        for use in uses:
            name, args, use_id = use["name"], use.get("input") or {}, use["id"]
            kind = _kind(self.tools, name)
            record = self.cp.action(use_id)
            if record is not None and record.result is not None:
                results.append(_block(use_id, record.result.content, record.result.is_error))
                continue
            if resuming and kind == "unkeyed" and record is not None and not self.reruns_unkeyed:
                record.state = "unknown"
                record.result = RecordedResult(
                    content=f"The outcome of {name} is unknown (the agent stopped while it ran). "
                    "Check whether it happened before doing it again.",
                    is_error=True,
                )
                results.append(_block(use_id, record.result.content, True))
                continue
            if kind == "read_only":
                result = self.tools.call(name, args)
            else:
                result = self.tools.call(name, args, idempotency_key=f"{self.task_id}:{use_id}")
            if record is not None:
                record.state, record.result = "done", RecordedResult(content=result.content, is_error=result.is_error)
                if kind == "unkeyed":
                    self.save()  # an unkeyed outcome cannot be found again: record it now
            results.append(_block(use_id, result.content, result.is_error))
        return results

    def run(self, goal: str) -> str:
        loaded = self.store.load(self.task_id)
        if loaded is None:
            loaded = self.store.save(
                Checkpoint(task_id=self.task_id, goal=goal, messages=[{"role": "user", "content": goal}])
            )
        self.cp = loaded
        if self.cp.status == "completed":
            return self.cp.final_answer or ""
        last = self.cp.messages[-1]
        if last["role"] == "assistant":  # a turn whose results were never saved
            pending = [b for b in last["content"] if b.get("type") == "tool_use"]
            self.cp.messages.append({"role": "user", "content": self.execute(pending, resuming=True)})
        unsaved = 0
        while True:
            if self.budget is not None and self.cp.iteration >= self.budget:
                self.save()
                raise RuntimeError(f"budget of {self.budget} model turns spent")
            reply = self.client.messages.create(
                model=MODEL, max_tokens=1024, messages=self.cp.messages, tools=self.tools.definitions()
            )
            content = [b.model_dump(mode="json", exclude_none=True) for b in reply.content]
            self.cp.messages.append({"role": "assistant", "content": content})
            self.cp.iteration += 1
            if reply.stop_reason != "tool_use":
                answer = "".join(b.get("text", "") for b in content if b["type"] == "text")
                self.cp.status, self.cp.final_answer = "completed", answer
                self.save()
                return answer
            uses = [b for b in content if b["type"] == "tool_use"]
            self.cp.messages.append({"role": "user", "content": self.execute(uses, resuming=False)})
            unsaved += 1
            if unsaved >= SAVE_EVERY:
                self.save()
                unsaved = 0


def batched_agent(**switches: Any) -> Any:
    design = type("Batched", (Batched,), switches)

    def run(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
        return design(task_id, client, store, tools).run(goal)

    return run
