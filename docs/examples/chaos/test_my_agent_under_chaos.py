"""Ordinary tests of an agent, as a team writes them: the example of docs/chaos.md.

They pass as they are (``pytest docs/examples/chaos``) and under chaos mode
(``pytest docs/examples/chaos --agentckpt-chaos``), which reruns each with a crash at
every fault point it passes. The test suite runs this file both ways.
"""

from __future__ import annotations

import anthropic
import pytest

import reference_agent as my_agent
from pytest_agentckpt import Plan, Step, ToolCall
from reference_agent.toolbox import Toolbox
from stores import CheckpointStore

# --8<-- [start:test]
PLAN = Plan(
    steps=(
        Step(calls=(ToolCall("lookup", {"quarter": "q3"}),)),
        Step(calls=(ToolCall("file_report", {"quarter": "q3"}),)),
    ),
    final_answer="filed",
)


@pytest.mark.agentckpt_model(plan=PLAN)
def test_agent_files_the_report(
    anthropic_client: anthropic.Anthropic,
    checkpoint_store: CheckpointStore,
    agentckpt_tools: Toolbox,
    reports: dict[str, str],
) -> None:
    answer = my_agent.run(
        "t1", "file the report", client=anthropic_client,
        store=checkpoint_store, tools=agentckpt_tools,
    )
    assert answer == "filed"
    assert reports == {"q3": "report for q3"}
# --8<-- [end:test]


# --8<-- [start:opt-out]
@pytest.mark.agentckpt_chaos(False)  # counts model calls: a crash adds some
@pytest.mark.agentckpt_model(plan=PLAN)
def test_agent_asks_the_model_three_times(
    anthropic_client: anthropic.Anthropic,
    checkpoint_store: CheckpointStore,
    agentckpt_tools: Toolbox,
    anthropic_fake: object,
) -> None:
    my_agent.run("t2", "file the report", client=anthropic_client,
                 store=checkpoint_store, tools=agentckpt_tools)
    assert anthropic_fake.model_calls == 3  # type: ignore[attr-defined]
# --8<-- [end:opt-out]
