"""store_down (opt-in): a store outage longer than an agent's own save retries, which the
default outages (one or two operations) never give an agent that retries. It reaches the
agent's give-up path; a bug there is caught, and a sound agent still passes."""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.database import InMemoryExampleDatabase

import reference_agent
from pytest_agentckpt import DEFAULT_FAULT_KINDS, OracleFailure, Plan, Step, ToolCall, fuzz
from pytest_agentckpt.faults import STORE_DOWN_OPERATIONS, FaultPlan
from pytest_agentckpt.strategies import fault_plans
from reference_agent.errors import IntentNotRecordedError
from tests.harness.toolkit import toolbox

WITH_STORE_DOWN = [*DEFAULT_FAULT_KINDS, "store_down"]
#: A keyed write, then an e-mail: work done before the store goes down for good.
PLAN = Plan(
    (Step((ToolCall("write_record", {"key": "a"}),)), Step((ToolCall("send_email", {"to": "ann"}),))), "done"
)


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    logging.disable(logging.WARNING)  # the agents log every failed save
    yield
    logging.disable(logging.NOTSET)


def _starts_over_when_the_store_stays_down(task_id: str, goal: str, **doors: Any) -> str:
    """The planted bug: when a save fails past its retries, the task is retried from a
    clean slate (its checkpoint deleted), so what it did so far is done again."""
    for _ in range(4):
        try:
            return reference_agent.run(task_id, goal, retry_backoff=0.0, save_attempts=3, **doors)
        except IntentNotRecordedError:
            doors["store"].delete(task_id)
    raise RuntimeError("the store stayed down")


@settings(max_examples=200, database=None, suppress_health_check=list(HealthCheck), deadline=None)
@given(st.data())
def test_outages_longer_than_two_operations_come_only_with_store_down(data: st.DataObject) -> None:
    default = data.draw(fault_plans(kinds=["store_outage"], max_store_faults=1))
    assert all(f.length <= 2 for f in default.store_faults)
    named = data.draw(fault_plans(kinds=["store_down"], max_store_faults=1))
    low, high = STORE_DOWN_OPERATIONS
    assert all(low <= f.length <= high and f.kind == "store_outage" for f in named.store_faults)


def test_a_retry_from_a_clean_slate_after_the_store_stayed_down_is_caught() -> None:
    with pytest.raises(OracleFailure) as caught:
        fuzz(_starts_over_when_the_store_stays_down, toolbox(), plans=[PLAN], seed=1, max_examples=100,
             fault_kinds=WITH_STORE_DOWN, database=InMemoryExampleDatabase(), unsafe_tools="ignore")
    assert "no_duplicate_effect" in caught.value.oracles
    assert "store outage on" in str(caught.value)


def test_the_sound_agent_with_its_own_retries_passes_a_store_that_stays_down() -> None:
    # It stops when an intent cannot be saved and resumes when the store is back; a task
    # whose every save failed, answered all the same, is resumed too (its completion is
    # nowhere), not taken for done.
    report = fuzz(functools.partial(reference_agent.run, retry_backoff=0.0, save_attempts=3), toolbox(),
                  seed=1, max_examples=150, fault_kinds=WITH_STORE_DOWN, database=InMemoryExampleDatabase(),
                  unsafe_tools="ignore")
    assert report.stats.store_faults > 20


def test_a_plan_allows_an_attempt_for_each_operation_an_outage_fails() -> None:
    from pytest_agentckpt.faults import StoreFault

    plan = FaultPlan(store_faults=(StoreFault("store_outage", "load", 1, length=6),))
    assert plan.attempts_needed == 1 + 5 + 3
