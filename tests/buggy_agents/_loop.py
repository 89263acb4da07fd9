"""A small checkpointed agent loop, correct by default, with switches that plant one bug.

Each known-buggy agent module turns on exactly one switch, so a test that catches it
proves that the harness finds that bug and no other. With every switch off the loop is a
second correct agent (independent of the reference agent) that the harness must pass.

The correct loop: load (errors propagate); return a completed task's answer; repair the
history (answer every pending ``tool_use``, keeping results already present, settling
irreversible calls from the write-ahead ledger); then ask, save, run the tools (intent
saved before an irreversible effect, outcome after), save, repeat.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stores import ActionRecord, Checkpoint, CheckpointStore, ConflictError, RecordedResult

logger = logging.getLogger(__name__)

UNKNOWN = "UNKNOWN OUTCOME: a crash hid whether this action happened; verify before retrying."


@dataclass(frozen=True)
class Bugs:
    """The switches; each is one bug from DESIGN.md's list."""

    no_repair: bool = False
    repair_only_if_last_assistant: bool = False
    budget_resets: bool = False
    load_error_is_none: bool = False
    checkpoint_after_result: bool = False
    delete_on_success: bool = False
    answer_changes_on_resume: bool = False
    key_per_attempt: bool = False
    save_after_tools: bool = False
    #: Keep at most this many entries in the write-ahead ledger (0: no cap), to bound the
    #: checkpoint's size on long tasks: an irreversible call past the cap goes unrecorded.
    ledger_cap: int = 0
    #: On a lost compare-and-set, load the newer version and save this worker's own state
    #: on top of it (the usual first "fix" of a ConflictError seen in production).
    overwrite_on_conflict: bool = False
    #: The same, but only over a version still running: a completed task is left alone (a
    #: worker that checks the status, not the version, before writing over a checkpoint).
    overwrite_running_on_conflict: bool = False
    #: On resume, drop the ``tool_use`` blocks of the last reply that have no result (and
    #: the reply, if nothing else is left) and ask the model again: the "degrade
    #: gracefully" recovery of session libraries.
    drop_unanswered: bool = False


def _key(task_id: str, tool_use_id: str) -> str:
    return "k-" + hashlib.sha256(f"{task_id}:{tool_use_id}".encode()).hexdigest()[:16]


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [] if isinstance(content, str) else list(content or [])


def make_agent(
    bugs: Bugs = Bugs(), *, max_iterations: int = 30, complete_at_budget: bool = False
) -> Callable[..., str]:
    """An agent of the fixed contract with the given bugs planted. ``complete_at_budget``:
    at ``max_iterations`` it completes the task with the answer "budget exhausted" (a
    design, not a bug) instead of raising."""

    def run(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
        agent = _Agent(task_id, goal, client, store, tools, bugs, max_iterations)
        agent.complete_at_budget = complete_at_budget
        return agent.run()

    return run


class _Agent:
    def __init__(
        self,
        task_id: str,
        goal: str,
        client: Any,
        store: CheckpointStore,
        tools: Any,
        bugs: Bugs,
        max_iterations: int,
    ) -> None:
        self.task_id, self.goal, self.client, self.store, self.tools = task_id, goal, client, store, tools
        self.bugs = bugs
        self.max_iterations = max_iterations
        self.cp = Checkpoint(task_id=task_id, goal=goal)
        self.resumed = False
        self.complete_at_budget = False

    def save(self) -> None:
        try:
            self.cp = self.store.save(self.cp)
        except ConflictError:
            current = None
            if self.bugs.overwrite_running_on_conflict:
                current = self.store.load(self.task_id)
                if current is not None and current.status != "running":
                    raise  # "someone finished it": the only case this worker backs off in
            if self.bugs.overwrite_on_conflict or self.bugs.overwrite_running_on_conflict:
                # BUG: the other worker's checkpoint is erased by this one's older state.
                current = current or self.store.load(self.task_id)
                self.cp.version = 0 if current is None else current.version
                self.cp = self.store.save(self.cp)
                return
            if not self.bugs.load_error_is_none:
                raise
            logger.warning("checkpoint write failed; continuing")
        except Exception:
            if not self.bugs.load_error_is_none:
                raise
            # The common design's "log and carry on".
            logger.warning("checkpoint write failed; continuing")

    def run(self) -> str:
        try:
            loaded = self.store.load(self.task_id)
        except Exception:
            if not self.bugs.load_error_is_none:
                raise
            loaded = None
        if loaded is None:
            self.cp.messages = [{"role": "user", "content": self.goal}]
            self.save()
        else:
            self.cp = loaded
            self.resumed = True
            if loaded.status == "completed":
                return loaded.final_answer or ""
            if self.bugs.budget_resets:
                self.cp.iteration = 0
            if not self.bugs.no_repair:
                self.repair()
        return self.loop()

    # -- repair ---------------------------------------------------------------------------
    def repair(self) -> None:
        messages = self.cp.messages
        if not messages:
            return
        last = messages[-1]
        if last["role"] == "assistant":
            pending = [b for b in _blocks(last) if b.get("type") == "tool_use"]
            if pending and self.bugs.drop_unanswered:
                kept = [b for b in _blocks(last) if b.get("type") != "tool_use"]
                messages[-1:] = [{"role": "assistant", "content": kept}] if kept else []
                return
            if pending:
                messages.append({"role": "user", "content": []})
                self.run_tools(pending)
            return
        if self.bugs.repair_only_if_last_assistant:
            return
        # The last message is a user message: it may hold only some of the results.
        if len(messages) >= 2 and messages[-2]["role"] == "assistant":
            uses = [b for b in _blocks(messages[-2]) if b.get("type") == "tool_use"]
            answered = {b.get("tool_use_id") for b in _blocks(last) if b.get("type") == "tool_result"}
            missing = [b for b in uses if b["id"] not in answered]
            if missing:
                self.run_tools(missing)

    # -- the loop ---------------------------------------------------------------------------
    def loop(self) -> str:
        while self.cp.iteration < self.max_iterations:
            reply = self.client.messages.create(
                model="buggy-agent",
                max_tokens=1024,
                messages=self.cp.messages,
                tools=self.tools.definitions(),
            )
            content = [block.model_dump(mode="json", exclude_none=True) for block in reply.content]
            self.cp.iteration += 1
            self.cp.messages.append({"role": "assistant", "content": content})
            uses = [b for b in content if b.get("type") == "tool_use"]
            if not uses:
                answer = "".join(b.get("text", "") for b in content if b.get("type") == "text")
                if self.bugs.answer_changes_on_resume and self.resumed:
                    answer += " (after a restart)"
                self.cp.status, self.cp.final_answer = "completed", answer
                self.save()
                if self.bugs.delete_on_success:
                    self.store.delete(self.task_id)
                return answer
            if not self.bugs.save_after_tools:
                self.save()  # BUG when skipped: the tools run on a reply no checkpoint holds
            self.cp.messages.append({"role": "user", "content": []})
            self.run_tools(uses)
        if self.complete_at_budget:
            self.cp.status, self.cp.final_answer = "completed", "budget exhausted"
            self.save()
            return "budget exhausted"
        raise RuntimeError("iteration budget exhausted")

    def run_tools(self, uses: list[dict[str, Any]]) -> None:
        """Answer ``uses`` into the last (user) message, saving around irreversible calls."""
        results: list[dict[str, Any]] = self.cp.messages[-1]["content"]
        for use in uses:
            spec = self.tools.spec(use["name"])
            key = _key(self.task_id, use["id"])
            if self.bugs.key_per_attempt:
                key = "k-" + uuid.uuid4().hex[:16]  # BUG: a resume re-runs it under a new key
            if spec.irreversible and not (self.bugs.checkpoint_after_result or self.bugs.save_after_tools):
                record = self.cp.action(use["id"])
                if record is not None and record.state == "done" and record.result is not None:
                    results.append({"type": "tool_result", "tool_use_id": use["id"], "content": record.result.content})
                    continue
                if record is not None and not spec.idempotent:
                    # An intent without outcome: nobody knows whether it happened.
                    record.state = "unknown"
                    results.append(
                        {"type": "tool_result", "tool_use_id": use["id"], "content": UNKNOWN, "is_error": True}
                    )
                    self.save()
                    continue
                if record is None and 0 < self.bugs.ledger_cap <= len(self.cp.actions):
                    # BUG (ledger_cap): no intent saved, no outcome until the batch's save.
                    result = self.tools.call(use["name"], use["input"], idempotency_key=key)
                    results.append(result.to_block(use["id"]))
                    continue
                if record is None:
                    record = ActionRecord(
                        tool_use_id=use["id"], tool_name=use["name"], input=use["input"], idempotency_key=key
                    )
                    self.cp.actions.append(record)
                    self.save()
                result = self.tools.call(use["name"], use["input"], idempotency_key=key)
                record.state = "done"
                record.result = RecordedResult(content=result.content, is_error=result.is_error)
                results.append(result.to_block(use["id"]))
                self.save()
            else:
                result = self.tools.call(use["name"], use["input"], idempotency_key=key)
                results.append(result.to_block(use["id"]))
        self.save()
