"""Scripted models: the plan-following model and the canned model."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference_agent.scripted import (
    CannedModel,
    Plan,
    PlanMismatchError,
    PlanModel,
    ScriptedModel,
    ScriptExhaustedError,
    Step,
    ToolCall,
)
from reference_agent.validation import validate_messages

PLAN = Plan(
    steps=(
        Step(
            calls=(ToolCall("read", {"path": "a"}), ToolCall("read", {"path": "b"})),
            text="Reading.",
        ),
        Step(calls=(ToolCall("send", {"to": "x"}),)),
    ),
    final_answer="Sent.",
)


def ask(model: ScriptedModel, messages: list[dict[str, Any]]) -> dict[str, Any]:
    return model.respond({"model": "claude-test", "max_tokens": 64, "messages": messages})


def answer(reply: dict[str, Any], errors: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """The assistant turn and the user turn answering its calls (errors for names in errors)."""
    results = [
        {
            "type": "tool_result",
            "tool_use_id": b["id"],
            "content": "failed" if b["name"] in errors else "ok",
            **({"is_error": True} if b["name"] in errors else {}),
        }
        for b in reply["content"]
        if b["type"] == "tool_use"
    ]
    return [
        {"role": "assistant", "content": reply["content"]},
        {"role": "user", "content": results},
    ]


def run(
    model: ScriptedModel, *, fail_first: frozenset[str] = frozenset(), limit: int = 20
) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for turn in range(limit):
        reply = ask(model, messages)
        if reply["stop_reason"] == "end_turn":
            messages.append({"role": "assistant", "content": reply["content"]})
            return messages
        messages.extend(answer(reply, fail_first if turn == 0 else frozenset()))
    raise AssertionError("plan did not finish")


def test_the_first_reply_asks_for_every_call_of_the_first_step_in_parallel() -> None:
    reply = ask(PlanModel(PLAN), [{"role": "user", "content": "go"}])
    assert reply["stop_reason"] == "tool_use"
    assert reply["content"][0] == {"type": "text", "text": "Reading."}
    assert [(b["name"], b["input"], b["id"]) for b in reply["content"][1:]] == [
        ("read", {"path": "a"}, "toolu_s0c0a0"),
        ("read", {"path": "b"}, "toolu_s0c1a0"),
    ]


def test_the_reply_has_the_api_message_shape() -> None:
    reply = ask(PlanModel(PLAN), [{"role": "user", "content": "go"}])
    assert set(reply) == {
        "id",
        "type",
        "role",
        "content",
        "model",
        "stop_reason",
        "stop_sequence",
        "usage",
    }
    assert (reply["type"], reply["role"], reply["model"]) == ("message", "assistant", "claude-test")
    assert reply["usage"]["output_tokens"] > 0


def test_a_full_run_follows_the_plan_and_ends_with_the_final_answer() -> None:
    messages = run(PlanModel(PLAN))
    validate_messages(messages, allow_prefill=True)
    calls = [
        (b["name"], b["input"])
        for m in messages
        if m["role"] == "assistant"
        for b in m["content"]
        if b["type"] == "tool_use"
    ]
    assert calls == [("read", {"path": "a"}), ("read", {"path": "b"}), ("send", {"to": "x"})]
    assert messages[-1]["content"] == [{"type": "text", "text": "Sent."}]


def test_an_error_result_makes_the_model_retry_only_that_call_with_a_fresh_id() -> None:
    model = PlanModel(PLAN)
    first = ask(model, [{"role": "user", "content": "go"}])
    history = [{"role": "user", "content": "go"}, *answer(first)]
    # Answer read(b) with an error instead.
    history[-1]["content"][1] = {**history[-1]["content"][1], "is_error": True}
    retry = ask(model, history)
    uses = [b for b in retry["content"] if b["type"] == "tool_use"]
    assert [(b["name"], b["input"], b["id"]) for b in uses] == [
        ("read", {"path": "b"}, "toolu_s0c1a1")
    ]


def test_retries_keep_ids_unique_in_the_conversation() -> None:
    messages = run(PlanModel(PLAN), fail_first=frozenset({"read"}))
    ids = [
        b["id"]
        for m in messages
        if m["role"] == "assistant"
        for b in m["content"]
        if b["type"] == "tool_use"
    ]
    assert len(ids) == len(set(ids)) == 5
    validate_messages(messages, allow_prefill=True)


def test_the_reply_is_a_function_of_the_history() -> None:
    history = [{"role": "user", "content": "go"}]
    assert ask(PlanModel(PLAN), history) == ask(PlanModel(PLAN), history)
    assert run(PlanModel(PLAN)) == run(PlanModel(PLAN))


def test_a_lost_reply_is_asked_again_with_the_same_calls_under_fresh_ids() -> None:
    # A crash after the model call but before the agent saved its reply: the agent sends
    # the same history again, and the model asks for the same calls, under ids of their
    # own, as the API gives every reply (a key made from the first reply's ids is lost).
    model = PlanModel(PLAN)
    history = [{"role": "user", "content": "go"}]
    first, second, third = ask(model, history), ask(model, history), ask(model, history)

    def calls(reply: dict[str, Any]) -> list[tuple[str, Any]]:
        return [(b["name"], b["input"]) for b in reply["content"] if b["type"] == "tool_use"]

    def ids(reply: dict[str, Any]) -> list[str]:
        return [b["id"] for b in reply["content"] if b["type"] == "tool_use"]

    assert calls(first) == calls(second) == calls(third) and calls(first)
    assert ids(second) == [f"{i}_g1" for i in ids(first)]
    assert ids(third) == [f"{i}_g2" for i in ids(first)]
    assert len({first["id"], second["id"], third["id"]}) == 3
    # The plan goes on from a reply under fresh ids as from the first one.
    answered = [
        *history,
        {"role": "assistant", "content": second["content"]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in ids(second)
        ]},
    ]
    following = ask(PlanModel(PLAN), answered)
    assert calls(following) == calls(ask(PlanModel(PLAN), [
        *history,
        {"role": "assistant", "content": first["content"]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in ids(first)]},
    ]))
    assert calls(following) != calls(first)


def test_identical_calls_in_a_plan_each_need_their_own_success() -> None:
    plan = Plan(
        steps=(Step(calls=(ToolCall("ping"),)), Step(calls=(ToolCall("ping"),))),
        final_answer="pong",
    )
    messages = run(PlanModel(plan))
    uses = [
        b
        for m in messages
        if m["role"] == "assistant"
        for b in m["content"]
        if b["type"] == "tool_use"
    ]
    assert [b["id"] for b in uses] == ["toolu_s0c0a0", "toolu_s1c0a0"]


def test_an_empty_plan_answers_at_once() -> None:
    reply = ask(
        PlanModel(Plan(steps=(), final_answer="Nothing.")), [{"role": "user", "content": "go"}]
    )
    assert (reply["stop_reason"], reply["content"]) == (
        "end_turn",
        [{"type": "text", "text": "Nothing."}],
    )


def test_a_plan_round_trips_through_json() -> None:
    assert Plan.from_dict(json.loads(json.dumps(PLAN.to_dict()))) == PLAN


def test_plan_arguments_are_validated_eagerly() -> None:
    with pytest.raises(ValueError, match=r"Step\.calls"):
        Step(calls=())
    with pytest.raises(ValueError, match="final_answer"):
        Plan(steps=(), final_answer=" ")


tool_calls = st.builds(
    ToolCall,
    name=st.sampled_from(["read", "write", "send"]),
    input=st.dictionaries(st.sampled_from("abc"), st.integers(0, 3), max_size=2),
)
plans = st.builds(
    Plan,
    steps=st.lists(
        st.builds(Step, calls=st.lists(tool_calls, min_size=1, max_size=3).map(tuple)), max_size=4
    ).map(tuple),
    final_answer=st.just("done"),
)


@given(plan=plans, failing=st.frozensets(st.sampled_from(["read", "write", "send"])))
def test_any_plan_runs_to_a_valid_history_with_every_call_made(
    plan: Plan, failing: frozenset[str]
) -> None:
    messages = run(PlanModel(plan), fail_first=failing, limit=2 * len(plan.steps) + 2)
    validate_messages(messages, allow_prefill=True)
    succeeded = sorted(
        (b["name"], json.dumps(b["input"], sort_keys=True))
        for m in messages
        if m["role"] == "assistant"
        for b in m["content"]
        if b["type"] == "tool_use"
    )
    planned = sorted(
        (c.name, json.dumps(dict(c.input), sort_keys=True)) for s in plan.steps for c in s.calls
    )
    # Every planned call is made, and a call is repeated only after an error result.
    assert set(succeeded) == set(planned)
    assert Plan.from_dict(plan.to_dict()) == plan


def test_the_canned_model_replays_its_responses_in_order() -> None:
    model = CannedModel(
        [
            "one",
            [{"type": "text", "text": "two"}],
            {"content": [{"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}}]},
        ]
    )
    replies = [ask(model, []) for _ in range(3)]
    assert [r["stop_reason"] for r in replies] == ["end_turn", "end_turn", "tool_use"]
    assert replies[1]["content"] == [{"type": "text", "text": "two"}]


@pytest.mark.parametrize(
    ("blocks", "words"),
    [([{"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}}] * 2, "two tool_use blocks with the id 'toolu_1'"),
     ([{"type": "tool_use", "id": "toolu 1!", "name": "t", "input": {}}], "which the API never sends")],
)
def test_the_canned_model_refuses_a_reply_the_api_never_sends(blocks: list[dict[str, Any]], words: str) -> None:
    # Served, it failed the agent's next request (ids must be unique, or match a pattern),
    # which read as the agent's bug.
    with pytest.raises(PlanMismatchError, match="canned response 1") as caught:
        ask(CannedModel([{"content": blocks}]), [])
    assert words in str(caught.value)


def test_the_canned_model_says_when_it_runs_out() -> None:
    model = CannedModel(["only"])
    ask(model, [])
    with pytest.raises(ScriptExhaustedError, match="holds 1 responses"):
        ask(model, [])


def test_both_models_satisfy_the_protocol() -> None:
    assert isinstance(PlanModel(PLAN), ScriptedModel)
    assert isinstance(CannedModel([]), ScriptedModel)


# -- progress across a compacted history ---------------------------------------------------


def _class_counting_reply(plan: Plan, messages: list[dict[str, Any]]) -> tuple[str, Any]:
    """What the model asks for, by the plain rule: successes counted per class of identical
    calls over the whole history, consumed in plan order (``("final", None)`` when done)."""

    def key(name: str, tool_input: Any) -> str:
        return json.dumps([name, tool_input], sort_keys=True)

    uses = {
        b["id"]: key(b["name"], b["input"])
        for m in messages
        if m["role"] == "assistant" and isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_use"
    }
    wins: dict[str, int] = {}
    for m in messages:
        if m["role"] == "user" and isinstance(m["content"], list):
            for b in m["content"]:
                if b["type"] == "tool_result" and not b.get("is_error"):
                    k = uses[b["tool_use_id"]]
                    wins[k] = wins.get(k, 0) + 1
    for s, step in enumerate(plan.steps):
        missing = []
        for c, call in enumerate(step.calls):
            k = key(call.name, dict(call.input))
            if wins.get(k, 0) > 0:
                wins[k] -= 1
            else:
                missing.append(c)
        if missing:
            return "step", (s, missing)
    return "final", None


def _asked(reply: dict[str, Any]) -> tuple[str, Any]:
    uses = [b["id"] for b in reply["content"] if b["type"] == "tool_use"]
    if not uses:
        return "final", None
    parsed = [
        tuple(int(x) for x in u[len("toolu_s") :].replace("c", " ").replace("a", " ").split())
        for u in uses
    ]
    return "step", (parsed[0][0], [c for _, c, _ in parsed])


def _compacted(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history as an agent that compacts keeps it: the first message with a summary,
    then only the last exchange (the last assistant turn and the results answering it)."""
    last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    summary = {"role": "user", "content": f"go (earlier turns compacted: {last - 1} messages)"}
    return [summary, *messages[last:]]


@given(
    plan=plans,
    errors=st.lists(st.booleans(), min_size=1, max_size=40),
)
def test_a_history_compacted_to_its_last_exchange_gets_the_reply_the_whole_one_gets(
    plan: Plan, errors: list[bool]
) -> None:
    # Along a run with results that fail at random, at every request: the reply to the
    # whole history is the one the plain class-counting rule gives, and the reply to the
    # history compacted down to its last exchange asks for the very same calls.
    model, fresh = PlanModel(plan), PlanModel(plan)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    draws = iter(errors)  # then no more errors
    for _ in range(len(errors) + len(plan.steps) + 2):
        reply = ask(model, messages)
        assert _asked(reply) == _class_counting_reply(plan, messages)
        if len(messages) > 1:
            assert _asked(ask(fresh, _compacted(messages))) == _asked(reply)
        if reply["stop_reason"] == "end_turn":
            return
        failing = frozenset(
            b["name"] for b in reply["content"] if b["type"] == "tool_use" and next(draws, False)
        )
        messages.extend(answer(reply, failing))
    raise AssertionError("plan did not finish")


def test_a_compacted_history_goes_on_with_the_next_step_not_the_first() -> None:
    model = PlanModel(PLAN)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    messages.extend(answer(ask(model, messages)))  # step 1: read a, read b
    compacted = [{"role": "user", "content": "go (read a and b already)"}, *messages[1:]]
    reply = ask(PlanModel(PLAN), compacted)
    assert [b["name"] for b in reply["content"] if b["type"] == "tool_use"] == ["send"]
    # Compacted in the middle of a step: "read b" failed and was asked again alone; the
    # first turn (with "read a"'s success) is gone, and "read a" is not asked again.
    model = PlanModel(PLAN)
    messages = [{"role": "user", "content": "go"}]
    messages.extend(answer(ask(model, messages)))
    messages[-1]["content"][1].update(is_error=True, content="failed")
    messages.extend(answer(ask(model, messages)))
    retry = messages[-2]["content"]
    assert [b["input"] for b in retry if b["type"] == "tool_use"] == [{"path": "b"}]
    reply = ask(PlanModel(PLAN), [{"role": "user", "content": "go (summary)"}, *messages[-2:]])
    assert [b["name"] for b in reply["content"] if b["type"] == "tool_use"] == ["send"]


def test_a_history_without_any_turn_of_the_model_starts_the_plan_over() -> None:
    # Nothing shows where the plan is: the whole plan is asked for, as a model reading
    # only a bare goal would.
    reply = ask(PlanModel(PLAN), [{"role": "user", "content": "go (everything compacted)"}])
    assert [b["input"] for b in reply["content"] if b["type"] == "tool_use"] == [
        {"path": "a"},
        {"path": "b"},
    ]


def test_with_tool_choice_none_the_plan_waits_and_the_reply_is_text() -> None:
    # An agent that asks for a summary with tools off gets text, as from Claude; the next
    # request that allows tools gets the step's calls.
    from reference_agent.offline import FakeMessagesAPI
    from reference_agent.scripted import Plan, Step, ToolCall

    api = FakeMessagesAPI(Plan((Step((ToolCall("search", {"query": "crash"}),)),), "done"))
    client = api.client()
    tools = [{"name": "search", "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}}}]
    messages = [{"role": "user", "content": "go"}]
    off = client.messages.create(
        model="m", max_tokens=64, messages=messages, tools=tools, tool_choice={"type": "none"}
    )
    assert [b.type for b in off.content] == ["text"] and off.stop_reason == "end_turn"
    assert "search" in off.content[0].text
    on = client.messages.create(model="m", max_tokens=64, messages=messages, tools=tools)
    assert [b.type for b in on.content] == ["tool_use"] and on.content[0].name == "search"
