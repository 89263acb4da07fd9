"""Fuzzing the async ``asyncio.gather`` agent of docs/fuzz-your-agent.md, and catching its naive twin.

Run it with ``pytest docs/examples/test_gather_agent.py``; the test suite runs it too.
"""

from __future__ import annotations

import pytest

import gather_agent
from pytest_agentckpt import Plan, Step, ToolCall

# --8<-- [start:glue]
from gather_agent import fetch_page, put_record, run, send_invoice
from pytest_agentckpt import Toolbox, fuzz

TOOLS = Toolbox.from_functions(
    fetch_page, put_record, send_invoice,
    kinds={"put_record": "repeat_safe", "send_invoice": "keyed"},
    inputs={"fetch_page": [{"url": "https://example.com/pricing"}, {"url": "https://example.com/terms"}],
            "put_record": [{"key": "acme", "value": "gold"}, {"key": "acme", "value": "silver"}],
            "send_invoice": [{"customer": "acme", "amount": 120}]},
)


def test_the_gather_agent_survives_crashes() -> None:
    assert fuzz(run, TOOLS, max_examples=30).stats.crashes > 0
# --8<-- [end:glue]


# --8<-- [start:twin]
def _last_turn_if_unanswered(messages: list[dict]) -> list[dict]:
    # The naive check: tools are pending only when the history ends with the model's turn.
    if messages[-1]["role"] != "assistant":
        return []
    return [b for b in messages[-1]["content"] if b.get("type") == "tool_use"]


# A turn of two parallel calls: a crash between their results leaves it answered in part.
TWO_AT_ONCE = Plan((Step((ToolCall("fetch_page", {"url": "https://example.com/terms"}),
                          ToolCall("send_invoice", {"customer": "acme", "amount": 120}))),), "Invoiced.")


def test_its_naive_twin_answering_a_turn_in_part_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gather_agent, "_unanswered", _last_turn_if_unanswered)
    with pytest.raises(AssertionError, match="valid_sequence"):
        fuzz(run, TOOLS, max_examples=100, plans=[TWO_AT_ONCE])
# --8<-- [end:twin]
