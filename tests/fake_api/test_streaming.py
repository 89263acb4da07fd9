"""Streaming: the API's SSE event sequence, through the SDK's stream helpers."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2

from reference_agent.offline import FakeMessagesAPI, sse_body
from reference_agent.scripted import CannedModel, Plan, Step, ToolCall, message_json

INPUT = {"path": "a/very/long/path/that/spans/several/deltas.txt", "mode": "read"}
PLAN = Plan(
    steps=(Step(calls=(ToolCall("read", INPUT), ToolCall("stat", {})), text="Let me look."),),
    final_answer="Done.",
)
GO = [{"role": "user", "content": "go"}]


def events(body: bytes) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for chunk in body.decode().strip().split("\n\n"):
        name, data = chunk.split("\n")
        out.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return out


def test_the_event_sequence_is_the_apis() -> None:
    message = message_json(
        [
            {"type": "text", "text": "hi"},
            {"type": "tool_use", "id": "toolu_1", "name": "t", "input": {"a": 1}},
        ],
        message_id="msg_1",
    )
    names = [name for name, _ in events(sse_body(message))]
    assert names == [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]


def test_tool_input_is_streamed_as_input_json_deltas_that_rebuild_it() -> None:
    message = message_json([{"type": "tool_use", "id": "toolu_1", "name": "t", "input": INPUT}])
    parsed = events(sse_body(message))
    start = next(d for n, d in parsed if n == "content_block_start")
    assert start["content_block"]["input"] == {}
    deltas = [d["delta"] for n, d in parsed if n == "content_block_delta"]
    assert len(deltas) > 1
    assert {d["type"] for d in deltas} == {"input_json_delta"}
    assert json.loads("".join(d["partial_json"] for d in deltas)) == INPUT


def test_message_start_opens_empty_and_message_delta_carries_the_stop_reason() -> None:
    parsed = dict(events(sse_body(message_json("hello", message_id="msg_9"))))
    assert parsed["message_start"]["message"]["content"] == []
    assert parsed["message_start"]["message"]["stop_reason"] is None
    assert parsed["message_delta"]["delta"]["stop_reason"] == "end_turn"


def test_messages_stream_accumulates_the_same_message_as_create() -> None:
    api = FakeMessagesAPI(PLAN)
    client = api.client()
    created = client.messages.create(model="m", max_tokens=64, messages=GO)
    with client.messages.stream(model="m", max_tokens=64, messages=GO) as stream:
        text = "".join(stream.text_stream)
        streamed = stream.get_final_message()
    assert text == "Let me look."
    # The same history asked twice: the same reply, under fresh ids the second time.
    assert [b.model_dump(exclude_none=True, exclude={"id"}) for b in streamed.content] == [
        b.model_dump(exclude_none=True, exclude={"id"}) for b in created.content
    ]
    assert [getattr(b, "id", None) for b in streamed.content] == [
        None if getattr(b, "id", None) is None else f"{b.id}_g1" for b in created.content  # type: ignore[union-attr]
    ]
    assert streamed.stop_reason == "tool_use"
    assert api.exchanges[-1].stream


def test_stream_true_yields_raw_events() -> None:
    client = FakeMessagesAPI(CannedModel(["streamed text"])).client()
    stream = client.messages.create(model="m", max_tokens=64, messages=GO, stream=True)
    kinds = [event.type for event in stream]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert "content_block_delta" in kinds


def test_thinking_blocks_stream_with_their_signature() -> None:
    blocks = [
        {
            "type": "thinking",
            "thinking": "Let me think this through carefully.",
            "signature": "sig==",
        },
        {"type": "text", "text": "Answer."},
    ]
    client = FakeMessagesAPI(CannedModel([{"content": blocks}])).client()
    with client.messages.stream(model="m", max_tokens=64, messages=GO) as stream:
        final = stream.get_final_message()
    assert final.content[0].model_dump(exclude_none=True) == blocks[0]


def test_the_async_stream_helper_works() -> None:
    api = FakeMessagesAPI(PLAN)

    async def main() -> list[str]:
        client = api.async_client()
        async with client.messages.stream(model="m", max_tokens=64, messages=GO) as stream:
            final = await stream.get_final_message()
        return [b.type for b in final.content]

    assert asyncio.run(main()) == ["text", "tool_use", "tool_use"]


def test_the_stream_is_served_as_event_stream() -> None:
    api = FakeMessagesAPI(CannedModel(["x"]))
    with httpx2.Client(transport=api.transport()) as http:
        response = http.post(
            "https://fake.invalid/v1/messages",
            headers={"x-api-key": "k"},
            json={"model": "m", "max_tokens": 8, "messages": GO, "stream": True},
        )
    assert response.headers["content-type"].startswith("text/event-stream")
