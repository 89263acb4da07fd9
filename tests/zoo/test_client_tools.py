"""Agents on Anthropic-defined client tools (``tests/zoo/client_tool_agents.py``): the text
editor and bash, or the SDK's memory tool object, sent by type. The sound agents pass; the
naive twins, which re-apply an interrupted ``str_replace``/``insert`` as if the editor were
repeat-safe, are caught with the edit made twice.

Before, such a toolbox could not be built (a definition by type has no input_schema), a
hand-made stand-in drew plans with commands that are none of the editor's (``{"command":
""}``), and one kind per tool made a re-run ``view`` or ``create`` a duplicate."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt import FaultPlan, Plan, replay
from pytest_agentckpt.harness import OracleFailure, fuzz

from .client_tool_agents import SOUND, TOOLS, TWINS
from .test_false_alarms import sound_passes


def _fuzz(design: str, run: Any, seed: int, examples: int = 50) -> Any:
    return fuzz(run, TOOLS[design](), seed=seed, database=InMemoryExampleDatabase(), unsafe_tools="ignore",
                max_examples=examples)


@pytest.mark.parametrize("design", sorted(SOUND))
def test_a_sound_client_tool_agent_passes(design: str) -> None:
    sound_passes(lambda: _fuzz(design, SOUND[design], 1))


@pytest.mark.parametrize("design", sorted(TWINS))
def test_the_twin_that_re_applies_an_edit_is_caught(design: str) -> None:
    with pytest.raises(OracleFailure) as caught:
        _fuzz(design, TWINS[design], 1)
    assert caught.value.oracles == ["no_duplicate_effect"], str(caught.value)[:3000]
    example = next(e for e in caught.value.examples if e.oracle == "no_duplicate_effect")
    assert example.fault_plan.size >= 1
    assert '"command":"str_replace"' in example.message or '"command":"insert"' in example.message, example.message
    assert "happened 2 times, but the model asked for it 1 time(s)" in example.message, example.message


def _step(command: dict[str, Any]) -> dict[str, Any]:
    return {"calls": [{"name": "str_replace_based_edit_tool", "input": command}], "text": None}


@pytest.mark.parametrize("command", [{"command": "view", "path": "app.py"},
                                     {"command": "create", "path": "app.py", "file_text": "b\n"}])
def test_a_view_or_create_run_again_after_a_crash_is_no_duplicate(command: dict[str, Any]) -> None:
    # The twin runs every editor call again on resume: right for these two commands.
    plan = Plan.from_dict({"steps": [_step(command)], "final_answer": "done"})
    replay(TWINS["coding"], TOOLS["coding"](), plan, FaultPlan.from_dict({"crashes": [["after_tool_effect", 1]]}))


def test_an_insert_run_again_after_a_crash_is_a_duplicate() -> None:
    plan = Plan.from_dict({"steps": [_step({"command": "insert", "path": "app.py", "insert_line": 0,
                                            "insert_text": "x"})], "final_answer": "done"})
    faults = FaultPlan.from_dict({"crashes": [["after_tool_effect", 1]]})
    replay(SOUND["coding"], TOOLS["coding"](), plan, faults)
    with pytest.raises(OracleFailure) as caught:
        replay(TWINS["coding"], TOOLS["coding"](), plan, faults)
    assert caught.value.oracles == ["no_duplicate_effect"], str(caught.value)[:3000]
