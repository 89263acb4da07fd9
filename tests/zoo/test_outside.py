"""Agents in the designs of public code on the SDK (``tests/zoo/outside_agents.py``): each
sound agent passes, each naive twin is caught by the oracle its bug breaks, with the
report's explanation.

Before, the screenshots twin was missed whenever the resume came after an older
screenshot had been left out of the requests: the request that asked again for a
recorded reply differed from the saved history by that image, and
``recorded_work_not_redone`` compared them exactly (marks aside). The trajectory twin was
missed likewise (its saved history holds the system prompt and keys of its own). And an
"outcome unknown" told as a plain result was reported as a lost action with no word of
why, and as tools run outside the toolbox."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt import FaultPlan, Plan, Toolbox, replay
from pytest_agentckpt.harness import OracleFailure, fuzz
from tests.harness.toolkit import search, toolbox

from .outside_agents import (
    SOUND,
    TWINS,
    create_file,
    desktop_tools,
    rebuilt_history,
    screenshot,
    trajectory_agent,
)
from .test_false_alarms import sound_passes

EXAMPLES = 100

#: The glue of each design: the cookbook agent keeps no ``checkpoint.messages``.
GLUE: dict[str, dict[str, Any]] = {
    "computer_use": {},
    "screenshots": {},
    "sdk_objects": {"history": rebuilt_history},
    "trajectory": {},
}

CAUGHT_BY: dict[str, tuple[str, str]] = {
    "computer_use": ("valid_sequence", "A maximum of 4 blocks with cache_control may be provided. Found 5."),
    "screenshots": ("recorded_work_not_redone", "the agent loaded that checkpoint and dropped the reply"),
    "sdk_objects": ("no_duplicate_effect", "the agent repeated an action the model asked for once"),
    "trajectory": ("no_duplicate_effect", "the agent repeated an action the model asked for once"),
}


def _fuzz(design: str, run: Any, seed: int, examples: int = EXAMPLES) -> Any:
    tools = toolbox() if design in ("sdk_objects", "trajectory") else desktop_tools()
    return fuzz(
        run, tools, seed=seed, database=InMemoryExampleDatabase(), unsafe_tools="ignore",
        max_examples=examples, **GLUE[design],
    )


@pytest.mark.parametrize("design", sorted(SOUND))
def test_a_sound_agent_of_each_outside_design_passes(design: str) -> None:
    sound_passes(lambda: _fuzz(design, SOUND[design], 1))


@pytest.mark.parametrize("design", sorted(TWINS))
def test_the_naive_twin_of_each_outside_design_is_caught(design: str) -> None:
    oracle, message = CAUGHT_BY[design]
    with pytest.raises(OracleFailure) as caught:
        # 200 examples: the cookbook twin's window (an unkeyed call's effect and the save of
        # its result) is found after 99 with this seed.
        _fuzz(design, TWINS[design], 20261201, examples=200)
    assert oracle in caught.value.oracles, str(caught.value)[:3000]
    example = next(e for e in caught.value.examples if e.oracle == oracle)
    assert example.fault_plan.size >= 1, str(caught.value)[:3000]
    assert message in example.message, example.message


SHOT = {"calls": [{"name": "screenshot", "input": {}}], "text": None}
WRITE = {"calls": [{"name": "create_file", "input": {"path": "notes.md", "file_text": "a"}}], "text": None}


@pytest.mark.parametrize("save", [6, 7])
def test_a_reply_asked_again_without_the_older_screenshots_is_recorded_work_redone(save: int) -> None:
    # Two screenshots, then a file written; the agent sends only the latest screenshot.
    # A crash after save 6 (the third reply) or 7 (its write-ahead record): the twin
    # drops the reply and asks again with a history whose first screenshot is left out.
    # Only read-only and repeat-safe tools: nothing but this oracle can see it.
    tools = Toolbox.from_functions(screenshot, create_file, kinds={"create_file": "repeat_safe"})
    plan = Plan.from_dict({"steps": [SHOT, SHOT, WRITE], "final_answer": "done"})
    faults = FaultPlan.from_dict({"crashes": [["after_checkpoint_write", save]]})
    replay(SOUND["screenshots"], tools, plan, faults)
    with pytest.raises(OracleFailure) as caught:
        replay(TWINS["screenshots"], tools, plan, faults)
    assert caught.value.oracles == ["recorded_work_not_redone"], str(caught.value)[:3000]
    assert "asks again for reply 5 of the history" in str(caught.value)


def _search(query: str) -> dict[str, Any]:
    return {"calls": [{"name": "search", "input": {"query": query}}], "text": None}


@pytest.mark.parametrize("save", [2, 4])
def test_a_reply_asked_again_is_caught_in_a_history_that_holds_its_system_prompt(save: int) -> None:
    # The trajectory keeps the system prompt as its first message and a key of its own on
    # each reply; its requests send neither. A crash after save 2 or 4 (a reply): the twin
    # drops the reply and asks again. Read-only tools only: only this oracle can see it.
    # Before, the saved history never matched a request (one message longer, extra keys).
    tools = Toolbox([search])
    plan = Plan.from_dict({"steps": [_search("crash"), _search("keys")], "final_answer": "done"})
    faults = FaultPlan.from_dict({"crashes": [["after_checkpoint_write", save]]})
    replay(SOUND["trajectory"], tools, plan, faults)
    with pytest.raises(OracleFailure) as caught:
        replay(TWINS["trajectory"], tools, plan, faults)
    assert caught.value.oracles == ["recorded_work_not_redone"], str(caught.value)[:3000]
    assert f"asks again for reply {save - 1} of the history" in str(caught.value)


def test_an_unknown_outcome_answered_as_a_plain_result_is_reported_as_what_it_is() -> None:
    # A crash right after the write-ahead record of an unkeyed call (save 3), before the
    # call: the resumed agent says the outcome is unknown, but in a result that is no
    # error, so the model takes the call for done and the e-mail is never sent. The report
    # says so; before, it said only that an action was lost, and that the agent ran its
    # tools elsewhere than through the toolbox (it did not: the crash-free run called them).
    plan = Plan.from_dict({"steps": [{"calls": [{"name": "send_email", "input": {"to": "ann"}}], "text": None}],
                           "final_answer": "done"})
    faults = FaultPlan.from_dict({"crashes": [["after_checkpoint_write", 3]]})
    replay(SOUND["trajectory"], toolbox(), plan, faults)
    with pytest.raises(OracleFailure) as caught:
        replay(trajectory_agent(unknown_as_output=True), toolbox(), plan, faults)
    report = str(caught.value)
    assert caught.value.oracles == ["no_duplicate_effect"], report[:3000]
    assert "an action was lost across a crash" in report
    assert "answered tool_use toolu_s0c0a0 with a result that is not an error" in report, report[:3000]
    assert "is_error" in report
    assert "tool_runner" not in report, report[:3000]
