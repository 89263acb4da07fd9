"""The exported strategies draw what they promise, and repair holds on every truncation."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_agentckpt.faults import FAULT_POINTS, CrashAt, FaultPlan
from pytest_agentckpt.strategies import (
    _hypothesis_setup_hook,
    fault_plans,
    from_schema,
    message_histories,
    plans,
    tool_schemas,
    toolboxes,
    truncations,
)
from reference_agent.repair import repair_history
from reference_agent.scripted import Plan
from reference_agent.validation import validate_messages

from .toolkit import toolbox


@given(message_histories())
def test_message_histories_are_valid_requests(messages: list[dict[str, Any]]) -> None:
    validate_messages(messages)


@given(message_histories(thinking=True))
def test_histories_with_thinking_are_valid_with_thinking_enabled(messages: list[dict[str, Any]]) -> None:
    validate_messages(messages, thinking=True)


@given(st.data())
def test_message_histories_include_parallel_tool_calls(data: st.DataObject) -> None:
    messages = data.draw(message_histories(min_turns=2, max_turns=2, max_parallel=3))
    uses = [b for b in messages[1]["content"] if b["type"] == "tool_use"]
    assert len(uses) <= 3


def test_parallel_calls_are_drawn_at_all() -> None:
    from hypothesis import find

    found = find(
        message_histories(min_turns=2),
        lambda m: any(sum(b["type"] == "tool_use" for b in x["content"]) >= 2 for x in m if x["role"] == "assistant"),
    )
    assert found


def _valid_state(messages: list[dict[str, Any]], *, thinking: bool = False) -> None:
    # A history cut right after a final text reply is a finished run, not a request: the
    # API's rules hold for it as for a prefill.
    validate_messages(messages, thinking=thinking, allow_prefill=messages[-1]["role"] == "assistant")


@settings(max_examples=150)
@given(message_histories(max_turns=5))
def test_every_truncation_of_a_valid_history_repairs_to_a_valid_history_idempotently(
    messages: list[dict[str, Any]],
) -> None:
    for damaged in truncations(messages):
        repaired = repair_history(damaged, [])
        _valid_state(repaired)
        assert repair_history(repaired, []) == repaired


@settings(max_examples=60)
@given(message_histories(max_turns=4, thinking=True))
def test_repair_keeps_histories_with_thinking_valid(messages: list[dict[str, Any]]) -> None:
    for damaged in truncations(messages):
        repaired = repair_history(damaged, [])
        _valid_state(repaired, thinking=True)


def test_truncations_include_partial_parallel_results() -> None:
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "a", "name": "x", "input": {}},
            {"type": "tool_use", "id": "b", "name": "x", "input": {}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": "1"},
            {"type": "tool_result", "tool_use_id": "b", "content": "2"},
        ]},
    ]
    cuts = truncations(history)
    assert [len(c) for c in cuts] == [1, 2, 3, 3]
    assert cuts[3][-1]["content"] == [history[2]["content"][0]]


@given(st.data())
def test_from_schema_draws_values_the_schema_accepts(data: st.DataObject) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = data.draw(tool_schemas())
    value = data.draw(from_schema(schema))
    jsonschema.validate(value, schema)


def test_from_schema_follows_refs_and_any_of() -> None:
    from hypothesis import find

    schema = {
        "type": "object",
        "properties": {"item": {"$ref": "#/$defs/Item"}, "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
        "required": ["item", "note"],
        "$defs": {"Item": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 5}}, "required": ["n"]}},
    }
    value = find(from_schema(schema), lambda v: v["note"] is None)
    assert value == {"item": {"n": 5}, "note": None}


@given(plans(toolbox(), max_steps=3, max_parallel=2))
def test_plans_call_only_the_toolboxs_tools_with_valid_inputs(plan: Plan) -> None:
    box = toolbox()
    assert len(plan.steps) <= 3
    for step in plan.steps:
        assert 1 <= len(step.calls) <= 2
        for call in step.calls:
            # The tools validate their input: an invalid one answers an error.
            assert not box.call(call.name, call.input, idempotency_key="k").is_error


@given(toolboxes())
def test_toolboxes_give_plans_too(box: Any) -> None:
    assert box.definitions()


@given(fault_plans(max_crashes=2, kinds=["after_tool_effect", "before_model_call"]))
def test_fault_plans_use_only_the_chosen_kinds_and_always_hold_a_fault(plan: FaultPlan) -> None:
    assert plan.size >= 1
    assert len(plan.crashes) <= 2
    assert {c.point for c in plan.crashes} <= {"after_tool_effect", "before_model_call"}
    assert plan.api_faults == () and plan.store_faults == ()


def _stream_share(streamed: bool) -> float:
    from hypothesis import HealthCheck
    from hypothesis import seed as hypothesis_seed
    from hypothesis.database import InMemoryExampleDatabase

    from pytest_agentckpt.faults import STREAM_FAULT_KINDS

    kinds: list[str] = []

    @hypothesis_seed(7)
    @settings(max_examples=400, database=InMemoryExampleDatabase(), suppress_health_check=list(HealthCheck))
    @given(fault_plans(streamed=streamed))
    def draw(plan: FaultPlan) -> None:
        kinds.extend(f.kind for f in plan.api_faults)

    draw()
    assert len(kinds) >= 50
    return sum(k in STREAM_FAULT_KINDS for k in kinds) / len(kinds)


def test_for_an_agent_that_streams_half_of_the_api_faults_cut_a_stream_short() -> None:
    # Two kinds in eight otherwise: too few for a streaming agent's handling of a cut reply.
    assert _stream_share(streamed=True) > 0.4
    assert _stream_share(streamed=False) < 0.35


def test_fault_plans_reject_unknown_kinds() -> None:
    with pytest.raises(ValueError, match="kinds: unknown"):
        fault_plans(kinds=["meteor_strike"])


def test_fault_plans_round_trip_through_json() -> None:
    from hypothesis import find

    plan = find(fault_plans(), lambda p: p.size >= 2)
    assert FaultPlan.from_dict(plan.to_dict()) == plan


def test_the_setup_hook_registers_fault_plans_for_from_type() -> None:
    from hypothesis import find

    _hypothesis_setup_hook()
    assert isinstance(find(st.from_type(FaultPlan), lambda p: True), FaultPlan)
    assert find(st.from_type(CrashAt), lambda c: True).point in FAULT_POINTS
    assert isinstance(find(st.from_type(Plan), lambda p: True), Plan)


def test_importing_the_strategies_before_hypothesis_works() -> None:
    import subprocess
    import sys

    # Hypothesis loads its entry points (this module's hook) while it is being imported.
    code = (
        "import pytest_agentckpt.strategies\n"
        "from hypothesis import find, strategies as st\n"
        "from pytest_agentckpt.faults import FaultPlan\n"
        "assert isinstance(find(st.from_type(FaultPlan), lambda p: True), FaultPlan)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
