"""Journal replay (``tests/zoo/journal_agents.py``): the sound agent passes, with its replay
keeping the ``tool_use`` ids or giving them fresh ones; the twin whose keys come from the
fresh ids is caught."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt import Plan
from pytest_agentckpt.harness import fuzz, replay
from reference_agent.scripted import Step, ToolCall
from tests.harness.toolkit import toolbox

from .journal_agents import journal_agent
from .test_false_alarms import SEEDS, sound_passes, twin_caught


def _fuzz(run: Any, seed: int, **options: Any) -> Any:
    return fuzz(run, toolbox(), seed=seed, database=InMemoryExampleDatabase(), unsafe_tools="ignore",
                client="direct", **options)


@pytest.mark.parametrize("new_ids", [False, True])
@pytest.mark.parametrize("seed", SEEDS)
def test_a_journal_replay_agent_passes_whether_its_replay_keeps_the_ids_or_not(seed: int, new_ids: bool) -> None:
    sound_passes(lambda: _fuzz(journal_agent(new_ids_on_replay=new_ids), seed, max_examples=150))


@pytest.mark.parametrize("new_ids", [False, True])
def test_a_journal_replay_agent_passes_every_single_crash_point(new_ids: bool) -> None:
    sound_passes(lambda: _fuzz(journal_agent(new_ids_on_replay=new_ids), 1, max_examples=8, systematic=True, max_steps=3))


def test_an_unkeyed_call_left_in_doubt_is_excused_under_fresh_ids_as_under_the_old_ones() -> None:
    # The outside round's case: the crash right after the unkeyed send; the resume
    # answers it "outcome unknown" under a fresh id, the model asks again, and the send
    # is made again. In doubt, as for the agent that keeps the ids: an unsafe tool.
    plan = Plan((Step((ToolCall("search", {"query": "crash"}), ToolCall("send_email", {"to": "ann"}))),), "done")
    faults = _crash_after_effect(2)  # the send, after the search
    for new_ids in (False, True):
        replay(journal_agent(new_ids_on_replay=new_ids), toolbox(), plan, faults)  # raises on a failure


def test_keys_from_the_fresh_ids_of_a_replay_are_caught() -> None:
    twin_caught(lambda: _fuzz(journal_agent(new_ids_on_replay=True, keys_from_ids=True), 1, max_examples=150),
                "no_duplicate_effect", needs_fault=True)


def _crash_after_effect(occurrence: int) -> Any:
    from pytest_agentckpt import CrashAt, FaultPlan

    return FaultPlan(crashes=(CrashAt("after_tool_effect", occurrence),))
