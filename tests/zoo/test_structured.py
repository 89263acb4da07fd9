"""Agents whose final answer is structured output (``tests/zoo/structured_agents.py``):
the scripted model answers a request with ``output_config.format`` as the API does (JSON
of the schema in every text block), so the sound designs pass and their twin is caught.

Before, it answered ``final_answer`` as plain text and wrote a plan step's free text
before its calls: ``messages.parse`` raised a ``ValidationError`` in every crash-free run,
and ``fuzz`` blamed every structured-output agent (``crash_free_run``)."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt import Plan, Step, ToolCall
from pytest_agentckpt.harness import fuzz
from reference_agent.scripted import PlanModel, output_schema, structured_text
from tests.harness.toolkit import toolbox

from .structured_agents import SCHEMA, SOUND, TWINS, Resolution
from .test_false_alarms import sound_passes, twin_caught

#: Fewer examples than the rest of the zoo (200), to keep this file fast: the sound
#: designs were also fuzzed with seeds 1-3 at 200 examples and passed.
EXAMPLES = 60


def _fuzz(run: Any, seed: int) -> Any:
    return fuzz(run, toolbox(), seed=seed, database=InMemoryExampleDatabase(), unsafe_tools="ignore",
                max_examples=EXAMPLES)


@pytest.mark.parametrize("design", sorted(SOUND))
def test_a_sound_structured_output_agent_passes(design: str) -> None:
    sound_passes(lambda: _fuzz(SOUND[design], 1))


def test_its_twin_without_intents_is_caught() -> None:
    twin_caught(lambda: _fuzz(TWINS["parse_no_intent"], 20261201), "no_duplicate_effect", needs_fault=True)


def test_a_parse_request_gets_json_the_pydantic_model_accepts(anthropic_client: anthropic.Anthropic,
                                                                anthropic_fake: Any) -> None:
    # A step with free text before its call: under a schema no free text is written, as
    # the SDK would fail to parse it; the final answer is JSON within the model's bounds.
    plan = Plan((Step((ToolCall("search", {"query": "kettles"}),), text="Let me look."),), "All resolved.")
    anthropic_fake.model = PlanModel(plan)
    tools = toolbox().definitions()
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Resolve it."}]
    first = anthropic_client.messages.parse(model="m", max_tokens=256, messages=messages, tools=tools,
                                            output_format=Resolution)
    assert [b.type for b in first.content] == ["tool_use"]
    use = first.content[0]
    messages += [{"role": "assistant", "content": [use.model_dump(exclude_none=True)]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "2 found"}]}]
    final = anthropic_client.messages.parse(model="m", max_tokens=256, messages=messages, tools=tools,
                                            output_format=Resolution)
    parsed = final.parsed_output
    assert parsed is not None and parsed.summary.startswith("All resolved.") and len(parsed.items) == 2
    assert final.stop_reason == "end_turn"
    # Without a schema, the same plan answers in text, with its step's text, as before.
    anthropic_fake.model = PlanModel(plan)
    plain = anthropic_client.messages.create(model="m", max_tokens=256, messages=messages[:1], tools=tools)
    assert [b.type for b in plain.content] == ["text", "tool_use"]


def test_structured_text_fits_the_schema_and_keeps_a_plans_json_answer() -> None:
    request = {"output_config": {"format": {"type": "json_schema", "schema": SCHEMA}}}
    schema = output_schema(request)
    assert schema == SCHEMA and output_schema({"output_config": {"effort": "high"}}) is None
    assert json.loads(structured_text(schema, "done")) == {"answer": "done", "steps": 0}
    # A plan whose final answer is JSON already is taken as the structured answer it wants.
    assert structured_text(schema, '{"answer": "x", "steps": 3}') == '{"answer": "x", "steps": 3}'
    assert structured_text(None, "done") == "done"
