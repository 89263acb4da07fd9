"""Agents that offer a server tool (``tests/zoo/server_tool_agents.py``): each sound design
passes, each naive twin is caught by the oracle its bug breaks, with the right advice."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt.harness import OracleFailure, fuzz
from tests.harness.toolkit import toolbox

from .server_tool_agents import SOUND, TWINS
from .test_false_alarms import sound_passes

#: Fewer examples than the rest of the zoo, to keep this file fast; the sound designs were
#: also fuzzed with seeds 1-3 at 150 examples, and with seeds 1-2 at 150 examples with the
#: max_tokens fault added, and passed.
EXAMPLES = 60

#: The oracle that catches each twin, and whether its bug shows only after a fault.
CAUGHT_BY: dict[str, tuple[str, bool]] = {
    "repair_server": ("valid_sequence", True),
    "known_blocks": ("valid_sequence", True),
    "use_only": ("valid_sequence", True),
    "pause_as_end": ("crash_free_run", False),
    "resume_as_final": ("same_answer", True),
    # The crash-free run fails on the API's 400, which valid_sequence explains.
    "runs_server": ("crash_free_run", False),
}

#: What each twin's report says: the API's 400 and the advice, or the harness's words.
REPORT_SAYS: dict[str, tuple[str, ...]] = {
    "repair_server": ("unexpected `tool_use_id` found in `tool_result` blocks: srvtoolu_", "never answer a server_tool_use with a tool_result"),
    "known_blocks": ("all messages must have non-empty content", "reply that stopped with stop_reason pause_turn"),
    "use_only": ("server tool use with id srvtoolu_", "the use and its result together"),
    "pause_as_end": ("stopped with stop_reason 'pause_turn'", "Send the paused reply back as it came"),
    "resume_as_final": ('the resumed run answered ""',),
    "runs_server": ("unexpected `tool_use_id` found in `tool_result` blocks: srvtoolu_", "nor run it as a client tool"),
}


def _fuzz(run: Callable[..., Any], seed: int) -> Any:
    return fuzz(
        run, toolbox(), seed=seed, database=InMemoryExampleDatabase(), unsafe_tools="ignore",
        max_examples=EXAMPLES,
    )


@pytest.mark.parametrize(
    ("design", "seed"), [("create", 1), ("create", 2), ("merge", 1), ("strip", 1), ("stream", 1), ("think", 1)]
)
def test_a_sound_agent_with_a_server_tool_passes(design: str, seed: int) -> None:
    sound_passes(lambda: _fuzz(SOUND[design], seed))


@pytest.mark.parametrize("twin", sorted(TWINS))
def test_a_naive_twin_with_a_server_tool_is_caught(twin: str) -> None:
    oracle, needs_fault = CAUGHT_BY[twin]
    with pytest.raises(OracleFailure) as caught:
        _fuzz(TWINS[twin], 20261201)
    failure = caught.value
    report = str(failure)
    assert oracle in failure.oracles, report[:3000]
    example = next(e for e in failure.examples if e.oracle == oracle)
    if needs_fault:
        assert example.fault_plan.size >= 1, report[:3000]
    else:
        assert example.fault_plan.size == 0, report[:3000]
    if twin == "runs_server":
        assert "valid_sequence" in failure.oracles, report[:3000]
    # The lead's report: its 400 and advice (a crash-free failure's valid_sequence comes
    # with it, on its own line).
    lead = report.split("fault plan:")[0]
    for words in REPORT_SAYS[twin]:
        assert words in lead, lead
    if "valid_sequence" in failure.oracles:
        # The advice names the server tool rule, not the client tool_result one.
        assert "every tool_use needs exactly one tool_result" not in lead, lead
