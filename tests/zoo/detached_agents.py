"""An agent in the shape of frameworks that run each tool call in a detached asyncio task,
written from the user docs as a team outside this project would, with its naive twin.

The loop (``AsyncAnthropic``) starts one task per ``tool_use`` of a reply. Each task's
wrapper catches ``Exception`` (an error result) and reports "done" on a queue in its
``finally``; the loop waits for as many reports as it started tasks and answers the calls
whose results came in. That is how a concurrent tool executor of an agent framework works
(Strands' is one): the loop never reads the tasks' own exceptions. The session is the
agent's own, outside the checkpoint store: each message is written, as it is appended, to
a JSON document per task, as a framework's file session manager does.

Sound: the key of a keyed call is derived from its ``tool_use`` id; on resume, the calls
of a last assistant turn with no results are run again under the same ids (so with the
same keys), and a call whose result is missing from a last user turn is answered with an
"interrupted" error (the model decides).

A crash in a tool's task (``after_tool_effect``) kills the process: nothing more is
written. An in-process crash that the task kept to itself would let the loop go on and
write a user turn without that result, which the resume answers "interrupted", and the
model's retry, under a new id and so a new key, would send the mail twice: a false alarm.
The harness's crash is a ``SystemExit``, which asyncio lets through the event loop.

==============  ==================================================  ======================
twin            its bug                                             caught by
==============  ==================================================  ======================
``fresh_keys``  a key per attempt (a new random key each time the   ``no_duplicate_effect``
                call runs), so the run of a pending call on resume
                is a second refund
``interrupts``  on resume, answers the calls of a last assistant    ``no_duplicate_effect``
                turn "interrupted" instead of running them again
                (what a framework does when the resume sends a new
                prompt): the model retries under a new id, so a
                new key
``new_session`` looks its session up under a new id at each run (the   ``no_duplicate_effect``
                task id and a random suffix): every resume starts
                over, asks the model again and gets the calls under
                new ids
==============  ==================================================  ======================
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

MODEL = "claude-sonnet-4-5"
#: The agent's own session storage: one JSON document per task, written at every append.
SESSIONS: dict[str, str] = {}


class DetachedLoop:
    #: Bug: a new key each time a call runs.
    fresh_keys = False
    #: Bug: on resume, the calls of a last assistant turn are answered "interrupted".
    interrupts = False
    #: Bug: the session is looked up under a new id at each run.
    new_session = False

    def __init__(self, task_id: str, goal: str, client: Any, tools: Any) -> None:
        self.task_id, self.goal, self.client, self.tools = task_id, goal, client, tools
        self.session = f"{task_id}-{uuid.uuid4().hex[:8]}" if self.new_session else task_id
        self.messages: list[dict[str, Any]] = json.loads(SESSIONS.get(self.session, "[]"))

    def append(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        SESSIONS[self.session] = json.dumps(self.messages)

    async def run(self) -> str:
        if not self.messages:
            self.append({"role": "user", "content": self.goal})
        last = self.messages[-1]
        if last["role"] == "assistant":
            uses = [b for b in last["content"] if b["type"] == "tool_use"]
            if not uses:
                return _text(last["content"])  # finished before
            if self.interrupts:
                self.append({"role": "user", "content": []})
                self.repair()
            else:
                self.append({"role": "user", "content": await self.run_tools(uses)})
        else:
            self.repair()
        for _ in range(40):
            reply = await self.client.messages.create(
                model=MODEL, max_tokens=1024, messages=self.messages, tools=self.tools.definitions()
            )
            content = [b.model_dump(mode="json", exclude_none=True) for b in reply.content]
            self.append({"role": "assistant", "content": content})
            uses = [b for b in content if b["type"] == "tool_use"]
            if not uses:
                return _text(content)
            self.append({"role": "user", "content": await self.run_tools(uses)})
        raise RuntimeError("turn budget exhausted")

    def repair(self) -> None:
        """Answer "interrupted" for each call of the last assistant turn with no result."""
        if len(self.messages) < 2 or self.messages[-2]["role"] != "assistant":
            return
        last = self.messages[-1]
        if not isinstance(last["content"], list):
            return
        answered = {b.get("tool_use_id") for b in last["content"]}
        for block in self.messages[-2]["content"]:
            if block["type"] == "tool_use" and block["id"] not in answered:
                last["content"].append(
                    {"type": "tool_result", "tool_use_id": block["id"], "content": "Tool was interrupted.", "is_error": True}
                )
        SESSIONS[self.session] = json.dumps(self.messages)

    async def run_tools(self, uses: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each call in a task of its own; the results that came in, in call order."""
        done: asyncio.Queue[str] = asyncio.Queue()
        results: dict[str, dict[str, Any]] = {}

        async def one(use: dict[str, Any]) -> None:
            try:
                key = uuid.uuid4().hex if self.fresh_keys else f"{self.task_id}:{use['id']}"
                spec = self.tools.spec(use["name"])
                outcome = self.tools.call(
                    use["name"], use["input"], idempotency_key=key if spec.kind == "keyed" else None
                )
                results[use["id"]] = outcome.to_block(use["id"])
            except Exception as exc:  # a tool error: the model sees it
                results[use["id"]] = {"type": "tool_result", "tool_use_id": use["id"], "content": str(exc), "is_error": True}
            finally:
                done.put_nowait(use["id"])

        tasks = [asyncio.create_task(one(use)) for use in uses]
        for _ in tasks:
            await done.get()
        return [results[use["id"]] for use in uses if use["id"] in results]


def _text(content: list[dict[str, Any]]) -> str:
    return "".join(b.get("text", "") for b in content if b.get("type") == "text")


def detached_agent(**bugs: bool) -> Any:
    design = type("DetachedLoop", (DetachedLoop,), bugs)

    async def run(task_id: str, goal: str, *, client: Any, store: Any, tools: Any) -> str:
        return await design(task_id, goal, client, tools).run()

    return run
