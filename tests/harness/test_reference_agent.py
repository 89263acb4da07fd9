"""The reference agent passes the harness; the common design and the async path are judged too.

In CI (``--agentckpt-profile ci``) the four reference-agent fuzz tests run 500 examples each:
2,000 in all.
"""

from __future__ import annotations

import functools
import logging
import warnings
from collections.abc import Iterator

import pytest
from hypothesis.database import InMemoryExampleDatabase

import reference_agent
from pytest_agentckpt import OracleFailure, UnsafeToolWarning, fuzz
from reference_agent.demo_tools import demo_toolbox
from reference_agent.scripted import Plan, Step, ToolCall
from reference_agent.world import World

from ..buggy_agents import common_design
from . import async_agent
from .toolkit import safe_toolbox, toolbox

# No backoff between the agent's own save retries: the store outages are injected.
REFERENCE = functools.partial(reference_agent.run, retry_backoff=0.0)


@pytest.fixture(autouse=True)
def _quiet_agent_logs() -> Iterator[None]:
    # The reference agent reports every injected store outage; thousands of lines.
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


def test_reference_agent_survives_every_fault_kind() -> None:
    # Whether a random run lands a crash inside send_email's effect-to-outcome window
    # depends on the seed, so this run only checks that nothing else is ever blamed; the
    # next test aims at that window on purpose.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsafeToolWarning)
        report = fuzz(REFERENCE, toolbox())
    assert report.stats.crashes > 0 and report.stats.resumes > 0
    assert {tool.tool for tool in report.unsafe_tools} <= {"send_email"}


SEND_ONE_EMAIL = Plan(steps=(Step(calls=(ToolCall("send_email", {"to": "ann"}),)),), final_answer="sent")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_crash_after_an_unkeyed_effect_is_reported_as_an_unsafe_tool_not_a_violation(seed: int) -> None:
    # Every crash lands right after an effect, and the only effect is send_email's: its
    # outcome can never be known, and the harness must say so (not call the agent wrong).
    with pytest.warns(UnsafeToolWarning, match="send_email"):
        report = fuzz(
            REFERENCE, toolbox(), plans=[SEND_ONE_EMAIL], fault_kinds=["after_tool_effect"],
            max_examples=10, seed=seed, database=None,
        )
    assert report.stats.crashes > 0
    assert report.stats.violations == {}
    assert [tool.tool for tool in report.unsafe_tools] == ["send_email"]


def test_the_unsafe_tool_report_can_fail_the_run() -> None:
    with pytest.raises(AssertionError, match=r"unsafe tools\n.*send_email"):
        fuzz(
            REFERENCE, toolbox(), plans=[SEND_ONE_EMAIL], fault_kinds=["after_tool_effect"],
            max_examples=10, seed=1, unsafe_tools="error",
        )


def test_reference_agent_survives_crashes_with_tools_that_honour_keys_and_reports_no_unsafe_tool() -> None:
    report = fuzz(REFERENCE, safe_toolbox(), max_crashes=4)
    assert report.unsafe_tools == []
    assert report.stats.violations == {}


def test_reference_agent_budget_spans_restarts() -> None:
    budget = 6
    fuzz(
        functools.partial(reference_agent.run, retry_backoff=0.0, max_iterations=budget),
        safe_toolbox(),
        budget=budget,
        max_steps=3,
    )


def test_reference_agent_survives_crashes_with_the_demo_tools() -> None:
    world = World()
    try:
        fuzz(REFERENCE, demo_toolbox(world), unsafe_tools="ignore")
    finally:
        world.close()


def test_common_design_is_caught() -> None:
    with pytest.raises(OracleFailure) as caught:
        fuzz(common_design.run, toolbox(), seed=1, database=InMemoryExampleDatabase())
    # It deletes its checkpoint on success: even the crash-free run fails completed_idempotent,
    # and that must not hide its resume bug: every distinct oracle is listed, each with its
    # own smallest example.
    failure = caught.value
    assert "completed_idempotent" in failure.oracles
    assert "no_duplicate_effect" in failure.oracles
    by_oracle = {example.oracle: example for example in failure.examples}
    assert by_oracle["completed_idempotent"].fault_plan.size == 0
    assert by_oracle["no_duplicate_effect"].fault_plan.size >= 1
    assert "=== also failed: " in str(failure)


def test_common_design_resume_bugs_are_caught_once_its_completion_bug_is_set_aside() -> None:
    # Its crash-free run already fails completed_idempotent (it deletes its checkpoint on
    # success); with that oracle ignored, what is left to catch is how it resumes.
    with pytest.raises(OracleFailure) as caught:
        fuzz(
            common_design.run,
            toolbox(),
            seed=1,
            database=InMemoryExampleDatabase(),
            unsafe_tools="ignore",
            ignore_oracles=["completed_idempotent"],
        )
    assert "completed_idempotent" not in caught.value.oracles
    # Checkpoints every fifth iteration and "please retry" repairs: work recorded is lost
    # and irreversible actions are done again.
    assert caught.value.oracle in {"no_duplicate_effect", "recorded_work_not_redone"}, str(
        caught.value
    )


def test_ignore_oracles_names_only_known_oracles() -> None:
    with pytest.raises(ValueError, match="ignore_oracles: unknown"):
        fuzz(REFERENCE, toolbox(), ignore_oracles=["no_such_oracle"])


def test_an_async_agent_is_fuzzed_with_an_async_client() -> None:
    report = fuzz(async_agent.run, safe_toolbox(), max_examples=60)
    assert report.stats.crashes > 0 and report.stats.violations == {}


def test_an_async_agent_with_a_bug_is_caught_too() -> None:
    async def forgets_pending_calls(task_id: str, goal: str, **kwargs: object) -> str:
        # Its resume drops the pending calls: a crash mid-batch leaves tool_use unanswered.
        real_pending = async_agent._pending
        async_agent._pending = lambda messages: []
        try:
            return await async_agent.run(task_id, goal, **kwargs)  # type: ignore[arg-type]
        finally:
            async_agent._pending = real_pending

    with pytest.raises(OracleFailure) as caught:
        fuzz(forgets_pending_calls, safe_toolbox(), seed=2, database=InMemoryExampleDatabase())
    assert caught.value.oracle == "valid_sequence"


def test_the_direct_client_path_passes_the_reference_agent_through_every_fault_kind() -> None:
    report = fuzz(REFERENCE, toolbox(), client="direct", unsafe_tools="ignore")
    assert report.stats.api_faults > 0 and report.stats.crashes > 0


def test_the_direct_client_path_still_answers_an_invalid_history_with_the_apis_400() -> None:
    import anthropic

    from ..buggy_agents import no_repair

    with pytest.raises(OracleFailure) as caught:
        fuzz(no_repair.run, toolbox(), client="direct", seed=4, database=InMemoryExampleDatabase())
    assert caught.value.oracle == "valid_sequence"
    assert anthropic.BadRequestError.__name__ in str(caught.value)


def test_a_store_class_is_taken_as_a_factory() -> None:
    from stores.memory import MemoryStore

    report = fuzz(REFERENCE, safe_toolbox(), store=MemoryStore, max_examples=10)
    assert report.stats.violations == {}
