"""Interleaved thinking (adaptive thinking, or manual thinking with the
``interleaved-thinking-2025-05-14`` beta) and manual thinking's ``budget_tokens``, answered as
the API answers them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anthropic
import pytest

from reference_agent.offline import FakeMessagesAPI
from reference_agent.scripted import (
    INTERLEAVED_THINKING_BETA,
    Plan,
    PlanModel,
    Step,
    ToolCall,
    signature_matches,
)

#: Three parallel batches: step 0 thinks between its first two calls, step 1 does so in
#: redacted form, step 2 does not.
PLAN = Plan(
    steps=(
        Step(calls=(ToolCall("lookup", {"q": "a"}), ToolCall("lookup", {"q": "b"}), ToolCall("fetch", {}))),
        Step(calls=(ToolCall("lookup", {"q": "c"}), ToolCall("fetch", {"u": "d"}))),
        Step(calls=(ToolCall("lookup", {"q": "e"}), ToolCall("fetch", {"u": "f"}))),
    ),
    final_answer="Found.",
)
GO = [{"role": "user", "content": "go"}]
MANUAL = {"type": "enabled", "budget_tokens": 1024}
BETA = {"anthropic-beta": INTERLEAVED_THINKING_BETA}
#: Ways to turn interleaved thinking on: adaptive thinking, or the beta header with manual thinking.
MODES: dict[str, dict[str, Any]] = {
    "adaptive": {"thinking": {"type": "adaptive"}},
    "beta_header": {"thinking": MANUAL, "extra_headers": BETA},
}
INTERLEAVED_KINDS = [
    ["thinking", "tool_use", "thinking", "tool_use", "tool_use"],
    ["redacted_thinking", "tool_use", "redacted_thinking", "tool_use"],
    ["thinking", "tool_use", "tool_use"],
    ["thinking", "text"],
]


def _answered(messages: list[Any], content: list[dict[str, Any]]) -> list[Any]:
    uses = [b for b in content if b["type"] == "tool_use"]
    results = [{"type": "tool_result", "tool_use_id": b["id"], "content": "ok"} for b in uses]
    return [*messages, {"role": "assistant", "content": content}, {"role": "user", "content": results}]


def _dump(reply: Any) -> list[dict[str, Any]]:
    return [b.model_dump(mode="json", exclude_none=True) for b in reply.content]


def _loop(
    client: anthropic.Anthropic, fields: dict[str, Any], *, stream: bool = False,
    repair: Callable[[int, list[dict[str, Any]]], list[dict[str, Any]]] = lambda n, c: c,
) -> list[list[str]]:
    """A tool loop that sends each reply back through ``repair`` (the reply's index, its
    content); the block types of every reply."""
    messages: list[Any] = list(GO)
    kinds = []
    for n in range(8):
        if stream:
            with client.messages.stream(model="m", max_tokens=2048, messages=messages, **fields) as s:
                reply = s.get_final_message()
        else:
            reply = client.messages.create(model="m", max_tokens=2048, messages=messages, **fields)
        content = _dump(reply)
        kinds.append([b["type"] for b in content])
        if reply.stop_reason != "tool_use":
            return kinds
        messages = _answered(messages, repair(n, content))
    raise AssertionError("the plan did not finish")


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("mode", sorted(MODES))
def test_interleaved_thinking_comes_between_the_calls_and_is_accepted_back_as_it_came(mode: str, stream: bool) -> None:
    assert _loop(FakeMessagesAPI(PLAN).client(max_retries=0), MODES[mode], stream=stream) == INTERLEAVED_KINDS


def test_the_betas_method_of_the_sdk_turns_interleaved_thinking_on() -> None:
    client = FakeMessagesAPI(PLAN).client(max_retries=0)
    reply = client.beta.messages.create(
        model="m", max_tokens=2048, messages=GO, thinking=MANUAL,  # type: ignore[arg-type]
        betas=[INTERLEAVED_THINKING_BETA],
    )
    assert [b.type for b in reply.content] == INTERLEAVED_KINDS[0]


def test_manual_thinking_without_the_beta_does_not_interleave() -> None:
    kinds = _loop(FakeMessagesAPI(PLAN).client(max_retries=0), {"thinking": MANUAL})
    assert kinds == [
        ["thinking", "tool_use", "tool_use", "tool_use"],
        ["redacted_thinking", "tool_use", "tool_use"],
        ["thinking", "tool_use", "tool_use"],
        ["thinking", "text"],
    ]


def test_the_thinking_between_calls_is_signed_and_says_what_the_step_still_needs() -> None:
    reply = PlanModel(PLAN).respond({"model": "m", "messages": GO, "thinking": {"type": "adaptive"}})
    between = reply["content"][2]
    assert between["type"] == "thinking" and signature_matches(between) is True
    assert "lookup, fetch" in between["thinking"]


def _only_first_thinking(n: int, content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A naive repair: keeps the thinking the reply opened with, drops the rest."""
    return [content[0], *(b for b in content[1:] if b["type"] not in ("thinking", "redacted_thinking"))]


def _thinking_first(n: int, content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A naive repair: the blocks sorted by type, thinking first (none dropped)."""
    return sorted(content, key=lambda b: b["type"] not in ("thinking", "redacted_thinking"))


def _edited(n: int, content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**b, "thinking": b["thinking"] + "!"} if k == 2 else b for k, b in enumerate(content)]


REJECTED = "`thinking` or `redacted_thinking` blocks in the latest assistant message cannot be modified"


@pytest.mark.parametrize(
    ("repair", "says"),
    [
        (_only_first_thinking, f"messages.1.content.2: {REJECTED}"),
        (_thinking_first, f"messages.1.content.1: {REJECTED}"),
        (_edited, "messages.1.content.2: Invalid `signature` in `thinking` block"),
    ],
)
@pytest.mark.parametrize("mode", sorted(MODES))
def test_thinking_between_calls_dropped_moved_or_edited_is_rejected(
    mode: str, repair: Callable[[int, list[dict[str, Any]]], list[dict[str, Any]]], says: str
) -> None:
    with pytest.raises(anthropic.BadRequestError, match=says.replace("`", ".")):
        _loop(FakeMessagesAPI(PLAN).client(max_retries=0), MODES[mode], repair=repair)


def test_a_dropped_redacted_block_between_calls_is_rejected() -> None:
    # Step 1 thinks between its calls in redacted form: a repair that keeps the thinking the
    # turn opened with and drops the rest is caught at the second reply.
    def repair(n: int, content: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return _only_first_thinking(n, content) if n == 1 else content

    with pytest.raises(anthropic.BadRequestError, match=f"messages.3.content.2: {REJECTED}".replace("`", ".")):
        _loop(FakeMessagesAPI(PLAN).client(max_retries=0), {"thinking": {"type": "adaptive"}}, repair=repair)


def test_without_interleaved_thinking_only_the_opening_thinking_is_required() -> None:
    # Manual thinking without the beta: the rules are as before (the turn opens with its
    # thinking); the fake does not ask more of a request than the API does.
    kinds = _loop(FakeMessagesAPI(PLAN).client(max_retries=0), {"thinking": MANUAL}, repair=_thinking_first)
    assert kinds[-1] == ["thinking", "text"]


def test_thinking_of_a_finished_turn_may_be_dropped_with_interleaved_thinking() -> None:
    client = FakeMessagesAPI(PLAN).client(max_retries=0)
    fields = MODES["adaptive"]
    first = _dump(client.messages.create(model="m", max_tokens=2048, messages=GO, **fields))
    # The user writes again: the tool loop's turn is finished, and its thinking may go.
    stripped = [b for b in first if b["type"] == "tool_use"]
    messages = _answered(list(GO), stripped)
    messages[-1]["content"].append({"type": "text", "text": "Also check the weather."})
    messages.append({"role": "assistant", "content": "Noted."})
    messages.append({"role": "user", "content": "Go on."})
    reply = client.messages.create(model="m", max_tokens=2048, messages=messages, **fields)
    assert reply.content[0].type in ("thinking", "redacted_thinking")


# -- budget_tokens -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("budget", "max_tokens", "says"),
    [
        (512, 2048, "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"),
        (2048, 2048, "`max_tokens` must be greater than `thinking.budget_tokens`"),
        (8000, 2048, "`max_tokens` must be greater than `thinking.budget_tokens`"),
        (None, 2048, "thinking.enabled.budget_tokens: Field required"),
    ],
)
def test_a_budget_the_api_refuses_is_a_400(budget: int | None, max_tokens: int, says: str) -> None:
    api = FakeMessagesAPI(PLAN)
    thinking: dict[str, Any] = {"type": "enabled"}
    if budget is not None:
        thinking["budget_tokens"] = budget
    with pytest.raises(anthropic.BadRequestError, match=says.replace("`", ".")) as caught:
        api.client(max_retries=0).messages.create(
            model="m", max_tokens=max_tokens, messages=GO, thinking=thinking,  # type: ignore[arg-type]
        )
    assert caught.value.status_code == 400 and caught.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert api.model_calls == 0


def test_with_interleaved_thinking_the_budget_may_exceed_max_tokens() -> None:
    # The budget then spans every thinking block of the assistant turn.
    client = FakeMessagesAPI(PLAN).client(max_retries=0)
    thinking = {"type": "enabled", "budget_tokens": 8000}
    reply = client.messages.create(model="m", max_tokens=2048, messages=GO, thinking=thinking, extra_headers=BETA)  # type: ignore[arg-type]
    assert reply.content[0].type == "thinking"
    with pytest.raises(anthropic.BadRequestError, match="greater than or equal to 1024"):
        client.messages.create(
            model="m", max_tokens=2048, messages=GO, thinking={"type": "enabled", "budget_tokens": 1000},
            extra_headers=BETA,
        )


def test_a_budget_just_below_max_tokens_and_adaptive_thinking_are_accepted() -> None:
    client = FakeMessagesAPI(PLAN).client(max_retries=0)
    client.messages.create(model="m", max_tokens=1025, messages=GO, thinking={"type": "enabled", "budget_tokens": 1024})
    client.messages.create(model="m", max_tokens=16, messages=GO, thinking={"type": "adaptive"})
