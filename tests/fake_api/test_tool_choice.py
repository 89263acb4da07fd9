"""A PlanModel answers forced ``tool_choice`` and ``disable_parallel_tool_use`` as the API
would; the opt-in ``max_tokens`` fault cuts a reply as the API does at the token limit."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest
from hypothesis import given, settings

from pytest_agentckpt.faults import (
    DEFAULT_FAULT_KINDS,
    FAULT_KINDS,
    OPT_IN_FAULT_KINDS,
    parse_fault_kinds,
)
from pytest_agentckpt.strategies import fault_plans
from reference_agent.offline import FakeMessagesAPI
from reference_agent.scripted import (
    Plan,
    PlanMismatchError,
    PlanModel,
    Step,
    ToolCall,
    max_tokens_reply,
)

PLAN = Plan(
    steps=(
        Step((ToolCall("search", {"q": "a"}), ToolCall("fetch", {"url": "u"}), ToolCall("search", {"q": "b"})), text="Both."),
        Step((ToolCall("send", {"to": "ann", "body": "hi"}),)),
    ),
    final_answer="All sent.",
)
TOOLS = [
    {"name": name, "input_schema": {"type": "object", "properties": {"x": {"type": "string"}}}}
    for name in ("search", "fetch", "send")
] + [
    {
        "name": "pay",
        "input_schema": {
            "type": "object",
            "properties": {"to": {"type": "string"}, "amount": {"type": "integer"}},
            "required": ["to", "amount"],
        },
    },
    {
        "name": "submit",
        "input_schema": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]},
    }
]


def ask(model: PlanModel, messages: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return model.respond({"model": "m", "max_tokens": 64, "messages": messages, "tools": TOOLS, **fields})


def uses(reply: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in reply["content"] if b["type"] == "tool_use"]


def answer(reply: dict[str, Any]) -> list[dict[str, Any]]:
    """The reply and a user turn that answers each of its calls with success."""
    results = [{"type": "tool_result", "tool_use_id": b["id"], "content": "ok"} for b in uses(reply)]
    return [{"role": "assistant", "content": reply["content"]}, {"role": "user", "content": results}]


def drive(model: PlanModel, choose: Any, limit: int = 12) -> tuple[list[list[str]], str]:
    """Run the plan, ``choose(n)`` giving the n-th request's extra fields; the calls of
    each reply, and the final text."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    calls: list[list[str]] = []
    for n in range(limit):
        reply = ask(model, messages, **choose(n))
        if not uses(reply) or uses(reply)[0]["name"] == "submit":
            return calls, str(reply["content"][-1].get("text") or uses(reply)[0]["input"])
        calls.append([f"{b['name']}:{sorted(b['input'].values())[0]}" for b in uses(reply)])
        messages.extend(answer(reply))
    raise AssertionError(f"the plan did not finish in {limit} requests: {calls}")


def test_a_forced_tool_gets_only_the_steps_calls_to_it_and_the_rest_stay_pending() -> None:
    forced = {"tool_choice": {"type": "tool", "name": "search"}}
    calls, final = drive(PlanModel(PLAN), lambda n: forced if n == 0 else {})
    assert calls == [["search:a", "search:b"], ["fetch:u"], ["send:ann"]]
    assert final == "All sent."


def test_a_forced_reply_has_no_text_before_its_calls() -> None:
    # The API starts a forced reply with the tool call; auto keeps the step's text.
    auto = ask(PlanModel(PLAN), [{"role": "user", "content": "go"}])
    forced = ask(PlanModel(PLAN), [{"role": "user", "content": "go"}], tool_choice={"type": "any"})
    assert auto["content"][0]["type"] == "text"
    assert [b["type"] for b in forced["content"]] == ["tool_use"] * 3
    assert [b["id"] for b in uses(forced)] == [b["id"] for b in uses(auto)]


@pytest.mark.parametrize("kind", ["auto", "any"])
def test_disable_parallel_tool_use_asks_one_call_per_reply_and_each_once(kind: str) -> None:
    choice = {"tool_choice": {"type": kind, "disable_parallel_tool_use": True}}
    plan = Plan(PLAN.steps, PLAN.final_answer, final_call=ToolCall("submit", {"answer": "done"}))
    calls, final = drive(PlanModel(plan), lambda n: choice)
    assert calls == [["search:a"], ["fetch:u"], ["search:b"], ["send:ann"]]
    # With "any" the model must call a tool at the end too: the plan's final call.
    assert final == ("All sent." if kind == "auto" else "{'answer': 'done'}")


def test_calls_left_for_later_survive_a_history_compacted_to_its_last_exchange() -> None:
    model = PlanModel(PLAN)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    messages.extend(answer(ask(model, messages, tool_choice={"type": "auto", "disable_parallel_tool_use": True})))
    compacted = [{"role": "user", "content": "go (summary)"}, *messages[-2:]]
    # Without a forced choice the rest of the step comes in one turn, then the next step.
    reply = ask(PlanModel(PLAN), compacted)
    assert [b["input"] for b in uses(reply)] == [{"url": "u"}, {"q": "b"}]
    compacted = [{"role": "user", "content": "go (summary)"}, *answer(reply)]
    assert [b["name"] for b in uses(ask(PlanModel(PLAN), compacted))] == ["send"]


def test_a_forced_tool_the_step_does_not_call_is_a_clear_error() -> None:
    with pytest.raises(PlanMismatchError, match=r"forces the tool 'send', but step 1 .* Step\(calls=\(ToolCall\('send'"):
        ask(PlanModel(PLAN), [{"role": "user", "content": "go"}], tool_choice={"type": "tool", "name": "send"})


def test_through_the_sdk_a_mismatch_is_a_500_that_is_not_retried_and_says_how_to_fix_the_plan() -> None:
    api = FakeMessagesAPI(PLAN)
    with pytest.raises(anthropic.InternalServerError, match="PlanMismatchError: tool_choice forces"):
        api.client().messages.create(
            model="m", max_tokens=8, messages=[{"role": "user", "content": "go"}], tools=TOOLS,  # type: ignore[arg-type]
            tool_choice={"type": "tool", "name": "send"},
        )
    assert len(api.exchanges) == 1


def _done(model: PlanModel) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for _ in range(2):
        messages.extend(answer(ask(model, messages)))
    return messages


def test_a_forced_submit_after_the_plan_gets_the_final_answer_as_its_single_string_argument() -> None:
    model = PlanModel(PLAN)
    reply = ask(model, _done(model), tool_choice={"type": "tool", "name": "submit"})
    assert reply["stop_reason"] == "tool_use"
    assert [(b["name"], b["input"]) for b in uses(reply)] == [("submit", {"answer": "All sent."})]
    assert ask(model, _done(model))["content"] == [{"type": "text", "text": "All sent."}]


def test_the_plans_final_call_answers_any_and_its_own_tool() -> None:
    plan = Plan(PLAN.steps, PLAN.final_answer, final_call=ToolCall("submit", {"answer": "sent", "count": 1}))
    model = PlanModel(plan)
    for choice in ({"type": "any"}, {"type": "tool", "name": "submit"}):
        reply = ask(model, _done(model), tool_choice=choice)
        assert [(b["name"], b["input"]) for b in uses(reply)] == [("submit", {"answer": "sent", "count": 1})]
    assert Plan.from_dict(plan.to_dict()) == plan


def test_a_forced_tool_the_finished_plan_cannot_answer_is_a_clear_error() -> None:
    model = PlanModel(PLAN)
    with pytest.raises(PlanMismatchError, match=r"forces any tool after every step .* final_call=ToolCall"):
        ask(model, _done(model), tool_choice={"type": "any"})
    with pytest.raises(PlanMismatchError, match=r"the tool 'pay' .* no final_call"):
        ask(model, _done(model), tool_choice={"type": "tool", "name": "pay"})


def test_replies_to_forced_requests_are_pure_functions_of_the_request() -> None:
    messages = _done(PlanModel(PLAN))
    choice = {"tool_choice": {"type": "tool", "name": "submit"}}
    assert ask(PlanModel(PLAN), messages, **choice) == ask(PlanModel(PLAN), messages, **choice)
    first = {"tool_choice": {"type": "any", "disable_parallel_tool_use": True}}
    assert ask(PlanModel(PLAN), messages[:1], **first) == ask(PlanModel(PLAN), messages[:1], **first)


def test_thinking_with_a_forced_tool_choice_is_refused_as_by_the_api() -> None:
    api = FakeMessagesAPI(PLAN)
    with pytest.raises(anthropic.BadRequestError, match="Thinking may not be enabled when tool_choice forces tool use"):
        api.client(max_retries=0).messages.create(
            model="m", max_tokens=2048, messages=[{"role": "user", "content": "go"}], tools=TOOLS,  # type: ignore[arg-type]
            tool_choice={"type": "any"}, thinking={"type": "enabled", "budget_tokens": 1024},
        )


# -- max_tokens --------------------------------------------------------------------------
def test_a_cut_tool_call_loses_its_last_argument_and_the_blocks_after_it() -> None:
    reply = ask(PlanModel(PLAN), [{"role": "user", "content": "go"}])
    cut = max_tokens_reply(reply, 64)
    assert cut["stop_reason"] == "max_tokens" and cut["usage"]["output_tokens"] == 64
    # The last call, search(q=b), lost its only argument; the blocks before it are whole.
    assert [b["type"] for b in cut["content"]] == ["text", "tool_use", "tool_use", "tool_use"]
    assert cut["content"][:3] == reply["content"][:3] and cut["content"][3]["input"] == {}
    two = max_tokens_reply({"content": [{"type": "tool_use", "id": "t", "name": "send", "input": {"to": "ann", "body": "hi"}}]})
    assert two["content"][0]["input"] == {"to": "ann"}
    bare = max_tokens_reply({"content": [{"type": "text", "text": "On it."}, {"type": "tool_use", "id": "t", "name": "now", "input": {}}]})
    assert bare["content"] == [{"type": "text", "text": "On it."}]


@pytest.mark.parametrize("stream", [False, True])
def test_the_fault_cuts_the_next_generation_streamed_or_not_and_the_retry_is_whole(stream: bool) -> None:
    api = FakeMessagesAPI(PLAN)
    client = api.client()
    request: dict[str, Any] = {"model": "m", "max_tokens": 1024, "messages": [{"role": "user", "content": "go"}], "tools": TOOLS}
    client.messages.count_tokens(model="m", messages=request["messages"])  # not a generation: passes
    api.fail_next("max_tokens")
    if stream:
        with client.messages.stream(**request) as events:
            cut = events.get_final_message()
    else:
        cut = client.messages.create(**request)
    assert cut.stop_reason == "max_tokens"
    assert [b.type for b in cut.content] == ["text", "tool_use", "tool_use", "tool_use"]
    assert cut.content[3].input == {}  # type: ignore[union-attr]
    whole = client.messages.create(**request)
    assert whole.stop_reason == "tool_use" and len(whole.content) == 4
    assert [e.fault for e in api.exchanges if e.generation] == ["max_tokens", None]


def test_a_cut_text_sent_back_as_a_prefill_is_continued() -> None:
    api = FakeMessagesAPI(Plan((), "The answer is forty-two."))
    client = api.client()
    messages: list[dict[str, Any]] = [{"role": "user", "content": "?"}]
    api.fail_next("max_tokens")
    cut = client.messages.create(model="m", max_tokens=8, messages=messages)  # type: ignore[arg-type]
    assert cut.stop_reason == "max_tokens" and cut.content[0].text == "The answer i"  # type: ignore[union-attr]
    rest = client.messages.create(
        model="m", max_tokens=64, messages=[*messages, {"role": "assistant", "content": cut.content[0].text}]  # type: ignore[union-attr]
    )
    assert cut.content[0].text + rest.content[0].text == "The answer is forty-two."  # type: ignore[union-attr]


def test_max_tokens_is_opt_in() -> None:
    assert sorted(OPT_IN_FAULT_KINDS) == ["api_outage", "max_tokens", "store_down"] and "max_tokens" in FAULT_KINDS
    assert "max_tokens" not in DEFAULT_FAULT_KINDS and "max_tokens" not in parse_fault_kinds(None)
    assert parse_fault_kinds(["max_tokens"]) == {"max_tokens"}


@settings(max_examples=60, database=None)
@given(fault_plans())
def test_default_fault_plans_never_draw_max_tokens(plan: Any) -> None:
    assert all(f.kind not in ("max_tokens", "api_outage") for f in plan.api_faults)


@settings(max_examples=30, database=None)
@given(fault_plans(kinds=["max_tokens"], max_crashes=0))
def test_fault_plans_draw_max_tokens_when_named(plan: Any) -> None:
    assert [f.kind for f in plan.api_faults] in ([], ["max_tokens"])


def test_a_named_max_tokens_is_half_of_the_api_faults_drawn() -> None:
    # One kind among nine, a cut final answer was caught in 1 of 3 seeds at 300 examples
    # (an outside round's twin that answers with the cut text); named, it is half.
    from collections import Counter

    from hypothesis import HealthCheck, given, seed

    kinds: Counter[str] = Counter()

    @seed(1)
    @settings(max_examples=300, database=None, suppress_health_check=list(HealthCheck))
    @given(fault_plans(kinds=[*DEFAULT_FAULT_KINDS, "max_tokens"]))
    def draw(plan: Any) -> None:
        kinds.update(f.kind for f in plan.api_faults)

    draw()
    assert kinds["max_tokens"] > 0.35 * sum(kinds.values()), kinds


def test_a_forced_tool_whose_one_string_is_an_enum_does_not_get_the_final_answer() -> None:
    # The final answer would not be a valid input: the plan must say what to call.
    model = PlanModel(PLAN)
    tools = [{"name": "rate", "input_schema": {"type": "object", "properties": {"grade": {"type": "string", "enum": ["a", "b"]}}}}]
    with pytest.raises(PlanMismatchError, match="the tool 'rate'"):
        model.respond({"model": "m", "max_tokens": 8, "messages": _done(model), "tools": tools,
                       "tool_choice": {"type": "tool", "name": "rate"}})
