"""The zoo: sound agents in designs unlike the reference agent's, each with a buggy twin.

==========================  =================================  ===========================
design                      the twin's bug                     caught by
==========================  =================================  ===========================
``threads``                 on resume answers only the first   ``valid_sequence``
                            pending call of a parallel batch
``gather`` (asyncio)        no intent recorded before an       ``no_duplicate_effect``
                            irreversible call
``count_tokens``            probes with a generation, not      ``completed_idempotent``
                            count_tokens, before loading
``stops_on_store_failure``  re-runs an unkeyed intent on       ``no_duplicate_effect``
                            resume (the model asked once)
``forgets_completion``      resets the iteration on resume     ``iteration_monotone``
``own_state``               asks the model again for a reply   ``recorded_work_not_redone``
                            its checkpoint holds
``compacts``                keeps the last 3 messages, which   ``crash_free_run`` (its
                            cuts a tool_use from its result    requests are invalid)
``streams``                 keeps a reply cut mid-stream as    ``same_answer``
                            if it were whole
==========================  =================================  ===========================
"""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic
import httpx2

from stores import Checkpoint, CheckpointStore

from ._base import Loop, Threaded, agent, text_of, tool_uses


class CountsTokens(Loop):
    """Estimates the prompt's size with ``count_tokens`` before it looks at its checkpoint."""

    probe_with_generation = False

    def before_load(self) -> None:
        messages = [{"role": "user", "content": self.goal}]
        if self.probe_with_generation:
            # BUG: a generation, not a token count: a completed task run again calls the model.
            self.client.messages.create(model="zoo-agent", max_tokens=1, messages=messages)
        else:
            self.client.messages.count_tokens(model="zoo-agent", messages=messages, tools=self.tools.definitions())


class StopsOnStoreFailure(Loop):
    """Raises on the first failed checkpoint write: no retry (a legitimate policy)."""

    save_attempts = 1


class ForgetsCompletion(Loop):
    """Deletes its checkpoint when done: a completed task run again does it all again
    (fuzzed with ``ignore_oracles=["completed_idempotent"]``)."""

    def complete(self, answer: str) -> str:
        answer = super().complete(answer)
        self.store.delete(self.task_id)
        return answer


class OwnState(Loop):
    """Keeps its session in ``artifacts["session"]``, in its own message wrapper;
    ``checkpoint.messages`` stays empty."""

    def read_history(self, cp: Checkpoint) -> list[dict[str, Any]]:
        return unwrap(cp)

    def write_history(self) -> None:
        self.cp.artifacts["session"] = {"turns": [{"who": m["role"], "said": m["content"]} for m in self.history]}


class OwnStatus(OwnState):
    """Keeps its completion in its own session too (``done``, ``answer``): it never sets
    ``checkpoint.status``, which stays ``running``."""

    def finished(self, cp: Checkpoint) -> str | None:
        session = cp.artifacts.get("session", {})
        return str(session["answer"]) if session.get("done") else None

    def complete(self, answer: str) -> str:
        self.write_history()
        self.cp.artifacts["session"].update(done=True, answer=answer)
        self.cp = self.store.save(self.cp)
        return answer

    def write_history(self) -> None:
        done = self.cp.artifacts.get("session", {})
        super().write_history()
        self.cp.artifacts["session"].update({k: done[k] for k in ("done", "answer") if k in done})


class Streams(Loop):
    """Streams each reply (``messages.stream``). The SDK does not retry a stream it has
    started to read: a reply cut short (the connection drops, or an ``error`` event) is
    asked for again, from the start."""

    #: Bug: keep what arrived before the cut as the reply.
    keep_partial = False

    def reply(self) -> list[dict[str, Any]]:
        for attempt in range(4):
            with self.client.messages.stream(
                model="zoo-agent", max_tokens=1024, messages=self.history, tools=self.tools.definitions()
            ) as stream:
                try:
                    message = stream.get_final_message()
                except (httpx2.TransportError, anthropic.APIError) as exc:
                    if isinstance(exc, anthropic.BadRequestError) or (attempt == 3 and not self.keep_partial):
                        raise
                    if not self.keep_partial:
                        continue
                    message = stream.current_message_snapshot  # BUG: a reply cut short
            return [block.model_dump(mode="json", exclude_none=True) for block in message.content]
        raise AssertionError("unreachable")


def unwrap(cp: Checkpoint) -> list[dict[str, Any]]:
    """Where an ``OwnState`` agent keeps the history: what ``fuzz(history=...)`` is told."""
    turns = cp.artifacts.get("session", {}).get("turns", [])
    return [{"role": t["who"], "content": t["said"]} for t in turns]


class Compacts(Loop):
    """Compacts its history as it grows: past ``limit`` messages, everything but the last
    ``keep`` is replaced by a summary folded into the first user message (context
    management of long agents). The ledger of actions is in ``checkpoint.actions``."""

    limit = 6
    #: The last exchange: the assistant turn and the results answering it.
    keep = 2

    def save(self) -> None:
        last = self.history[-1] if self.history else None
        if (
            len(self.history) > self.limit
            and last is not None
            and last["role"] == "user"
            and not isinstance(last["content"], str)
        ):
            dropped = len(self.history) - self.keep
            summary = {"role": "user", "content": f"{self.goal}\n\n(Earlier turns compacted: {dropped} messages.)"}
            self.history = [summary, *self.history[-self.keep :]]
        super().save()


class Gathers(Loop):
    """An asyncio agent: ``AsyncAnthropic``, async tools run with ``asyncio.gather``."""

    async def arun(self) -> str:
        loaded = self.store.load(self.task_id)
        if loaded is None:
            self.history = [{"role": "user", "content": self.goal}]
            self.save()
        else:
            self.cp = loaded
            self.history = self.read_history(loaded)
            if loaded.status == "completed":
                return loaded.final_answer or ""
            last = self.history[-1]
            if last["role"] == "assistant" and not isinstance(last["content"], str) and tool_uses(last["content"]):
                await self.aanswer(tool_uses(last["content"]))
        while self.cp.iteration < self.max_iterations:
            reply = await self.client.messages.create(
                model="zoo-agent", max_tokens=1024, messages=self.history, tools=self.tools.definitions()
            )
            content = [block.model_dump(mode="json", exclude_none=True) for block in reply.content]
            self.cp.iteration += 1
            self.history.append({"role": "assistant", "content": content})
            uses = tool_uses(content)
            if not uses:
                return self.complete(text_of(content))
            self.save()
            await self.aanswer(uses)
        raise RuntimeError("iteration budget exhausted")

    async def aanswer(self, uses: list[dict[str, Any]]) -> None:
        results, to_run = self.prepare(uses)
        outputs = await asyncio.gather(*(self.call(use) for use in to_run))
        self.finish(uses, results, to_run, list(outputs))


async def gather_agent(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
    return await Gathers(task_id, goal, client, store, tools).arun()


class _GathersNoIntent(Gathers):
    no_intent = True


async def gather_no_intent(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
    return await _GathersNoIntent(task_id, goal, client, store, tools).arun()


class AsyncToolbox:
    """The test toolkit's tools behind an async ``call`` (as an async team toolbox is)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def definitions(self) -> list[dict[str, Any]]:
        return list(self._inner.definitions())

    def spec(self, name: str) -> Any:
        return self._inner.spec(name)

    async def call(self, name: str, input: dict[str, Any], *, idempotency_key: str | None = None) -> Any:
        await asyncio.sleep(0)  # let sibling tasks interleave
        return self._inner.call(name, input, idempotency_key=idempotency_key)


SOUND = {
    "threads": agent(Threaded),
    "count_tokens": agent(CountsTokens),
    "stops_on_store_failure": agent(StopsOnStoreFailure),
    "forgets_completion": agent(ForgetsCompletion),
    "own_state": agent(OwnState),
    "compacts": agent(Compacts),
    "gather": gather_agent,
    "streams": agent(Streams),
}

TWINS = {
    "threads": agent(Threaded, answer_first_pending_only=True),
    "count_tokens": agent(CountsTokens, probe_with_generation=True),
    "stops_on_store_failure": agent(StopsOnStoreFailure, rerun_unkeyed_intent=True),
    "forgets_completion": agent(ForgetsCompletion, iteration_resets=True),
    "own_state": agent(OwnState, reask_stored_reply=True),
    "compacts": agent(Compacts, keep=3),
    "gather": gather_no_intent,
    "streams": agent(Streams, keep_partial=True),
}
