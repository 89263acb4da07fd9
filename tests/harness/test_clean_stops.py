"""Clean stops (an agent returns while its checkpoint says ``running``): a stop that did
work is resumed beyond the fault plan's resume limit, and an agent that stops for ever is
still reported, with what to do."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_agentckpt import FaultPlan, Plan, replay
from pytest_agentckpt._scenario import MAX_WAITS, MAX_WORKING_STOPS, attempt_numbers
from pytest_agentckpt.harness import OracleFailure
from pytest_agentckpt.timeline import Timeline
from stores import Checkpoint, CheckpointStore
from tests.harness.toolkit import toolbox
from tests.zoo._base import agent
from tests.zoo.designs import PausesForApproval, _Paused


class NeedsApproval(Exception):
    """What an agent that pauses by raising raises."""


class RaisesForApproval(PausesForApproval):
    """The approval agent of the zoo, pausing by raising instead of returning."""

    def run(self) -> str:
        try:
            return super(PausesForApproval, self).run()
        except _Paused:
            raise NeedsApproval("waiting for approval") from None


def _fails_at_once(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
    """Loads its checkpoint and raises, every time, saving nothing."""
    store.load(task_id)
    raise RuntimeError("misconfigured")


SEND = {"calls": [{"name": "send_email", "input": {"to": "ann"}}], "text": None}


def test_an_agent_that_pauses_by_raising_after_saved_progress_is_resumed_to_completion() -> None:
    # Four approvals, four raises, each after a durable step: not "twice the same failure".
    replay(agent(RaisesForApproval), toolbox(), Plan.from_dict({"steps": [SEND] * 4, "final_answer": "done"}), FaultPlan())


def test_an_agent_that_fails_the_same_way_with_nothing_saved_is_given_up_after_two_attempts() -> None:
    with pytest.raises(OracleFailure) as caught:
        replay(_fails_at_once, toolbox(), Plan.from_dict({"steps": [SEND], "final_answer": "done"}), FaultPlan())
    assert caught.value.oracle == "crash_free_run"
    report = str(caught.value)
    assert "[a2] --- attempt 2 ends" in report and "[a3]" not in report, report


def _forgets_completion_status(task_id: str, goal: str, *, client: Any, store: CheckpointStore, tools: Any) -> str:
    """Asks the model once per run and returns, never recording that it is done."""
    checkpoint = store.load(task_id) or store.save(
        Checkpoint(task_id=task_id, goal=goal, messages=[{"role": "user", "content": goal}])
    )
    client.messages.create(model="m", max_tokens=64, messages=checkpoint.messages, tools=tools.definitions())
    return "paused"


def test_an_agent_that_stops_for_ever_is_a_runaway_told_to_record_its_completion() -> None:
    plan = Plan.from_dict({"steps": [], "final_answer": "done"})
    with pytest.raises(OracleFailure) as caught:
        replay(_forgets_completion_status, toolbox(), plan, FaultPlan())
    assert caught.value.oracle == "runaway"
    assert "status 'running' (a clean stop, resumed each time" in str(caught.value)
    assert "set status='completed' on completion" in str(caught.value)


def _attempts(ends: list[tuple[str, bool]]) -> int:
    """How many attempts run when attempt n ends as ``ends[n]`` (outcome, did work)."""
    timeline = Timeline()
    ran = 0
    for _ in attempt_numbers(2, timeline):
        timeline.start_attempt()
        outcome, worked = ends[min(ran, len(ends) - 1)]
        if worked:
            timeline.add("model_request", index=ran, messages=[])
        timeline.add("attempt_end", outcome=outcome)
        ran += 1
    return ran


def test_only_stops_that_did_work_extend_the_resume_limit_and_only_so_far() -> None:
    assert _attempts([("crash", True)]) == 3
    # A stop that did nothing waits (for an approval, say): MAX_WAITS of them in a row.
    assert _attempts([("stopped", False)]) == 3 + MAX_WAITS
    assert _attempts([("crash", False)]) == 3
    assert _attempts([("stopped", True)]) == 3 + MAX_WORKING_STOPS
    assert _attempts([("stopped", True), ("stopped", True), ("crash", True)]) == 5
