"""fuzz cuts a dropped stream in the middle of the reply: an agent that takes the text it
had so far for the answer is caught; one that asks again passes."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from pytest_agentckpt import ApiFault, FaultPlan, OracleFailure, Plan, replay
from stores import Checkpoint
from tests.harness.toolkit import toolbox

ANSWER = "the order has shipped, and the invoice went out with it"  # several text deltas


def _streaming(keep_draft: bool) -> Any:
    def run(task_id: str, goal: str, *, client: Any, store: Any, tools: Any) -> str:
        cp = store.load(task_id)
        if cp is not None and cp.status == "completed":
            return str(cp.final_answer)
        cp = cp or store.save(Checkpoint(task_id=task_id, goal=goal, messages=[{"role": "user", "content": goal}]))
        for _ in range(3):
            text = ""
            try:
                with client.messages.stream(model="m", max_tokens=256, messages=cp.messages) as stream:
                    for event in stream:
                        if event.type == "text":
                            text += event.text
                break
            except anthropic.APIConnectionError:
                if keep_draft and text:
                    break  # BUG: the text so far, when there is some, taken for the whole reply
        cp.messages.append({"role": "assistant", "content": [{"type": "text", "text": text}]})
        cp.iteration += 1
        cp.status, cp.final_answer = "completed", text
        store.save(cp)
        return text

    return run


CUT = FaultPlan(api_faults=(ApiFault("stream_disconnect", 1),))
PLAN = Plan((), ANSWER)


def test_an_agent_that_asks_again_after_a_dropped_stream_passes() -> None:
    replay(_streaming(keep_draft=False), toolbox(), PLAN, CUT)


def test_an_agent_that_takes_a_dropped_streams_draft_for_the_answer_is_caught() -> None:
    with pytest.raises(OracleFailure) as caught:
        replay(_streaming(keep_draft=True), toolbox(), PLAN, CUT)
    assert caught.value.oracle == "same_answer"
    assert "the order has shipped" in str(caught.value)
