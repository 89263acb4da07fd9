"""Agents with extended thinking on (``tests/zoo/thinking_agents.py``): each sound design
passes, each naive twin is caught by the oracle its bug breaks, and only after a fault."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt.harness import OracleFailure, fuzz
from tests.harness.toolkit import toolbox

from .test_false_alarms import sound_passes
from .thinking_agents import SOUND, TWINS

#: Fewer examples than the rest of the zoo (200), to keep this file fast; the sound designs
#: were also fuzzed with seeds 1-3 at 150 examples, the stream cut and max_tokens faults
#: included, and passed.
EXAMPLES = 100

#: The oracle that catches each twin.
CAUGHT_BY: dict[str, str] = {
    "drop_thinking": "valid_sequence",
    "known_blocks": "valid_sequence",
    "no_signature": "valid_sequence",
    "keep_cut": "valid_sequence",
    "first_thinking": "valid_sequence",
}


#: What the API's 400 says of each twin's request (one of these).
API_SAYS: dict[str, tuple[str, ...]] = {
    "drop_thinking": ("Expected `thinking` or `redacted_thinking`, but found `tool_use`",),
    "known_blocks": ("Expected `thinking` or `redacted_thinking`, but found `tool_use`",),
    "no_signature": ("thinking.signature: Field required",),
    # A stream cut before the thinking block's signature, or after it, in the reply's
    # last block: either way the cut reply goes back as a prefill the API refuses.
    "keep_cut": ("thinking.signature: Field required", "does not support assistant message prefill"),
    "first_thinking": ("`thinking` or `redacted_thinking` blocks in the latest assistant message cannot be modified",),
}


def _fuzz(run: Callable[..., Any], seed: int) -> Any:
    return fuzz(
        run, toolbox(), seed=seed, database=InMemoryExampleDatabase(), unsafe_tools="ignore",
        max_examples=EXAMPLES,
    )


@pytest.mark.parametrize("design", sorted(SOUND))
def test_a_sound_agent_with_thinking_passes(design: str) -> None:
    sound_passes(lambda: _fuzz(SOUND[design], 1))


@pytest.mark.parametrize("twin", sorted(TWINS))
def test_a_naive_twin_with_thinking_is_caught(twin: str) -> None:
    # ``known_blocks`` is caught only since scripted models give redacted reasoning (every
    # second step's).
    with pytest.raises(OracleFailure, match=CAUGHT_BY[twin]) as caught:
        _fuzz(TWINS[twin], 20261201)
    example = next(e for e in caught.value.examples if e.oracle == CAUGHT_BY[twin])
    assert example.fault_plan.size >= 1, str(caught.value)[:3000]
    report = str(caught.value)
    assert any(said in report for said in API_SAYS[twin]), report[:3000]
    # The report names the rule broken (the thinking one, or the prefill one for a cut
    # reply kept whole to its last block), not the tool_result one, and says what came first.
    first = report.split("\n")[1].split("invalid request(s) in all.")[1]
    if "prefill" in report and twin == "keep_cut":
        assert "a history ends with a user message" in first, first
    else:
        assert "thinking and redacted_thinking blocks exactly as they came" in first, first
    assert "tool_result" not in first, first
    if twin == "keep_cut":
        assert "It follows an API fault (no crash)" in first, first
