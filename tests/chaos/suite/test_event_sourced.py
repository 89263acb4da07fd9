"""A team's test of its event-sourced agent: the history lives in an event log, not in
``checkpoint.messages``."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from reference_agent.scripted import Plan, Step, ToolCall
from stores import CheckpointStore
from tests.chaos.suite import event_sourced

PLAN = Plan(
    steps=(Step((ToolCall("search", {"query": "crash"}),)), Step((ToolCall("write_record", {"key": "a"}),))),
    final_answer="filed",
)
AGENTS = {"sound": event_sourced.run, "redoes_a_turn": event_sourced.run_redoes_a_turn}


@pytest.mark.parametrize("name", list(AGENTS))
@pytest.mark.agentckpt_model(plan=PLAN)
def test_event_sourced_agent_files_the_record(
    name: str, anthropic_client: anthropic.Anthropic, checkpoint_store: CheckpointStore, agentckpt_tools: Any
) -> None:
    answer = AGENTS[name]("t1", "file the record", client=anthropic_client, store=checkpoint_store, tools=agentckpt_tools)
    assert answer == "filed"
