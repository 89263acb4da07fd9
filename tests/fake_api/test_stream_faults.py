"""Streams that stream: events reach the SDK as it reads them; faults in the middle."""

from __future__ import annotations

import asyncio

import anthropic
import pytest

from reference_agent.offline import FakeMessagesAPI
from reference_agent.scripted import CannedModel
from tests.fake_api._cut import raises_cut_stream

GO = [{"role": "user", "content": "go"}]
TEXT = "a reply long enough to be sent as several text deltas, one after another"


def read_stream(client: anthropic.Anthropic, seen: list[str] | None = None) -> None:
    with client.messages.stream(model="m", max_tokens=64, messages=GO) as stream:
        for event in stream:
            if seen is not None:
                seen.append(event.type)


def fake() -> FakeMessagesAPI:
    return FakeMessagesAPI(CannedModel([TEXT] * 5))


def test_a_stream_is_open_until_its_last_event_is_read() -> None:
    client = fake().client(max_retries=0)
    with client.messages.stream(model="m", max_tokens=64, messages=GO) as stream:
        assert stream.response.is_closed is False
        first = next(iter(stream))
        assert first.type == "message_start"
        assert stream.response.is_closed is False
        text = "".join(stream.text_stream)
    assert text == TEXT
    assert stream.response.is_closed is True


def test_an_async_stream_is_open_until_its_last_event_is_read() -> None:
    async def main() -> str:
        client = fake().async_client(max_retries=0)
        async with client.messages.stream(model="m", max_tokens=64, messages=GO) as stream:
            assert stream.response.is_closed is False
            text = "".join([piece async for piece in stream.text_stream])
        assert stream.response.is_closed is True
        return text

    assert asyncio.run(main()) == TEXT


def test_a_dropped_stream_raises_after_the_events_sent_before_it() -> None:
    api = fake()
    api.fail_next("stream_disconnect", after_events=5)
    client = api.client(max_retries=0)
    seen: list[str] = []
    with raises_cut_stream():
        read_stream(client, seen)
    # Five events went out; the SDK does not surface the ping, and adds "text" events.
    assert [t for t in seen if t != "text"] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
    ]
    exchange = api.exchanges[-1]
    assert (exchange.fault, exchange.model_called, exchange.delivered) == (
        "stream_disconnect",
        True,
        False,
    )


def test_an_overloaded_error_event_mid_stream_raises_the_sdks_status_error() -> None:
    api = fake()
    api.fail_next("stream_error", after_events=4)
    client = api.client(max_retries=0)
    # The HTTP status was 200 when the error came: the SDK raises APIStatusError with the
    # event's body, as it does for the API's own mid-stream errors.
    with pytest.raises(anthropic.APIStatusError) as info:
        read_stream(client)
    assert info.value.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }


def test_a_stream_fault_waits_for_a_streaming_request() -> None:
    api = fake()
    api.fail_next("stream_error")
    client = api.client(max_retries=0)
    plain = client.messages.create(model="m", max_tokens=64, messages=GO)
    assert plain.content[0].type == "text"
    assert api.pending_faults == 1
    with pytest.raises(anthropic.APIStatusError):
        read_stream(client)
    assert api.pending_faults == 0


def test_stream_faults_reach_an_agent_over_real_http() -> None:
    import anthropic as sdk

    api = fake()
    api.fail_next("stream_disconnect", after_events=3)
    with api.serve() as url:
        client = sdk.Anthropic(api_key="k", base_url=url, max_retries=0)
        with raises_cut_stream():
            read_stream(client)
        with client.messages.stream(model="m", max_tokens=64, messages=GO) as stream:
            assert stream.response.is_closed is False
            assert stream.get_final_text() == TEXT


def test_a_streamed_reply_is_delivered_once_its_last_event_is_read_on_every_way_in() -> None:
    api = fake()
    delivered: list[int] = []
    api.add_delivery_hook(lambda index, message: delivered.append(index))
    client = api.client(max_retries=0)
    with client.messages.stream(model="m", max_tokens=64, messages=GO) as stream:
        next(iter(stream))
        assert delivered == []  # the agent holds part of the reply
        stream.get_final_message()
    assert delivered == [0]
    # A reply that does not stream arrives whole with its response: no delivery to wait for.
    client.messages.create(model="m", max_tokens=64, messages=GO)
    assert delivered == [0]

    async def main() -> None:
        async with api.async_client(max_retries=0).messages.stream(model="m", max_tokens=64, messages=GO) as s:
            await s.get_final_message()

    asyncio.run(main())
    assert delivered == [0, 2]
    # Over real HTTP the last chunk written is not the last one read: nothing is said.
    with api.serve() as url:
        over_http = anthropic.Anthropic(api_key="k", base_url=url, max_retries=0)
        with over_http.messages.stream(model="m", max_tokens=64, messages=GO) as stream:
            stream.get_final_message()
    assert delivered == [0, 2]


@pytest.mark.parametrize("kind", ["stream_disconnect", "stream_error"])
def test_a_stream_cut_short_is_never_delivered(kind: str) -> None:
    api = fake()
    delivered: list[int] = []
    api.add_delivery_hook(lambda index, message: delivered.append(index))
    api.fail_next(kind, after_events=4)  # type: ignore[arg-type]
    cut = raises_cut_stream() if kind == "stream_disconnect" else pytest.raises(anthropic.APIStatusError)
    with cut:
        read_stream(api.client(max_retries=0))
    assert delivered == []


def test_a_stream_cut_mid_reply_stops_after_the_first_delta_of_the_last_block() -> None:
    # A text and a call whose input takes more than one delta: the cut comes inside the
    # call, with part of its input's JSON sent. The default cut comes before any content.
    long_input = {"query": "an input long enough to be sent as several input_json deltas"}
    call = {"type": "tool_use", "id": "toolu_1", "name": "search", "input": long_input}
    api = FakeMessagesAPI(CannedModel([[{"type": "text", "text": TEXT}, call]] * 2))
    api.fail_next("stream_disconnect", mid_reply=True)
    client = api.client(max_retries=0)
    snapshot: list[object] = []
    with raises_cut_stream(), client.messages.stream(model="m", max_tokens=64, messages=GO) as stream:
        for _ in stream:
            snapshot[:] = [block.model_dump() for block in stream.current_message_snapshot.content]
    text, started = snapshot
    assert text["text"] == TEXT  # type: ignore[index]  # the whole text came
    assert started["type"] == "tool_use" and started["input"] != long_input  # type: ignore[index]  # the input did not
    api.fail_next("stream_disconnect")
    seen: list[str] = []
    with raises_cut_stream():
        read_stream(client, seen)
    assert "content_block_delta" not in seen
