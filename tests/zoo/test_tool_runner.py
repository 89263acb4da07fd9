"""Agents on the SDK's ``client.beta.messages.tool_runner`` (``tests/zoo/tool_runner_agents.py``),
sync, streamed and async: each sound design passes, each buggy twin is caught by the oracle
its bug breaks. The suite runs one seed at a few examples each; the long runs (seeds 1-3 at
200 examples) are in the zoo's figures in docs/fuzzing.md."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt import FaultPlan, Plan, Step, ToolCall, replay
from pytest_agentckpt.faults import StoreFault
from pytest_agentckpt.harness import NotCheckableWarning, OracleFailure, fuzz
from tests.harness.toolkit import safe_toolbox, toolbox

from .test_false_alarms import sound_passes, twin_caught
from .tool_runner_agents import async_toolbox, make_run, own_tools_run, restarts_from_scratch_run

SEED = 20261201
EXAMPLES = 50
TWIN_EXAMPLES = 20


def _plan(*steps: tuple[str, dict[str, Any]]) -> list[Plan]:
    return [Plan(tuple(Step((ToolCall(name, args),)) for name, args in steps), "done")]


SEARCH = ("search", {"query": "crash"})
WRITE = ("write_record", {"key": "a"})
EMAIL = ("send_email", {"to": "ann"})

#: Each design's toolbox: the thread design keeps no ledger, so it is sound for
#: read-only and keyed tools only.
TOOLBOXES: dict[str, Callable[[], Any]] = {
    "ledger": toolbox,
    "thread": safe_toolbox,
    "stream": toolbox,
    "async": async_toolbox,
}

#: (design, bug, toolbox, oracle, fuzz arguments): each twin and what catches it, on one
#: short plan that reaches its bug and the faults that show it, so that each is found in
#: a few examples and shrinks fast (the long runs draw plans and every fault kind).
TWINS: list[tuple[str, str | None, Callable[[], Any], str, dict[str, Any]]] = [
    # A failed save after the effect raises from the tool: the runner answers the model an
    # error, and the model asks again under a new tool_use id (a new key).
    ("ledger", "outcome_error", toolbox, "no_duplicate_effect", {"fault_kinds": ["store_outage"], "plans": _plan(WRITE)}),
    ("ledger", "no_key", toolbox, "no_duplicate_effect", {"fault_kinds": ["after_tool_effect"], "plans": _plan(WRITE)}),
    # A keyed write run again under its key: no second effect, but recorded work redone
    # (a read-only call's rerun is free: an agent may read again after a restart).
    ("ledger", "rerun_answered", toolbox, "recorded_work_not_redone", {"fault_kinds": ["after_checkpoint_write"], "plans": _plan(WRITE)}),
    ("thread", "no_settle", safe_toolbox, "valid_sequence", {"fault_kinds": ["after_checkpoint_write"], "plans": _plan(SEARCH)}),
    # No ledger: the resume sends an unkeyed e-mail of the saved reply again.
    ("thread", None, toolbox, "no_duplicate_effect", {"fault_kinds": ["after_tool_effect"], "plans": _plan(EMAIL)}),
    ("stream", "keeps_cut_reply", toolbox, "same_answer", {"fault_kinds": ["stream_error", "stream_disconnect"], "plans": _plan(SEARCH)}),
    ("async", "enumerate_iteration", async_toolbox, "iteration_monotone", {"fault_kinds": ["after_checkpoint_write"], "plans": _plan(SEARCH, SEARCH)}),
]


def _fuzz(design: str, bug: str | None, tools: Any, examples: int = EXAMPLES, **extra: Any) -> Any:
    return fuzz(
        make_run(design, bug), tools, seed=SEED, max_examples=examples, database=InMemoryExampleDatabase(),
        unsafe_tools="ignore", **extra,
    )


@pytest.mark.parametrize("design", sorted(TOOLBOXES))
def test_a_sound_tool_runner_agent_passes(design: str) -> None:
    sound_passes(lambda: _fuzz(design, None, TOOLBOXES[design]()))


@pytest.mark.parametrize(
    ("design", "bug", "tools", "oracle", "extra"), TWINS, ids=[f"{t[0]}-{t[1] or 'unkeyed_tool'}" for t in TWINS]
)
def test_the_buggy_twin_of_each_tool_runner_agent_is_caught(
    design: str, bug: str | None, tools: Callable[[], Any], oracle: str, extra: dict[str, Any]
) -> None:
    twin_caught(lambda: _fuzz(design, bug, tools(), TWIN_EXAMPLES, **extra), oracle, needs_fault=True)


def test_a_call_answered_as_failed_after_its_effect_is_reported_as_such() -> None:
    # The save of the outcome (the 4th save) fails. The twin's tool raises; the runner sends
    # the exception as an error result and the model asks again under a new tool_use id,
    # so the keys differ. The report names the error answer, not the keys' derivation.
    outage = FaultPlan(store_faults=(StoreFault("store_outage", "save", 4),))
    with pytest.raises(OracleFailure) as caught:
        replay(make_run("ledger", "outcome_error"), toolbox(), _plan(WRITE)[0], outage)
    message = caught.value.examples[0].message
    assert caught.value.oracle == "no_duplicate_effect"
    assert "answered tool_use toolu_s0c0a0 with an error (StoreUnavailableError" in message, message
    assert "although its effect had happened" in message and "tool_runner" in message, message
    assert "derive the key" not in message, message
    # The sound agent answers the call with its result and records the outcome later.
    replay(make_run("ledger"), toolbox(), _plan(WRITE)[0], outage)


def test_a_runner_given_its_own_tools_instead_of_the_toolbox_is_not_checkable() -> None:
    # Its search runs outside the toolbox: no tool call, no effect seen. Said, not passed.
    with pytest.warns(NotCheckableWarning, match="never called them through the toolbox"):
        report = fuzz(
            own_tools_run, safe_toolbox(), seed=SEED, max_examples=20, database=InMemoryExampleDatabase(),
            plans=_plan(SEARCH),
        )
    assert set(report.not_checkable) >= {"no_duplicate_effect", "recorded_work_not_redone"}
    assert "search" in report.not_checkable["no_duplicate_effect"]


def test_a_runner_agent_that_starts_over_after_a_crash_repeats_a_keyed_call() -> None:
    # It saves only on completion, with keys from the tool_use ids: a crash after an effect
    # starts it over, and the model's new reply (fresh ids, as the API's) makes a new key.
    with pytest.raises(OracleFailure) as caught:
        fuzz(
            restarts_from_scratch_run, safe_toolbox(), seed=SEED, max_examples=10, database=InMemoryExampleDatabase(),
            plans=_plan(WRITE), fault_kinds=["after_tool_effect"],
        )
    assert "no_duplicate_effect" in caught.value.oracles
    assert "Save the model's reply durably before running its tools" in str(caught.value)


def test_an_agent_that_saves_only_on_completion_is_told_so() -> None:
    with pytest.warns(NotCheckableWarning, match="every checkpoint it wrote was of a completed task"):
        fuzz(
            restarts_from_scratch_run, safe_toolbox(), seed=SEED, max_examples=5, database=InMemoryExampleDatabase(),
            plans=_plan(SEARCH),
        )
