"""An orchestrator that hands sub-tasks to sub-agents (``tests/zoo/subagent_agents.py``):
each sub-agent a conversation of its own, checkpointed under
``f"{task_id}/sub/{tool_use_id}"``, its tools those of the toolbox. The plans come from
``sub_agent_plans``: the lead's calls include ``delegate``, each with its sub-agent's plan.

Before, the scripted model could not follow a sub-agent: every conversation got the
lead's plan from its start, so a sub-agent was asked for ``delegate`` (a tool its request
did not offer) and the sound orchestrator was stopped as a runaway in its crash-free run;
plans drawn over the toolbox never delegated, so every naive twin passed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt import FaultPlan, Plan, PlanModel, Step, ToolCall, replay, sub_agent_plans
from pytest_agentckpt._shrink import _smaller_plans
from pytest_agentckpt.faults import CrashAt
from pytest_agentckpt.harness import OracleFailure, fuzz
from reference_agent.scripted import PlanMismatchError
from reference_agent.toolbox import Toolbox, tool
from tests.harness.toolkit import toolbox

from .subagent_agents import DELEGATE, TWINS, run, run_parallel
from .test_false_alarms import sound_passes

SOUND: dict[str, Callable[..., Any]] = {"sync": run, "parallel": run_parallel}


def _fuzz(agent: Callable[..., Any], seed: int, examples: int, **extra: Any) -> Any:
    tools = toolbox()
    return fuzz(
        agent, tools, plans=sub_agent_plans(tools, DELEGATE), seed=seed, max_examples=examples,
        database=InMemoryExampleDatabase(), unsafe_tools="ignore", client="direct", **extra,
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("design", sorted(SOUND))
def test_a_sound_orchestrator_passes(design: str, seed: int) -> None:
    reports: list[Any] = []
    sound_passes(lambda: reports.append(_fuzz(SOUND[design], seed, 100)) or reports[0])
    assert reports[0].stats.crashes > 0 and reports[0].stats.resumes > 0


#: The oracle that catches each twin, and the seed and examples that find it here.
CAUGHT_BY: dict[str, tuple[str, int, int]] = {
    "restart_subagent": ("no_duplicate_effect", 2, 60),
    "parallel_restart": ("no_duplicate_effect", 2, 60),
    "ephemeral_subagent": ("no_duplicate_effect", 2, 60),
    "parallel_ephemeral": ("no_duplicate_effect", 2, 60),
    "save_reply_late": ("no_duplicate_effect", 2, 60),
}


@pytest.mark.parametrize("twin", sorted(CAUGHT_BY))
def test_a_naive_orchestrator_is_caught(twin: str) -> None:
    oracle, seed, examples = CAUGHT_BY[twin]
    with pytest.raises(OracleFailure) as caught:
        _fuzz(TWINS[twin], seed, examples)
    assert oracle in caught.value.oracles, str(caught.value)[:3000]
    example = next(e for e in caught.value.examples if e.oracle == oracle)
    assert example.fault_plan.size > 0
    assert any(c.plan is not None for s in example.plan.steps for c in s.calls), "the bug is in a sub-agent"


def test_a_sub_agent_checkpoint_deleted_on_success_is_caught_crash_point_by_point() -> None:
    # Its window is one save: the sub-agent finished and its checkpoint is gone, and the
    # lead has not yet recorded its answer. Drawn fault plans seldom aim there (none of
    # seeds 1-4 at 200 examples); a crash at every single point of each plan does.
    tools = toolbox()
    with pytest.raises(OracleFailure) as caught:
        fuzz(
            TWINS["delete_sub_on_success"], tools, plans=sub_agent_plans(tools, DELEGATE, max_steps=2), seed=2,
            max_examples=10, database=InMemoryExampleDatabase(), unsafe_tools="ignore", client="direct",
            systematic=True,
        )
    assert "no_duplicate_effect" in caught.value.oracles, str(caught.value)[:3000]


def _search_only() -> Toolbox:
    @tool()
    def search(query: str) -> str:
        """Search the notes."""
        return f"notes about {query}"

    return Toolbox([search])


SUB = Plan((Step((ToolCall("search", {"query": "a"}),)), Step((ToolCall("search", {"query": "b"}),))), "found")


def test_a_lead_that_asks_again_for_its_stored_reply_is_caught_with_read_only_sub_agents() -> None:
    # The lead saved its reply (a delegation), then the sub-agent saved its own progress; a
    # crash in the sub-agent, and the resumed lead asks the model again for the reply its
    # checkpoint holds. The request was judged against the latest save of any checkpoint
    # (the sub-agent's), so it passed; it is judged against its own conversation's now.
    plan = Plan((Step((ToolCall("delegate", {"task": "Sub-task 1: look."}, plan=SUB),)),), "done")
    with pytest.raises(OracleFailure) as caught:
        replay(TWINS["reask_lead_reply"], _search_only(), plan, FaultPlan(crashes=(CrashAt("before_tool_effect", 2),)))
    assert caught.value.oracle == "recorded_work_not_redone"
    assert "asks again for reply 1 of the history" in str(caught.value)
    replay(run, _search_only(), plan, FaultPlan(crashes=(CrashAt("before_tool_effect", 2),)))


def test_two_sub_agents_given_the_same_task_are_not_taken_for_one_asked_again() -> None:
    # Each has its own checkpoint, and the second starts (saving first) after a crash that
    # left the first's history reread: its first request is a new conversation's.
    same = ToolCall("delegate", {"task": "Look it up."}, plan=SUB)
    plan = Plan((Step((same,)), Step((same,))), "done")
    report = fuzz(run, _search_only(), plans=[plan], seed=1, max_examples=40, database=InMemoryExampleDatabase(),
                  client="direct")
    assert report.stats.crashes > 0


def test_a_plan_with_many_sub_agents_is_no_runaway_in_its_crash_free_run() -> None:
    # Two lead steps of three delegations, each sub-agent three turns: 27 model requests
    # with no fault. The budget counted the lead's steps only (20 requests).
    sub = Plan((Step((ToolCall("search", {"query": "a"}),)), Step((ToolCall("search", {"query": "b"}),))), "found")
    step = lambda n: Step(tuple(ToolCall("delegate", {"task": f"Sub-task {n + i}: x."}, plan=sub) for i in range(3)))  # noqa: E731
    plan = Plan((step(1), step(4)), "done")
    replay(run, _search_only(), plan, FaultPlan())


def test_each_sub_agent_follows_its_own_plan_under_ids_of_its_own() -> None:
    plan = Plan((Step((ToolCall("delegate", {"task": "Sub-task 1: look."}, plan=SUB),)),), "done")
    model = PlanModel(plan)
    tools = [{"name": "search", "input_schema": {"type": "object"}}]
    lead = model.respond({"messages": [{"role": "user", "content": "Carry out the task."}],
                          "tools": [*tools, DELEGATE]})
    assert [(b["name"], b["id"]) for b in lead["content"]] == [("delegate", "toolu_s0c0a0")]
    sub = model.respond({"messages": [{"role": "user", "content": "Sub-task 1: look."}], "tools": tools})
    assert [(b["name"], b["input"], b["id"]) for b in sub["content"]] == [("search", {"query": "a"}, "toolu_v0-0_s0c0a0")]
    # A conversation the plan cannot place follows the lead's plan, whose next call is not
    # offered: said, not a runaway.
    with pytest.raises(PlanMismatchError, match="which this request does not offer"):
        model.respond({"messages": [{"role": "user", "content": "Research: look"}], "tools": tools})


def test_shrinking_keeps_the_final_call_and_shrinks_a_sub_agent_s_plan() -> None:
    plan = Plan((Step((ToolCall("delegate", {"task": "Sub-task 1: look."}, plan=SUB),)),), "done",
                final_call=ToolCall("submit", {"answer": "done"}))
    smaller = list(_smaller_plans(plan))
    assert all(p.final_call == plan.final_call for p in smaller)
    assert any(len(p.steps) == 1 and p.steps[0].calls[0].plan == Plan(SUB.steps[1:], "found") for p in smaller)
