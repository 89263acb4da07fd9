"""The request's ``max_tokens`` and ``stop_sequences`` end a scripted reply as they end
Claude's: cut where the token limit falls (``stop_reason: "max_tokens"``,
``usage.output_tokens == max_tokens``), or before the first stop sequence
(``stop_reason: "stop_sequence"``, ``stop_sequence`` the one matched), streamed or not."""

from __future__ import annotations

import json
import re
from typing import Any

import anthropic
import pytest

from reference_agent.offline import FakeMessagesAPI
from reference_agent.scripted import (
    CannedModel,
    Plan,
    Step,
    ToolCall,
    limited_reply,
    message_json,
)

GO = [{"role": "user", "content": "go"}]
ANSWER = "The answer is forty-two, as the plan computed from every one of its steps."
BODY = "A long letter body that does not fit in a small token budget at all, " * 3
SEND = {
    "name": "send",
    "input_schema": {
        "type": "object",
        "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
        "required": ["to", "body"],
    },
}
PLAN = Plan(steps=(Step((ToolCall("send", {"to": "ann", "body": BODY}),), text="Sending it."),), final_answer=ANSWER)


def generate(client: anthropic.Anthropic, stream: bool, **request: Any) -> anthropic.types.Message:
    request = {"model": "m", "messages": GO, **request}
    if stream:
        with client.messages.stream(**request) as events:
            return events.get_final_message()
    return client.messages.create(**request)


def raw_events(client: anthropic.Anthropic, **request: Any) -> list[dict[str, Any]]:
    """The stream's events as JSON, as the API sends them."""
    stream = client.messages.create(model="m", messages=GO, stream=True, **request)
    return [event.model_dump(mode="json") for event in stream]


def text_of(reply: anthropic.types.Message) -> str:
    return "".join(b.text for b in reply.content if b.type == "text")


# -- max_tokens --------------------------------------------------------------------------
@pytest.mark.parametrize("stream", [False, True])
def test_a_text_longer_than_max_tokens_comes_back_cut_with_stop_reason_max_tokens(stream: bool) -> None:
    api = FakeMessagesAPI(Plan((), ANSWER))
    whole = generate(api.client(), stream, max_tokens=1024)
    assert whole.stop_reason == "end_turn" and text_of(whole) == ANSWER
    assert whole.usage.output_tokens < 1024
    cut = generate(api.client(), stream, max_tokens=16)
    assert cut.stop_reason == "max_tokens" and cut.stop_sequence is None
    assert cut.usage.output_tokens == 16
    text = text_of(cut)
    assert text and ANSWER.startswith(text) and len(text) < len(ANSWER) and text == text.rstrip()
    # The estimate usage counts (the content's JSON, four characters a token) fits the limit.
    assert len(json.dumps([b.model_dump(exclude_none=True) for b in cut.content], separators=(",", ":"))) // 4 <= 16


def test_a_streamed_cut_says_max_tokens_in_its_message_delta() -> None:
    api = FakeMessagesAPI(Plan((), ANSWER))
    events = raw_events(api.client(), max_tokens=16)
    delta = next(e for e in events if e["type"] == "message_delta")
    assert (delta["delta"]["stop_reason"], delta["delta"]["stop_sequence"]) == ("max_tokens", None)
    assert delta["usage"]["output_tokens"] == 16
    start = next(e for e in events if e["type"] == "message_start")
    assert start["message"]["stop_reason"] is None
    text = "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta")
    assert ANSWER.startswith(text) and len(text) < len(ANSWER)


@pytest.mark.parametrize("stream", [False, True])
def test_a_tool_call_the_limit_falls_in_is_incomplete_and_one_that_does_not_start_is_not_written(
    stream: bool,
) -> None:
    api = FakeMessagesAPI(PLAN)
    whole = generate(api.client(), stream, max_tokens=1024, tools=[SEND])
    assert whole.stop_reason == "tool_use" and [b.type for b in whole.content] == ["text", "tool_use"]
    # The call's head and its first argument fit 40 tokens, its long body does not.
    cut = generate(api.client(), stream, max_tokens=40, tools=[SEND])
    assert cut.stop_reason == "max_tokens" and cut.usage.output_tokens == 40
    assert [b.type for b in cut.content] == ["text", "tool_use"]
    call = cut.content[1]
    assert call.type == "tool_use" and call.name == "send" and call.input == {"to": "ann"}
    # 12 tokens hold the text, not the call: it is not written at all.
    short = generate(api.client(), stream, max_tokens=12, tools=[SEND])
    assert short.stop_reason == "max_tokens" and [b.type for b in short.content] == ["text"]
    assert text_of(short) == "Sending it."


def test_a_text_cut_at_max_tokens_can_be_sent_back_as_a_prefill_and_is_continued() -> None:
    api = FakeMessagesAPI(Plan((), ANSWER))
    client = api.client()
    cut = generate(client, False, max_tokens=16)
    assert cut.stop_reason == "max_tokens"
    rest = client.messages.create(
        model="m", max_tokens=1024,
        messages=[*GO, {"role": "assistant", "content": text_of(cut)}],  # type: ignore[list-item]
    )
    assert rest.stop_reason == "end_turn" and text_of(cut) + text_of(rest) == ANSWER


def test_a_limit_smaller_than_the_json_overhead_still_writes_the_texts_start() -> None:
    api = FakeMessagesAPI(CannedModel(["Hello there, how are you today?"]))
    cut = generate(api.client(), False, max_tokens=1)
    assert cut.stop_reason == "max_tokens" and cut.usage.output_tokens == 1
    assert text_of(cut) == "Hell"


def test_replies_that_fit_are_unchanged_and_their_usage_stays_below_the_limit() -> None:
    reply = message_json([{"type": "text", "text": "On it."}, {"type": "tool_use", "id": "t", "name": "send", "input": {"to": "ann"}}])
    assert limited_reply(reply, {"max_tokens": 1024}) is reply
    assert limited_reply(reply, {"max_tokens": reply["usage"]["output_tokens"]}) is reply
    cut = limited_reply(reply, {"max_tokens": reply["usage"]["output_tokens"] - 1})
    assert cut["stop_reason"] == "max_tokens" and reply["stop_reason"] == "tool_use"


# -- stop_sequences ----------------------------------------------------------------------
STOPPED = "The plan is done. END OF ANSWER. Anything after this is never written."


@pytest.mark.parametrize("stream", [False, True])
def test_a_text_holding_a_stop_sequence_ends_before_it(stream: bool) -> None:
    api = FakeMessagesAPI(Plan((), STOPPED))
    reply = generate(api.client(), stream, max_tokens=1024, stop_sequences=["never", "END"])
    assert reply.stop_reason == "stop_sequence" and reply.stop_sequence == "END"
    assert text_of(reply) == "The plan is done. "
    whole = generate(api.client(), stream, max_tokens=1024)
    assert reply.usage.output_tokens < whole.usage.output_tokens
    unmatched = generate(api.client(), stream, max_tokens=1024, stop_sequences=["STOP"])
    assert unmatched.stop_reason == "end_turn" and unmatched.stop_sequence is None
    assert text_of(unmatched) == STOPPED


def test_a_streamed_stop_says_which_sequence_in_its_message_delta() -> None:
    api = FakeMessagesAPI(Plan((), STOPPED))
    events = raw_events(api.client(), max_tokens=1024, stop_sequences=["END"])
    delta = next(e for e in events if e["type"] == "message_delta")
    assert (delta["delta"]["stop_reason"], delta["delta"]["stop_sequence"]) == ("stop_sequence", "END")
    text = "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta")
    assert text == "The plan is done. "


def test_the_sequence_whose_generation_completes_first_stops_the_reply() -> None:
    reply = message_json("abcdef")
    assert limited_reply(reply, {"stop_sequences": ["bcdef", "cd"]})["stop_sequence"] == "cd"
    assert limited_reply(reply, {"stop_sequences": ["bcd", "bc"]})["stop_sequence"] == "bc"
    assert limited_reply(reply, {"stop_sequences": ["abc"]})["content"] == []


def test_a_stop_sequence_in_the_text_before_a_call_means_the_call_is_never_written() -> None:
    api = FakeMessagesAPI(Plan((Step((ToolCall("send", {"to": "ann", "body": "hi"}),), text="Sending it. DONE"),), "ok"))
    reply = generate(api.client(), False, max_tokens=1024, tools=[SEND], stop_sequences=["DONE"])
    assert reply.stop_reason == "stop_sequence" and reply.stop_sequence == "DONE"
    assert [b.type for b in reply.content] == ["text"] and text_of(reply) == "Sending it. "
    # Tool input is not matched: only text is.
    reply = generate(api.client(), False, max_tokens=1024, tools=[SEND], stop_sequences=["ann"])
    assert reply.stop_reason == "tool_use"


def test_a_stop_sequence_before_the_token_limit_wins_and_one_after_it_does_not() -> None:
    api = FakeMessagesAPI(Plan((), ANSWER))
    early = generate(api.client(), False, max_tokens=16, stop_sequences=["answer"])
    assert early.stop_reason == "stop_sequence" and text_of(early) == "The "
    late = generate(api.client(), False, max_tokens=16, stop_sequences=["steps"])
    assert late.stop_reason == "max_tokens" and late.stop_sequence is None


def test_a_batch_requests_limits_end_its_reply_too() -> None:
    api = FakeMessagesAPI(Plan((), STOPPED))
    batches = api.client().messages.batches
    params: dict[str, Any] = {"model": "m", "max_tokens": 1024, "messages": GO}
    created = batches.create(requests=[  # type: ignore[list-item]
        {"custom_id": "cut", "params": {**params, "max_tokens": 8}},
        {"custom_id": "stopped", "params": {**params, "stop_sequences": ["END"]}},
        {"custom_id": "whole", "params": params},
    ])
    batches.retrieve(created.id)
    results = {r.custom_id: r.result for r in batches.results(created.id)}
    replies = {name: result.message for name, result in results.items() if result.type == "succeeded"}
    assert {name: reply.stop_reason for name, reply in replies.items()} == {
        "cut": "max_tokens", "stopped": "stop_sequence", "whole": "end_turn"}
    assert replies["cut"].usage.output_tokens == 8 and replies["stopped"].stop_sequence == "END"


@pytest.mark.parametrize(
    ("stops", "message"),
    [
        ("END", "stop_sequences: Input should be a valid list"),
        (["END", 3], "stop_sequences.1: Input should be a valid string"),
        ([None], "stop_sequences.0: Input should be a valid string"),
    ],
)
def test_stop_sequences_that_are_not_a_list_of_strings_are_a_400_as_with_the_api(stops: Any, message: str) -> None:
    # Before: each was taken and answered, where the API refuses the request.
    api = FakeMessagesAPI(Plan((), ANSWER))
    with pytest.raises(anthropic.BadRequestError) as caught:
        api.client(max_retries=0).messages.create(model="m", max_tokens=64, messages=GO, stop_sequences=stops)
    assert caught.value.status_code == 400 and message in str(caught.value)


@pytest.mark.parametrize("stream", [False, True])
def test_a_prompt_beyond_the_context_window_is_refused_as_the_api_refuses_it(stream: bool) -> None:
    api = FakeMessagesAPI(Plan(steps=(), final_answer=ANSWER), context_window=200)
    client = api.client(max_retries=0)
    short = [{"role": "user", "content": "go"}]
    assert generate(client, stream, max_tokens=64, messages=short).content[0].text == ANSWER  # type: ignore[union-attr]
    long = [{"role": "user", "content": "x" * 2_000}]
    with pytest.raises(anthropic.BadRequestError) as caught:
        generate(client, stream, max_tokens=64, messages=long)
    assert caught.value.status_code == 400 and caught.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    message = caught.value.body["error"]["message"]  # type: ignore[index]
    tokens = int(message.split("prompt is too long: ", 1)[1].split(" ", 1)[0])
    # The same count as the usage of an answered request: a token for every 4 bytes.
    assert message == f"prompt is too long: {tokens} tokens > 200 maximum" and 500 <= tokens <= 600
    # Counting tokens is not generating: the endpoint still answers, with a count beyond
    # the window (an agent that counts before it asks learns that it must compact).
    counted = client.messages.count_tokens(model="m", messages=long).input_tokens  # type: ignore[arg-type]
    assert 200 < counted <= tokens and tokens - counted < 20


@pytest.mark.parametrize("window", [0, -1, 1.5, True, "100"])
def test_a_context_window_that_is_not_a_positive_int_is_refused(window: Any) -> None:
    with pytest.raises(ValueError, match="context_window must be a positive int"):
        FakeMessagesAPI(Plan(steps=(), final_answer=ANSWER), context_window=window)


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ({"system": 5}, "system: Input should be a valid string or a valid list"),
        ({"system": [{"type": "image"}]}, "system.0: Input should be a text block"),
        ({"metadata": {"user_id": 5}}, "metadata.user_id: Input should be a valid string"),
        ({"metadata": "x"}, "metadata: Input should be a valid dictionary"),
    ],
)
def test_a_system_or_metadata_the_api_refuses_is_a_400(extra: dict[str, Any], says: str) -> None:
    # They were answered 200 (an outside round).
    client = FakeMessagesAPI(Plan(steps=(), final_answer=ANSWER)).client(max_retries=0)
    with pytest.raises(anthropic.BadRequestError, match=re.escape(says)):
        client.messages.create(model="m", max_tokens=64, messages=GO, extra_body=extra)  # type: ignore[arg-type]
    # What the API takes still passes.
    ok = client.messages.create(
        model="m", max_tokens=64, messages=GO,  # type: ignore[arg-type]
        system=[{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
        metadata={"user_id": "u-1"},
    )
    assert ok.content[0].text == ANSWER  # type: ignore[union-attr]
