"""A stateless step worker (``tests/zoo/step_worker_agents.py``): it loads the task at every
step, so a worker that wakes up goes on from the newest checkpoint. ``takeover`` passes it
(it called that a lost update), ``fuzz`` too; the twin that saves a step only after its
tools is caught: a paused worker acts before its save conflicts."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt import NotCheckableWarning, takeover
from pytest_agentckpt.harness import fuzz
from tests.harness.toolkit import safe_toolbox, toolbox

from .step_worker_agents import step_worker
from .test_false_alarms import SEEDS, sound_passes


@pytest.mark.parametrize("seed", SEEDS)
def test_a_step_worker_passes_fuzz(seed: int) -> None:
    sound_passes(lambda: fuzz(step_worker(), toolbox(), seed=seed, max_examples=150, unsafe_tools="ignore",
                              database=InMemoryExampleDatabase(), client="direct"))


@pytest.mark.parametrize("tools", [safe_toolbox, toolbox], ids=["keyed", "with an unkeyed send"])
def test_a_step_worker_that_goes_on_from_the_newest_checkpoint_passes_takeover(tools: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", NotCheckableWarning)
        stats = takeover(step_worker(), tools(), examples=3, seed=0)
    assert stats.failed == 0 and stats.passed == stats.points > 20, stats.summary()


def test_a_stale_worker_b_that_acts_after_a_went_on_from_its_checkpoint_is_caught() -> None:
    # The step worker's B reloads at every step, so it never acts on stale state; a
    # design whose B goes on from its memory after A went on from B's checkpoint must not
    # perform an effect it had not recorded before it paused.
    from pytest_agentckpt import _takeover
    from pytest_agentckpt.oracles import ToolFlags
    from pytest_agentckpt.timeline import Timeline

    timeline = Timeline()
    going_on = timeline.start_attempt("worker B goes on")
    timeline.add("effect", tool="send_email", input={"to": "ann"}, key=None)
    flags = {"send_email": ToolFlags(True, False)}
    intent = {"tool_name": "send_email", "input": {"to": "ann"}, "result": None}
    acted = _takeover._stale_b_acted(timeline, flags, going_on, {"messages": [], "actions": []})
    assert [v.oracle for v in acted] == ["stops_after_conflict"]
    assert "both workers acted on the task" in acted[0].message
    # The effect of an intent B saved before it paused was B's to make.
    assert _takeover._stale_b_acted(timeline, flags, going_on, {"messages": [], "actions": [intent]}) == []


def test_a_worker_a_that_puts_its_own_state_on_b_s_is_not_taken_for_one_that_went_on_from_it() -> None:
    from pytest_agentckpt import _takeover
    from pytest_agentckpt.timeline import Timeline

    b = {"messages": [{"role": "user", "content": "goal"}, {"role": "assistant", "content": "b's turn"}], "iteration": 1}
    timeline = Timeline()
    woken = timeline.start_attempt("worker A wakes up")
    timeline.add("store_load", found=True, version=3)
    timeline.add("model_response", tool_uses=[("toolu_new", "search", {})])
    went_on = {**b, "messages": [*b["messages"], {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_new", "name": "search", "input": {}}]}], "iteration": 2}
    assert _takeover._built_on(b, [went_on], timeline, woken)
    # Its own stale history on top (B's turn missing), or a call asked before its pause.
    stale = {"messages": [{"role": "user", "content": "goal"}, {"role": "assistant", "content": "a's turn"}], "iteration": 1}
    assert not _takeover._built_on(b, [stale], timeline, woken)
    merged = {**b, "messages": [*b["messages"], {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_old", "name": "search", "input": {}}]}], "iteration": 2}
    assert not _takeover._built_on(b, [merged], timeline, woken)
