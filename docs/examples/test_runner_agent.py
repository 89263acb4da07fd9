"""Fuzzing the tool_runner agent of docs/fuzz-your-agent.md, and catching its naive twin.

Run it with ``pytest docs/examples/test_runner_agent.py``; the test suite runs it too.
"""

from __future__ import annotations

from typing import Any

import pytest

import runner_agent
from pytest_agentckpt import Plan, Step, ToolCall

# --8<-- [start:glue]
from pytest_agentckpt import Toolbox, fuzz
from runner_agent import book_table, get_weather, run

TOOLS = Toolbox.from_functions(get_weather, book_table, kinds={"book_table": "keyed"},
                               inputs={"get_weather": [{"city": "Lisbon"}], "book_table": [{"restaurant": "Tasca"}]})


def test_the_tool_runner_agent_survives_crashes() -> None:
    assert fuzz(run, TOOLS, max_examples=30).stats.crashes > 0
# --8<-- [end:glue]


# --8<-- [start:twin]
A_BOOKING = Plan((Step((ToolCall("book_table", {"restaurant": "Tasca"}),)),), "Booked.")


def _start_from_saved_messages(self: Any) -> None:
    # The naive resume: a new runner from the saved messages as they are. A crash after
    # the reply was saved and before its results were leaves its tool_use unanswered.
    return None


def test_its_naive_twin_resuming_from_an_unanswered_call_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner_agent._Agent, "settle", _start_from_saved_messages)
    with pytest.raises(AssertionError, match="valid_sequence"):
        fuzz(run, TOOLS, max_examples=100, plans=[A_BOOKING])
# --8<-- [end:twin]
