"""A team's tests of an async agent: one runs it with asyncio.run, one is itself async."""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic
import pytest

from reference_agent.scripted import Plan, Step, ToolCall
from reference_agent.toolbox import Toolbox
from stores import CheckpointStore
from tests.harness import async_agent
from tests.harness.toolkit import safe_toolbox

PLAN = Plan(
    steps=(Step((ToolCall("search", {"query": "crash"}), ToolCall("write_record", {"key": "a"}))),),
    final_answer="filed",
)


@pytest.fixture
def agentckpt_tools() -> Toolbox:
    # The async agent re-runs pending calls with their key: right for these tools only.
    return safe_toolbox()


@pytest.mark.agentckpt_model(plan=PLAN)
def test_async_agent_under_asyncio_run(
    async_anthropic_client: anthropic.AsyncAnthropic, checkpoint_store: CheckpointStore, agentckpt_tools: Any
) -> None:
    run = async_agent.run("t1", "file", client=async_anthropic_client, store=checkpoint_store, tools=agentckpt_tools)
    assert asyncio.run(run) == "filed"


@pytest.mark.anyio
@pytest.mark.agentckpt_model(plan=PLAN)
async def test_async_agent_in_an_async_test(
    async_anthropic_client: anthropic.AsyncAnthropic, checkpoint_store: CheckpointStore, agentckpt_tools: Any
) -> None:
    answer = await async_agent.run("t1", "file", client=async_anthropic_client, store=checkpoint_store, tools=agentckpt_tools)
    assert answer == "filed"
