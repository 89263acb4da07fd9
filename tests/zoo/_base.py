"""The false-alarm zoo's common ground: a write-ahead ledger and one checkpointed loop whose
design choices (how tools run, how state is kept, what a store failure does, what happens
on completion) each zoo agent makes differently from the reference agent.

Each design comes with ``bug=`` switches: the sound agent has none; its buggy twin turns on
one, which the harness must still catch.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from stores import ActionRecord, Checkpoint, CheckpointStore, RecordedResult

UNKNOWN = "OUTCOME UNKNOWN: the run ended before this action's outcome was recorded; check before doing it again."


def key_for(task_id: str, tool_use_id: str) -> str:
    return "z-" + hashlib.sha256(f"{task_id}:{tool_use_id}".encode()).hexdigest()[:16]


def tool_uses(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [b for b in content if b.get("type") == "tool_use"]


def text_of(content: list[dict[str, Any]]) -> str:
    return "".join(b.get("text", "") for b in content if b.get("type") == "text")


class Loop:
    """A sound checkpointed loop; subclasses change one design choice each.

    Write-ahead for irreversible tools: intents saved before the batch runs, outcomes
    and the results saved together after it; on resume a recorded outcome is reused, a
    keyed intent is re-run with its key, an unkeyed one is answered "outcome unknown".
    """

    max_iterations = 40
    #: Saves retried on a store failure before the agent gives up (raises).
    save_attempts = 3
    #: Bugs: re-run an unkeyed intent on resume; answer only the first pending call on
    #: resume; reset the iteration count on resume; re-ask the model for a stored reply.
    rerun_unkeyed_intent = False
    answer_first_pending_only = False
    iteration_resets = False
    reask_stored_reply = False
    no_intent = False

    def __init__(self, task_id: str, goal: str, client: Any, store: CheckpointStore, tools: Any) -> None:
        self.task_id, self.goal, self.client, self.store, self.tools = task_id, goal, client, store, tools
        self.cp = Checkpoint(task_id=task_id, goal=goal)
        self.history: list[dict[str, Any]] = []

    # -- state: where the history lives (own-state agents override) ------------------------
    def read_history(self, cp: Checkpoint) -> list[dict[str, Any]]:
        return list(cp.messages)

    def write_history(self) -> None:
        self.cp.messages = list(self.history)

    def save(self) -> None:
        self.write_history()
        for attempt in range(self.save_attempts):
            try:
                self.cp = self.store.save(self.cp)
                return
            except Exception:
                if attempt == self.save_attempts - 1:
                    raise
                time.sleep(0)

    # -- the loop --------------------------------------------------------------------------
    def run(self) -> str:
        self.before_load()
        loaded = self.store.load(self.task_id)
        if loaded is None:
            self.history = [{"role": "user", "content": self.goal}]
            self.save()
        else:
            self.cp = loaded
            self.history = self.read_history(loaded)
            done = self.finished(loaded)
            if done is not None:
                return done
            if self.iteration_resets:
                self.cp.iteration = 0
            self.resume()
        while self.cp.iteration < self.max_iterations:
            content = self.reply()
            self.cp.iteration += 1
            self.history.append({"role": "assistant", "content": content})
            uses = tool_uses(content)
            if not uses:
                return self.complete(text_of(content))
            self.save()
            self.answer(uses)
        raise RuntimeError("iteration budget exhausted")

    def reply(self) -> list[dict[str, Any]]:
        """The model's next reply to the history, as content blocks."""
        reply = self.client.messages.create(
            model="zoo-agent", max_tokens=1024, messages=self.history, tools=self.tools.definitions()
        )
        return [block.model_dump(mode="json", exclude_none=True) for block in reply.content]

    def before_load(self) -> None:
        """What the agent does before it looks at its checkpoint (count_tokens agents)."""

    def finished(self, cp: Checkpoint) -> str | None:
        """The answer of a completed task, ``None`` while it runs."""
        return (cp.final_answer or "") if cp.status == "completed" else None

    def complete(self, answer: str) -> str:
        self.cp.status, self.cp.final_answer = "completed", answer
        self.save()
        return answer

    def resume(self) -> None:
        last = self.history[-1] if self.history else None
        if last is None or last["role"] != "assistant" or isinstance(last["content"], str):
            return
        uses = tool_uses(last["content"])
        if not uses:
            return
        if self.reask_stored_reply:
            self.history.pop()  # BUG: asks the model again for a reply the checkpoint holds
            return
        if self.answer_first_pending_only:
            uses = uses[:1]  # BUG: the other calls of the batch stay unanswered
        self.answer(uses)

    def answer(self, uses: list[dict[str, Any]]) -> None:
        """Answer ``uses`` (the last assistant message's calls) with one user message."""
        results, to_run = self.prepare(uses)
        self.finish(uses, results, to_run, self.run_batch(to_run))

    def prepare(self, uses: list[dict[str, Any]]) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
        """Settle what the ledger already knows; record (and save) the new intents."""
        results: dict[str, dict[str, Any]] = {}
        to_run: list[dict[str, Any]] = []
        new_intent = False
        for use in uses:
            spec = self.tools.spec(use["name"])
            record = self.cp.action(use["id"])
            if not spec.irreversible or self.no_intent:
                to_run.append(use)
            elif record is not None and record.state == "done" and record.result is not None:
                results[use["id"]] = {
                    "type": "tool_result", "tool_use_id": use["id"], "content": record.result.content,
                    **({"is_error": True} if record.result.is_error else {}),
                }
            elif record is not None and not spec.idempotent and not self.rerun_unkeyed_intent:
                record.state = "unknown"
                results[use["id"]] = {"type": "tool_result", "tool_use_id": use["id"], "content": UNKNOWN, "is_error": True}
            else:
                if record is None:
                    self.cp.actions.append(
                        ActionRecord(tool_use_id=use["id"], tool_name=use["name"], input=use["input"],
                                     idempotency_key=key_for(self.task_id, use["id"]))
                    )
                    new_intent = True
                to_run.append(use)
        if new_intent:
            self.save()
        return results, to_run

    def finish(
        self,
        uses: list[dict[str, Any]],
        results: dict[str, dict[str, Any]],
        to_run: list[dict[str, Any]],
        outputs: list[Any],
    ) -> None:
        for use, result in zip(to_run, outputs, strict=True):
            record = self.cp.action(use["id"])
            if record is not None:
                record.state = "done"
                record.result = RecordedResult(content=result.content, is_error=result.is_error)
            results[use["id"]] = result.to_block(use["id"])
        self.history.append({"role": "user", "content": [results[u["id"]] for u in uses]})
        self.save()

    def call(self, use: dict[str, Any]) -> Any:
        return self.tools.call(use["name"], use["input"], idempotency_key=key_for(self.task_id, use["id"]))

    def run_batch(self, uses: list[dict[str, Any]]) -> list[Any]:
        return [self.call(use) for use in uses]


class Threaded(Loop):
    """Runs a tool batch in a thread pool."""

    def run_batch(self, uses: list[dict[str, Any]]) -> list[Any]:
        if not uses:
            return []
        with ThreadPoolExecutor(max_workers=len(uses)) as pool:
            return list(pool.map(self.call, uses))


def agent(cls: type[Loop], **switches: Any) -> Callable[..., str]:
    """``run(task_id, goal, *, client, store, tools)`` for a design (and its bugs)."""
    design = type(cls.__name__, (cls,), switches) if switches else cls

    def run(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
        return design(task_id, goal, client, store, tools).run()

    run.__qualname__ = f"{cls.__name__}{'_' + '_'.join(sorted(switches)) if switches else ''}"
    return run


def is_results(message: dict[str, Any]) -> bool:
    """Whether ``message`` is a user message of tool results."""
    content = message["content"]
    return message["role"] == "user" and isinstance(content, list) and bool(content) and content[0].get("type") == "tool_result"


class Journal:
    """Answers the calls of a turn with a write-ahead ledger in ``checkpoint.actions``: a
    recorded outcome is reused, a keyed or repeat-safe call made again with its key, an
    unkeyed one in doubt answered "outcome unknown". The zoo's one-class loops (thinking,
    server tools) share it; each saves in its own way (``save``)."""

    task_id: str
    cp: Checkpoint
    tools: Any

    def save(self) -> None:
        raise NotImplementedError

    def answer(self, use_id: str, result: RecordedResult) -> None:
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": use_id, "content": result.content}
        if result.is_error:
            block["is_error"] = True
        if is_results(self.cp.messages[-1]):
            self.cp.messages[-1]["content"].append(block)
        else:
            self.cp.messages.append({"role": "user", "content": [block]})
        self.save()

    def settle(self, use: dict[str, Any]) -> None:
        name, tool_input, use_id = use["name"], use.get("input") or {}, use["id"]
        kind = self.tools.spec(name).kind if name in self.tools else "read_only"
        if kind == "read_only":
            done = self.tools.call(name, tool_input)
            return self.answer(use_id, RecordedResult(content=done.content, is_error=done.is_error))
        record = self.cp.action(use_id)
        if record is not None and record.result is not None:
            return self.answer(use_id, record.result)
        if record is not None and kind == "unkeyed":
            record.state = "unknown"
            record.result = RecordedResult(content=f"The outcome of {name} is unknown: check before doing it again.", is_error=True)
            return self.answer(use_id, record.result)
        if record is None:
            record = ActionRecord(
                tool_use_id=use_id, tool_name=name, input=tool_input, idempotency_key=f"{self.task_id}:{use_id}"
            )
            self.cp.actions.append(record)
            self.save()  # write-ahead
        done = self.tools.call(name, tool_input, idempotency_key=record.idempotency_key)
        record.state = "done"
        record.result = RecordedResult(content=done.content, is_error=done.is_error)
        self.answer(use_id, record.result)
