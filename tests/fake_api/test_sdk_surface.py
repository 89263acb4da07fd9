"""Every public SDK method that talks to ``/v1/messages*`` or ``/v1/models``, against the fake.

Sync and async; Message Batches and Models; the Vertex and Bedrock clients through
``anthropic_intercept``; an endpoint the fake does not serve gets an error naming it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import anthropic
import pytest

from reference_agent.offline import FakeMessagesAPI
from reference_agent.scripted import Plan, Step, ToolCall

PLAN = Plan(steps=(Step(calls=(ToolCall("add", {"a": 1, "b": 2}),)),), final_answer="3")
GO = [{"role": "user", "content": "1 + 2?"}]
ARGS: dict[str, Any] = {"model": "claude-sonnet-4-6", "max_tokens": 64, "messages": GO}
BAD = [{"role": "assistant", "content": "prefill"}]


def batch_requests() -> list[dict[str, Any]]:
    return [
        {"custom_id": "good", "params": ARGS},
        {"custom_id": "bad", "params": {**ARGS, "messages": BAD}},
    ]


def do_batches(batches: Any) -> None:
    created = batches.create(requests=batch_requests())
    assert created.processing_status == "in_progress"
    assert created.request_counts.processing == 2 and created.results_url is None
    ended = batches.retrieve(created.id)
    assert ended.processing_status == "ended"
    assert (ended.request_counts.succeeded, ended.request_counts.errored) == (1, 1)
    assert ended.results_url.endswith(f"/v1/messages/batches/{created.id}/results")
    results = {r.custom_id: r.result for r in batches.results(created.id)}
    assert results["good"].type == "succeeded"
    assert results["good"].message.content[0].type == "tool_use"
    assert results["good"].message.usage.service_tier == "batch"
    assert results["bad"].type == "errored"
    assert results["bad"].error.error.type == "invalid_request_error"
    assert 'first message must use the "user" role' in results["bad"].error.error.message
    assert [b.id for b in batches.list()] == [created.id]
    canceled = batches.create(requests=[{"custom_id": "late", "params": ARGS}])
    assert batches.cancel(canceled.id).processing_status == "canceling"
    assert [r.result.type for r in batches.results(canceled.id)] == ["canceled"]
    assert batches.delete(created.id).type == "message_batch_deleted"
    assert [b.id for b in batches.list()] == [canceled.id]


def do_models(models: Any) -> None:
    listed = [m.id for m in models.list()]
    assert "claude-opus-4-6" in listed
    page = models.list(limit=2)
    assert len(page.data) == 2 and page.has_more
    assert [m.id for m in models.list(limit=2, after_id=page.last_id).data] == listed[2:4]
    info = models.retrieve("claude-opus-4-6")
    assert (info.id, info.type, info.lifecycle) == ("claude-opus-4-6", "model", "active")
    with pytest.raises(anthropic.NotFoundError):
        models.retrieve("claude-nonexistent")


def stream_text(messages: Any) -> None:
    with messages.stream(**ARGS) as stream:
        assert stream.get_final_message().stop_reason == "tool_use"


def raw_stream(messages: Any) -> None:
    kinds = [event.type for event in messages.create(**ARGS, stream=True)]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"


def parse(messages: Any) -> None:
    reply = messages.create(**ARGS)
    assert reply.content[0].type == "tool_use" and reply.usage.cache_read_input_tokens == 0


def count(messages: Any) -> None:
    assert messages.count_tokens(model="m", messages=GO).input_tokens > 0


def with_raw(messages: Any) -> None:
    raw = messages.with_raw_response.create(**ARGS)
    assert raw.headers["request-id"].startswith("req_offline")
    assert raw.parse().content[0].type == "tool_use"


def with_streaming(messages: Any) -> None:
    with messages.with_streaming_response.create(**ARGS) as response:
        assert b"tool_use" in response.read()


SYNC_CALLS: dict[str, Callable[[anthropic.Anthropic], None]] = {
    "messages.create": lambda c: parse(c.messages),
    "messages.create(stream=True)": lambda c: raw_stream(c.messages),
    "messages.stream": lambda c: stream_text(c.messages),
    "messages.count_tokens": lambda c: count(c.messages),
    "messages.with_raw_response.create": lambda c: with_raw(c.messages),
    "messages.with_streaming_response.create": lambda c: with_streaming(c.messages),
    "messages.batches.*": lambda c: do_batches(c.messages.batches),
    "models.*": lambda c: do_models(c.models),
    "beta.messages.create": lambda c: parse(c.beta.messages),
    "beta.messages.create(stream=True)": lambda c: raw_stream(c.beta.messages),
    "beta.messages.stream": lambda c: stream_text(c.beta.messages),
    "beta.messages.count_tokens": lambda c: count(c.beta.messages),
    "beta.messages.batches.*": lambda c: do_batches(c.beta.messages.batches),
    "beta.models.*": lambda c: do_models(c.beta.models),
}


@pytest.mark.parametrize("name", list(SYNC_CALLS))
def test_sync_sdk_call_works_against_the_fake(name: str) -> None:
    SYNC_CALLS[name](FakeMessagesAPI(PLAN).client(max_retries=0))


async def a_batches(batches: Any) -> None:
    created = await batches.create(requests=batch_requests())
    ended = await batches.retrieve(created.id)
    assert ended.processing_status == "ended"
    results = {r.custom_id: r.result.type async for r in await batches.results(created.id)}
    assert results == {"good": "succeeded", "bad": "errored"}
    assert [b.id async for b in batches.list()] == [created.id]
    assert (await batches.cancel(created.id)).processing_status == "ended"
    assert (await batches.delete(created.id)).id == created.id


async def a_models(models: Any) -> None:
    assert "claude-haiku-4-5" in [m.id async for m in models.list()]
    assert (await models.retrieve("claude-haiku-4-5")).display_name == "Claude Haiku 4.5"


async def a_stream(messages: Any) -> None:
    async with messages.stream(**ARGS) as stream:
        assert (await stream.get_final_message()).stop_reason == "tool_use"


async def a_raw_stream(messages: Any) -> None:
    kinds = [event.type async for event in await messages.create(**ARGS, stream=True)]
    assert kinds[-1] == "message_stop"


async def a_create(messages: Any) -> None:
    assert (await messages.create(**ARGS)).usage.cache_creation_input_tokens == 0


async def a_count(messages: Any) -> None:
    assert (await messages.count_tokens(model="m", messages=GO)).input_tokens > 0


ASYNC_CALLS: dict[str, Callable[[anthropic.AsyncAnthropic], Any]] = {
    "messages.create": lambda c: a_create(c.messages),
    "messages.create(stream=True)": lambda c: a_raw_stream(c.messages),
    "messages.stream": lambda c: a_stream(c.messages),
    "messages.count_tokens": lambda c: a_count(c.messages),
    "messages.batches.*": lambda c: a_batches(c.messages.batches),
    "models.*": lambda c: a_models(c.models),
    "beta.messages.create": lambda c: a_create(c.beta.messages),
    "beta.messages.stream": lambda c: a_stream(c.beta.messages),
    "beta.messages.batches.*": lambda c: a_batches(c.beta.messages.batches),
    "beta.models.*": lambda c: a_models(c.beta.models),
}


@pytest.mark.parametrize("name", list(ASYNC_CALLS))
def test_async_sdk_call_works_against_the_fake(name: str) -> None:
    asyncio.run(ASYNC_CALLS[name](FakeMessagesAPI(PLAN).async_client(max_retries=0)))


def test_a_batch_without_requests_is_refused_whole() -> None:
    client = FakeMessagesAPI(PLAN).client(max_retries=0)
    with pytest.raises(anthropic.BadRequestError, match="custom_id"):
        client.messages.batches.create(requests=[{"custom_id": "", "params": ARGS}])


def test_batch_requests_are_not_model_calls_for_hooks() -> None:
    api = FakeMessagesAPI(PLAN)
    seen: list[str] = []
    api.add_hook(lambda event, index, body: seen.append(event))
    client = api.client(max_retries=0)
    batch = client.messages.batches.create(requests=batch_requests())
    client.messages.batches.retrieve(batch.id)
    client.messages.count_tokens(model="m", messages=GO)
    client.models.list()
    assert seen == [] and api.model_calls == 0
    client.messages.create(**ARGS)
    assert seen == ["request", "response"] and api.model_calls == 1
    assert [e.generation for e in api.exchanges] == [False] * 4 + [True]


def test_an_unserved_endpoint_gets_an_error_that_names_it() -> None:
    client = FakeMessagesAPI(PLAN).client(max_retries=0)
    with pytest.raises(anthropic.NotFoundError) as info:
        client.beta.files.list()
    assert "does not serve GET /v1/files" in str(info.value)


def test_the_vertex_client_is_served_through_intercept(
    anthropic_intercept: FakeMessagesAPI,
) -> None:
    client = anthropic.AnthropicVertex(
        project_id="proj", region="us-east5", access_token="token", max_retries=0
    )
    # The fixture's default model answers "Done." at once.
    reply = client.messages.create(**ARGS)
    assert reply.content[0].type == "text" and reply.content[0].text == "Done."
    with client.messages.stream(**ARGS) as stream:
        assert stream.response.is_closed is False
        assert stream.get_final_text() == "Done."
    assert client.messages.count_tokens(model="m", messages=GO).input_tokens > 0
    generation = anthropic_intercept.exchanges[0]
    assert generation.path.endswith("/models/claude-sonnet-4-6:rawPredict")
    assert generation.request["model"] == "claude-sonnet-4-6"
    assert "anthropic_version" in generation.request  # Vertex names the version in the body
    assert anthropic_intercept.model_calls == 2


def test_the_bedrock_client_is_served_through_intercept(
    anthropic_intercept: FakeMessagesAPI,
) -> None:
    client = anthropic.AnthropicBedrock(
        aws_access_key="AKIAFAKE", aws_secret_key="secret", aws_region="us-east-1", max_retries=0
    )
    reply = client.messages.create(**ARGS)
    assert reply.content[0].type == "text" and reply.content[0].text == "Done."
    with client.messages.stream(**ARGS) as stream:
        kinds = [event.type for event in stream]
        assert stream.get_final_text() == "Done."
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    paths = [e.path for e in anthropic_intercept.exchanges]
    assert paths == [
        "/model/claude-sonnet-4-6/invoke",
        "/model/claude-sonnet-4-6/invoke-with-response-stream",
    ]
    assert anthropic_intercept.exchanges[0].headers["authorization"].startswith("AWS4-HMAC-SHA256")


def test_an_invalid_history_from_vertex_gets_the_apis_400(
    anthropic_intercept: FakeMessagesAPI,
) -> None:
    client = anthropic.AnthropicVertex(
        project_id="proj", region="us-east5", access_token="token", max_retries=0
    )
    with pytest.raises(anthropic.BadRequestError, match='must use the "user" role'):
        client.messages.create(**{**ARGS, "messages": BAD})
