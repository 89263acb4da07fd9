"""Injected faults, as the SDK's own retry loop sees them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from pytest_agentckpt.fake_api import FakeMessagesAPI, instant_retries
from reference_agent.scripted import CannedModel, Plan, Step, ToolCall

PLAN = Plan(steps=(Step(calls=(ToolCall("send", {"to": "x"}),)),), final_answer="Sent.")
GO = [{"role": "user", "content": "go"}]


@pytest.fixture(autouse=True)
def _fast() -> Iterator[None]:
    with instant_retries():
        yield


def create(client: anthropic.Anthropic, messages: list[Any] = GO) -> Any:
    return client.messages.create(model="m", max_tokens=64, messages=messages)


def retry_counts(api: FakeMessagesAPI) -> list[str]:
    return [e.headers["x-stainless-retry-count"] for e in api.exchanges]


def test_rate_limits_are_retried_and_the_retry_count_header_counts() -> None:
    api = FakeMessagesAPI(PLAN)
    api.fail_next("rate_limit", times=2)
    reply = create(api.client(max_retries=2))
    assert reply.stop_reason == "tool_use"
    assert [e.status for e in api.exchanges] == [429, 429, 200]
    assert retry_counts(api) == ["0", "1", "2"]


def test_a_rate_limit_carries_retry_headers_and_the_api_error_body() -> None:
    api = FakeMessagesAPI(PLAN)
    api.fail_next("rate_limit", retry_after=2.5)
    with pytest.raises(anthropic.RateLimitError) as info:
        create(api.client(max_retries=0))
    headers = info.value.response.headers
    assert (headers["retry-after-ms"], headers["retry-after"]) == ("2500", "3")
    body = info.value.body
    assert isinstance(body, dict)
    assert body["error"]["type"] == "rate_limit_error"
    assert body["request_id"] == headers["request-id"]


_WAITS = [(0, "0", "0"), (0.3, "300", "1"), (1, "1000", "1"), (1.4, "1400", "2"),
          (2.5, "2500", "3"), (3.5, "3500", "4"), (7, "7000", "7"), (0.0015, "2", "1")]


@pytest.mark.parametrize(
    ("kind", "retry_after", "ms", "seconds"),
    [("rate_limit", None, "1", "1"),  # a rate_limit's default wait, 1 ms
     *(("rate_limit", *wait) for wait in _WAITS), *(("overloaded", *wait) for wait in _WAITS[2:5])],
)
def test_retry_after_headers_say_the_wait_asked_for_each_rounded_up_to_its_unit(
    kind: Any, retry_after: float | None, ms: str, seconds: str
) -> None:
    # Before: retry-after was round(seconds) (2 for 2.5 s, 1 for 1.4 s), so a client that
    # honours it came back before the wait the test asked for, and disagreed with
    # retry-after-ms.
    api = FakeMessagesAPI(PLAN)
    api.fail_next(kind, retry_after=retry_after)
    client = api.client(max_retries=0)
    expected = anthropic.RateLimitError if kind == "rate_limit" else anthropic.InternalServerError
    with pytest.raises(expected) as info:
        create(client)
    headers = info.value.response.headers
    assert (headers["retry-after-ms"], headers["retry-after"]) == (ms, seconds)
    asked = 0.001 if retry_after is None else retry_after
    # Both headers say at least the wait asked for, and the same one: retry-after is
    # retry-after-ms in whole seconds, rounded up.
    assert int(headers["retry-after-ms"]) / 1000 >= asked and int(headers["retry-after"]) >= asked
    assert int(headers["retry-after"]) == -(-int(headers["retry-after-ms"]) // 1000)
    # The SDK waits what retry-after-ms says (it reads it before retry-after).
    assert client._parse_retry_after_header(headers) == int(ms) / 1000
    assert api.exchanges[0].response_headers["retry-after"] == seconds


@pytest.mark.parametrize(
    ("kind", "status", "error_type", "exc"),
    [
        ("server_error", 500, "api_error", anthropic.InternalServerError),
        ("overloaded", 529, "overloaded_error", anthropic.InternalServerError),
    ],
)
def test_server_faults_have_the_api_status_and_error_type(
    kind: Any, status: int, error_type: str, exc: type[Exception]
) -> None:
    api = FakeMessagesAPI(PLAN)
    api.fail_next(kind)
    with pytest.raises(exc) as info:
        create(api.client(max_retries=0))
    assert isinstance(info.value, anthropic.APIStatusError)
    assert info.value.status_code == status
    assert isinstance(info.value.body, dict)
    assert info.value.body["error"]["type"] == error_type


@pytest.mark.parametrize("kind", ["server_error", "overloaded"])
def test_server_faults_are_retried_by_the_sdk(kind: Any) -> None:
    api = FakeMessagesAPI(PLAN)
    api.fail_next(kind, times=2)
    assert create(api.client(max_retries=2)).stop_reason == "tool_use"
    assert retry_counts(api) == ["0", "1", "2"]
    assert api.model_calls == 1


def test_a_timeout_surfaces_as_the_sdk_timeout_error_after_retries() -> None:
    api = FakeMessagesAPI(PLAN)
    api.fail_next("timeout", times=3)
    with pytest.raises(anthropic.APITimeoutError):
        create(api.client(max_retries=2))
    assert [e.fault for e in api.exchanges] == ["timeout"] * 3
    assert api.model_calls == 0


@pytest.mark.parametrize("kind", ["disconnect", "connect_error", "timeout"])
def test_network_faults_are_retried_by_the_sdk(kind: Any) -> None:
    api = FakeMessagesAPI(PLAN)
    api.fail_next(kind)
    assert create(api.client(max_retries=1)).stop_reason == "tool_use"
    assert [e.status for e in api.exchanges] == [0, 200]
    assert retry_counts(api) == ["0", "1"]


def test_a_lost_response_was_produced_by_the_model_but_never_delivered() -> None:
    api = FakeMessagesAPI(PLAN)
    api.fail_next("lost_response")
    with pytest.raises(anthropic.APIConnectionError):
        create(api.client(max_retries=0))
    (lost,) = api.exchanges
    assert lost.model_called and not lost.delivered
    assert lost.response is not None and lost.response["stop_reason"] == "tool_use"


def test_a_lost_response_is_answered_again_by_the_retry_with_the_same_calls_under_fresh_ids() -> None:
    # The API made a reply the client never got; the SDK's retry gets a reply of its own.
    api = FakeMessagesAPI(PLAN)
    api.fail_next("lost_response")
    reply = create(api.client(max_retries=1))
    assert api.model_calls == 2
    lost, served = (e.response for e in api.exchanges)
    assert isinstance(lost, dict) and isinstance(served, dict)
    assert reply.id == served["id"] != lost["id"]
    assert [(b["name"], b["input"]) for b in served["content"] if b["type"] == "tool_use"] == [
        (b["name"], b["input"]) for b in lost["content"] if b["type"] == "tool_use"
    ]
    assert [b["id"] for b in served["content"] if b["type"] == "tool_use"] == [
        f"{b['id']}_g1" for b in lost["content"] if b["type"] == "tool_use"
    ]


def test_a_lost_response_advances_a_stateful_model() -> None:
    api = FakeMessagesAPI(CannedModel(["first", "second"]))
    api.fail_next("lost_response")
    assert create(api.client(max_retries=1)).content[0].text == "second"


def test_a_400_is_not_retried() -> None:
    api = FakeMessagesAPI(PLAN)
    with pytest.raises(anthropic.BadRequestError):
        create(api.client(max_retries=3), [{"role": "assistant", "content": "x"}])
    assert len(api.exchanges) == 1


def test_faults_queue_in_order_and_are_consumed() -> None:
    api = FakeMessagesAPI(PLAN)
    api.fail_next("overloaded")
    api.fail_next("rate_limit")
    assert api.pending_faults == 2
    create(api.client(max_retries=2))
    assert [e.fault for e in api.exchanges] == ["overloaded", "rate_limit", None]
    assert api.pending_faults == 0


def test_fail_next_validates_its_arguments() -> None:
    api = FakeMessagesAPI(PLAN)
    with pytest.raises(ValueError, match="kind must be one of"):
        api.fail_next("meteor")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="times must be at least 1"):
        api.fail_next("timeout", times=0)


def test_the_async_client_retries_faults_too() -> None:
    api = FakeMessagesAPI(PLAN)
    api.fail_next("rate_limit")
    api.fail_next("disconnect")

    async def main() -> str | None:
        reply = await api.async_client(max_retries=2).messages.create(
            model="m", max_tokens=1024, messages=GO
        )
        return reply.stop_reason

    assert asyncio.run(main()) == "tool_use"
    assert retry_counts(api) == ["0", "1", "2"]


def test_faults_over_real_http_are_seen_by_the_sdk_as_connection_errors() -> None:
    api = FakeMessagesAPI(PLAN)
    api.fail_next("rate_limit")
    api.fail_next("lost_response")
    with api.serve() as url:
        client = anthropic.Anthropic(api_key="k", base_url=url, max_retries=2)
        assert create(client).stop_reason == "tool_use"
    assert [(e.status, e.fault) for e in api.exchanges] == [
        (429, "rate_limit"),
        (0, "lost_response"),
        (200, None),
    ]
