"""Testing an agent with the fake Messages API: the example of docs/testing-your-agent.md.

Run it with ``pytest docs/examples/test_my_agent.py`` (the plugin is registered by
installing pytest-agentckpt). The test suite runs this file too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anthropic
import pytest

# --8<-- [start:imports]
from pytest_agentckpt import (
    Exchange,
    FakeMessagesAPI,
    Plan,
    Step,
    ToolCall,
    message_json,
    validate_messages,
)

# --8<-- [end:imports]

# -- the agent under test: a plain tool loop -------------------------------------------

MODEL = "claude-test-model"  # any name: the fake answers for every model

TOOLS = [
    {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]


def my_agent(
    goal: str,
    *,
    client: anthropic.Anthropic,
    tools: dict[str, Callable[..., str]],
    max_turns: int = 10,
) -> str:
    messages: list[dict[str, Any]] = [{"role": "user", "content": goal}]
    for _ in range(max_turns):
        reply = client.messages.create(
            model=MODEL, max_tokens=1024, tools=TOOLS, messages=messages
        )
        messages.append({"role": "assistant", "content": reply.content})
        if reply.stop_reason != "tool_use":
            return "".join(b.text for b in reply.content if b.type == "text")
        results = []
        for block in reply.content:
            if block.type == "tool_use":
                results.append(
                    {
                        "type": "tool_result",
                        "tool_use_id": block.id,
                        "content": tools[block.name](**block.input),
                    }
                )
        messages.append({"role": "user", "content": results})
    raise RuntimeError("out of turns")


def summarise_weather() -> str:
    """Code that builds its own client: no way to pass one in."""
    client = anthropic.Anthropic(api_key="unused-in-tests")
    return my_agent(
        "Weather in Paris and Oslo?", client=client, tools={"get_weather": fake_weather}
    )


def fake_weather(city: str) -> str:
    return {"Paris": "sunny", "Oslo": "snow"}[city]


# --8<-- [start:plan]
WEATHER_PLAN = Plan(
    steps=(
        Step(
            calls=(
                ToolCall("get_weather", {"city": "Paris"}),
                ToolCall("get_weather", {"city": "Oslo"}),
            ),
            text="Checking both cities.",
        ),
    ),
    final_answer="Paris is sunny; Oslo has snow.",
)
# --8<-- [end:plan]

# -- 1. the fake API behind a real SDK client -------------------------------------------


# --8<-- [start:first]
@pytest.mark.agentckpt_model(plan=WEATHER_PLAN)
def test_agent_answers_after_parallel_tool_calls(
    anthropic_client: anthropic.Anthropic, anthropic_requests: list[Exchange]
) -> None:
    answer = my_agent(
        "Weather in Paris and Oslo?", client=anthropic_client, tools={"get_weather": fake_weather}
    )
    assert answer == "Paris is sunny; Oslo has snow."
    # Two model calls: the parallel tool calls, then the answer after both results.
    assert [e.status for e in anthropic_requests] == [200, 200]
    # Every request the agent sent was a history the API accepts.
    for exchange in anthropic_requests:
        validate_messages(exchange.request["messages"])
# --8<-- [end:first]


# -- 2. faults: the SDK retries them, the agent never notices ---------------------------


# --8<-- [start:faults]
@pytest.mark.agentckpt_model(plan=WEATHER_PLAN, faults=["rate_limit", "overloaded"])
def test_agent_survives_rate_limits_and_overload(
    anthropic_client: anthropic.Anthropic, anthropic_fake: FakeMessagesAPI
) -> None:
    answer = my_agent("Weather?", client=anthropic_client, tools={"get_weather": fake_weather})
    assert answer == "Paris is sunny; Oslo has snow."
    assert [e.status for e in anthropic_fake.exchanges][:3] == [429, 529, 200]
    assert anthropic_fake.exchanges[2].headers["x-stainless-retry-count"] == "2"
# --8<-- [end:faults]


def test_a_broken_history_gets_the_apis_400(anthropic_client: anthropic.Anthropic) -> None:
    unanswered = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}],
        },
        {"role": "user", "content": "why no answer?"},
    ]
    with pytest.raises(anthropic.BadRequestError, match="without `tool_result` blocks"):
        anthropic_client.messages.create(model="m", max_tokens=64, messages=unanswered)


# -- 3. code that builds its own client ---------------------------------------------------


# --8<-- [start:intercept]
@pytest.mark.agentckpt_model(plan=WEATHER_PLAN)
def test_code_with_its_own_client_is_intercepted(anthropic_intercept: FakeMessagesAPI) -> None:
    assert summarise_weather() == "Paris is sunny; Oslo has snow."
    assert anthropic_intercept.model_calls == 2
# --8<-- [end:intercept]


# -- 4. respx routes, working with the SDK ------------------------------------------------


# --8<-- [start:respx]
def test_respx_routes_drive_the_agent(anthropic_respx: Any) -> None:
    route = anthropic_respx.post("/v1/messages").respond(
        json=message_json("No tools needed: it is sunny.")
    )
    assert summarise_weather() == "No tools needed: it is sunny."
    assert route.call_count == 1
# --8<-- [end:respx]
