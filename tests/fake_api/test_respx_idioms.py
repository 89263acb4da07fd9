"""respx's documented idioms reach the SDK while ``anthropic_respx`` is active."""

from __future__ import annotations

import anthropic
import httpx2
import pytest
import respx

from pytest_agentckpt.fake_api import (
    FakeMessagesAPI,
    fake_side_effect,
    respx_mock,
    respx_transport,
)
from reference_agent.scripted import CannedModel, message_json
from tests.fake_api._cut import raises_cut_stream

GO = [{"role": "user", "content": "go"}]
API = "https://api.anthropic.com"


def ask(client: anthropic.Anthropic) -> str:
    reply = client.messages.create(model="m", max_tokens=8, messages=GO)
    block = reply.content[0]
    assert block.type == "text"
    return block.text


def read_stream(client: anthropic.Anthropic, seen: list[str]) -> None:
    with client.messages.stream(model="m", max_tokens=64, messages=GO) as stream:
        seen.extend(event.type for event in stream)


def own_client() -> anthropic.Anthropic:
    # Built by the code under test: only interception can reach it.
    return anthropic.Anthropic(api_key="k", max_retries=0)


def test_a_module_level_respx_route_answers_the_sdk(anthropic_respx: respx.MockRouter) -> None:
    route = respx.post(f"{API}/v1/messages").respond(json=message_json("module level"))
    assert ask(own_client()) == "module level"
    assert route.call_count == 1
    assert not anthropic_respx.calls  # the fixture's router had no route for it


def test_module_level_routes_added_inside_the_bridge_are_dropped_after_it() -> None:
    before = len(respx.mock.routes)
    with respx_mock(base_url=API, assert_all_called=False):
        respx.post(f"{API}/v1/messages").respond(json=message_json("x"))
        assert len(respx.mock.routes) == before + 1
    assert len(respx.mock.routes) == before


@pytest.mark.respx(base_url="https://proxy.example.test/anthropic", assert_all_called=False)
def test_the_respx_marker_configures_anthropic_respx(anthropic_respx: respx.MockRouter) -> None:
    anthropic_respx.post("/v1/messages").respond(json=message_json("through the proxy"))
    anthropic_respx.post("/v1/never").respond(json={})  # uncalled: allowed by the marker
    client = anthropic.Anthropic(
        api_key="k", base_url="https://proxy.example.test/anthropic", max_retries=0
    )
    assert ask(client) == "through the proxy"


def test_the_respx_mock_fixture_routes_answer_the_sdk(
    anthropic_respx: respx.MockRouter, respx_mock: respx.MockRouter
) -> None:
    route = respx_mock.post(f"{API}/v1/messages").respond(json=message_json("respx_mock"))
    assert ask(own_client()) == "respx_mock"
    assert route.called


@respx.mock(assert_all_called=True)
def test_a_respx_mock_decorator_router_answers_the_sdk(anthropic_respx: respx.MockRouter) -> None:
    route = respx.post(f"{API}/v1/messages").respond(json=message_json("decorated"))
    assert ask(own_client()) == "decorated"
    assert route.call_count == 1


def test_a_request_no_router_mocks_fails_with_respx_own_error(
    anthropic_respx: respx.MockRouter,
) -> None:
    from respx.models import AllMockedAssertionError

    # The SDK wraps what its transport raises; respx's error is the cause, as with httpx.
    with pytest.raises(anthropic.APIConnectionError) as info:
        ask(own_client())
    assert isinstance(info.value.__cause__, AllMockedAssertionError)
    assert "not mocked" in str(info.value.__cause__)


def test_a_stream_through_a_respx_route_is_not_buffered() -> None:
    api = FakeMessagesAPI(CannedModel(["one two three four five six seven eight nine ten"]))
    router = respx.MockRouter(base_url=API)
    router.post("/v1/messages").mock(side_effect=fake_side_effect(api))
    client = anthropic.Anthropic(
        api_key="k", max_retries=0, http_client=httpx2.Client(transport=respx_transport(router))
    )
    with client.messages.stream(model="m", max_tokens=64, messages=GO) as stream:
        assert stream.response.is_closed is False
        text = "".join(stream.text_stream)
    assert stream.response.is_closed is True
    assert text.startswith("one two")


def test_a_stream_cut_mid_way_through_a_respx_route_raises_the_httpx2_protocol_error() -> None:
    api = FakeMessagesAPI(CannedModel(["a reply long enough to need several text deltas"]))
    api.fail_next("stream_disconnect", after_events=4)
    router = respx.MockRouter(base_url=API)
    router.post("/v1/messages").mock(side_effect=fake_side_effect(api))
    client = anthropic.Anthropic(
        api_key="k", max_retries=0, http_client=httpx2.Client(transport=respx_transport(router))
    )
    seen: list[str] = []
    # As over the network: the transport's protocol error (wrapped by anthropic >= 2.17).
    with raises_cut_stream(match=""):
        read_stream(client, seen)
    assert seen[:1] == ["message_start"] and "message_stop" not in seen


def test_a_respx_route_answers_a_streaming_agent_with_sse_body(anthropic_respx: respx.MockRouter) -> None:
    # An agent that streams needs an event stream: sse_body(message_json(...)) makes the
    # API's, which the SDK reads as it reads the API's (a JSON body would not do).
    from pytest_agentckpt.fake_api import sse_body

    call = {"type": "tool_use", "id": "toolu_01", "name": "search", "input": {"query": "keys"}}
    anthropic_respx.post("/v1/messages").respond(
        content=sse_body(message_json([call], stop_reason="tool_use")),
        headers={"content-type": "text/event-stream"},
    )
    with own_client().messages.stream(model="m", max_tokens=64, messages=GO) as stream:
        reply = stream.get_final_message()
    assert reply.stop_reason == "tool_use"
    assert [(b.type, getattr(b, "input", None)) for b in reply.content] == [("tool_use", {"query": "keys"})]
