"""Two designs written from the docs alone: a supervisor with handoffs, kept as a state
machine in the checkpoint's metadata (``tests/zoo/desk_agents.py``), and an agent that
saves every third turn (``tests/zoo/batched_agents.py``). The sound agents pass, with a
turn budget and with a planning call that offers no tools too; their twins are caught."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt import (
    FaultPlan,
    OracleFailure,
    Plan,
    ResumeDriftWarning,
    Step,
    ToolCall,
    fuzz,
    replay,
)

from .batched_agents import batched_agent
from .desk_agents import desk_agent, desk_tools, read_only_desk_tools
from .test_false_alarms import SEEDS, sound_passes, twin_caught


def _fuzz(run: Any, seed: int, examples: int = 100, tools: Any = None, **options: Any) -> Any:
    return fuzz(
        run, tools or desk_tools(), seed=seed, database=InMemoryExampleDatabase(), max_examples=examples, **options
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_the_desk_agent_passes(seed: int) -> None:
    sound_passes(lambda: _fuzz(desk_agent(), seed))


@pytest.mark.parametrize("seed", SEEDS)
def test_the_desk_agent_with_a_planning_call_that_offers_no_tools_passes(seed: int) -> None:
    # Before, the fake answered the planning call with the plan's tool calls (the API only
    # answers a request without tools in text): the agent kept that reply in its history,
    # and its own next request was a 400 in the crash-free run.
    sound_passes(lambda: _fuzz(desk_agent(plans_first=True), seed))


LOOKUP = Plan((Step((ToolCall("lookup", {"sku": "A1"}),)),), "answer 0")


@pytest.mark.parametrize(
    "faults",
    [
        # The save of the final reply fails; the agent raises on it, and the resume asks the
        # model for that turn again: the same loss as a crash before that save.
        {"crashes": [], "api_faults": [], "store_faults": [["store_outage", "save", -1, 1, 0.0005]]},
        {"crashes": [["before_checkpoint_write", -1]], "api_faults": [], "store_faults": []},
    ],
    ids=["failed save", "crash before the save"],
)
def test_a_turn_lost_to_a_failed_save_is_within_the_budget_as_one_lost_to_a_crash(faults: dict[str, Any]) -> None:
    # Before, only crashes and lost replies were allowed for: iteration_monotone said the
    # budget "was reset by a restart" after a failed save.
    replay(desk_agent(budget=2), read_only_desk_tools(), LOOKUP, FaultPlan.from_dict(faults), budget=2)


def test_advancing_the_cursor_before_the_call_is_caught() -> None:
    twin_caught(lambda: _fuzz(desk_agent(cursor_before_call=True), 1), "valid_sequence", needs_fault=True)


@pytest.mark.parametrize("seed", SEEDS)
def test_dropping_the_open_turn_and_saving_before_asking_again_is_caught_with_read_only_tools(seed: int) -> None:
    # Before, the request was judged against the latest save only, which the agent had
    # just written without the reply: it passed. The save it loaded holds the reply.
    with pytest.raises(OracleFailure) as caught:
        _fuzz(desk_agent(drops_open_turn=True), seed, tools=read_only_desk_tools())
    assert caught.value.oracle == "recorded_work_not_redone"
    assert "dropped the reply, saved the shorter history" in str(caught.value)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_desk_not_restored_on_resume_is_warned_of_and_the_sound_agent_is_not(seed: int) -> None:
    # The resumed request sends the crash-free run's history under the triage prompt, where
    # the crash-free run's was the billing desk's. Before, nothing said so.
    with pytest.warns(ResumeDriftWarning, match="another system prompt") as caught:
        _fuzz(desk_agent(forgets_desk=True), seed)
    [drift] = [w for w in caught if issubclass(w.category, ResumeDriftWarning)]
    assert "the first of resumed attempt" in str(drift.message)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResumeDriftWarning)
        report = _fuzz(desk_agent(), seed)
    assert all(item.topic != "resume_drift" for item in report.advice)


# -- saves in batches (tests/zoo/batched_agents.py) ---------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_an_agent_that_saves_every_third_turn_passes(seed: int) -> None:
    sound_passes(lambda: _fuzz(batched_agent(), seed))


@pytest.mark.parametrize("seed", SEEDS)
def test_an_agent_that_saves_every_third_turn_passes_with_a_budget(seed: int) -> None:
    # A crash (or a failed save it raises on) may cost it up to three turns, each asked
    # again on resume: before, iteration_monotone allowed one per crash and said the
    # budget was reset by a restart.
    sound_passes(lambda: _fuzz(batched_agent(budget=7), seed, budget=7))


@pytest.mark.parametrize(("twin", "switch"), [("keys without intents", "keys_without_intents"), ("reruns unkeyed", "reruns_unkeyed")])
def test_the_batched_agent_s_twins_are_caught(twin: str, switch: str) -> None:
    twin_caught(lambda: _fuzz(batched_agent(**{switch: True}), 1), "no_duplicate_effect", needs_fault=True)
