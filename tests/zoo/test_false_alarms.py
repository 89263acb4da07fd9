"""The false-alarm zoo: sound agents in designs unlike the reference agent's pass; each
buggy twin is caught by the oracle its bug breaks, with a fault whenever the bug needs one.

Every sound agent passes three seeds at the default example count (the ``quick`` profile);
the default run checks seed 1, ``pytest -m sweep`` the other two.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt.harness import NotCheckableWarning, OracleFailure, fuzz
from tests.harness.toolkit import toolbox

from ._base import agent
from .agents import SOUND, TWINS, AsyncToolbox, OwnStatus, unwrap

#: Seed 1 in every run; seeds 2 and 3 on demand (``pytest -m sweep``), to keep the default
#: run in its time budget: each seed is a full search of 200 examples per design.
SEEDS = (1, pytest.param(2, marks=pytest.mark.sweep), pytest.param(3, marks=pytest.mark.sweep))
#: Examples per fuzz run, given explicitly: a loaded Hypothesis profile's ``max_examples``
#: would otherwise apply (the suite's dev profile has 50), and a verdict of this zoo must
#: not depend on which profile the session loaded.
EXAMPLES = 200


def _tools(design: str) -> Any:
    return AsyncToolbox(toolbox()) if design == "gather" else toolbox()


#: What each design needs of fuzz: its glue.
GLUE: dict[str, dict[str, Any]] = {
    "threads": {},
    "gather": {},
    "count_tokens": {},
    "stops_on_store_failure": {},
    "forgets_completion": {"ignore_oracles": ["completed_idempotent"]},
    "own_state": {"history": unwrap},
    "compacts": {},
    "streams": {},
}

#: The oracle that catches each twin, and whether its bug needs a fault to show.
CAUGHT_BY: dict[str, tuple[str, bool]] = {
    "threads": ("valid_sequence", True),
    "gather": ("no_duplicate_effect", True),
    "count_tokens": ("completed_idempotent", False),
    "stops_on_store_failure": ("no_duplicate_effect", True),
    "forgets_completion": ("iteration_monotone", True),
    "own_state": ("recorded_work_not_redone", True),
    "compacts": ("crash_free_run", False),  # and valid_sequence: it fails with no fault
    "streams": ("same_answer", True),
}


def _fuzz(run: Callable[..., Any], design: str, seed: int, **extra: Any) -> Any:
    # The sync designs take the fast client (they use only create and count_tokens of the SDK);
    # the streaming one needs the SDK.
    client = {} if design in ("gather", "streams") else {"client": "direct"}
    return fuzz(
        run, _tools(design), seed=seed, database=InMemoryExampleDatabase(), unsafe_tools="ignore",
        max_examples=EXAMPLES, **{**client, **GLUE[design], **extra},
    )


def sound_passes(fuzz_call: Callable[[], Any]) -> None:
    """A sound agent's fuzz call passes, every oracle able to judge it."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", NotCheckableWarning)
        report = fuzz_call()
    assert report.examples >= 50
    assert report.not_checkable == {}


def twin_caught(fuzz_call: Callable[[], Any], oracle: str, *, needs_fault: bool) -> None:
    """A buggy twin's fuzz call fails ``oracle``, with a fault when its bug needs one."""
    with pytest.raises(OracleFailure) as caught:
        fuzz_call()
    failure = caught.value
    assert oracle in failure.oracles, str(failure)[:3000]
    example = next(e for e in failure.examples if e.oracle == oracle)
    if needs_fault:
        assert example.fault_plan.size >= 1, str(failure)[:3000]
    else:
        assert example.fault_plan.size == 0


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("design", sorted(SOUND))
def test_a_sound_agent_of_each_design_passes(design: str, seed: int) -> None:
    sound_passes(lambda: _fuzz(SOUND[design], design, seed))


@pytest.mark.parametrize("design", sorted(TWINS))
def test_the_buggy_twin_of_each_design_is_caught_by_the_oracle_its_bug_breaks(design: str) -> None:
    oracle, needs_fault = CAUGHT_BY[design]
    twin_caught(lambda: _fuzz(TWINS[design], design, 20261201), oracle, needs_fault=needs_fault)


def test_an_agent_with_its_own_state_format_is_not_checkable_without_the_history_hook() -> None:
    with pytest.warns(NotCheckableWarning, match="recorded_work_not_redone"):
        report = fuzz(
            SOUND["own_state"], toolbox(), seed=1, max_examples=30, database=InMemoryExampleDatabase(),
            unsafe_tools="ignore",
        )
    assert "recorded_work_not_redone" in report.not_checkable
    assert "history=" in report.not_checkable["recorded_work_not_redone"]


@pytest.mark.parametrize(
    ("history", "says"),
    [
        (lambda checkpoint: [], "returned None or an empty list), though"),
        (lambda checkpoint: checkpoint.artifacts["sesion"]["messages"], "it raised on every one; the first time KeyError: 'sesion'"),
        (
            # Finds nothing in some checkpoints, raises on the others.
            lambda checkpoint: None if checkpoint.version % 2 else checkpoint.artifacts["nope"],
            "it returned None or an empty list on",
        ),
    ],
)
def test_a_history_hook_that_finds_nothing_is_named_in_the_not_checkable_reason(history: Any, says: str) -> None:
    # Before, a hook with a typo was told to pass a hook: "none held the message history
    # where the harness looks (checkpoint.messages): tell fuzz where it lives with history=".
    with pytest.warns(NotCheckableWarning, match="recorded_work_not_redone"):
        report = fuzz(
            SOUND["own_state"], toolbox(), seed=1, max_examples=20, database=InMemoryExampleDatabase(),
            unsafe_tools="ignore", history=history,
        )
    reason = report.not_checkable["recorded_work_not_redone"]
    assert "the history= function given to fuzz found no messages" in reason and says in reason


def test_an_agent_that_forgets_completion_fails_only_completed_idempotent() -> None:
    with pytest.raises(OracleFailure) as caught:
        fuzz(SOUND["forgets_completion"], toolbox(), seed=1, database=InMemoryExampleDatabase(),
             unsafe_tools="ignore", max_examples=EXAMPLES)
    # The re-run of the completed task redoes the work, which only completed_idempotent judges.
    assert caught.value.oracles == ["completed_idempotent"], str(caught.value)[:3000]


def test_an_agent_that_stops_on_a_store_failure_gets_advice_not_a_violation() -> None:
    report = fuzz(
        # Seed 1: seed 2 drew no outage on an outcome write once occurrences were also
        # counted from the end of the run (seeds 1, 3 and 5 do).
        SOUND["stops_on_store_failure"], toolbox(), seed=1, database=InMemoryExampleDatabase(),
        unsafe_tools="ignore", fault_kinds=["store_outage"], max_examples=EXAMPLES,
    )
    assert any("retrying the outcome write" in a.describe() for a in report.advice), report.advice


def test_an_agent_that_keeps_its_completion_in_its_own_state_passes() -> None:
    # Its checkpoint's status stays "running": every return looks like a clean stop, and
    # the resume that follows finds nothing to do and answers the same. That is done,
    # not a crash-free run that "fails with no fault injected at all: None".
    report = fuzz(
        agent(OwnStatus), toolbox(), seed=1, database=InMemoryExampleDatabase(), unsafe_tools="ignore",
        max_examples=60, history=unwrap,
    )
    assert report.stats.crashes > 0 and report.not_checkable == {}
