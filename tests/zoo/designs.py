"""More zoo designs, each written as another team writes it, with a buggy twin that makes
the resume bug such a team makes.

==========================  =================================  ===========================
design                      the twin's bug                     caught by
==========================  =================================  ===========================
``caches``                  moves a ``cache_control`` mark     ``valid_sequence`` (five
                            onto the latest block, forgetting  breakpoints: the API's
                            the mark a resume loaded           limit is four)
``caches_copy`` (marks on   asks the model again for a reply   ``recorded_work_not_redone``
a copy of the history)      its checkpoint holds
``events`` (event-sourced   its fold drops ``tool_started``    ``no_duplicate_effect``
checkpoint, folded on       ("telemetry"): a call cut off is
load)                       run again
``approval`` (pauses for    the approved path calls the tool   ``no_duplicate_effect``
a human before an           without the write-ahead ledger
irreversible call)
``outbox`` (a dispatch      marks an entry sent before it is   ``no_duplicate_effect`` (an
step makes the keyed        sent ("at most once")              action lost across a crash)
calls)
``retries`` (its own        retries the whole step, tools      ``no_duplicate_effect``
backoff around create,      included, on any error, with no
saving in the retry loop)   ledger
``ledger_apart`` (its       asks the model again for a reply   ``recorded_work_not_redone``
ledger in a second          its checkpoint holds
checkpoint)
==========================  =================================  ===========================
"""

from __future__ import annotations

import copy
import time
from typing import Any

import anthropic

from stores import Checkpoint, CheckpointStore
from stores.memory import MemoryStore

from ._base import UNKNOWN, Loop, Threaded, agent, key_for, text_of, tool_uses

EPHEMERAL = {"type": "ephemeral"}
SYSTEM = [{"type": "text", "text": "You are the notes agent.", "cache_control": EPHEMERAL}]


def _strip_marks(messages: list[dict[str, Any]]) -> None:
    for message in messages:
        if isinstance(message["content"], list):
            for block in message["content"]:
                block.pop("cache_control", None)


def _mark_last(messages: list[dict[str, Any]]) -> dict[str, Any]:
    last = messages[-1]
    if isinstance(last["content"], str):
        last["content"] = [{"type": "text", "text": last["content"]}]
    block: dict[str, Any] = last["content"][-1]
    block["cache_control"] = dict(EPHEMERAL)
    return block


class Caches(Loop):
    """Prompt caching: a breakpoint on the system prompt, one on the tools, and one moved
    onto the latest content block each turn; the history is saved with its mark."""

    #: Mark a copy of the history for each request; the history is saved unmarked.
    on_copy = False
    #: Bug: strip only the mark this attempt made (a resume's loaded mark stays behind).
    strip_own_mark_only = False

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.marked: list[dict[str, Any]] = []

    def reply(self) -> list[dict[str, Any]]:
        if self.on_copy:
            messages = copy.deepcopy(self.history)
            _strip_marks(messages)
            _mark_last(messages)
        else:
            if self.strip_own_mark_only:
                for block in self.marked:
                    block.pop("cache_control", None)
                self.marked.clear()
            else:
                _strip_marks(self.history)
            self.marked.append(_mark_last(self.history))
            messages = self.history
        tools = copy.deepcopy(self.tools.definitions())
        tools[-1]["cache_control"] = dict(EPHEMERAL)
        reply = self.client.messages.create(
            model="zoo-agent", max_tokens=1024, system=SYSTEM, messages=messages, tools=tools
        )
        return [block.model_dump(mode="json", exclude_none=True) for block in reply.content]


class _Paused(Exception):
    """Raised inside the loop to stop it: the agent waits for an approval."""


class PausesForApproval(Loop):
    """Stops before any irreversible call of the model's turn with a "waiting for approval"
    state (its checkpoint stays ``running``); an operator approves by running the task
    again, which makes the approved calls with the write-ahead ledger."""

    def run(self) -> str:
        try:
            return super().run()
        except _Paused:
            return "waiting for approval"

    def resume(self) -> None:
        waiting = self.cp.artifacts.get("awaiting") or []
        if waiting:
            self.cp.artifacts["approved"] = sorted({*self.cp.artifacts.get("approved", []), *waiting})
            self.cp.artifacts["awaiting"] = []
            self.save()
        super().resume()

    def answer(self, uses: list[dict[str, Any]]) -> None:
        approved = set(self.cp.artifacts.get("approved", []))
        waiting = [u["id"] for u in uses if self.tools.spec(u["name"]).irreversible and u["id"] not in approved]
        if waiting:
            self.cp.artifacts["awaiting"] = waiting
            self.save()
            raise _Paused
        super().answer(uses)


class TurnQuota(Loop):
    """Makes at most one model turn per run (a worker's quota), then stops with its
    checkpoint ``running``: a task of four turns takes four runs with no fault at all."""

    def run(self) -> str:
        self.turns = 0
        try:
            return super().run()
        except _Paused:
            return "paused: this run's turn quota is used"

    def reply(self) -> list[dict[str, Any]]:
        if self.turns >= 1:
            raise _Paused
        self.turns += 1
        return super().reply()


class LedgerApart(Loop):
    """Keeps its write-ahead ledger in a second checkpoint of its own, under
    ``f"{task_id}/ledger"`` (an actions table beside the conversation), saved before the
    conversation's checkpoint at every step; the conversation's has no actions."""

    def run(self) -> str:
        ledger_id = f"{self.task_id}/ledger"
        self.ledger = self.store.load(ledger_id) or Checkpoint(task_id=ledger_id, goal="ledger")
        return super().run()

    def read_history(self, cp: Checkpoint) -> list[dict[str, Any]]:
        cp.actions = list(self.ledger.actions)
        return super().read_history(cp)

    def save(self) -> None:
        actions = self.cp.actions
        written = [a.model_dump(mode="json") for a in actions]
        if written != [a.model_dump(mode="json") for a in self.ledger.actions]:
            self.ledger.actions = [a.model_copy(deep=True) for a in actions]
            self.ledger = self.store.save(self.ledger)
        self.cp.actions = []
        try:
            super().save()
        finally:
            self.cp.actions = actions


class OwnRetries(Loop):
    """Its own retry with backoff around ``messages.create`` (the SDK's retries off),
    saving the attempt number and the last error in the checkpoint at every try; a failed
    save ends the run (the harness resumes it)."""

    save_attempts = 1
    #: Bug: a retry of the whole step (the reply and its tools) on any error.
    retry_whole_step = False

    def reply(self) -> list[dict[str, Any]]:
        client = self.client.with_options(max_retries=0)
        for attempt in range(6):
            self.cp.artifacts["model_attempt"] = attempt
            self.save()
            try:
                reply = client.messages.create(
                    model="zoo-agent", max_tokens=1024, messages=self.history, tools=self.tools.definitions()
                )
            except (anthropic.RateLimitError, anthropic.InternalServerError, anthropic.APIConnectionError) as exc:
                self.cp.artifacts["last_error"] = type(exc).__name__
                time.sleep(0)
                continue
            except anthropic.APIStatusError as exc:
                if exc.status_code != 529:
                    raise
                self.cp.artifacts["last_error"] = "overloaded"
                continue
            return [block.model_dump(mode="json", exclude_none=True) for block in reply.content]
        raise RuntimeError("the model is unavailable")

    def answer(self, uses: list[dict[str, Any]]) -> None:
        if not self.retry_whole_step:
            return super().answer(uses)
        history = list(self.history)
        for attempt in range(3):
            try:
                return super().answer(uses)
            except Exception:
                if attempt == 2:
                    raise
                self.history = list(history)
        return None


class EventSourced:
    """The checkpoint is an append-only list of events in ``artifacts["events"]`` (the
    goal, each model reply, each irreversible call started, each call finished, the
    completion), saved as each is appended; the message history is their fold, built on
    load. ``checkpoint.messages`` stays empty: fuzzed with ``history=fold_history``."""

    #: Bug: the fold ignores ``tool_started`` ("telemetry"), so a call cut off runs again.
    fold_ignores_started = False

    def __init__(self, task_id: str, goal: str, client: Any, store: CheckpointStore, tools: Any) -> None:
        self.task_id, self.goal, self.client, self.store, self.tools = task_id, goal, client, store, tools

    def emit(self, event: dict[str, Any]) -> None:
        self.cp.artifacts["events"].append(event)
        self.cp = self.store.save(self.cp)

    def run(self) -> str:
        loaded = self.store.load(self.task_id)
        self.cp = loaded or Checkpoint(task_id=self.task_id, goal=self.goal, artifacts={"events": []})
        if not self.cp.artifacts.get("events"):
            self.cp.artifacts["events"] = []
            self.emit({"type": "goal", "text": self.goal})
        messages, self.started, self.finished, answer = fold(
            self.cp.artifacts["events"], ignore_started=self.fold_ignores_started
        )
        if answer is not None:
            return answer
        last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=None)
        if last is not None and any(u["id"] not in self.finished for u in tool_uses(messages[last]["content"])):
            del messages[last + 1 :]
            messages.append({"role": "user", "content": self.answer(tool_uses(messages[last]["content"]))})
        while self.cp.iteration < 40:
            reply = self.client.messages.create(
                model="zoo-agent", max_tokens=1024, messages=messages, tools=self.tools.definitions()
            )
            content = [block.model_dump(mode="json", exclude_none=True) for block in reply.content]
            self.cp.iteration += 1
            messages.append({"role": "assistant", "content": content})
            uses = tool_uses(content)
            if not uses:
                self.cp.status, self.cp.final_answer = "completed", text_of(content)
                self.emit({"type": "completed", "answer": text_of(content)})
                return text_of(content)
            self.emit({"type": "model_reply", "content": content})
            messages.append({"role": "user", "content": self.answer(uses)})
        raise RuntimeError("iteration budget exhausted")

    def answer(self, uses: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [self.finished[u["id"]] if u["id"] in self.finished else self.call(u) for u in uses]

    def call(self, use: dict[str, Any]) -> dict[str, Any]:
        spec = self.tools.spec(use["name"])
        block: dict[str, Any]
        if spec.irreversible and use["id"] in self.started and not spec.idempotent:
            block = {"type": "tool_result", "tool_use_id": use["id"], "content": UNKNOWN, "is_error": True}
        else:
            if spec.irreversible and use["id"] not in self.started:
                self.emit({"type": "tool_started", "use_id": use["id"], "name": use["name"], "input": use["input"]})
                self.started.add(use["id"])
            key = key_for(self.task_id, use["id"]) if spec.idempotent else None
            block = self.tools.call(use["name"], use["input"], idempotency_key=key).to_block(use["id"])
        self.emit({"type": "tool_finished", "use_id": use["id"], "block": block})
        self.finished[use["id"]] = block
        return block


def fold(
    events: list[dict[str, Any]], *, ignore_started: bool = False
) -> tuple[list[dict[str, Any]], set[str], dict[str, dict[str, Any]], str | None]:
    """The events folded: the messages, the calls started, the results, the answer."""
    messages: list[dict[str, Any]] = []
    started: set[str] = set()
    finished: dict[str, dict[str, Any]] = {}
    answer: str | None = None
    for event in events:
        if event["type"] == "goal":
            messages.append({"role": "user", "content": event["text"]})
        elif event["type"] == "model_reply":
            messages.append({"role": "assistant", "content": event["content"]})
        elif event["type"] == "tool_started" and not ignore_started:
            started.add(event["use_id"])
        elif event["type"] == "tool_finished":
            finished[event["use_id"]] = event["block"]
            last = messages[-1]
            if last["role"] == "user" and isinstance(last["content"], list):
                last["content"].append(event["block"])
            else:
                messages.append({"role": "user", "content": [event["block"]]})
        elif event["type"] == "completed":
            answer = event["answer"]
    return messages, started, finished, answer


def fold_history(cp: Checkpoint) -> list[dict[str, Any]]:
    """Where an ``EventSourced`` agent's history is: what ``fuzz(history=...)`` is told."""
    return fold(cp.artifacts.get("events", []))[0]


class Outbox:
    """Keyed calls go to an outbox (``artifacts["outbox"]``), answered "queued"; a separate
    dispatch step, after each turn and on every start, makes each queued call with its
    entry's key and marks it sent. The other tools run in the turn (the unkeyed one with
    the write-ahead ledger of the other zoo agents)."""

    #: Bug: marks an entry sent before it is sent ("at most once").
    mark_sent_first = False

    def __init__(self, task_id: str, goal: str, client: Any, store: CheckpointStore, tools: Any) -> None:
        self.task_id, self.goal, self.client, self.store, self.tools = task_id, goal, client, store, tools

    def save(self) -> None:
        self.cp = self.store.save(self.cp)

    def run(self) -> str:
        loaded = self.store.load(self.task_id)
        if loaded is None:
            self.cp = Checkpoint(task_id=self.task_id, goal=self.goal, messages=[{"role": "user", "content": self.goal}],
                                 artifacts={"outbox": []})
            self.save()
        else:
            self.cp = loaded
            if self.cp.status == "completed":
                return self.cp.final_answer or ""
        last = self.cp.messages[-1]
        if last["role"] == "assistant" and tool_uses(last["content"]):
            self.answer(tool_uses(last["content"]))
        self.dispatch()
        while self.cp.iteration < 40:
            reply = self.client.messages.create(
                model="zoo-agent", max_tokens=1024, messages=self.cp.messages, tools=self.tools.definitions()
            )
            content = [block.model_dump(mode="json", exclude_none=True) for block in reply.content]
            self.cp.messages.append({"role": "assistant", "content": content})
            self.cp.iteration += 1
            if not tool_uses(content):
                self.cp.status, self.cp.final_answer = "completed", text_of(content)
                self.save()
                return text_of(content)
            self.save()
            self.answer(tool_uses(content))
            self.dispatch()
        raise RuntimeError("iteration budget exhausted")

    def answer(self, uses: list[dict[str, Any]]) -> None:
        outbox: list[dict[str, Any]] = self.cp.artifacts["outbox"]
        results = []
        for use in uses:
            spec = self.tools.spec(use["name"])
            if spec.irreversible and spec.idempotent:
                if not any(entry["use_id"] == use["id"] for entry in outbox):
                    outbox.append({"use_id": use["id"], "tool": use["name"], "input": use["input"],
                                   "key": key_for(self.task_id, use["id"]), "sent": False})
                results.append({"type": "tool_result", "tool_use_id": use["id"], "content": f"{use['name']} queued"})
            elif spec.irreversible:
                results.append(self.unkeyed(use))
            else:
                results.append(self.tools.call(use["name"], use["input"]).to_block(use["id"]))
        self.cp.messages.append({"role": "user", "content": results})
        self.save()

    def unkeyed(self, use: dict[str, Any]) -> dict[str, Any]:
        from stores import ActionRecord, RecordedResult

        record = self.cp.action(use["id"])
        if record is not None and record.result is not None:
            return {"type": "tool_result", "tool_use_id": use["id"], "content": record.result.content,
                    **({"is_error": True} if record.result.is_error else {})}
        if record is not None:
            record.state, record.result = "unknown", RecordedResult(content=UNKNOWN, is_error=True)
            self.save()
            return {"type": "tool_result", "tool_use_id": use["id"], "content": UNKNOWN, "is_error": True}
        record = ActionRecord(tool_use_id=use["id"], tool_name=use["name"], input=use["input"],
                              idempotency_key=key_for(self.task_id, use["id"]))
        self.cp.actions.append(record)
        self.save()
        result = self.tools.call(use["name"], use["input"])
        record.state, record.result = "done", RecordedResult(content=result.content, is_error=result.is_error)
        self.save()
        return result.to_block(use["id"])

    def dispatch(self) -> None:
        for entry in self.cp.artifacts["outbox"]:
            if entry["sent"]:
                continue
            if self.mark_sent_first:
                entry["sent"] = True  # BUG: a crash before the call loses it
                self.save()
            self.tools.call(entry["tool"], entry["input"], idempotency_key=entry["key"])
            entry["sent"] = True
            self.save()


#: The own table of ``own_table_agent``: a database of the team's, not the store it is given.
_OWN_TABLE = MemoryStore()


def own_table_agent(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
    """The threaded zoo loop, keeping its checkpoints in a table of its own: sound, but the
    harness sees none of its state (fuzz says so: not checkable)."""
    return Threaded(task_id, goal, client, _OWN_TABLE, tools).run()


def _runner(cls: type[Any], **switches: Any) -> Any:
    design = type(cls.__name__, (cls,), switches) if switches else cls

    def run(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
        return str(design(task_id, goal, client, store, tools).run())

    run.__qualname__ = f"{cls.__name__}{'_' + '_'.join(sorted(switches)) if switches else ''}"
    return run


SOUND = {
    "caches": agent(Caches),
    "caches_copy": agent(Caches, on_copy=True),
    "events": _runner(EventSourced),
    "approval": agent(PausesForApproval),
    "outbox": _runner(Outbox),
    "retries": agent(OwnRetries),
    "ledger_apart": agent(LedgerApart),
}

TWINS = {
    "caches": agent(Caches, strip_own_mark_only=True),
    "caches_copy": agent(Caches, on_copy=True, reask_stored_reply=True),
    "events": _runner(EventSourced, fold_ignores_started=True),
    "approval": agent(PausesForApproval, no_intent=True),
    "outbox": _runner(Outbox, mark_sent_first=True),
    "retries": agent(OwnRetries, retry_whole_step=True, no_intent=True),
    "ledger_apart": agent(LedgerApart, reask_stored_reply=True),
}
