"""The fake checks a request's tool definitions as the API does: a custom tool needs an
``input_schema``, and an Anthropic-defined client tool has the name its type requires.
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
     ([{"name": "bash"}], "tools.0.custom.input_schema: Field required")],
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
