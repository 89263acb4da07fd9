"""Tools made with the SDK's ``beta_tool`` / ``beta_async_tool`` keep their definition and validation."""

from __future__ import annotations

import asyncio

from anthropic import beta_async_tool, beta_tool
from anthropic.lib.tools import ToolError

from reference_agent.toolbox import Toolbox, ToolResult


@beta_tool
def get_weather(city: str, unit: str = "celsius") -> str:
    """Current weather of a city.

    Args:
        city: the city's name
    """
    return f"{city}: 21 {unit}"


@beta_tool(name="put_record", description="Store a record under a key (overwrites).")
def put(key: str, value: str) -> str:
    return f"{key}={value}"


@beta_async_tool
async def fetch_page(url: str) -> str:
    """Fetch a web page."""
    await asyncio.sleep(0)
    return f"<html>{url}</html>"


@beta_tool
def charge(amount: int, idempotency_key: str | None = None) -> str:
    """Charge a card."""
    return f"charged {amount} with {idempotency_key}"


@beta_tool
def refuse(reason: str) -> str:
    """Always refuses."""
    raise ToolError([{"type": "text", "text": f"refused: {reason}"}])


def test_a_beta_tool_keeps_the_sdks_definition() -> None:
    box = Toolbox.from_functions(get_weather, put)
    assert box.definitions()[0] == get_weather.to_dict()
    assert box.definitions()[1]["name"] == "put_record"
    assert box.definitions()[1]["description"] == "Store a record under a key (overwrites)."


def test_a_beta_tool_runs_through_the_sdks_validation() -> None:
    box = Toolbox.from_functions(get_weather)
    assert box.call("get_weather", {"city": "Oslo"}) == ToolResult("Oslo: 21 celsius")
    bad = box.call("get_weather", {"city": ["not", "a", "string"]})
    assert bad.is_error and "Invalid arguments for function get_weather" in str(bad.content)


def test_a_beta_async_tool_is_async_and_awaitable() -> None:
    box = Toolbox.from_functions(fetch_page)
    assert box.spec("fetch_page").is_async
    result = asyncio.run(box.call("fetch_page", {"url": "https://x"}))  # type: ignore[arg-type]
    assert result == ToolResult("<html>https://x</html>")


def test_a_keyed_beta_tool_gets_the_key_and_the_model_does_not_see_it() -> None:
    box = Toolbox.from_functions(charge, kinds={"charge": "keyed"})
    assert "idempotency_key" not in box.spec("charge").input_schema["properties"]
    assert box.call("charge", {"amount": 5}, idempotency_key="k1").content == "charged 5 with k1"


def test_the_sdks_tool_error_content_becomes_the_error_result() -> None:
    result = Toolbox.from_functions(refuse).call("refuse", {"reason": "no"})
    assert result == ToolResult([{"type": "text", "text": "refused: no"}], is_error=True)


def test_input_examples_given_to_beta_tool_become_the_inputs_plans_draw() -> None:
    @beta_tool(input_examples=[{"city": "Lisbon"}, {"city": "Oslo"}])
    def forecast(city: str) -> str:
        """Forecast."""
        return city

    assert Toolbox.from_functions(forecast).spec("forecast").inputs == ({"city": "Lisbon"}, {"city": "Oslo"})
