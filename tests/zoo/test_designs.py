"""More zoo designs (``tests/zoo/designs.py``): each sound agent passes three seeds at the
zoo's example count, and each buggy twin is caught by the oracle its bug breaks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt import FaultPlan, Plan, replay
from pytest_agentckpt.harness import NotCheckableWarning, OracleFailure, fuzz
from tests.harness.toolkit import toolbox

from ._base import agent
from .designs import SOUND, TWINS, TurnQuota, fold_history, own_table_agent
from .test_false_alarms import EXAMPLES, SEEDS, sound_passes, twin_caught

GLUE: dict[str, dict[str, Any]] = {
    "caches": {"client": "direct"},
    "caches_copy": {"client": "direct"},
    "events": {"client": "direct", "history": fold_history},
    "approval": {"client": "direct"},
    "outbox": {"client": "direct"},
    # Its own retries: the SDK's client, whose retries it turns off (the direct one retries).
    "retries": {},
    "ledger_apart": {"client": "direct"},
}

#: The oracle that catches each twin (every twin's bug needs a fault to show).
CAUGHT_BY: dict[str, str] = {
    "caches": "valid_sequence",
    "caches_copy": "recorded_work_not_redone",
    "events": "no_duplicate_effect",
    "approval": "no_duplicate_effect",
    "outbox": "no_duplicate_effect",
    "retries": "no_duplicate_effect",
    "ledger_apart": "recorded_work_not_redone",
}


def _fuzz(run: Callable[..., Any], design: str, seed: int, **extra: Any) -> Any:
    return fuzz(
        run, toolbox(), seed=seed, database=InMemoryExampleDatabase(), unsafe_tools="ignore",
        max_examples=EXAMPLES, **{**GLUE[design], **extra},
    )


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("design", sorted(SOUND))
def test_a_sound_agent_of_each_further_design_passes(design: str, seed: int) -> None:
    sound_passes(lambda: _fuzz(SOUND[design], design, seed))


@pytest.mark.parametrize("design", sorted(TWINS))
def test_the_buggy_twin_of_each_further_design_is_caught(design: str) -> None:
    twin_caught(lambda: _fuzz(TWINS[design], design, 20261201), CAUGHT_BY[design], needs_fault=True)


def test_a_forgotten_cache_mark_is_reported_with_the_api_s_limit() -> None:
    with pytest.raises(OracleFailure) as caught:
        _fuzz(TWINS["caches"], "caches", 20261201)
    report = str(caught.value)
    assert "A maximum of 4 blocks with cache_control may be provided. Found 5." in report
    assert "remove the marks of earlier turns" in report


def test_a_load_of_the_agent_s_second_checkpoint_finding_nothing_is_not_taken_for_a_lost_one() -> None:
    # The ledger's checkpoint does not exist until the first irreversible call: its load
    # finding none says nothing of the conversation's checkpoint, which was loaded: the
    # report names what the twin does (it loaded the reply, then dropped it from the history).
    with pytest.raises(OracleFailure) as caught:
        _fuzz(TWINS["ledger_apart"], "ledger_apart", 20261201)
    example = next(e for e in caught.value.examples if e.oracle == "recorded_work_not_redone")
    assert "the agent loaded that checkpoint and dropped the reply" in example.message, example.message
    assert "the load found none" not in example.message, example.message


def test_a_whole_step_retried_on_a_store_failure_repeats_its_tools_with_no_crash() -> None:
    # The twin's bug without any crash: the step (the reply and its tools) is retried after
    # the failed save of its results, and the tools run again.
    with pytest.raises(OracleFailure) as caught:
        # Seed 4: caught on 8 of seeds 1-10 (5 of 10 when occurrences counted only from the
        # start), but no longer on the suite's seed, 20261201.
        _fuzz(TWINS["retries"], "retries", 4, fault_kinds=["store_outage"])
    example = next(e for e in caught.value.examples if e.oracle == "no_duplicate_effect")
    assert example.fault_plan.crashes == () and example.fault_plan.store_faults, str(caught.value)[:3000]


def test_an_agent_that_pauses_more_often_than_the_resume_limit_completes() -> None:
    # Four approvals, no fault: four clean stops, each after work. The resume limit counts
    # faults (three resumes past the faults of a plan); the pauses are the design's own.
    send = {"calls": [{"name": "send_email", "input": {"to": "ann"}}], "text": None}
    plan = Plan.from_dict({"steps": [send] * 4, "final_answer": "done"})
    replay(SOUND["approval"], toolbox(), plan, FaultPlan())
    replay(agent(TurnQuota), toolbox(), plan, FaultPlan())


def test_an_agent_with_a_turn_quota_per_run_passes() -> None:
    report = fuzz(
        agent(TurnQuota), toolbox(), seed=1, max_examples=60, database=InMemoryExampleDatabase(),
        unsafe_tools="ignore", client="direct",
    )
    assert report.stats.crashes > 0


def test_an_agent_that_keeps_its_state_in_a_table_of_its_own_is_not_checkable() -> None:
    # It never loads nor saves through the store it is given: no checkpoint-write crash,
    # no store fault, and no history to check recorded work against. Said, not passed.
    with pytest.warns(NotCheckableWarning, match="saved no checkpoint through the store"):
        report = fuzz(
            own_table_agent, toolbox(), seed=1, max_examples=30, database=InMemoryExampleDatabase(),
            unsafe_tools="ignore", client="direct",
        )
    assert "saved no checkpoint" in report.not_checkable["recorded_work_not_redone"]
    assert "iteration_monotone" in report.not_checkable
    assert report.stats.fault_points_hit["before_checkpoint_write"] == 0
