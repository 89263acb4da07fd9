"""FakeMessagesAPI: the Messages API's answers, behind the real SDK."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import anthropic
import httpx2
import pytest

from reference_agent.offline import FAKE_API_KEY, FakeMessagesAPI, offline_client
from reference_agent.scripted import CannedModel, Plan, Step, ToolCall

PLAN = Plan(
    steps=(Step(calls=(ToolCall("read", {"path": "a"}), ToolCall("read", {"path": "b"}))),),
    final_answer="All read.",
)
GO = [{"role": "user", "content": "go"}]


def create(client: anthropic.Anthropic, messages: list[Any] = GO, **kwargs: Any) -> Any:
    return client.messages.create(model="claude-test", max_tokens=256, messages=messages, **kwargs)


def test_create_returns_the_scripted_reply_as_an_sdk_message() -> None:
    reply = create(FakeMessagesAPI(PLAN).client())
    assert isinstance(reply, anthropic.types.Message)
    assert reply.stop_reason == "tool_use"
    assert [(b.type, b.id) for b in reply.content if b.type == "tool_use"] == [
        ("tool_use", "toolu_s0c0a0"),
        ("tool_use", "toolu_s0c1a0"),
    ]
    assert reply.usage.input_tokens > 0


def test_every_exchange_is_recorded_with_request_status_and_response() -> None:
    api = FakeMessagesAPI(PLAN)
    create(api.client())
    (exchange,) = api.exchanges
    assert exchange.path == "/v1/messages"
    assert exchange.request["messages"] == GO
    assert exchange.status == 200
    assert exchange.response is not None and exchange.response["stop_reason"] == "tool_use"
    assert exchange.model_called and exchange.delivered
    assert api.requests == [exchange.request]


def test_an_invalid_history_gets_the_api_400_body_and_request_id() -> None:
    api = FakeMessagesAPI(PLAN)
    client = api.client()
    reply = create(client)
    bad = [*GO, {"role": "assistant", "content": reply.content}]
    with pytest.raises(anthropic.BadRequestError) as info:
        create(client, [*bad, {"role": "user", "content": "and?"}])
    body = info.value.body
    assert isinstance(body, dict)
    assert body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"].startswith(
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after"
    )
    assert body["request_id"] == info.value.response.headers["request-id"]
    assert api.exchanges[-1].status == 400
    assert not api.exchanges[-1].model_called
    assert api.model_calls == 1


def test_validation_can_be_turned_off() -> None:
    api = FakeMessagesAPI(CannedModel(["fine"]), validate=False)
    assert create(api.client(), [{"role": "assistant", "content": "x"}]).content[0].text == "fine"


def test_missing_max_tokens_is_a_400() -> None:
    api = FakeMessagesAPI(PLAN)
    with httpx2.Client(transport=api.transport()) as http:
        response = http.post(
            "https://fake.invalid/v1/messages",
            headers={"x-api-key": "k"},
            json={"model": "m", "messages": GO},
        )
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "max_tokens: Field required"


def test_requests_without_credentials_get_a_401_authentication_error() -> None:
    api = FakeMessagesAPI(PLAN)
    client = anthropic.Anthropic(
        api_key="unused",
        http_client=httpx2.Client(transport=api.transport()),
        default_headers={"Authorization": anthropic.omit},  # type: ignore[dict-item]
        max_retries=0,
    )
    with pytest.raises(anthropic.AuthenticationError) as info:
        create(client)
    assert info.value.body == {
        "type": "error",
        "error": {"type": "authentication_error", "message": "x-api-key header is required"},
        "request_id": info.value.response.headers["request-id"],
    }


@pytest.mark.parametrize(
    "headers", [{"x-api-key": "k"}, {"authorization": "Bearer k"}], ids=["x-api-key", "bearer"]
)
def test_either_header_authenticates(headers: dict[str, str]) -> None:
    api = FakeMessagesAPI(CannedModel(["ok"]))
    with httpx2.Client(transport=api.transport()) as http:
        response = http.post(
            "https://fake.invalid/v1/messages",
            headers=headers,
            json={"model": "m", "max_tokens": 8, "messages": GO},
        )
    assert response.status_code == 200
    assert response.json()["content"] == [{"type": "text", "text": "ok"}]


def test_unknown_paths_are_404_not_found_error() -> None:
    api = FakeMessagesAPI(PLAN)
    with httpx2.Client(transport=api.transport()) as http:
        response = http.post(
            "https://fake.invalid/v1/complete", headers={"x-api-key": "k"}, json={}
        )
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "not_found_error"


def test_count_tokens_is_served_and_does_not_consult_the_model() -> None:
    api = FakeMessagesAPI(PLAN)
    counted = api.client().messages.count_tokens(model="m", messages=GO)
    assert counted.input_tokens > 0
    assert api.model_calls == 0


def test_hooks_see_request_and_response_with_the_same_index() -> None:
    api = FakeMessagesAPI(PLAN)
    seen: list[tuple[str, int, str]] = []
    api.add_hook(lambda event, index, body: seen.append((event, index, sorted(body)[0])))
    create(api.client())
    assert seen == [("request", 0, "max_tokens"), ("response", 0, "content")]


class Crash(BaseException):
    pass


def test_a_base_exception_raised_by_a_request_hook_propagates_and_the_model_is_not_called() -> None:
    api = FakeMessagesAPI(PLAN)

    def crash(event: str, index: int, body: dict[str, Any]) -> None:
        if event == "request":
            raise Crash

    api.add_hook(crash)
    with pytest.raises(Crash):
        create(api.client())
    assert api.model_calls == 0


def test_a_crash_after_the_model_replied_records_an_undelivered_exchange() -> None:
    api = FakeMessagesAPI(PLAN)

    def crash(event: str, index: int, body: dict[str, Any]) -> None:
        if event == "response":
            raise Crash

    api.add_hook(crash)
    with pytest.raises(Crash):
        create(api.client())
    (exchange,) = api.exchanges
    assert exchange.model_called and not exchange.delivered
    api.remove_hook(crash)
    assert create(api.client()).stop_reason == "tool_use"


def test_a_broken_script_is_a_500_that_the_sdk_does_not_retry() -> None:
    api = FakeMessagesAPI(CannedModel([]))
    with pytest.raises(anthropic.InternalServerError, match="ScriptExhaustedError"):
        create(api.client(max_retries=2))
    assert len(api.exchanges) == 1


def test_the_async_client_is_served_too() -> None:
    async def main() -> str:
        client = FakeMessagesAPI(CannedModel(["async ok"])).async_client()
        reply = await client.messages.create(model="m", max_tokens=8, messages=GO)
        block = reply.content[0]
        assert block.type == "text"
        return block.text

    assert asyncio.run(main()) == "async ok"


def test_offline_client_wraps_a_plan() -> None:
    client = offline_client(Plan(steps=(), final_answer="42"))
    assert create(client).content[0].text == "42"
    assert client.api_key == FAKE_API_KEY


def test_exchanges_are_recorded_safely_from_many_threads() -> None:
    api = FakeMessagesAPI(PLAN)
    client = api.client()
    threads = [threading.Thread(target=create, args=(client,)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(e.index for e in api.exchanges) == list(range(8))


def test_serve_answers_over_real_http_and_stops_cleanly() -> None:
    api = FakeMessagesAPI(PLAN)
    with api.serve() as url:
        assert url.startswith("http://127.0.0.1:")
        client = anthropic.Anthropic(api_key="k", base_url=url, max_retries=0)
        reply = create(client)
        assert reply.stop_reason == "tool_use"
        with pytest.raises(anthropic.BadRequestError):
            create(client, [{"role": "assistant", "content": "x"}])
    assert [e.status for e in api.exchanges] == [200, 400]
    with pytest.raises(anthropic.APIConnectionError):
        create(anthropic.Anthropic(api_key="k", base_url=url, max_retries=0))


def test_serve_drops_the_connection_when_a_hook_crashes() -> None:
    api = FakeMessagesAPI(PLAN)

    def crash(event: str, index: int, body: dict[str, Any]) -> None:
        raise Crash

    api.add_hook(crash)
    with api.serve() as url, pytest.raises(anthropic.APIConnectionError):
        create(anthropic.Anthropic(api_key="k", base_url=url, max_retries=0))
    assert len(api.server_errors) == 1 and isinstance(api.server_errors[0], Crash)


def test_a_paused_turn_sent_back_as_is_is_accepted_but_other_prefills_are_not() -> None:
    paused = {"content": [{"type": "text", "text": "Searching…"}], "stop_reason": "pause_turn"}
    api = FakeMessagesAPI(CannedModel([paused, "done", "never"]))
    client = api.client(max_retries=0)
    first = client.messages.create(
        model="m", max_tokens=64, messages=[{"role": "user", "content": "go"}]
    )
    assert first.stop_reason == "pause_turn"
    history = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [b.model_dump(mode="json") for b in first.content]},
    ]
    assert client.messages.create(model="m", max_tokens=64, messages=history).content[0].text == "done"
    other = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "a prefill"}]
    with pytest.raises(anthropic.BadRequestError, match="prefill"):
        client.messages.create(model="m", max_tokens=64, messages=other)


def test_a_client_that_resets_its_connection_is_no_traceback_of_the_served_api(
    capfd: pytest.CaptureFixture[str],
) -> None:
    # What a SIGKILLed child does to its keep-alive connection: socketserver printed
    # "Exception occurred during processing of request" and a ConnectionResetError.
    import socket
    import struct
    import time
    import urllib.parse

    api = FakeMessagesAPI(Plan(steps=(), final_answer="ok"))
    with api.serve() as url:
        parts = urllib.parse.urlparse(url)
        client = socket.create_connection((parts.hostname, parts.port))
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.send(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nx-api-key: k\r\n\r\n")
        time.sleep(0.2)
        client.close()  # a reset, with the answer unread
        time.sleep(0.2)
    assert "Traceback" not in capfd.readouterr().err


def test_each_exchange_records_the_headers_of_its_answer() -> None:
    api = FakeMessagesAPI(PLAN)
    client = api.client(max_retries=0)
    raw = client.messages.with_raw_response.create(model="claude-test", max_tokens=256, messages=GO)
    api.fail_next("rate_limit", retry_after=7)
    with pytest.raises(anthropic.RateLimitError):
        create(client)
    api.fail_next("timeout")
    with pytest.raises(anthropic.APITimeoutError):
        create(client)
    ok, limited, lost = api.exchanges
    assert ok.response_headers["request-id"] == raw.headers["request-id"]
    assert "anthropic-ratelimit-requests-remaining" in ok.response_headers
    assert limited.status == 429 and limited.response_headers["retry-after"] == "7"
    assert lost.status == 0 and lost.response_headers == {}
