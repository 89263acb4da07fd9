"""Message threads: the SDK's default ``tool_runner`` (create, then continue) end to end."""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic
import pytest
from anthropic import beta_async_tool, beta_tool

from reference_agent.offline import THREADS_BETA, FakeMessagesAPI
from reference_agent.scripted import Plan, Step, ToolCall

PLAN = Plan(
    steps=(
        Step(calls=(ToolCall("add", {"a": 1, "b": 2}),)),
        Step(calls=(ToolCall("add", {"a": 3, "b": 4}), ToolCall("add", {"a": 5, "b": 6}))),
    ),
    final_answer="3, 7 and 11.",
)
GO = [{"role": "user", "content": "Add things."}]


@beta_tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@beta_async_tool(name="add")
async def add_async(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


def threads_of(api: FakeMessagesAPI) -> list[Any]:
    return [e.sent.get("thread") for e in api.exchanges]


def check_record(api: FakeMessagesAPI) -> None:
    # Three generations: create, then two continues that sent only the new tool results.
    assert [e.status for e in api.exchanges] == [200, 200, 200]
    kinds = [t["type"] for t in threads_of(api)]
    assert kinds == ["create", "continue", "continue"]
    for previous, exchange in zip(api.exchanges, api.exchanges[1:], strict=False):
        assert exchange.sent["thread"]["previous_message_id"] == previous.response["id"]
        assert THREADS_BETA in exchange.headers["anthropic-beta"]
        sent = exchange.sent["messages"]
        assert [m["role"] for m in sent] == ["user"]
        assert {b["type"] for b in sent[0]["content"]} == {"tool_result"}
        assert "tools" not in exchange.sent  # the thread keeps them
    # The record shows the whole history each request stands for, and the thread's tools.
    lengths = [len(e.request["messages"]) for e in api.exchanges]
    assert lengths == [1, 3, 5]
    assert all(e.request["tools"][0]["name"] == "add" for e in api.exchanges)
    assert api.requests[2]["messages"][:3] == api.requests[1]["messages"]
    assert api.model_calls == 3


def test_tool_runner_runs_a_plan_over_a_thread() -> None:
    api = FakeMessagesAPI(PLAN)
    runner = api.client(max_retries=0).beta.messages.tool_runner(
        model="m", max_tokens=256, tools=[add], messages=GO
    )
    final = runner.until_done()
    assert final.content[-1].type == "text" and final.content[-1].text == "3, 7 and 11."
    check_record(api)


def test_tool_runner_streaming_runs_a_plan_over_a_thread() -> None:
    api = FakeMessagesAPI(PLAN)
    runner = api.client(max_retries=0).beta.messages.tool_runner(
        model="m", max_tokens=256, tools=[add], messages=GO, stream=True
    )
    finals = []
    for stream in runner:
        types = [event.type for event in stream]
        assert types[0] == "message_start" and types[-1] == "message_stop"
        finals.append(stream.get_final_message().stop_reason)
    assert finals == ["tool_use", "tool_use", "end_turn"]
    check_record(api)
    assert all(e.stream for e in api.exchanges)


def test_async_tool_runner_runs_a_plan_over_a_thread() -> None:
    api = FakeMessagesAPI(PLAN)

    async def main() -> str:
        runner = api.async_client(max_retries=0).beta.messages.tool_runner(
            model="m", max_tokens=256, tools=[add_async], messages=GO
        )
        final = await runner.until_done()
        block = final.content[-1]
        assert block.type == "text"
        return block.text

    assert asyncio.run(main()) == "3, 7 and 11."
    check_record(api)


def test_hooks_see_the_whole_history_of_a_continue() -> None:
    api = FakeMessagesAPI(PLAN)
    seen: list[int] = []
    api.add_hook(
        lambda event, index, body: (
            seen.append(len(body["messages"])) if event == "request" else None
        )
    )
    api.client(max_retries=0).beta.messages.tool_runner(
        model="m", max_tokens=256, tools=[add], messages=GO
    ).until_done()
    assert seen == [1, 3, 5]


def create(client: anthropic.Anthropic, **kwargs: Any) -> Any:
    return client.beta.messages.create(model="m", max_tokens=64, betas=[THREADS_BETA], **kwargs)


def test_a_continue_from_an_unknown_reply_is_thread_not_found() -> None:
    client = FakeMessagesAPI(PLAN).client(max_retries=0)
    with pytest.raises(anthropic.NotFoundError) as info:
        create(client, messages=GO, thread={"type": "continue", "previous_message_id": "msg_x"})
    assert info.value.error_code == "thread_not_found"


def test_a_reply_can_be_continued_only_once() -> None:
    api = FakeMessagesAPI(PLAN)
    client = api.client(max_retries=0)
    first = create(client, messages=GO, thread={"type": "create"})
    result = [{"type": "tool_result", "tool_use_id": first.content[0].id, "content": "3"}]
    thread = {"type": "continue", "previous_message_id": first.id}
    create(client, messages=[{"role": "user", "content": result}], thread=thread)
    with pytest.raises(anthropic.BadRequestError) as info:
        create(client, messages=[{"role": "user", "content": result}], thread=thread)
    assert info.value.error_code == "thread_already_continued"


def test_a_continue_is_validated_against_the_history_it_stands_for() -> None:
    api = FakeMessagesAPI(PLAN)
    client = api.client(max_retries=0)
    first = create(client, messages=GO, thread={"type": "create"})
    # An answer to a tool_use the thread never had: invalid in the full history.
    wrong = [{"type": "tool_result", "tool_use_id": "toolu_other", "content": "3"}]
    with pytest.raises(anthropic.BadRequestError, match="toolu_other"):
        create(
            client,
            messages=[{"role": "user", "content": wrong}],
            thread={"type": "continue", "previous_message_id": first.id},
        )
    # Rejected before the model: the reply can still be continued.
    right = [{"type": "tool_result", "tool_use_id": first.content[0].id, "content": "3"}]
    reply = create(
        client,
        messages=[{"role": "user", "content": right}],
        thread={"type": "continue", "previous_message_id": first.id},
    )
    assert reply.stop_reason == "tool_use"


def test_a_continue_that_repeats_tools_is_refused() -> None:
    client = FakeMessagesAPI(PLAN).client(max_retries=0)
    tools = [{"name": "add", "input_schema": {"type": "object"}}]
    first = create(client, messages=GO, tools=tools, thread={"type": "create"})
    result = [{"type": "tool_result", "tool_use_id": first.content[0].id, "content": "3"}]
    with pytest.raises(anthropic.BadRequestError, match="`tools`"):
        create(
            client,
            messages=[{"role": "user", "content": result}],
            tools=tools,
            thread={"type": "continue", "previous_message_id": first.id},
        )


def test_the_same_plan_run_twice_on_one_fake_keeps_two_threads_apart() -> None:
    api = FakeMessagesAPI(PLAN)
    client = api.client(max_retries=0)
    for _ in range(2):
        runner = client.beta.messages.tool_runner(
            model="m", max_tokens=256, tools=[add], messages=GO
        )
        assert runner.until_done().stop_reason == "end_turn"
    ids = [e.response["id"] for e in api.exchanges]
    assert len(set(ids)) == len(ids) == 6


def test_a_lost_reply_on_a_thread_makes_the_sdk_replay_the_whole_history() -> None:
    # The server moved the thread on, but the client never heard: its retry of the same
    # continue is refused, and the SDK starts a new thread with the whole conversation.
    api = FakeMessagesAPI(PLAN)
    client = api.client(max_retries=2)
    runner = client.beta.messages.tool_runner(model="m", max_tokens=256, tools=[add], messages=GO)
    iterator = iter(runner)
    next(iterator)
    api.fail_next("lost_response")
    final = None
    for message in iterator:
        final = message
    assert final is not None and final.stop_reason == "end_turn"
    faults = [(e.fault, e.status, (e.sent.get("thread") or {}).get("type")) for e in api.exchanges]
    assert ("lost_response", 0, "continue") in faults
    refused = [e for e in api.exchanges if e.status == 400]
    assert refused and refused[0].response["error"]["details"]["error_code"] == (
        "thread_already_continued"
    )
    replay = api.exchanges[api.exchanges.index(refused[0]) + 1]
    assert replay.sent["thread"] == {"type": "create"}
    assert len(replay.sent["messages"]) == 3  # the whole history again
