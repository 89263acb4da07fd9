"""An agent that stops to wait for a human's approval (``tests/zoo/approval_agents.py``):
the sound agent passes, its naive twin is caught and told it is stuck."""

from __future__ import annotations

import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt import FaultPlan, OracleFailure, Plan, replay
from pytest_agentckpt.harness import fuzz

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


def test_takeover_says_which_points_after_a_pause_it_could_not_check() -> None:
    # An outside round's approval agent: every point after its first "waiting for approval"
    # was "not reached" by worker A (a first call, which returns at the pause), so its
    # approval path was never put under two workers, and takeover passed without a word.
    from pytest_agentckpt import NotCheckableWarning, takeover

    with pytest.warns(NotCheckableWarning, match=r"point\(s\) not checkable, worker A never reached them.*a pause for an approval") as caught:
        stats = takeover(approval_agent(), approval_tools(), plans=[INVOICE], seed=1)
    assert stats.unreached > 0
    assert str(stats.unreached) in str(caught[0].message)
