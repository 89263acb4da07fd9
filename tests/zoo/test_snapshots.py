"""An agent that saves every checkpoint as a new snapshot and never overwrites one
(``tests/zoo/snapshot_agents.py``): the sound one passes; its twin, which takes the
newest snapshot by its id sorted as text, is caught, with the report saying that it had
saved the reply it asked for again."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt.harness import OracleFailure, fuzz
from tests.harness.toolkit import safe_toolbox, toolbox

from .snapshot_agents import snapshot_agent
from .test_false_alarms import SEEDS, sound_passes, twin_caught


def _fuzz(run: Any, seed: int, examples: int) -> Any:
    return fuzz(run, toolbox(), seed=seed, database=InMemoryExampleDatabase(), unsafe_tools="ignore",
                max_examples=examples, client="direct")


@pytest.mark.parametrize("seed", SEEDS)
def test_an_agent_that_never_overwrites_a_snapshot_passes(seed: int) -> None:
    sound_passes(lambda: _fuzz(snapshot_agent(), seed, 100))


def test_taking_the_newest_snapshot_by_its_id_as_text_is_caught_and_the_stale_load_named() -> None:
    twin_caught(lambda: _fuzz(snapshot_agent(sorts_as_text=True), 1, 100), "no_duplicate_effect", needs_fault=True)
    with pytest.raises(OracleFailure) as caught:
        _fuzz(snapshot_agent(sorts_as_text=True), 1, 100)
    assert "resumed from a stale checkpoint: it loaded" in str(caught.value), str(caught.value)[:3000]
    assert "but the agent had since saved" in str(caught.value)
    # The snapshot was picked by its key: the hint about text order is given here, and only
    # here (a resume that dropped a reply from one checkpoint gets none).
    assert "'task@10' comes before 'task@9'" in str(caught.value)


def test_a_keyed_call_asked_again_after_a_stale_load_is_not_blamed_on_an_unsaved_reply() -> None:
    # Keyed and read-only tools only: the repeat is a keyed write under a new tool_use id.
    with pytest.raises(OracleFailure) as caught:
        fuzz(snapshot_agent(sorts_as_text=True), safe_toolbox(), seed=1, database=InMemoryExampleDatabase(),
             unsafe_tools="ignore", max_examples=100, client="direct")
    example = next(e for e in caught.value.examples if e.oracle == "no_duplicate_effect")
    # It had saved the reply, in the snapshot it skipped: not "a reply it had not saved".
    assert "the agent saved the reply that asked for the call, but a resume went on from a checkpoint without it" in example.message
    assert "had not saved" not in example.message
