"""An agent that stops to wait for a human's approval (``tests/zoo/approval_agents.py``):
the sound agent passes, its naive twin is caught and told it is stuck."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt import FaultPlan, NotCheckableWarning, OracleFailure, Plan, replay
from pytest_agentckpt.harness import fuzz
from stores import Checkpoint

from .approval_agents import approval_agent, approval_tools
from .test_false_alarms import SEEDS, sound_passes

INVOICE = Plan.from_dict(
    {"steps": [{"calls": [{"name": "send_invoice", "input": {"order": "A1"}}], "text": None}], "final_answer": "sent"}
)


def test_a_resume_that_finds_no_approval_yet_is_a_stop_not_the_end() -> None:
    # Before: the second run, which found the approval not given yet and did nothing, was
    # taken for the end of an agent that never marks completion, and the run after it,
    # which got the approval and sent the invoice, for a completed task run again.
    replay(approval_agent(), approval_tools(), INVOICE, FaultPlan())


@pytest.mark.parametrize("seed", SEEDS)
def test_the_sound_approval_agent_passes(seed: int) -> None:
    sound_passes(lambda: fuzz(approval_agent(), approval_tools(), seed=seed, max_examples=60,
                              database=InMemoryExampleDatabase()))


def test_the_twin_that_takes_the_approval_before_recording_it_is_told_it_is_stuck() -> None:
    # A crash between taking the approval and recording it: the task waits for ever.
    with pytest.raises(OracleFailure) as caught:
        replay(approval_agent(pop_approval=True), approval_tools(), INVOICE,
               FaultPlan.from_dict({"crashes": [["before_checkpoint_write", 4]]}))
    message = str(caught.value)
    assert "resumes_to_completion" in message.splitlines()[0], message
    assert "stuck" in message and "record it in the checkpoint before" in message
    assert "completed_idempotent" not in message


@pytest.mark.parametrize("delete_when_done", [False, True], ids=["marks completion", "deletes when done"])
def test_takeover_puts_the_path_after_a_pause_under_two_workers(delete_when_done: bool) -> None:
    # An outside round's approval agent: while worker A was the agent's first call only,
    # every point after its first "awaiting approval" was "not reached" (A returned at the
    # pause), and its approval path was never put under two workers. A is now called again
    # after each clean stop, as the crash-free run was: every point is reached.
    from pytest_agentckpt import takeover

    with warnings.catch_warnings():
        warnings.simplefilter("error", NotCheckableWarning)
        stats = takeover(approval_agent(delete_when_done=delete_when_done), approval_tools(), plans=[INVOICE])
    assert stats.unreached == 0 and stats.failed == 0
    assert stats.points == stats.passed >= 15


def test_takeover_catches_the_twin_that_saves_an_approval_over_a_newer_checkpoint() -> None:
    # The round's twin: refused a save of the approval (another worker took the task over
    # while it was paused), it loads the newer version and saves its own state on top.
    # Met only by a worker resumed after its pause: it passed while A was a first call.
    from pytest_agentckpt import TakeoverFailure, takeover

    with pytest.raises(TakeoverFailure) as caught:
        takeover(approval_agent(refresh_on_approval=True), approval_tools(), plans=[INVOICE])
    message = str(caught.value)
    assert "no_lost_update" in message.splitlines()[1], message
    assert "do not load the newer version to save your own state on top" in message
    # The failing point is one of a resumed call of worker A's.
    held = message.index("HELD at")
    assert "(worker A resumes)" in message[:held] and "(worker B takes the task over)" in message[held:]


def _warming_up(run: Any) -> Any:
    """``run``, but a process's first call only saves the task and returns (a worker that
    warms up its caches first): its crash-free run takes a call more than a later run of it
    in the same process, whose path is not the crash-free run's."""
    warmed: list[bool] = []

    def warming(task_id: str, goal: str, **kwargs: Any) -> Any:
        if not warmed:
            warmed.append(True)
            store = kwargs["store"]
            saved = store.save(Checkpoint(task_id=task_id, goal=goal, messages=[{"role": "user", "content": goal}]))
            store.save(saved)  # a save more than a later run of it makes
            return "warming up"
        return run(task_id, goal, **kwargs)

    return warming


def test_takeover_says_which_points_its_worker_a_never_reached() -> None:
    from pytest_agentckpt import takeover

    with pytest.warns(NotCheckableWarning, match=r"point\(s\) not checkable, worker A never reached them.*its path left the crash-free run's") as caught:
        stats = takeover(_warming_up(approval_agent()), approval_tools(), plans=[INVOICE])
    assert stats.unreached > 0 and stats.failed == 0
    assert str(stats.unreached) in str(caught[0].message)
