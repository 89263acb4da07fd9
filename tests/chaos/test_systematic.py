"""fuzz(systematic=True): every single crash point of each plan's crash-free run, one at a time."""

from __future__ import annotations

import functools

import pytest

import reference_agent
from pytest_agentckpt import OracleFailure, fuzz
from reference_agent.scripted import Plan, Step, ToolCall
from tests.buggy_agents import checkpoint_after_result
from tests.chaos.test_chaos_mode import _fault_points_of
from tests.harness.toolkit import safe_toolbox, toolbox

PLAN = Plan(
    steps=(Step((ToolCall("search", {"query": "crash"}), ToolCall("write_record", {"key": "a"}))),),
    final_answer="done",
)
REFERENCE = functools.partial(reference_agent.run, retry_backoff=0.0)


def test_every_single_crash_point_of_the_plan_is_checked_and_counted() -> None:
    report = fuzz(REFERENCE, safe_toolbox(), plans=[PLAN], systematic=True, max_examples=1, seed=1)
    points = _fault_points_of(REFERENCE, PLAN, safe_toolbox())
    assert report.single_crash_points == points > 10
    assert report.examples == points  # one scenario per point
    assert f"every single-crash point of each plan was checked ({points} points over 1 plan(s))" in report.describe()


def test_a_buggy_agent_fails_at_a_single_crash_point() -> None:
    plan = Plan(steps=(Step((ToolCall("send_email", {"to": "ann"}),)),), final_answer="sent")
    with pytest.raises(OracleFailure) as caught:
        fuzz(checkpoint_after_result.run, toolbox(), plans=[plan], systematic=True, max_examples=1, seed=1)
    assert caught.value.oracle == "no_duplicate_effect"
    assert caught.value.fault_plan is not None and caught.value.fault_plan.size == 1


def test_drawn_plans_are_each_crashed_at_every_point() -> None:
    report = fuzz(REFERENCE, safe_toolbox(), systematic=True, max_examples=3, max_steps=2, seed=2)
    assert report.plans is not None and report.plans >= 2
    assert report.single_crash_points == report.examples == report.stats.crashes


def test_points_only_the_run_of_the_completed_task_passes_are_not_counted_as_checked() -> None:
    # An outside round's durable-execution agent saves when run on a task it completed:
    # those saves' points were planned crashes that never came (that run gets no faults),
    # and "every single-crash point ... (322 points)" counted them, with 256 crashes.
    from stores import Checkpoint

    def touches_completed(task_id: str, goal: str, *, client: object, store: object, tools: object) -> str:
        loaded = store.load(task_id)  # type: ignore[attr-defined]
        if loaded is not None and loaded.status == "completed":
            store.save(Checkpoint.model_validate({**loaded.model_dump(), "metadata": {"seen": True}}))  # type: ignore[attr-defined]
        return REFERENCE(task_id, goal, client=client, store=store, tools=tools)

    report = fuzz(touches_completed, safe_toolbox(), plans=[PLAN], systematic=True, max_examples=1, seed=1)
    assert report.single_crash_points == report.examples == report.stats.crashes


def test_systematic_must_be_a_bool() -> None:
    with pytest.raises(ValueError, match="systematic must be True or False"):
        fuzz(REFERENCE, safe_toolbox(), systematic="yes")  # type: ignore[arg-type]
