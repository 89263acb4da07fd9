"""Fuzzing the session-JSON, thread-pool agent of docs/fuzz-your-agent.md, and catching its naive twin.

Run it with ``pytest docs/examples/test_session_agent.py``; the test suite runs it too.
"""

from __future__ import annotations

from typing import Any

import pytest

import session_agent
from pytest_agentckpt import Plan, Step, ToolCall

# --8<-- [start:glue]
import json
from pytest_agentckpt import Toolbox, fuzz
from session_agent import open_ticket, read_file, run, write_file

TOOLS = Toolbox.from_functions(
    read_file, write_file, open_ticket,
    kinds={"write_file": "repeat_safe", "open_ticket": "keyed"},
    inputs={"read_file": [{"path": "README.md"}, {"path": "setup.cfg"}],
            "write_file": [{"path": "CHANGES.md", "content": "v2: faster"}]},
)


def test_the_session_agent_survives_crashes() -> None:
    report = fuzz(run, TOOLS, max_examples=30, history=lambda cp: json.loads(cp.artifacts["session"])["turns"])
    assert report.stats.crashes > 0
# --8<-- [end:glue]


# --8<-- [start:twin]
def _settle_without_a_journal(session: Any, tools: Any, use: dict[str, Any]) -> dict[str, Any]:
    # The naive loop: no record before the effect, and no key for the tracker.
    return tools.call(use["name"], use["input"]).to_block(use["id"])  # type: ignore[no-any-return]


OPEN_A_TICKET = Plan((Step((ToolCall("open_ticket", {"title": "Release v2"}),)),), "Ticket opened.")


def test_its_naive_twin_without_a_journal_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_agent, "_settle", _settle_without_a_journal)
    with pytest.raises(AssertionError, match="no_duplicate_effect"):
        fuzz(run, TOOLS, max_examples=100, plans=[OPEN_A_TICKET],
             history=lambda cp: json.loads(cp.artifacts["session"])["turns"])
# --8<-- [end:twin]
