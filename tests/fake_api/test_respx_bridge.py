"""respx working with the SDK: the transport bridge and the patching mode."""

from __future__ import annotations

import asyncio
import json

import anthropic
import httpx
import httpx2
import pytest
import respx
from respx.models import AllMockedAssertionError

from pytest_agentckpt.fake_api import (
    fake_side_effect,
    instant_retries,
    intercept_httpx2,
    respx_async_transport,
    respx_mock,
    respx_transport,
)
from reference_agent.offline import FakeMessagesAPI
from reference_agent.scripted import CannedModel, message_json

GO = [{"role": "user", "content": "go"}]
API = "https://api.anthropic.com"


def ask(client: anthropic.Anthropic) -> str:
    reply = client.messages.create(model="m", max_tokens=1024, messages=GO)
    block = reply.content[0]
    assert block.type == "text"
    return block.text


def code_that_builds_its_own_client() -> str:
    # No client argument: the situation patching mode exists for.
    return ask(anthropic.Anthropic(api_key="k", max_retries=0))


def test_plain_respx_mock_does_not_see_the_sdk() -> None:
    # The problem this bridge solves: respx only patches httpx, the SDK sends via httpx2.
    api = FakeMessagesAPI(CannedModel(["never"]))
    with respx.mock(assert_all_called=False) as router:
        router.post(f"{API}/v1/messages").respond(json=message_json("mocked"))
        # intercept via the fake only to keep the test offline; respx still sees nothing
        with intercept_httpx2(api):
            assert code_that_builds_its_own_client() == "never"
        assert not router.calls


def test_a_respx_route_answers_the_sdk_through_the_transport() -> None:
    router = respx.MockRouter(base_url=API, assert_all_called=True)
    route = router.post("/v1/messages").respond(json=message_json("routed"))
    client = anthropic.Anthropic(
        api_key="k", http_client=httpx2.Client(transport=respx_transport(router))
    )
    assert ask(client) == "routed"
    assert route.call_count == 1
    sent = json.loads(route.calls.last.request.content)
    assert sent["messages"] == GO
    assert route.calls.last.request.headers["x-stainless-retry-count"] == "0"
    router.assert_all_called()


def test_assert_all_called_fails_for_an_uncalled_route() -> None:
    router = respx.MockRouter(base_url=API)
    router.post("/v1/messages").respond(json=message_json("x"))
    router.post("/v1/messages/count_tokens").respond(json={"input_tokens": 1})
    client = anthropic.Anthropic(
        api_key="k", http_client=httpx2.Client(transport=respx_transport(router))
    )
    ask(client)
    with pytest.raises(AssertionError):
        router.assert_all_called()


def test_side_effect_sequences_and_status_codes_drive_the_sdk_retry_loop() -> None:
    router = respx.MockRouter(base_url=API)
    route = router.post("/v1/messages").mock(
        side_effect=[
            httpx.Response(
                529,
                json={
                    "type": "error",
                    "error": {"type": "overloaded_error", "message": "Overloaded"},
                },
            ),
            httpx.ReadTimeout("slow"),
            httpx.Response(200, json=message_json("third time")),
        ]
    )
    client = anthropic.Anthropic(
        api_key="k", max_retries=2, http_client=httpx2.Client(transport=respx_transport(router))
    )
    with instant_retries():
        assert ask(client) == "third time"
    assert route.call_count == 3
    assert [c.request.headers["x-stainless-retry-count"] for c in route.calls] == ["0", "1", "2"]


def test_a_respx_timeout_side_effect_becomes_the_sdk_timeout_error() -> None:
    router = respx.MockRouter(base_url=API)
    router.post("/v1/messages").mock(side_effect=httpx.ReadTimeout("slow"))
    client = anthropic.Anthropic(
        api_key="k", max_retries=0, http_client=httpx2.Client(transport=respx_transport(router))
    )
    with pytest.raises(anthropic.APITimeoutError):
        ask(client)


def test_an_unmatched_request_fails_as_with_respx() -> None:
    router = respx.MockRouter(base_url="https://elsewhere.invalid")
    router.post("/v1/messages").respond(json=message_json("x"))
    client = anthropic.Anthropic(
        api_key="k", max_retries=0, http_client=httpx2.Client(transport=respx_transport(router))
    )
    with pytest.raises(anthropic.APIConnectionError) as info:
        ask(client)
    assert isinstance(info.value.__cause__, AllMockedAssertionError)


def test_a_pass_through_route_goes_to_the_fallback_transport() -> None:
    router = respx.MockRouter(base_url=API)
    router.post("/v1/messages").pass_through()
    api = FakeMessagesAPI(CannedModel(["from the fallback"]))
    transport = respx_transport(router, fallback=api.transport())
    assert (
        ask(anthropic.Anthropic(api_key="k", http_client=httpx2.Client(transport=transport)))
        == "from the fallback"
    )


def test_the_async_transport_bridges_too() -> None:
    router = respx.MockRouter(base_url=API)
    route = router.post("/v1/messages").respond(json=message_json("async routed"))

    async def main() -> str:
        client = anthropic.AsyncAnthropic(
            api_key="k", http_client=httpx2.AsyncClient(transport=respx_async_transport(router))
        )
        reply = await client.messages.create(model="m", max_tokens=8, messages=GO)
        block = reply.content[0]
        assert block.type == "text"
        return block.text

    assert asyncio.run(main()) == "async routed"
    assert route.called


def test_a_route_can_hand_requests_to_the_fake() -> None:
    api = FakeMessagesAPI(CannedModel(["from the fake"]))
    router = respx.MockRouter(base_url=API)
    route = router.post("/v1/messages").mock(side_effect=fake_side_effect(api))
    client = anthropic.Anthropic(
        api_key="k", http_client=httpx2.Client(transport=respx_transport(router))
    )
    assert ask(client) == "from the fake"
    assert route.call_count == 1 and len(api.exchanges) == 1


def test_the_fake_side_effect_keeps_the_fakes_400() -> None:
    api = FakeMessagesAPI(CannedModel(["x"]))
    router = respx.MockRouter(base_url=API)
    router.post("/v1/messages").mock(side_effect=fake_side_effect(api))
    client = anthropic.Anthropic(
        api_key="k", max_retries=0, http_client=httpx2.Client(transport=respx_transport(router))
    )
    with pytest.raises(anthropic.BadRequestError, match="first message must use"):
        client.messages.create(
            model="m", max_tokens=8, messages=[{"role": "assistant", "content": "x"}]
        )


# -- patching mode ----------------------------------------------------------------------


def test_respx_mock_intercepts_a_client_built_deep_inside() -> None:
    with respx_mock(base_url=API) as router:
        route = router.post("/v1/messages").respond(json=message_json("patched"))
        assert code_that_builds_its_own_client() == "patched"
    assert route.call_count == 1


def test_respx_mock_honours_anthropic_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://gateway.example.invalid/anthropic")
    with respx_mock() as router:
        route = router.post("https://gateway.example.invalid/anthropic/v1/messages").respond(
            json=message_json("via gateway")
        )
        assert code_that_builds_its_own_client() == "via gateway"
    assert route.called


def test_respx_mock_checks_assert_all_called_on_exit() -> None:
    with pytest.raises(AssertionError), respx_mock(base_url=API) as router:
        router.post("/v1/messages").respond(json=message_json("never called"))


@pytest.mark.parametrize("base_url", [None, "https://gateway.example.invalid/anthropic"])
def test_intercepting_with_the_fake_serves_any_base_url(
    monkeypatch: pytest.MonkeyPatch, base_url: str | None
) -> None:
    if base_url is None:
        monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    else:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", base_url)
    api = FakeMessagesAPI(CannedModel(["faked"]))
    with intercept_httpx2(api):
        assert code_that_builds_its_own_client() == "faked"
    expected_host = "api.anthropic.com" if base_url is None else "gateway.example.invalid"
    assert api.exchanges[0].headers["host"] == expected_host


def test_interception_ends_with_the_block() -> None:
    original = httpx2.HTTPTransport.handle_request
    with intercept_httpx2(FakeMessagesAPI(CannedModel(["x"]))):
        assert httpx2.HTTPTransport.handle_request is not original
    assert httpx2.HTTPTransport.handle_request is original


def test_intercepting_reaches_async_clients_built_inside() -> None:
    api = FakeMessagesAPI(CannedModel(["async faked"]))

    async def main() -> str:
        client = anthropic.AsyncAnthropic(api_key="k", max_retries=0)
        reply = await client.messages.create(model="m", max_tokens=1024, messages=GO)
        block = reply.content[0]
        assert block.type == "text"
        return block.text

    with intercept_httpx2(api):
        assert asyncio.run(main()) == "async faked"
