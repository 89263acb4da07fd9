"""The anthropic_* fixtures and the agentckpt_model marker, as a user's test uses them."""

from __future__ import annotations

import asyncio

import anthropic
import pytest

import pytest_agentckpt
from pytest_agentckpt.fake_api import FakeMessagesAPI
from reference_agent.offline import Exchange
from reference_agent.scripted import Plan, Step, ToolCall, message_json

GO = [{"role": "user", "content": "go"}]
PLAN = Plan(steps=(Step(calls=(ToolCall("lookup", {"q": "x"}),)),), final_answer="Found it.")

pytest_plugins = ["pytester"]


def test_the_default_client_answers_done(anthropic_client: anthropic.Anthropic) -> None:
    reply = anthropic_client.messages.create(model="m", max_tokens=8, messages=GO)
    assert reply.content[0].type == "text" and reply.content[0].text == "Done."


LOOKUP = {"name": "lookup", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}


@pytest.mark.agentckpt_model(plan=PLAN)
def test_the_marker_sets_the_plan(anthropic_client: anthropic.Anthropic) -> None:
    reply = anthropic_client.messages.create(model="m", max_tokens=1024, messages=GO, tools=[LOOKUP])  # type: ignore[list-item]
    assert [b.type for b in reply.content] == ["tool_use"]


@pytest.mark.agentckpt_model(plan=PLAN)
def test_a_planners_tools_free_call_gets_text_and_the_plan_waits_for_its_tools_call(
    anthropic_client: anthropic.Anthropic, anthropic_requests: list[Exchange]
) -> None:
    # Before: the tools-free call got the plan's lookup call (a tool it was never given),
    # where fuzz and chaos (and the API) answer it in text.
    summary = anthropic_client.messages.create(
        model="m", max_tokens=1024, messages=[{"role": "user", "content": "Summarise the task."}]
    )
    assert summary.stop_reason == "end_turn" and [b.type for b in summary.content] == ["text"]
    reply = anthropic_client.messages.create(model="m", max_tokens=1024, messages=GO, tools=[LOOKUP])  # type: ignore[list-item]
    assert reply.stop_reason == "tool_use"
    call = reply.content[0]
    assert call.type == "tool_use" and call.name == "lookup" and call.input == {"q": "x"}
    assert [e.status for e in anthropic_requests] == [200, 200]


@pytest.mark.agentckpt_model(responses=["canned"])
def test_the_marker_sets_canned_responses(anthropic_client: anthropic.Anthropic) -> None:
    reply = anthropic_client.messages.create(model="m", max_tokens=8, messages=GO)
    assert reply.content[0].type == "text" and reply.content[0].text == "canned"


@pytest.mark.agentckpt_model(plan=PLAN, faults=[("rate_limit", 1), {"kind": "disconnect"}])
def test_the_marker_queues_faults_and_retries_are_instant(
    anthropic_client: anthropic.Anthropic, anthropic_requests: list[Exchange]
) -> None:
    anthropic_client.messages.create(model="m", max_tokens=8, messages=GO)
    assert [e.fault for e in anthropic_requests] == ["rate_limit", "disconnect", None]


def test_the_request_log_is_live(
    anthropic_client: anthropic.Anthropic, anthropic_requests: list[Exchange]
) -> None:
    assert anthropic_requests == []
    anthropic_client.messages.create(model="m", max_tokens=8, messages=GO)
    assert [e.request["messages"] for e in anthropic_requests] == [GO]


def test_the_async_client_shares_the_fake(
    async_anthropic_client: anthropic.AsyncAnthropic, anthropic_fake: FakeMessagesAPI
) -> None:
    asyncio.run(async_anthropic_client.messages.create(model="m", max_tokens=8, messages=GO))
    assert anthropic_fake.model_calls == 1


def test_intercept_catches_clients_built_inside(anthropic_intercept: FakeMessagesAPI) -> None:
    reply = anthropic.Anthropic(api_key="k").messages.create(model="m", max_tokens=8, messages=GO)
    assert reply.content[0].type == "text" and reply.content[0].text == "Done."
    assert anthropic_intercept.model_calls == 1


def test_the_respx_fixture_sees_the_sdk(anthropic_respx: object) -> None:
    import respx

    assert isinstance(anthropic_respx, respx.MockRouter)
    route = anthropic_respx.post("/v1/messages").respond(json=message_json("respx fixture"))
    reply = anthropic.Anthropic(api_key="k").messages.create(model="m", max_tokens=8, messages=GO)
    assert reply.content[0].type == "text" and reply.content[0].text == "respx fixture"
    assert route.call_count == 1


def test_the_public_names_are_importable_from_the_package_root() -> None:
    assert pytest_agentckpt.validate_messages is not None
    assert issubclass(pytest_agentckpt.InvalidHistoryError, ValueError)
    assert pytest_agentckpt.FakeMessagesAPI is FakeMessagesAPI
    assert set(pytest_agentckpt.__all__) >= {
        "validate_messages",
        "InvalidHistoryError",
        "PlanModel",
    }


def test_a_bad_marker_argument_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.agentckpt_model(plan_=None)
        def test_x(anthropic_client):
            pass
        """
    )
    result = pytester.runpytest("-p", "no:randomly")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*agentckpt_model: unknown argument(s)*plan_*"])
