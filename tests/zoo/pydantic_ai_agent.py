"""An agent we did not design: a pydantic-ai agent on its Anthropic model, written as a team
using pydantic-ai would write it. The fuzz client goes in through
``AnthropicProvider(anthropic_client=...)``; the message history, in pydantic-ai's own
format, is saved in ``checkpoint.artifacts["history"]`` after each node of the run.

What that design does on resume: pydantic-ai holds a turn's tool results in the next node
until that node runs, so the save after the tools ran does not have them, and a resume
runs the last turn's tool calls again. With idempotency keys derived from the tool call id
(``keyed``) the repeat is harmless; an unkeyed irreversible tool is performed twice.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic_ai import Agent, RunContext, Tool
from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.providers.anthropic import AnthropicProvider

from stores import Checkpoint


def _tools(box: Any, task_id: str, keyed: bool) -> list[Tool[Any]]:
    """The toolbox's tools as pydantic-ai tools (their JSON schemas as they are)."""
    out: list[Tool[Any]] = []
    for definition in box.definitions():

        def call(ctx: RunContext[Any], _name: str = definition["name"], **kwargs: Any) -> str:
            key = None
            if keyed and box.spec(_name).idempotent:
                key = "pai-" + hashlib.sha256(f"{task_id}:{ctx.tool_call_id}".encode()).hexdigest()[:16]
            result = box.call(_name, kwargs, idempotency_key=key)
            if result.is_error:
                raise RuntimeError(result.content)
            return str(result.content)

        out.append(
            Tool.from_schema(call, definition["name"], definition.get("description"), definition["input_schema"], takes_ctx=True)
        )
    return out


def make_run(*, keyed: bool = True) -> Any:
    async def run(task_id: str, goal: str, *, client: Any, store: Any, tools: Any) -> str:
        model = AnthropicModel("claude-sonnet-4-5", provider=AnthropicProvider(anthropic_client=client))
        agent = Agent(model, tools=_tools(tools, task_id, keyed))
        cp = store.load(task_id) or Checkpoint(task_id=task_id, goal=goal)
        if cp.status == "completed":
            return str(cp.final_answer)
        history = ModelMessagesTypeAdapter.validate_python(cp.artifacts.get("history", []))
        async with agent.iter(None if history else goal, message_history=history or None) as agent_run:
            async for _node in agent_run:
                cp.artifacts["history"] = ModelMessagesTypeAdapter.dump_python(agent_run.ctx.state.message_history, mode="json")
                cp.iteration += 1
                cp = store.save(cp)
        assert agent_run.result is not None
        cp.status, cp.final_answer = "completed", str(agent_run.result.output)
        store.save(cp)
        return cp.final_answer

    return run
