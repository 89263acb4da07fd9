"""The fake checks a request's tool definitions as the API does: a custom tool needs a
name of letters, digits, '_' and '-' and an object ``input_schema``, names are unique, and
an Anthropic-defined client tool has the name its type requires.
Before, both were taken (the scripted model then called the tool or failed with a plan
mismatch, a 500)."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from reference_agent.offline import offline_client
from reference_agent.scripted import Plan

PLAN = Plan.from_dict({"steps": [{"calls": [{"name": "bash", "input": {"command": "ls"}}], "text": None}],
                       "final_answer": "ok"})


def _create(tools: list[dict[str, Any]]) -> Any:
    return offline_client(PLAN).messages.create(
        model="m", max_tokens=100, messages=[{"role": "user", "content": "go"}], tools=tools)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("tools", "message"),
    [([{"type": "bash_20250124", "name": "shell"}], "tools.0.bash_20250124.name: Input should be 'bash'"),
     ([{"type": "bash_20250124", "name": "bash"}, {"type": "text_editor_20250728", "name": "str_replace_editor"}],
      "tools.1.text_editor_20250728.name: Input should be 'str_replace_based_edit_tool'"),
     ([{"name": "bash"}], "tools.0.custom.input_schema: Field required"),
     ([{"name": "bad name!", "input_schema": {"type": "object"}}], "tools.0.custom.name: String should match pattern"),
     ([{"name": "bash", "input_schema": {"type": "string"}}], "tools.0.custom.input_schema.type: Input should be 'object'"),
     ([{"name": "bash", "input_schema": {"type": "object"}}, {"name": "bash", "input_schema": {"type": "object"}}],
      "tools: Tool names must be unique.")],
)
def test_a_wrong_tool_definition_is_the_apis_400(tools: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        _create(tools)
    assert message in str(caught.value)


@pytest.mark.parametrize("tools", [[{"type": "bash_20250124", "name": "bash"}], [{"type": "bash_20991231", "name": "bash"}],
                                   [{"name": "bash", "input_schema": {"type": "object"}}]])
def test_a_client_tool_offered_by_type_is_called(tools: list[dict[str, Any]]) -> None:
    # A type this fake does not know is let through: the API adds versions.
    reply = _create(tools)
    assert reply.stop_reason == "tool_use" and reply.content[0].name == "bash"  # type: ignore[union-attr]


@pytest.mark.parametrize(("max_tokens", "message"), [(0, "greater than or equal to 1"), (-5, "greater than or equal to 1")])
def test_max_tokens_below_one_is_the_apis_400(max_tokens: int, message: str) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        offline_client(PLAN).messages.create(
            model="m", max_tokens=max_tokens, messages=[{"role": "user", "content": "go"}],
            tools=[{"type": "bash_20250124", "name": "bash"}])
    assert f"max_tokens: Input should be {message}" in str(caught.value)


def test_tool_choice_naming_a_tool_not_offered_is_a_400_about_the_request() -> None:
    # Before: the scripted model failed (a 500 blaming the script).
    with pytest.raises(anthropic.BadRequestError) as caught:
        offline_client(PLAN).messages.create(
            model="m", max_tokens=100, messages=[{"role": "user", "content": "go"}],
            tools=[{"type": "bash_20250124", "name": "bash"}], tool_choice={"type": "tool", "name": "search"})
    assert "tool_choice" in str(caught.value) and "'search'" in str(caught.value)


@pytest.mark.parametrize(
    "choice",
    [{"type": "auto"}, {"type": "any"}, {"type": "none"}, {"type": "tool", "name": "bash"}],
)
@pytest.mark.parametrize("tools", [None, []])
def test_any_tool_choice_on_a_request_without_tools_is_a_400_as_with_the_api(
    choice: dict[str, Any], tools: list[Any] | None
) -> None:
    # Before: auto, any and none were taken and answered (any even with the plan's calls).
    client = offline_client(PLAN, max_retries=0)
    extra: dict[str, Any] = {} if tools is None else {"tools": tools}
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(
            model="m", max_tokens=100, messages=[{"role": "user", "content": "go"}],
            tool_choice=choice, **extra)  # type: ignore[arg-type]
    assert caught.value.status_code == 400
    body = caught.value.body
    assert isinstance(body, dict) and body["error"]["type"] == "invalid_request_error"
    assert "tool_choice may only be specified while providing tools" in body["error"]["message"]
    # count_tokens checks the same fields.
    with pytest.raises(anthropic.BadRequestError, match="may only be specified while providing tools"):
        client.messages.count_tokens(
            model="m", messages=[{"role": "user", "content": "go"}], tool_choice=choice, **extra)  # type: ignore[arg-type]
