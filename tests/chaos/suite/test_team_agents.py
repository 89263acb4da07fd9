"""A team's ordinary test, run for a sound agent and for known-buggy ones.

Every agent passes it as it is; chaos mode must pass the sound one and fail the others.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import anthropic
import pytest

import reference_agent
from reference_agent.scripted import Plan, Step, ToolCall
from stores import CheckpointStore
from tests.buggy_agents import checkpoint_after_result, common_design, delete_on_success, no_repair

PLAN = Plan(
    steps=(
        Step((ToolCall("search", {"query": "crash"}),)),
        Step((ToolCall("write_record", {"key": "a"}), ToolCall("send_email", {"to": "ann"}))),
    ),
    final_answer="filed",
)

AGENTS: dict[str, Any] = {
    "reference": functools.partial(reference_agent.run, retry_backoff=0.0),
    "common_design": common_design.run,
    "checkpoint_after_result": checkpoint_after_result.run,
    "no_repair": no_repair.run,
    "delete_on_success": delete_on_success.run,
}


@pytest.mark.parametrize("name", list(AGENTS))
@pytest.mark.agentckpt_model(plan=PLAN)
def test_agent_files_the_report(
    name: str,
    anthropic_client: anthropic.Anthropic,
    checkpoint_store: CheckpointStore,
    agentckpt_tools: Any,
    body_runs: Path,
) -> None:
    with body_runs.open("a") as log:
        log.write(name + "\n")
    answer = AGENTS[name]("t1", "file the report", client=anthropic_client, store=checkpoint_store, tools=agentckpt_tools)
    assert answer == "filed"
