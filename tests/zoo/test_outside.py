"""Agents in the designs of public code on the SDK (``tests/zoo/outside_agents.py``): each
sound agent passes, each naive twin is caught by the oracle its bug breaks, with the
report's explanation.

Before, the screenshots twin was missed whenever the resume came after an older
screenshot had been left out of the requests: the request that asked again for a
recorded reply differed from the saved history by that image, and
``recorded_work_not_redone`` compared them exactly (marks aside)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt import FaultPlan, Plan, Toolbox, replay
from pytest_agentckpt.harness import OracleFailure, fuzz
from tests.harness.toolkit import toolbox

from .outside_agents import SOUND, TWINS, create_file, desktop_tools, rebuilt_history, screenshot
from .test_false_alarms import sound_passes

EXAMPLES = 100

#: The glue of each design: the cookbook agent keeps no ``checkpoint.messages``.
GLUE: dict[str, dict[str, Any]] = {
    "computer_use": {},
    "screenshots": {},
    "sdk_objects": {"history": rebuilt_history},
}

CAUGHT_BY: dict[str, tuple[str, str]] = {
    "computer_use": ("valid_sequence", "A maximum of 4 blocks with cache_control may be provided. Found 5."),
    "screenshots": ("recorded_work_not_redone", "the agent loaded that checkpoint and dropped the reply"),
    "sdk_objects": ("no_duplicate_effect", "the agent repeated an action the model asked for once"),
}


def _fuzz(design: str, run: Any, seed: int) -> Any:
    tools = toolbox() if design == "sdk_objects" else desktop_tools()
    return fuzz(
        run, tools, seed=seed, database=InMemoryExampleDatabase(), unsafe_tools="ignore",
        max_examples=EXAMPLES, **GLUE[design],
    )


@pytest.mark.parametrize("design", sorted(SOUND))
def test_a_sound_agent_of_each_outside_design_passes(design: str) -> None:
    sound_passes(lambda: _fuzz(design, SOUND[design], 1))


@pytest.mark.parametrize("design", sorted(TWINS))
def test_the_naive_twin_of_each_outside_design_is_caught(design: str) -> None:
    oracle, message = CAUGHT_BY[design]
    with pytest.raises(OracleFailure) as caught:
        _fuzz(design, TWINS[design], 20261201)
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
