"""Agents that shape their saved history in ways of their own, written from the user docs
as a team outside this project would, each with the naive twin such a team writes.

==================  =============================================  ===========================
design              what it does                                   its twin's bug, caught by
==================  =============================================  ===========================
``summarises``      past six messages, asks the model (a request   ``late_compaction``: on
                    of its own: a summariser system prompt, the    resume it compacts before
                    transcript as one user message, no tools) for  it answers the loaded
                    a summary, and saves the goal with the         reply's calls, so the kept
                    summary plus the last exchange verbatim in     tail starts with results
                    place of the older turns (a rewritten prefix)  whose call was summarised
                                                                   away (``valid_sequence``)
``drafts``          streams each reply (``text_stream``) and       ``keeps_draft``: forgets
                    saves the text as it arrives, as a draft       the draft on load, so a
                    assistant message in ``checkpoint.messages``   resumed request ends with
                    (``metadata["streaming"]``), replaced by       the cut text: a prefill
                    ``get_final_message()`` when it ends; on       (``same_answer`` or
                    load a draft is dropped and asked again        ``valid_sequence``)
``taskgroup``       ``AsyncAnthropic``; runs a turn's calls in an  ``count_pending``: on
                    ``asyncio.TaskGroup``, slow tools finishing    resume takes the calls
                    after fast ones, each result saved as it       after the first *n* as the
                    arrives (arrival order, not call order); a     pending ones (*n* results
                    write-ahead ledger; on resume the calls with   saved), which arrival order
                    no result (by id) are settled                  breaks (``valid_sequence``)
==================  =============================================  ===========================

The ``summarises`` twin's bug needs a resume whose loaded reply is unanswered while the
history is past the limit: a few hundred examples find it (``test_history.py``). The sound
``drafts`` agent was a false alarm of ``recorded_work_not_redone``, which took a draft saved
while its reply was still streaming for the recorded reply; a reply now counts as recorded
once it was read to its end.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pytest_agentckpt import Toolbox
from stores import ActionRecord, Checkpoint, CheckpointStore, RecordedResult

MODEL = "claude-sonnet-4-5"


# -- the team's tools ----------------------------------------------------------------------
def lookup(order: str) -> str:
    """Look an order up in the shop's database."""
    return f"order {order}: paid, not shipped"


def set_status(order: str, status: str) -> str:
    """Set an order's status (the same status twice changes nothing)."""
    return f"order {order} is {status}"


def refund(order: str, amount: int, idempotency_key: str | None = None) -> str:
    """Refund an order; the payment API drops a repeat with the same key."""
    return f"refunded {amount} EUR on {order}"


INPUTS = {
    "lookup": [{"order": "A-1"}, {"order": "B-2"}],
    "set_status": [{"order": "A-1", "status": "shipped"}, {"order": "B-2", "status": "held"}],
    "refund": [{"order": "A-1", "amount": 20}],
}
KINDS = {"set_status": "repeat_safe", "refund": "keyed"}


def shop_tools() -> Toolbox:
    return Toolbox.from_functions(lookup, set_status, refund, kinds=KINDS, inputs=INPUTS)


async def slow_lookup(order: str) -> str:
    """Look an order up in the shop's (slow) database."""
    for _ in range(3):
        await asyncio.sleep(0)
    return f"order {order}: paid, not shipped"


async def async_set_status(order: str, status: str) -> str:
    """Set an order's status (the same status twice changes nothing)."""
    await asyncio.sleep(0)
    return f"order {order} is {status}"


async def async_refund(order: str, amount: int, idempotency_key: str | None = None) -> str:
    """Refund an order; the payment API drops a repeat with the same key."""
    return f"refunded {amount} EUR on {order}"


def async_shop_tools() -> Toolbox:
    return Toolbox.from_functions(
        {"lookup": slow_lookup, "set_status": async_set_status, "refund": async_refund},
        kinds=KINDS, inputs=INPUTS,
    )


# -- what the three loops share: a journal of the calls -------------------------------------
def blocks(content: Any) -> list[dict[str, Any]]:
    return [block.model_dump(mode="json", exclude_none=True) for block in content]


def text_of(content: list[dict[str, Any]]) -> str:
    return "".join(b.get("text", "") for b in content if b.get("type") == "text")


def unanswered(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The calls of the last assistant turn with no ``tool_result`` yet (by id)."""
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=None)
    if last is None or isinstance(messages[last]["content"], str):
        return []
    answered = {
        b.get("tool_use_id") for m in messages[last + 1 :] if isinstance(m["content"], list) for b in m["content"]
    }
    return [b for b in messages[last]["content"] if b.get("type") == "tool_use" and b["id"] not in answered]


class Journal:
    """Saves each result with its ledger entry; settles a call as the docs say."""

    def __init__(self, task_id: str, goal: str, client: Any, store: CheckpointStore, tools: Any) -> None:
        self.task_id, self.goal, self.client, self.store, self.tools = task_id, goal, client, store, tools
        self.cp = Checkpoint(task_id=task_id, goal=goal, messages=[{"role": "user", "content": goal}])

    def save(self) -> None:
        self.cp = self.store.save(self.cp)

    def load(self) -> str | None:
        """Load (or start) the checkpoint; the answer of a finished task."""
        loaded = self.store.load(self.task_id)
        if loaded is None:
            self.save()
            return None
        self.cp = loaded
        return (loaded.final_answer or "") if loaded.status == "completed" else None

    def answer(self, use_id: str, result: RecordedResult) -> None:
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": use_id, "content": result.content}
        if result.is_error:
            block["is_error"] = True
        last = self.cp.messages[-1]
        if last["role"] == "user" and isinstance(last["content"], list):
            last["content"].append(block)
        else:
            self.cp.messages.append({"role": "user", "content": [block]})
        self.save()

    def intent(self, use: dict[str, Any]) -> tuple[str, ActionRecord | None]:
        """The call's kind and its ledger entry (recorded, and saved, before a first call)."""
        kind = self.tools.spec(use["name"]).kind
        if kind == "read_only":
            return kind, None
        record = self.cp.action(use["id"])
        if record is None:
            record = ActionRecord(
                tool_use_id=use["id"], tool_name=use["name"], input=use["input"],
                idempotency_key=f"{self.task_id}:{use['id']}",
            )
            self.cp.actions.append(record)
            self.save()
        elif record.result is None and kind == "unkeyed":
            record.state = "unknown"
            record.result = RecordedResult(content="Outcome unknown: check before doing it again.", is_error=True)
        return kind, record

    def settled(self, use: dict[str, Any], record: ActionRecord | None, done: Any) -> None:
        result = RecordedResult(content=done.content, is_error=done.is_error)
        if record is not None:
            record.state, record.result = "done", result
        self.answer(use["id"], result)

    def settle(self, use: dict[str, Any]) -> None:
        _, record = self.intent(use)
        if record is not None and record.result is not None:
            return self.answer(use["id"], record.result)
        key = record.idempotency_key if record is not None else None
        self.settled(use, record, self.tools.call(use["name"], use["input"], idempotency_key=key))

    def complete(self, content: list[dict[str, Any]]) -> str:
        self.cp.status, self.cp.final_answer = "completed", text_of(content)
        self.save()
        return self.cp.final_answer


# -- summarises: the model writes a summary that replaces the older turns -------------------
SUMMARISER = (
    "You are a conversation summarizer. Summarize the conversation you are given: the decisions "
    "made, the results of the tools, what is left to do."
)


class Summarises(Journal):
    limit = 5
    #: Bug: compact at the top of the loop, before a resume has answered the loaded reply.
    late_compaction = False
    #: How the summary is asked for: ``"transcript"``, the older turns as one user message;
    #: ``"as_is"``, the older turns as they are, under the summariser's system prompt, the
    #: tools offered (their definitions must come with the calls) but ``tool_choice`` none.
    summary_request = "transcript"

    def run(self) -> str:
        done = self.load()
        if done is not None:
            return done
        while self.cp.iteration < 40:
            if not self.late_compaction:
                for use in unanswered(self.cp.messages):
                    self.settle(use)
            self.compact()
            for use in unanswered(self.cp.messages):
                self.settle(use)
            reply = self.client.messages.create(
                model=MODEL, max_tokens=1024, messages=self.cp.messages, tools=self.tools.definitions()
            )
            content = blocks(reply.content)
            self.cp.messages.append({"role": "assistant", "content": content})
            self.cp.iteration += 1
            if reply.stop_reason != "tool_use":
                return self.complete(content)
            self.save()
            for use in unanswered(self.cp.messages):
                self.settle(use)
        raise RuntimeError("turn budget exhausted")

    def compact(self) -> None:
        messages = self.cp.messages
        if len(messages) <= self.limit:
            return
        older, tail = messages[:-2], messages[-2:]
        if self.summary_request == "transcript":
            transcript = "\n\n".join(f"{m['role']}: {json.dumps(m['content'])}" for m in older)
            summary = self.client.messages.create(
                model=MODEL, max_tokens=512, system=SUMMARISER,
                messages=[{"role": "user", "content": f"Summarize this conversation:\n\n{transcript}"}],
            )
        else:
            # The history as it is saved, which ends where the kept turn's reply was asked
            # for: the same messages as that request, another question.
            summary = self.client.messages.create(
                model=MODEL, max_tokens=512, system=SUMMARISER, messages=older, tools=self.tools.definitions(),
                tool_choice={"type": "none"},
            )
        text = text_of(blocks(summary.content)) or "(no summary)"
        head = {"role": "user", "content": f"{self.goal}\n\nSummary of the work so far:\n{text}"}
        self.cp.messages = [head, *tail]
        self.cp.artifacts["compactions"] = self.cp.artifacts.get("compactions", 0) + 1
        self.save()


# -- drafts: the streamed text saved as it arrives ------------------------------------------
class Drafts(Journal):
    #: Bug: a draft found on load is left in the history (the resumed request ends with it).
    keeps_draft = False
    #: Bug: a whole reply found on load is taken for a draft too, and asked again.
    drops_whole_reply = False

    def run(self) -> str:
        done = self.load()
        if done is not None:
            return done
        if self.cp.metadata.get("streaming") and not self.keeps_draft:
            self.cp.messages.pop()  # a reply cut short: ask again
            del self.cp.metadata["streaming"]
        elif self.drops_whole_reply and self.cp.messages and self.cp.messages[-1]["role"] == "assistant":
            self.cp.messages.pop()
        for use in unanswered(self.cp.messages):
            self.settle(use)
        while self.cp.iteration < 40:
            content = self.stream_reply()
            self.cp.iteration += 1
            if not any(b["type"] == "tool_use" for b in content):
                return self.complete(content)
            self.save()
            for use in unanswered(self.cp.messages):
                self.settle(use)
        raise RuntimeError("turn budget exhausted")

    def stream_reply(self) -> list[dict[str, Any]]:
        """Stream a reply, the draft saved at each delta; the final message replaces it."""
        history = list(self.cp.messages)
        draft: dict[str, Any] = {"role": "assistant", "content": [{"type": "text", "text": ""}]}
        with self.client.messages.stream(
            model=MODEL, max_tokens=1024, messages=history, tools=self.tools.definitions()
        ) as stream:
            for delta in stream.text_stream:
                if not self.cp.metadata.get("streaming"):
                    self.cp.messages.append(draft)
                    self.cp.metadata["streaming"] = True
                draft["content"][0]["text"] += delta
                self.save()
            message = stream.get_final_message()
        content = blocks(message.content)
        if self.cp.metadata.pop("streaming", None):
            self.cp.messages.pop()
        self.cp.messages.append({"role": "assistant", "content": content})
        return content  # saved by the caller: with the results' intents, or with completion


# -- taskgroup: parallel calls whose results arrive out of order ----------------------------
class TaskGroupLoop(Journal):
    #: Bug: on resume, the pending calls are those after the first n (n results saved).
    count_pending = False

    async def arun(self) -> str:
        done = self.load()
        if done is not None:
            return done
        while self.cp.iteration < 40:
            pending = self.pending()
            if pending:
                async with asyncio.TaskGroup() as group:
                    for use in pending:
                        group.create_task(self.asettle(use))
            reply = await self.client.messages.create(
                model=MODEL, max_tokens=1024, messages=self.cp.messages, tools=self.tools.definitions()
            )
            content = blocks(reply.content)
            self.cp.messages.append({"role": "assistant", "content": content})
            self.cp.iteration += 1
            if reply.stop_reason != "tool_use":
                return self.complete(content)
            self.save()
        raise RuntimeError("turn budget exhausted")

    def pending(self) -> list[dict[str, Any]]:
        if not self.count_pending:
            return unanswered(self.cp.messages)
        messages = self.cp.messages
        last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=None)
        if last is None:
            return []
        uses = [b for b in messages[last]["content"] if b.get("type") == "tool_use"]
        results = messages[last + 1]["content"] if last + 1 < len(messages) else []
        return uses[len(results) :]  # BUG: results are saved in arrival order, not call order

    async def asettle(self, use: dict[str, Any]) -> None:
        _, record = self.intent(use)
        if record is not None and record.result is not None:
            return self.answer(use["id"], record.result)
        key = record.idempotency_key if record is not None else None
        self.settled(use, record, await self.tools.call(use["name"], use["input"], idempotency_key=key))


def summarising_agent(**bugs: Any) -> Any:
    design = type("Summarises", (Summarises,), bugs)

    def run(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
        return design(task_id, goal, client, store, tools).run()

    return run


def drafting_agent(**bugs: bool) -> Any:
    design = type("Drafts", (Drafts,), bugs)

    def run(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
        return design(task_id, goal, client, store, tools).run()

    return run


def taskgroup_agent(**bugs: bool) -> Any:
    design = type("TaskGroupLoop", (TaskGroupLoop,), bugs)

    async def run(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
        return await design(task_id, goal, client, store, tools).arun()

    return run
