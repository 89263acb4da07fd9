"""Agents on the SDK's own agent loop, ``client.beta.messages.tool_runner``, written as a
team using the runner would write them (none of them is ours to design).

The runner runs the tools it is given and calls each with its input only; these agents
give it the toolbox ``fuzz`` hands them as ``beta_tool`` wrappers (:func:`runner_tools`).
An idempotency key must come from the ``tool_use`` id, which a runner's tool never sees:
the loop tells the wrappers the ids of the reply it is about to run tools for
(:class:`ReplyIds`; the runner runs a reply's calls in order, after the loop body).

==================  ===========================================  ===========================
design              what it does                                 its twins' bugs, caught by
==================  ===========================================  ===========================
``ledger``          sync; saves each reply, runs its tools       ``outcome_error``: a failed
                    through ``generate_tool_call_response()``    save after the effect
                    in the loop body, a write-ahead ledger for   raises from the tool; the
                    irreversible calls, saves the results;       runner answers the model an
                    resume settles a saved reply's calls, then   error and it asks again
                    a new runner from the saved messages         (``no_duplicate_effect``);
                                                                 ``no_key``: sends without a
                                                                 key (same oracle);
                                                                 ``rerun_answered``: a resume
                                                                 runs the last reply's calls
                                                                 again though their results
                                                                 are saved
                                                                 (``recorded_work_not_redone``,
                                                                 on an irreversible tool)
``thread``          its own ``client.beta.messages.thread()``    ``no_settle``: the new
                    and ``thread.tool_runner()``; saves          thread gets the saved reply
                    ``thread.messages`` after each reply (its    unanswered
                    tool results come with the next); resume     (``valid_sequence``); with
                    runs the saved reply's calls again with      an unkeyed tool, the resume
                    their keys. No ledger: sound for read-only   sends it again
                    and keyed tools only                         (``no_duplicate_effect``)
``stream``          ``ledger`` on ``stream=True``; a reply cut   ``keeps_cut_reply``: takes
                    short raises, the agent starts over from     the cut reply's snapshot as
                    its checkpoint (three times, then raises)    the reply (``same_answer``)
``async``           ``ledger`` on ``AsyncAnthropic``,            ``enumerate_iteration``:
                    ``beta_async_tool`` wrappers, ``async for``  the iteration is the
                    over the runner, ``async def`` tools         runner's turn count, which
                                                                 restarts with each runner
                                                                 (``iteration_monotone``)
==================  ===========================================  ===========================
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import anthropic
from anthropic import beta_async_tool, beta_tool

from pytest_agentckpt import Toolbox
from stores import ActionRecord, Checkpoint, CheckpointStore, RecordedResult, StoreError

MODEL = "claude-sonnet-4-5"
UNKNOWN = "The outcome of this action is unknown (the agent stopped while it ran): check before doing it again."


def key_for(task_id: str, tool_use_id: str) -> str:
    return "rt-" + hashlib.sha256(f"{task_id}:{tool_use_id}".encode()).hexdigest()[:16]


def to_json(message: Any) -> dict[str, Any]:
    """A runner's message (SDK blocks inside) as JSON for the checkpoint."""
    dumped: dict[str, Any] = json.loads(
        json.dumps(message, default=lambda o: o.model_dump(mode="json", exclude_none=True))
    )
    return dumped


class ReplyIds:
    """The ``tool_use`` ids of the reply the runner is about to run tools for, per tool."""

    def __init__(self) -> None:
        self._ids: dict[str, deque[str]] = {}

    def expect(self, message: Any) -> None:
        self._ids = {}
        for block in message.content:
            if block.type == "tool_use":
                self._ids.setdefault(block.name, deque()).append(block.id)

    def take(self, name: str) -> str:
        return self._ids[name].popleft()


def runner_tools(tools: Any, call: Callable[[str, dict[str, Any]], Any], *, is_async: bool = False) -> list[Any]:
    """One runner tool per toolbox tool, each calling ``call(name, input)`` (its definition
    as the toolbox has it)."""
    out = []
    for definition in tools.definitions():
        name = definition["name"]
        if is_async:

            async def afn(_name: str = name, **input: Any) -> Any:
                return await call(_name, input)

            out.append(beta_async_tool(afn, name=name, description=definition.get("description", name),
                                       input_schema=definition["input_schema"]))
        else:

            def fn(_name: str = name, **input: Any) -> Any:
                return call(_name, input)

            out.append(beta_tool(fn, name=name, description=definition.get("description", name),
                                 input_schema=definition["input_schema"]))
    return out


def _text(message: Any) -> str:
    return "".join(b.text for b in message.content if b.type == "text")


def _result_block(use_id: str, result: RecordedResult) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": use_id, "content": result.content}
    if result.is_error:
        block["is_error"] = True
    return block


class Ledger:
    """The ``ledger`` design (sync, non-streaming); ``bugs`` turns on its twins' bugs."""

    def __init__(self, task_id: str, goal: str, client: Any, store: CheckpointStore, tools: Any, bugs: frozenset[str]) -> None:
        self.task_id, self.client, self.store, self.tools, self.bugs = task_id, client, store, tools, bugs
        cp = store.load(task_id)
        if cp is None:
            cp = store.save(Checkpoint(task_id=task_id, goal=goal, messages=[{"role": "user", "content": goal}]))
        self.cp = cp
        self.ids = ReplyIds()

    def save(self) -> None:
        self.cp = self.store.save(self.cp)

    def call(self, name: str, tool_input: dict[str, Any], use_id: str) -> RecordedResult:
        spec = self.tools.spec(name)
        key = None if "no_key" in self.bugs else key_for(self.task_id, use_id)
        if not spec.irreversible:
            result = self.tools.call(name, tool_input)
            return RecordedResult(content=result.content, is_error=result.is_error)
        record = self.cp.action(use_id)
        if record is not None and record.result is not None:
            return record.result
        if record is not None and spec.kind == "unkeyed":
            record.state, record.result = "unknown", RecordedResult(content=UNKNOWN, is_error=True)
            return record.result
        if record is None:
            record = ActionRecord(tool_use_id=use_id, tool_name=name, input=tool_input, idempotency_key=key or "")
            self.cp.actions.append(record)
            self.save()  # write-ahead: no durable intent, no effect
        result = self.tools.call(name, tool_input, idempotency_key=key)
        record.state, record.result = "done", RecordedResult(content=result.content, is_error=result.is_error)
        try:
            self.save()
        except StoreError:
            # The effect happened: the runner must not answer it as an error (the model
            # would ask again). The next save carries the outcome.
            if "outcome_error" in self.bugs:
                raise
        return record.result

    def runner_call(self, name: str, tool_input: dict[str, Any]) -> Any:
        result = self.call(name, tool_input, self.ids.take(name))
        if result.is_error:
            raise RuntimeError(result.content)  # the runner sends it as an error result
        return result.content

    def settle(self) -> None:
        """Answer the calls of a saved reply whose results were not saved."""
        last = self.cp.messages[-1]
        if last["role"] != "assistant":
            if "rerun_answered" in self.bugs:
                # BUG: the last reply's calls are run again (past the ledger, under their
                # keys) though their results are saved.
                reply = next((m for m in reversed(self.cp.messages) if m["role"] == "assistant"), None)
                for b in reply["content"] if reply else ():
                    if b.get("type") == "tool_use":
                        key = key_for(self.task_id, b["id"])
                        self.tools.call(b["name"], b.get("input") or {}, idempotency_key=key)
            return
        results = [
            _result_block(b["id"], self.call(b["name"], b.get("input") or {}, b["id"]))
            for b in last["content"]
            if b.get("type") == "tool_use"
        ]
        self.cp.messages.append({"role": "user", "content": results})
        self.save()

    def make_runner(self) -> Any:
        return self.client.beta.messages.tool_runner(
            model=MODEL, max_tokens=1024, tools=runner_tools(self.tools, self.runner_call),
            messages=self.cp.messages,
        )

    def turn(self, runner: Any, message: Any) -> str | None:
        """Record one reply and run its tools; the answer when it is the last."""
        self.cp.messages.append(to_json(message.to_param()))
        self.cp.iteration += 1
        if message.stop_reason != "tool_use":
            self.cp.status, self.cp.final_answer = "completed", _text(message)
            self.save()
            return self.cp.final_answer
        self.save()
        self.ids.expect(message)
        response = runner.generate_tool_call_response()  # runs the tools; the runner sends it
        if response is not None:
            self.cp.messages.append(to_json(response))
            self.save()
        return None

    def run(self) -> str:
        if self.cp.status == "completed":
            return self.cp.final_answer or ""
        self.settle()
        runner = self.make_runner()
        for message in runner:
            answer = self.turn(runner, message)
            if answer is not None:
                return answer
        raise RuntimeError("the runner stopped without a final answer")


class Streaming(Ledger):
    """The ``stream`` design: ``Ledger`` on streamed replies, started over from the
    checkpoint when a reply is cut short."""

    def run(self) -> str:
        for _ in range(3):
            try:
                return super().run()
            except anthropic.APIError:
                if "keeps_cut_reply" in self.bugs:
                    raise
                cp = self.store.load(self.task_id)
                assert cp is not None
                self.cp = cp
        return super().run()

    def make_runner(self) -> Any:
        return self.client.beta.messages.tool_runner(
            model=MODEL, max_tokens=1024, tools=runner_tools(self.tools, self.runner_call),
            messages=self.cp.messages, stream=True,
        )

    def turn(self, runner: Any, stream: Any) -> str | None:
        shown: list[str] = []
        try:
            for event in stream:
                if event.type == "content_block_delta" and event.delta.type == "text_delta":
                    shown.append(event.delta.text)  # what a UI would show as it streams
            message = stream.get_final_message()
        except anthropic.APIError:
            if "keeps_cut_reply" not in self.bugs:
                raise
            message = stream.current_message_snapshot  # BUG: a cut reply taken as whole
        return super().turn(runner, message)


def thread_run(bugs: frozenset[str]) -> Callable[..., str]:
    """The ``thread`` design."""

    def run(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
        cp = store.load(task_id)
        if cp is None:
            cp = store.save(Checkpoint(task_id=task_id, goal=goal, messages=[{"role": "user", "content": goal}]))
        if cp.status == "completed":
            return cp.final_answer or ""
        ids = ReplyIds()

        def call(name: str, tool_input: dict[str, Any], use_id: str | None = None) -> Any:
            result = tools.call(name, tool_input, idempotency_key=key_for(task_id, use_id or ids.take(name)))
            if result.is_error:
                raise RuntimeError(result.content)
            return result.content

        messages = list(cp.messages)
        if messages[-1]["role"] == "assistant" and "no_settle" not in bugs:
            results = []
            for block in messages[-1]["content"]:
                if block.get("type") == "tool_use":
                    try:
                        content, failed = call(block["name"], block.get("input") or {}, block["id"]), False
                    except RuntimeError as exc:
                        content, failed = str(exc), True
                    results.append({"type": "tool_result", "tool_use_id": block["id"], "content": content, "is_error": failed})
            messages.append({"role": "user", "content": results})
        thread = client.beta.messages.thread(
            model=MODEL, max_tokens=1024, tools=runner_tools(tools, call), messages=messages
        )
        for message in thread.tool_runner():
            cp.messages = [to_json(m) for m in thread.messages]
            cp.iteration += 1
            if message.stop_reason == "tool_use":
                ids.expect(message)
            else:
                cp.status, cp.final_answer = "completed", _text(message)
            cp = store.save(cp)
        return cp.final_answer or ""

    return run


def async_run(bugs: frozenset[str]) -> Callable[..., Awaitable[str]]:
    """The ``async`` design."""

    async def run(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
        cp = store.load(task_id)
        if cp is None:
            cp = store.save(Checkpoint(task_id=task_id, goal=goal, messages=[{"role": "user", "content": goal}]))
        if cp.status == "completed":
            return cp.final_answer or ""
        state = {"cp": cp}
        ids = ReplyIds()

        def save() -> None:
            state["cp"] = store.save(state["cp"])

        async def call(name: str, tool_input: dict[str, Any], use_id: str) -> RecordedResult:
            spec, key, cp = tools.spec(name), key_for(task_id, use_id), state["cp"]
            if not spec.irreversible:
                result = await tools.call(name, tool_input)
                return RecordedResult(content=result.content, is_error=result.is_error)
            record = cp.action(use_id)
            if record is not None and record.result is not None:
                return record.result
            if record is not None and spec.kind == "unkeyed":
                record.state, record.result = "unknown", RecordedResult(content=UNKNOWN, is_error=True)
                return record.result
            if record is None:
                record = ActionRecord(tool_use_id=use_id, tool_name=name, input=tool_input, idempotency_key=key)
                cp.actions.append(record)
                save()
            result = await tools.call(name, tool_input, idempotency_key=key)
            record.state, record.result = "done", RecordedResult(content=result.content, is_error=result.is_error)
            with contextlib.suppress(StoreError):
                save()  # the effect happened; if this fails, the next save carries the outcome
            return record.result

        async def runner_call(name: str, tool_input: dict[str, Any]) -> Any:
            result = await call(name, tool_input, ids.take(name))
            if result.is_error:
                raise RuntimeError(result.content)
            return result.content

        last = state["cp"].messages[-1]
        if last["role"] == "assistant":
            uses = [b for b in last["content"] if b.get("type") == "tool_use"]
            settled = [_result_block(b["id"], await call(b["name"], b.get("input") or {}, b["id"])) for b in uses]
            state["cp"].messages.append({"role": "user", "content": settled})
            save()
        runner = client.beta.messages.tool_runner(
            model=MODEL, max_tokens=1024, tools=runner_tools(tools, runner_call, is_async=True),
            messages=state["cp"].messages,
        )
        turns = 0
        async for message in runner:
            turns += 1
            cp = state["cp"]
            cp.messages.append(to_json(message.to_param()))
            cp.iteration = turns if "enumerate_iteration" in bugs else cp.iteration + 1
            if message.stop_reason != "tool_use":
                cp.status, cp.final_answer = "completed", _text(message)
                save()
                return cp.final_answer
            save()
            ids.expect(message)
            response = await runner.generate_tool_call_response()
            if response is not None:
                state["cp"].messages.append(to_json(response))
                save()
        raise RuntimeError("the runner stopped without a final answer")

    return run


def make_run(design: str, bug: str | None = None) -> Callable[..., Any]:
    """``run(task_id, goal, *, client, store, tools)`` of a design, with one twin's bug."""
    bugs = frozenset({bug} if bug else ())
    if design == "thread":
        return thread_run(bugs)
    if design == "async":
        return async_run(bugs)
    cls = {"ledger": Ledger, "stream": Streaming}[design]

    def run(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
        return cls(task_id, goal, client, store, tools, bugs).run()

    return run


async def search(query: Literal["crash", "resume", "keys"]) -> str:
    """Search the notes."""
    await asyncio.sleep(0)
    return f"3 notes about {query}"


async def write_record(key: Literal["a", "b"], idempotency_key: str | None = None) -> str:
    """Write a record (honours idempotency keys)."""
    await asyncio.sleep(0)
    return f"record {key} written"


async def send_email(to: Literal["ann", "bob"]) -> str:
    """Send an e-mail (no idempotency key)."""
    await asyncio.sleep(0)
    return f"mail to {to} sent"


def async_toolbox() -> Toolbox:
    """The test toolkit's three tools as ``async def`` tools (an async team's toolbox)."""
    return Toolbox.from_functions(search, write_record, send_email, kinds={"write_record": "keyed", "send_email": "unkeyed"})


@beta_tool(name="search")
def _own_search(query: str) -> str:
    """Search the notes."""
    return f"3 notes about {query}"


def own_tools_run(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
    """A fitting mistake: the runner gets the agent's own ``@beta_tool`` functions, not the
    toolbox ``fuzz`` hands it, so the harness never sees a tool call."""
    cp = store.load(task_id) or Checkpoint(task_id=task_id, goal=goal, messages=[{"role": "user", "content": goal}])
    if cp.status == "completed":
        return cp.final_answer or ""
    final = client.beta.messages.tool_runner(
        model=MODEL, max_tokens=1024, tools=[_own_search], messages=cp.messages
    ).until_done()
    cp.status, cp.final_answer = "completed", _text(final)
    store.save(cp)
    return cp.final_answer


def restarts_from_scratch_run(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
    """The naive runner agent: ``until_done()``, a checkpoint only at completion, keys from
    the task and the ``tool_use`` id. A crash starts the task over and the model is asked
    again; the API's new reply has new ids, so the keys differ and a keyed call repeats."""
    cp = store.load(task_id)
    if cp is not None and cp.status == "completed":
        return cp.final_answer or ""
    ids = ReplyIds()

    def call(name: str, tool_input: dict[str, Any]) -> Any:
        result = tools.call(name, tool_input, idempotency_key=key_for(task_id, ids.take(name)))
        if result.is_error:
            raise RuntimeError(result.content)
        return result.content

    runner = client.beta.messages.tool_runner(
        model=MODEL, max_tokens=1024, tools=runner_tools(tools, call), messages=[{"role": "user", "content": goal}]
    )
    final = None
    for message in runner:
        ids.expect(message)
        final = message
    assert final is not None
    done = Checkpoint(task_id=task_id, goal=goal, status="completed", final_answer=_text(final))
    if cp is not None:
        done.version = cp.version
    store.save(done)
    return done.final_answer or ""
