"""Usage as the API returns it (cache token counts included) and signed thinking from plans."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from reference_agent.offline import FakeMessagesAPI
from reference_agent.scripted import Plan, PlanModel, Step, ToolCall, signature_matches

PLAN = Plan(steps=(Step(calls=(ToolCall("lookup", {"q": "x"}),)),), final_answer="Found.")
GO = [{"role": "user", "content": "go"}]
LONG = "All the background a cached system prompt holds. " * 200  # ~2,500 tokens


def test_usage_fields_are_numbers_without_cache_control() -> None:
    client = FakeMessagesAPI(PLAN).client(max_retries=0)
    usage = client.messages.create(model="m", max_tokens=64, messages=GO).usage
    assert usage.cache_creation_input_tokens == 0
    assert usage.cache_read_input_tokens == 0
    assert usage.cache_creation is not None
    assert usage.cache_creation.ephemeral_5m_input_tokens == 0
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    assert usage.service_tier == "standard"
    # What one published agent did with them, and crashed on with None.
    assert usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens


def cached_system() -> list[dict[str, Any]]:
    return [{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}]


def test_a_cache_control_prefix_is_written_then_read() -> None:
    client = FakeMessagesAPI(PLAN).client(max_retries=0)
    first = client.messages.create(model="m", max_tokens=64, system=cached_system(), messages=GO)
    second = client.messages.create(model="m", max_tokens=64, system=cached_system(), messages=GO)
    assert first.usage.cache_creation_input_tokens > 1000
    assert first.usage.cache_read_input_tokens == 0
    assert second.usage.cache_creation_input_tokens == 0
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    assert second.usage.input_tokens < 100  # only the uncached messages


def test_a_changed_prefix_misses_the_cache() -> None:
    client = FakeMessagesAPI(PLAN).client(max_retries=0)
    client.messages.create(model="m", max_tokens=64, system=cached_system(), messages=GO)
    changed = [{**cached_system()[0], "text": LONG + "!"}]
    reply = client.messages.create(model="m", max_tokens=64, system=changed, messages=GO)
    assert reply.usage.cache_read_input_tokens == 0
    assert reply.usage.cache_creation_input_tokens > 1000


def test_a_prefix_below_the_minimum_is_not_cached() -> None:
    client = FakeMessagesAPI(PLAN).client(max_retries=0)
    short = [{"type": "text", "text": "Short.", "cache_control": {"type": "ephemeral"}}]
    for _ in range(2):
        usage = client.messages.create(model="m", max_tokens=64, system=short, messages=GO).usage
        assert (usage.cache_creation_input_tokens, usage.cache_read_input_tokens) == (0, 0)


def test_streamed_usage_carries_the_cache_counts() -> None:
    client = FakeMessagesAPI(PLAN).client(max_retries=0)
    client.messages.create(model="m", max_tokens=64, system=cached_system(), messages=GO)
    with client.messages.stream(
        model="m", max_tokens=64, system=cached_system(), messages=GO
    ) as stream:
        usage = stream.get_final_message().usage
    assert usage.cache_read_input_tokens and usage.cache_read_input_tokens > 1000
    assert usage.cache_creation_input_tokens == 0


THINKING = {"type": "enabled", "budget_tokens": 1024}


def test_a_plan_model_starts_its_replies_with_signed_thinking_when_enabled() -> None:
    model = PlanModel(PLAN)
    reply = model.respond({"model": "m", "messages": GO, "thinking": THINKING})
    assert [b["type"] for b in reply["content"]] == ["thinking", "tool_use"]
    assert signature_matches(reply["content"][0]) is True
    plain = model.respond({"model": "m", "messages": GO})
    assert [b["type"] for b in plain["content"]] == ["tool_use"]


def run_loop(client: anthropic.Anthropic, *, tamper: bool) -> Any:
    messages: list[Any] = list(GO)
    while True:
        reply = client.messages.create(
            model="m", max_tokens=2048, thinking=THINKING, messages=messages
        )
        if reply.stop_reason != "tool_use":
            return reply
        content = [block.model_dump(exclude_none=True) for block in reply.content]
        if tamper:
            content[0]["thinking"] += " (edited)"
        messages.append({"role": "assistant", "content": content})
        uses = [b for b in content if b["type"] == "tool_use"]
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": b["id"], "content": "ok"} for b in uses
                ],
            }
        )


def test_thinking_carried_back_unchanged_is_accepted() -> None:
    reply = run_loop(FakeMessagesAPI(PLAN).client(max_retries=0), tamper=False)
    assert [b.type for b in reply.content] == ["thinking", "text"]


def test_edited_thinking_is_rejected_as_the_api_rejects_it() -> None:
    with pytest.raises(anthropic.BadRequestError, match="Invalid `signature` in `thinking`"):
        run_loop(FakeMessagesAPI(PLAN).client(max_retries=0), tamper=True)


def test_dropped_thinking_is_rejected_when_thinking_is_enabled() -> None:
    client = FakeMessagesAPI(PLAN).client(max_retries=0)
    reply = client.messages.create(model="m", max_tokens=2048, thinking=THINKING, messages=GO)
    use = reply.content[1]
    assert use.type == "tool_use"
    messages = [
        *GO,
        {"role": "assistant", "content": [use.model_dump(exclude_none=True)]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "ok"}],
        },
    ]
    with pytest.raises(anthropic.BadRequestError, match="Expected `thinking`"):
        client.messages.create(model="m", max_tokens=2048, thinking=THINKING, messages=messages)


TWO_STEPS = Plan(
    steps=(Step(calls=(ToolCall("lookup", {"q": "x"}),)), Step(calls=(ToolCall("lookup", {"q": "y"}),))),
    final_answer="Found.",
)


def _answered(messages: list[Any], content: list[dict[str, Any]]) -> list[Any]:
    uses = [b for b in content if b["type"] == "tool_use"]
    results = [{"type": "tool_result", "tool_use_id": b["id"], "content": "ok"} for b in uses]
    return [*messages, {"role": "assistant", "content": content}, {"role": "user", "content": results}]


@pytest.mark.parametrize("stream", [False, True])
def test_the_second_step_s_reasoning_comes_redacted_and_is_accepted_back_unchanged(stream: bool) -> None:
    client = FakeMessagesAPI(TWO_STEPS).client(max_retries=0)
    messages: list[Any] = list(GO)
    kinds = []
    while True:
        if stream:
            with client.messages.stream(model="m", max_tokens=2048, thinking=THINKING, messages=messages) as s:
                reply = s.get_final_message()
        else:
            reply = client.messages.create(model="m", max_tokens=2048, thinking=THINKING, messages=messages)
        content = [block.model_dump(exclude_none=True) for block in reply.content]
        kinds.append([b["type"] for b in content])
        if reply.stop_reason != "tool_use":
            break
        messages = _answered(messages, content)
    assert kinds == [["thinking", "tool_use"], ["redacted_thinking", "tool_use"], ["thinking", "text"]]
    assert isinstance(messages[3]["content"][0]["data"], str) and messages[3]["content"][0]["data"]


def test_a_dropped_redacted_thinking_block_is_rejected() -> None:
    # A serialiser that keeps the block types it knows (text, tool_use, thinking) loses the
    # turn's redacted reasoning: the API asks for the thinking the tool loop's turn opened with.
    client = FakeMessagesAPI(TWO_STEPS).client(max_retries=0)
    first = client.messages.create(model="m", max_tokens=2048, thinking=THINKING, messages=GO)
    messages = _answered(list(GO), [b.model_dump(exclude_none=True) for b in first.content])
    second = client.messages.create(model="m", max_tokens=2048, thinking=THINKING, messages=messages)
    kept = [b.model_dump(exclude_none=True) for b in second.content if b.type in ("text", "tool_use", "thinking")]
    with pytest.raises(anthropic.BadRequestError, match="Expected `thinking` or `redacted_thinking`"):
        client.messages.create(model="m", max_tokens=2048, thinking=THINKING, messages=_answered(messages, kept))
