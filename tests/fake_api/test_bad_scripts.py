"""A script written wrong gets a clear error that says what to do: a UsageError naming the
marker's argument, a ValueError naming the part of a plan dict, a 500 naming the script;
never a bare KeyError / TypeError, a connection error, a hang, or a silently odd script."""

from __future__ import annotations

import re
from typing import Any

import anthropic
import pytest

from pytest_agentckpt.fake_api import FakeMessagesAPI
from reference_agent.scripted import (
    MAX_ERROR_ANSWERS,
    CannedModel,
    Plan,
    PlanMismatchError,
    PlanModel,
    Step,
    ToolCall,
)

pytest_plugins = ["pytester"]

GO = [{"role": "user", "content": "go"}]
# The plan names the tool's argument "q"; the tool takes "query", and refuses every call.
WRONG_ARGUMENT = Plan(
    steps=(Step(calls=(ToolCall("search", {"q": "x"}),)),), final_answer="Found it."
)
SEARCH = {
    "name": "search",
    "description": "Search.",
    "input_schema": {
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    },
}


# -- the marker --------------------------------------------------------------------------

#: Each bad marker, and what its error must say (``*``: any text).
BAD_MARKERS = {
    "plan_dict": (
        'plan={"steps": [{"calls": [{"tool": "search"}]}]}',
        "*UsageError: @pytest.mark.agentckpt_model: plan= is not a plan: "
        "plan['steps'][0]['calls'][0]['name'] is missing; plan['steps'][0]['calls'][0]['tool'] is "
        "not a field; plan['final_answer'] is missing. "
        "A plan as a dict looks like {'steps': [{'calls': [{'name': *",
    ),
    "plan_other": (
        "plan=[1, 2]",
        "*UsageError: @pytest.mark.agentckpt_model: plan= must be a Plan (or a dict*not [1, 2]",
    ),
    "plan_unfollowable": (
        'plan={"steps": [{"calls": [{"name": "d", "input": {"n": 1}, '
        '"plan": {"steps": [], "final_answer": "ok"}}]}], "final_answer": "ok"}',
        "*UsageError: @pytest.mark.agentckpt_model: plan= cannot be followed: *no string argument*",
    ),
    "fault_without_kind": (
        'faults=[{"times": 2}]',
        "*UsageError: @pytest.mark.agentckpt_model: faults[0] = {'times': 2}: a dict of "
        "fail_next arguments needs 'kind'; faults= takes a list whose items are each a kind*",
    ),
    "fault_times_str": (
        'faults=[("rate_limit", "2")]',
        "*UsageError: *faults[0] = ('rate_limit', '2'): times must be int, not '2'; faults= takes*",
    ),
    "fault_times_zero": (
        'faults=[("rate_limit", 0)]',
        "*UsageError: *faults[0] = ('rate_limit', 0): times must be at least 1*faults= takes*",
    ),
    "fault_unknown_argument": (
        'faults=[{"kind": "timeout", "count": 2}]',
        "*UsageError: *faults[0] = *: fail_next takes no count (it takes kind, times, *",
    ),
    "fault_bare_string": (
        'faults="rate_limit"',
        "*UsageError: @pytest.mark.agentckpt_model: faults= is 'rate_limit', not a list of "
        "faults;*(one fault: faults=['rate_limit'])",
    ),
    "fault_unknown_kind": (
        'faults=["rate_limt"]',
        "*UsageError: *faults[0] = 'rate_limt': kind must be one of [*'rate_limit'*",
    ),
    "fault_pair_unwrapped": (
        'faults=("timeout", 2)',
        "*UsageError: *faults[1] = 2: *(one (kind, times) fault: faults=[('timeout', 2)])",
    ),
    "responses_string": (
        'responses="hello"',
        "*UsageError: @pytest.mark.agentckpt_model: responses= takes a list of canned replies, "
        "not str 'hello': write responses=['hello'] for a single reply*",
    ),
    "responses_dict": (
        'responses={"content": "hi"}',
        "*UsageError: *responses= takes a list of canned replies, not dict*",
    ),
    "responses_item": (
        "responses=[1]",
        "*UsageError: *responses= CannedModel's response 1 is 1: each response is a string*",
    ),
    "model_without_respond": (
        "model=object()",
        "*UsageError: @pytest.mark.agentckpt_model: model= must be a scripted model, an object "
        "with a respond(request) -> Message JSON method*",
    ),
    "model_plan": (
        'model=Plan(steps=(), final_answer="ok")',
        "*UsageError: *model= must be a scripted model*; give a Plan as plan=",
    ),
}


def test_a_malformed_marker_argument_is_a_usage_error_that_names_it(pytester: pytest.Pytester) -> None:
    source = ["import pytest", "from reference_agent.scripted import Plan", ""]
    for name, (argument, _) in BAD_MARKERS.items():
        source += [
            f"@pytest.mark.agentckpt_model({argument})",
            f"def test_{name}(anthropic_client):",
            "    anthropic_client.messages.create(model='m', max_tokens=8, "
            "messages=[{'role': 'user', 'content': 'go'}])",
            "",
        ]
    pytester.makepyfile("\n".join(source))
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:xdist")
    result.assert_outcomes(errors=len(BAD_MARKERS))
    # fnmatch patterns: "[" opens a character class, so it is escaped as "[[]".
    result.stdout.fnmatch_lines([words.replace("[", "[[]") for _, words in BAD_MARKERS.values()])
    output = result.stdout.str()
    for bare in ("KeyError", "TypeError", "APIConnectionError", "AttributeError"):
        assert bare not in output


def test_the_marker_still_takes_every_form_the_docs_give(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.agentckpt_model(
            plan={"steps": [{"calls": [{"name": "lookup", "input": {"q": "x"}}]}], "final_answer": "ok"},
            faults=["rate_limit", ("timeout", 2), ["overloaded", 1],
                    {"kind": "stream_disconnect", "times": 1, "mid_reply": True, "after_events": 2},
                    {"kind": "rate_limit", "retry_after": 0}],
        )
        def test_forms(anthropic_fake):
            assert anthropic_fake.pending_faults == 6

        @pytest.mark.agentckpt_model(responses=("one", [{"type": "text", "text": "two"}]))
        def test_a_tuple_of_responses(anthropic_client):
            reply = anthropic_client.messages.create(
                model="m", max_tokens=8, messages=[{"role": "user", "content": "go"}])
            assert reply.content[0].text == "one"
        """
    )
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:xdist")
    result.assert_outcomes(passed=2)


# -- Plan.from_dict ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"steps": [{"calls": [{"tool": "search"}]}], "final_answer": "ok"},
         "plan['steps'][0]['calls'][0]['name'] is missing; plan['steps'][0]['calls'][0]['tool'] is not a field"),
        ({"steps": []}, "plan['final_answer'] is missing"),
        ({"steps": "search", "final_answer": "ok"}, "plan['steps']: Input should be a list, not 'search'"),
        ({"steps": [{"calls": [{"name": "s", "input": ["x"]}]}], "final_answer": "ok"},
         "plan['steps'][0]['calls'][0]['input']: Input should be a valid dictionary, not ['x']"),
        ({"steps": [{"calls": [{"name": "s", "args": {"q": 1}}]}], "final_answer": "ok"},
         "plan['steps'][0]['calls'][0]['args'] is not a field"),
        ({"steps": [{"calls": []}], "final_answer": "ok"},
         "plan['steps'][0] is refused: Step.calls must hold at least one ToolCall"),
        ({"steps": [], "final_answer": 3}, "plan['final_answer']: Input should be a valid string, not 3"),
        ({"steps": [{"calls": [{"name": "s"}], "text": 5}], "final_answer": "ok"},
         "plan['steps'][0]['text']: Input should be a valid string, not 5"),
        ({"steps": [], "final_answer": "ok", "final_call": {"input": {}}},
         "plan['final_call']['name'] is missing"),
        ("steps", "plan: Input should be a dictionary or an instance of Plan, not 'steps'"),
    ],
)
def test_a_plan_dict_of_another_shape_is_a_value_error_that_says_which_part(
    data: Any, words: str
) -> None:
    with pytest.raises(ValueError, match=r"A plan as a dict looks like \{'steps'") as caught:
        Plan.from_dict(data)
    assert words in str(caught.value)
    assert type(caught.value) is ValueError


def test_a_plan_dict_names_every_problem_at_once() -> None:
    with pytest.raises(ValueError, match=re.escape("plan['final_answer'] is missing")) as caught:
        Plan.from_dict({"steps": [{"calls": [{"tool": "search"}]}]})
    assert "plan['steps'][0]['calls'][0]['name'] is missing" in str(caught.value)


def test_step_and_call_from_dict_say_what_is_wrong_too() -> None:
    with pytest.raises(ValueError, match=re.escape("step['calls'] is missing; step['call'] is not a field")):
        Step.from_dict({"call": []})
    with pytest.raises(ValueError, match=re.escape("call['plan']['final_answer'] is missing")):
        ToolCall.from_dict({"name": "delegate", "input": {"task": "t"}, "plan": {"steps": []}})


# -- a model without respond() ---------------------------------------------------------


def test_a_model_without_respond_is_a_500_naming_it_not_a_connection_error() -> None:
    class NotAModel:
        def answer(self, request: dict[str, Any]) -> dict[str, Any]:
            return {}

    api = FakeMessagesAPI(NotAModel())  # type: ignore[arg-type]
    with pytest.raises(anthropic.InternalServerError, match=r"NotAModel.*has no respond"):
        api.client(max_retries=2).messages.create(model="m", max_tokens=8, messages=GO)
    assert [e.status for e in api.exchanges] == [500]


# -- a planned call the tool keeps refusing ----------------------------------------------


def _refuse_every_call(
    model: PlanModel, turns: int, messages: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """The history (``GO``, or ``messages``) after ``turns`` more replies whose every call
    was answered with an error."""
    messages = list(GO if messages is None else messages)
    for _ in range(turns):
        reply = model.respond({"model": "m", "messages": messages, "tools": [SEARCH]})
        uses = [b for b in reply["content"] if b["type"] == "tool_use"]
        assert uses, reply
        messages.append({"role": "assistant", "content": reply["content"]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": b["id"], "is_error": True,
             "content": "missing required argument: query"}
            for b in uses
        ]})
    return messages


def _succeed(model: PlanModel, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history after one more reply whose calls all succeeded."""
    reply = model.respond({"model": "m", "messages": messages, "tools": [SEARCH]})
    uses = [b for b in reply["content"] if b["type"] == "tool_use"]
    assert uses, reply
    return [
        *messages,
        {"role": "assistant", "content": reply["content"]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": b["id"], "content": "ok"} for b in uses
        ]},
    ]


def test_a_call_the_tool_keeps_refusing_is_a_plan_mismatch_not_a_loop() -> None:
    model = PlanModel(WRONG_ARGUMENT)
    # Up to the cap, the model asks again, as models do.
    messages = _refuse_every_call(model, MAX_ERROR_ANSWERS)
    with pytest.raises(PlanMismatchError) as caught:
        model.respond({"model": "m", "messages": messages, "tools": [SEARCH]})
    said = str(caught.value)
    assert said.startswith(
        f'the tool keeps answering errors to planned call search({{"q":"x"}}) '
        f"({MAX_ERROR_ANSWERS} times): check the plan's input against the tool's schema"
    )
    assert "the tool's last answer: 'missing required argument: query'" in said


def test_the_cap_is_generous_and_a_call_that_succeeds_at_last_goes_on() -> None:
    assert MAX_ERROR_ANSWERS >= 20
    model = PlanModel(WRONG_ARGUMENT)
    messages = _refuse_every_call(model, MAX_ERROR_ANSWERS - 1)
    # The last attempt before the cap is still asked for, under its own attempt's id.
    assert messages[-2]["content"][0]["id"] == f"toolu_s0c0a{MAX_ERROR_ANSWERS - 2}"
    messages = _succeed(model, messages)
    assert messages[-2]["content"][0]["id"] == f"toolu_s0c0a{MAX_ERROR_ANSWERS - 1}"
    final = model.respond({"model": "m", "messages": messages, "tools": [SEARCH]})
    assert final["content"] == [{"type": "text", "text": "Found it."}]


def test_errors_count_per_planned_call() -> None:
    plan = Plan(
        steps=(Step(calls=(ToolCall("search", {"q": "x"}),)), Step(calls=(ToolCall("search", {"q": "y"}),))),
        final_answer="ok",
    )
    model = PlanModel(plan)
    messages = _succeed(model, _refuse_every_call(model, MAX_ERROR_ANSWERS - 1))
    # The second call has had none of the first one's errors: it gets the whole cap too.
    messages = _refuse_every_call(model, MAX_ERROR_ANSWERS - 1, messages)
    assert messages[-2]["content"][0]["input"] == {"q": "y"}
    messages = _succeed(model, messages)
    final = model.respond({"model": "m", "messages": messages, "tools": [SEARCH]})
    assert final["content"] == [{"type": "text", "text": "ok"}]


def test_a_final_call_the_tool_keeps_refusing_is_a_plan_mismatch_too() -> None:
    submit = {"name": "submit", "input_schema": {"type": "object", "properties": {"answer": {"type": "integer"}}}}
    plan = Plan(steps=(), final_answer="ok", final_call=ToolCall("submit", {"answer": "forty-two"}))
    model = PlanModel(plan)
    request: dict[str, Any] = {"model": "m", "tools": [submit], "tool_choice": {"type": "tool", "name": "submit"}}
    messages: list[dict[str, Any]] = list(GO)
    for _ in range(MAX_ERROR_ANSWERS):
        reply = model.respond({**request, "messages": messages})
        (use,) = [b for b in reply["content"] if b["type"] == "tool_use"]
        messages += [
            {"role": "assistant", "content": reply["content"]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": use["id"], "is_error": True, "content": "answer: not an integer"}
            ]},
        ]
    said = f'planned call submit({{"answer":"forty-two"}}) ({MAX_ERROR_ANSWERS} times)'
    with pytest.raises(PlanMismatchError, match=re.escape(said)) as caught:
        model.respond({**request, "messages": messages})
    assert "(the final call of the plan)" in str(caught.value)


def _agent_without_a_turn_limit(client: anthropic.Anthropic) -> None:
    """An agent loop that answers every call with the tool's error and asks again (bounded
    here only so that the test cannot hang)."""
    messages: list[Any] = list(GO)
    for _ in range(5 * MAX_ERROR_ANSWERS):
        reply = client.messages.create(
            model="m", max_tokens=64, messages=messages, tools=[SEARCH]  # type: ignore[list-item]
        )
        messages.append({"role": "assistant", "content": reply.content})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": b.id, "is_error": True, "content": "bad input"}
            for b in reply.content if b.type == "tool_use"
        ]})
    raise AssertionError(f"the agent was asked for the call {5 * MAX_ERROR_ANSWERS} times")


@pytest.mark.agentckpt_model(plan=WRONG_ARGUMENT)
def test_an_agent_whose_tool_refuses_the_plan_gets_a_500_instead_of_looping_forever(
    anthropic_client: anthropic.Anthropic, anthropic_fake: FakeMessagesAPI
) -> None:
    with pytest.raises(anthropic.InternalServerError, match="keeps answering errors to planned call search"):
        _agent_without_a_turn_limit(anthropic_client)
    statuses = [e.status for e in anthropic_fake.exchanges]
    # Asked again after each of the errors, then a 500 the SDK does not retry.
    assert statuses == [200] * MAX_ERROR_ANSWERS + [500]
    assert "PlanMismatchError" in str(anthropic_fake.exchanges[-1].response)


# -- a refused canned reply ------------------------------------------------------------

BAD_CANNED = {"content": [{"type": "tool_use", "id": "toolu 1!", "name": "t", "input": {}}]}


def test_a_refused_canned_reply_is_not_used_up() -> None:
    model = CannedModel([BAD_CANNED, "fine"])
    for _ in range(2):
        with pytest.raises(PlanMismatchError, match="canned response 1"):
            model.respond({"messages": GO})
    assert model.calls == 0


def test_an_agent_retrying_a_refused_canned_reply_gets_the_same_refusal() -> None:
    api = FakeMessagesAPI(CannedModel([BAD_CANNED]))
    client = api.client(max_retries=0)
    for _ in range(2):
        with pytest.raises(anthropic.InternalServerError, match="canned response 1") as caught:
            client.messages.create(model="m", max_tokens=8, messages=GO)
        assert "ScriptExhaustedError" not in str(caught.value)


def test_a_canned_model_refuses_a_bare_string() -> None:
    with pytest.raises(ValueError, match=r"CannedModel takes a list of responses, not one str 'hello'"):
        CannedModel("hello")


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"times": "2"}, "times must be int, not '2'"),
        ({"times": True}, "times must be int, not True"),
        ({"after_events": 2.5}, "after_events must be int, not 2.5"),
        ({"retry_after": "1"}, "retry_after must be int or float or None, not '1'"),
        ({"mid_reply": 1}, "mid_reply must be bool, not 1"),
    ],
)
def test_fail_next_refuses_an_argument_of_the_wrong_type_by_name(arguments: dict[str, object], says: str) -> None:
    # Checked where the fault is queued, for the marker and a test calling it alike.
    api = FakeMessagesAPI(Plan(steps=(), final_answer="ok"))
    with pytest.raises(ValueError, match=re.escape(says)):
        api.fail_next("rate_limit", **arguments)  # type: ignore[arg-type]
    assert api.pending_faults == 0
