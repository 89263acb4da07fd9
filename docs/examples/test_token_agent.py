"""Fuzzing the count_tokens agent of docs/fuzz-your-agent.md, and catching its naive twin.

Run it with ``pytest docs/examples/test_token_agent.py``; the test suite runs it too.
"""

from __future__ import annotations

from typing import Any

import pytest

import token_agent
from pytest_agentckpt import Plan, Step, ToolCall

# --8<-- [start:glue]
from hypothesis import strategies as st
from pytest_agentckpt import Toolbox, fuzz
from token_agent import lookup_order, refund, run, send_sms

TOOLS = Toolbox.from_functions(
    lookup_order, refund, send_sms,
    kinds={"refund": "keyed", "send_sms": "unkeyed"},
    inputs={"lookup_order": [{"order_id": "A-1001"}, {"order_id": "A-1002"}],
            "refund": st.builds(dict, order_id=st.just("A-1001"), amount=st.sampled_from([10, 40])),
            "send_sms": [{"phone": "+351 555 0100", "text": "Your refund is on its way."}]},
)


def test_the_token_counting_agent_survives_crashes() -> None:
    assert fuzz(run, TOOLS, max_examples=30).stats.crashes > 0
# --8<-- [end:glue]


# --8<-- [start:twin]
_call = token_agent._call


def _please_retry(cp: Any, store: Any, tools: Any, use: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    # The common repair: a call cut off by a restart is answered "interrupted, please retry".
    if use["id"] in cp.artifacts["calls"]:
        return cp, {"type": "tool_result", "tool_use_id": use["id"], "is_error": True,
                    "content": "The tool was interrupted by a restart. Please retry the call."}
    return _call(cp, store, tools, use)


A_REFUND = Plan((Step((ToolCall("refund", {"order_id": "A-1001", "amount": 40}),)),), "Refunded.")


def test_its_naive_twin_asking_to_retry_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(token_agent, "_call", _please_retry)
    with pytest.raises(AssertionError, match="no_duplicate_effect"):
        fuzz(run, TOOLS, max_examples=100, plans=[A_REFUND])
# --8<-- [end:twin]
