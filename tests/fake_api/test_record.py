"""The record holds each message about once, however many requests carried it."""

from __future__ import annotations

import json
from typing import Any

import anthropic

from reference_agent.offline import FakeMessagesAPI
from reference_agent.offline_record import History, HistoryIndex
from reference_agent.scripted import Plan, Step, ToolCall

STEPS = 40
PLAN = Plan(
    steps=tuple(Step(calls=(ToolCall("lookup", {"n": i}),)) for i in range(STEPS)),
    final_answer="done",
)
TOOLS = [{"name": "lookup", "input_schema": {"type": "object"}}]


def tool_loop(client: anthropic.Anthropic, goal: str) -> list[Any]:
    messages: list[Any] = [{"role": "user", "content": goal}]
    while True:
        reply = client.messages.create(model="m", max_tokens=64, tools=TOOLS, messages=messages)
        messages.append({"role": "assistant", "content": reply.content})
        if reply.stop_reason != "tool_use":
            return messages
        results = [
            {"type": "tool_result", "tool_use_id": b.id, "content": f"result of {b.id}"}
            for b in reply.content
            if b.type == "tool_use"
        ]
        messages.append({"role": "user", "content": results})


def held_messages(api: FakeMessagesAPI) -> set[int]:
    return {id(m) for e in api.exchanges for m in e.request["messages"]}


def test_a_tool_loop_is_recorded_with_each_message_held_once() -> None:
    api = FakeMessagesAPI(PLAN)
    final = tool_loop(api.client(max_retries=0), "look everything up")
    assert len(api.exchanges) == STEPS + 1
    # Requests carried 1 + 3 + 5 + ... messages (about STEPS**2 in all); the record holds
    # each distinct message once: as many as the longest request has.
    longest = len(api.exchanges[-1].request["messages"])
    assert longest == len(final) - 1
    assert len(held_messages(api)) == longest
    # And the tools, sent with every request, are held once too.
    assert len({id(e.request["tools"]) for e in api.exchanges}) == 1


def test_the_record_still_reads_as_the_requests_sent() -> None:
    api = FakeMessagesAPI(PLAN)
    client = api.client(max_retries=0)
    tool_loop(client, "look everything up")
    for exchange in api.exchanges:
        assert exchange.request == json.loads(exchange.body)
        assert exchange.request["tools"] == TOOLS
    assert [len(r["messages"]) for r in api.requests] == list(range(1, 2 * STEPS + 2, 2))


def test_interleaved_conversations_share_their_own_prefixes() -> None:
    api = FakeMessagesAPI(Plan(steps=PLAN.steps[:5], final_answer="done"))
    client = api.client(max_retries=0)
    histories: dict[str, list[Any]] = {
        goal: [{"role": "user", "content": goal}] for goal in ("first task", "second task")
    }
    for _ in range(6):
        for messages in histories.values():
            reply = client.messages.create(model="m", max_tokens=64, messages=messages)
            messages.append({"role": "assistant", "content": reply.content})
            uses = [b for b in reply.content if b.type == "tool_use"]
            if uses:
                messages.append(
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": b.id, "content": "ok"}
                            for b in uses
                        ],
                    }
                )
    longest = sum(len(e.request["messages"]) for e in api.exchanges[-2:])
    assert len(held_messages(api)) == longest


def test_a_retried_request_shares_its_whole_history() -> None:
    api = FakeMessagesAPI(PLAN)
    api.fail_next("server_error")
    client = api.client(max_retries=1)
    client.messages.create(model="m", max_tokens=64, messages=[{"role": "user", "content": "x"}])
    failed, answered = api.exchanges
    assert (failed.status, answered.status) == (500, 200)
    assert failed.history is answered.history


def test_a_body_that_is_not_json_is_kept_as_sent() -> None:
    api = FakeMessagesAPI(PLAN)
    status, _, _, _ = api.handle("POST", "/v1/messages", {"x-api-key": "k"}, b"{oops")
    assert status == 400
    assert api.exchanges[0].body == b"{oops" and api.exchanges[0].request == {}


def test_history_index_shares_the_longest_recent_prefix() -> None:
    index = HistoryIndex(window=2)
    a = index.share([1, 2])
    b = index.share([1, 2, 3, 4])
    assert b.parent is a and b.own == [3, 4]
    c = index.share([9])  # unrelated: a new root
    assert c.parent is None
    d = index.share([1, 2, 3, 4, 5])
    assert d.parent is b and d.messages() == [1, 2, 3, 4, 5]
    assert isinstance(d, History) and d.length == 5
