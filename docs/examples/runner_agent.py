"""A checkpointed agent on the SDK's own agent loop, ``client.beta.messages.tool_runner``.

The runner sends the requests and runs the tools; the loop body saves what it yields:

- the toolbox ``fuzz`` hands the agent becomes the runner's tools (``beta_tool`` wrappers
  that call ``tools.call``), so the harness sees every call and effect;
- a runner's tool is called with its input only, so the loop tells the wrappers the
  ``tool_use`` ids of the reply before the tools run: the idempotency key comes from the
  task and the id, and a resume sends the same one;
- each reply is saved, then its tools are run in the loop body with
  ``runner.generate_tool_call_response()`` (the runner sends that same response next) and
  the results are saved; an irreversible call gets a write-ahead record in
  ``checkpoint.actions``;
- on resume a saved reply without results is settled first, then a new runner starts
  from the saved messages (a new thread: it sends the whole history once).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from anthropic import beta_tool

from stores import ActionRecord, Checkpoint, CheckpointStore, RecordedResult, StoreError

MODEL = "claude-sonnet-4-5"


# --8<-- [start:tools]
@beta_tool
def get_weather(city: str) -> str:
    """Current weather of a city."""
    return f"{city}: sunny"


def book_table(restaurant: str, idempotency_key: str | None = None) -> str:
    """Book a table; the booking API drops a repeat with the same key."""
    return f"table booked at {restaurant}"


# --8<-- [end:tools]


# --8<-- [start:wrap]
def runner_tools(tools: Any, call: Any) -> list[Any]:
    """The toolbox as runner tools, each calling ``call(name, input)``."""
    out = []
    for definition in tools.definitions():

        def function(_name: str = definition["name"], **tool_input: Any) -> Any:
            return call(_name, tool_input)

        out.append(beta_tool(function, name=definition["name"], description=definition["description"],
                             input_schema=definition["input_schema"]))
    return out


# --8<-- [end:wrap]


# --8<-- [start:loop]
def run(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
    agent = _Agent(task_id, goal, store, tools)
    if agent.cp.status == "completed":
        return agent.cp.final_answer or ""
    agent.settle()
    runner = client.beta.messages.tool_runner(
        model=MODEL, max_tokens=1024, messages=agent.cp.messages, tools=runner_tools(tools, agent.runner_call)
    )
    for message in runner:
        agent.cp.messages.append(_json(message.to_param()))
        agent.cp.iteration += 1
        if message.stop_reason != "tool_use":
            agent.cp.status = "completed"
            agent.cp.final_answer = "".join(b.text for b in message.content if b.type == "text")
            agent.save()
            return agent.cp.final_answer
        agent.save()
        agent.ids = {b.id: b.name for b in message.content if b.type == "tool_use"}
        response = runner.generate_tool_call_response()  # runs the tools; the runner sends it next
        if response is not None:
            agent.cp.messages.append(_json(response))
            agent.save()
    raise RuntimeError("the runner stopped before a final answer")


def _json(message: Any) -> dict[str, Any]:
    """A message of the runner (SDK blocks in it) as JSON for the checkpoint."""
    return json.loads(json.dumps(message, default=lambda o: o.model_dump(mode="json", exclude_none=True)))  # type: ignore[no-any-return]


# --8<-- [end:loop]


# --8<-- [start:settle]
UNKNOWN = "The outcome is unknown (the agent stopped while it ran): check before doing it again."


class _Agent:
    def __init__(self, task_id: str, goal: str, store: CheckpointStore, tools: Any) -> None:
        self.task_id, self.store, self.tools = task_id, store, tools
        self.cp = store.load(task_id) or store.save(
            Checkpoint(task_id=task_id, goal=goal, messages=[{"role": "user", "content": goal}])
        )
        self.ids: dict[str, str] = {}  # the tool_use ids of the reply being handled -> names

    def save(self) -> None:
        self.cp = self.store.save(self.cp)

    def runner_call(self, name: str, tool_input: dict[str, Any]) -> Any:
        # The runner runs a reply's calls in order: take the first id of this tool left.
        use_id = next(i for i, n in self.ids.items() if n == name)
        del self.ids[use_id]
        result = self.call(name, tool_input, use_id)
        if result.is_error:
            raise RuntimeError(result.content)  # the runner sends it as an error result
        return result.content

    def call(self, name: str, tool_input: dict[str, Any], use_id: str) -> RecordedResult:
        spec, key = self.tools.spec(name), f"{self.task_id}:{use_id}"
        if not spec.irreversible:
            result = self.tools.call(name, tool_input)
            return RecordedResult(content=result.content, is_error=result.is_error)
        record = self.cp.action(use_id)
        if record is not None and record.result is not None:
            return record.result
        if record is not None and spec.kind == "unkeyed":
            return RecordedResult(content=UNKNOWN, is_error=True)
        if record is None:
            record = ActionRecord(tool_use_id=use_id, tool_name=name, input=tool_input, idempotency_key=key)
            self.cp.actions.append(record)
            self.save()  # write-ahead: no durable intent, no effect
        result = self.tools.call(name, tool_input, idempotency_key=key)
        record.state, record.result = "done", RecordedResult(content=result.content, is_error=result.is_error)
        # The effect happened: a failed save must not become an error result (the runner
        # sends a tool's exception to the model, which would ask again). The next save
        # carries the outcome.
        with contextlib.suppress(StoreError):
            self.save()
        return record.result

    def settle(self) -> None:
        """Answer the calls of a saved reply whose results were not saved."""
        last = self.cp.messages[-1]
        if last["role"] != "assistant":
            return
        results = []
        for block in last["content"]:
            if block.get("type") == "tool_use":
                result = self.call(block["name"], block.get("input") or {}, block["id"])
                results.append({"type": "tool_result", "tool_use_id": block["id"], "content": result.content,
                                "is_error": result.is_error})
        self.cp.messages.append({"role": "user", "content": results})
        self.save()


# --8<-- [end:settle]
