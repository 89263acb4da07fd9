"""The scripted model's server tool replies: a request that offers a server tool (web
search, web fetch) gets ``server_tool_use`` blocks with their results, and paused turns;
one that offers none gets the replies it always got."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_agentckpt.oracles import valid_sequence
from pytest_agentckpt.timeline import Timeline
from reference_agent.offline import FakeMessagesAPI
from reference_agent.scripted import Plan, PlanModel, Step, ToolCall
from reference_agent.validation import InvalidHistoryError, validate_messages

ADD = {"name": "add", "description": "Add.", "input_schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}
SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
FETCH = {"type": "web_fetch_20250910", "name": "web_fetch", "max_uses": 2}
PLAN = Plan(
    steps=tuple(Step(calls=(ToolCall("add", {"a": n}),), text=f"Adding {n}.") for n in range(4)),
    final_answer="done",
)


def _results(content: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": b["id"], "content": "ok"} for b in content if b["type"] == "tool_use"],
    }


def _loop(model: PlanModel, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A sound loop's replies: a paused reply is sent back as the last message."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    replies = []
    for _ in range(20):
        validate_messages(messages, allow_prefill=messages[-1]["role"] == "assistant")
        reply = model.respond({"model": "m", "messages": messages, "tools": tools})
        replies.append(reply)
        messages.append({"role": "assistant", "content": reply["content"]})
        if reply["stop_reason"] == "end_turn":
            return replies
        if reply["stop_reason"] == "tool_use":
            messages.append(_results(reply["content"]))
    raise AssertionError("the plan did not finish")


def _kinds(reply: dict[str, Any]) -> list[str]:
    return [b["type"] for b in reply["content"]]


def test_a_request_offering_web_search_gets_searches_and_paused_turns() -> None:
    replies = _loop(PlanModel(PLAN), [ADD, SEARCH])
    shapes = [(_kinds(r), r["stop_reason"]) for r in replies]
    assert shapes == [
        # Step 1 searches and pauses; the paused turn sent back gets the step's calls.
        (["server_tool_use", "web_search_tool_result"], "pause_turn"),
        (["text", "tool_use"], "tool_use"),
        # Step 2 searches in the reply that makes its calls; step 3 does not search.
        (["server_tool_use", "web_search_tool_result", "text", "tool_use"], "tool_use"),
        (["text", "tool_use"], "tool_use"),
        # Step 4 is like step 1.
        (["server_tool_use", "web_search_tool_result"], "pause_turn"),
        (["text", "tool_use"], "tool_use"),
        (["text"], "end_turn"),
    ]
    use, result = replies[0]["content"]
    assert use == {"type": "server_tool_use", "id": "srvtoolu_s0", "name": "web_search", "input": {"query": "step 1: add"}}
    assert result["tool_use_id"] == "srvtoolu_s0"
    assert result["content"][0]["type"] == "web_search_result"
    assert replies[2]["content"][0]["id"] == "srvtoolu_s1"
    assert replies[4]["content"][0]["id"] == "srvtoolu_s3"
    assert replies[0]["usage"]["server_tool_use"] == {"web_search_requests": 1}
    assert "server_tool_use" not in replies[1]["usage"]


def test_a_history_asked_again_gets_fresh_server_tool_ids() -> None:
    model = PlanModel(PLAN)
    request = {"model": "m", "messages": [{"role": "user", "content": "go"}], "tools": [ADD, SEARCH]}
    first, again = model.respond(request), model.respond(request)
    assert first["content"][0]["id"] == "srvtoolu_s0"
    assert again["content"][0]["id"] == again["content"][1]["tool_use_id"] == "srvtoolu_s0_g1"
    assert first["id"] != again["id"]
    # The paused turn (of either reply) sent back continues the step.
    paused = [*request["messages"], {"role": "assistant", "content": again["content"]}]
    going_on = model.respond({**request, "messages": paused})
    assert _kinds(going_on) == ["text", "tool_use"]


def test_a_paused_turn_followed_by_a_user_message_still_goes_on() -> None:
    model = PlanModel(PLAN)
    request = {"model": "m", "messages": [{"role": "user", "content": "go"}], "tools": [ADD, SEARCH]}
    paused = model.respond(request)
    assert paused["stop_reason"] == "pause_turn"
    messages = [*request["messages"], {"role": "assistant", "content": paused["content"]}, {"role": "user", "content": "Go on."}]
    assert _kinds(model.respond({**request, "messages": messages})) == ["text", "tool_use"]


def test_web_fetch_is_used_when_offered() -> None:
    reply = PlanModel(PLAN).respond({"model": "m", "messages": [{"role": "user", "content": "go"}], "tools": [ADD, FETCH]})
    use, result = reply["content"]
    assert (use["name"], use["input"], result["type"]) == ("web_fetch", {"url": "https://example.com/plan/step-1"}, "web_fetch_tool_result")
    assert reply["usage"]["server_tool_use"] == {"web_fetch_requests": 1}


@pytest.mark.parametrize("tools", [None, [ADD], [ADD, {"type": "custom", **ADD, "name": "other"}]])
def test_without_a_server_tool_the_replies_are_as_before(tools: list[dict[str, Any]] | None) -> None:
    replies = _loop(PlanModel(PLAN), tools or [])
    assert [(_kinds(r), r["stop_reason"]) for r in replies] == [(["text", "tool_use"], "tool_use")] * 4 + [(["text"], "end_turn")]
    assert all("server_tool_use" not in r["usage"] for r in replies)
    # The exact bytes of the first reply, as every earlier version wrote them.
    first = PlanModel(PLAN).respond({"model": "m", "messages": [{"role": "user", "content": "go"}], **({"tools": tools} if tools else {})})
    assert json.dumps(first, sort_keys=True) == json.dumps(
        {
            "id": "msg_0001s0a0",
            "type": "message",
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Adding 0."},
                {"type": "tool_use", "id": "toolu_s0c0a0", "name": "add", "input": {"a": 0}},
            ],
            "model": "m",
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": first["usage"]["output_tokens"]},
        },
        sort_keys=True,
    )


def test_the_fake_serves_the_same_blocks_streamed_and_accepts_the_paused_turn_sent_back() -> None:
    api = FakeMessagesAPI(PLAN)
    client = api.client(max_retries=0)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    streamed, created = [], []
    for _ in range(10):
        kwargs: dict[str, Any] = {"model": "m", "max_tokens": 1024, "messages": messages, "tools": [ADD, SEARCH]}
        with client.messages.stream(**kwargs) as stream:
            reply = stream.get_final_message()
        content = [b.model_dump(mode="json", exclude_none=True) for b in reply.content]
        # The same request, not streamed, gets the same blocks (under fresh ids).
        whole = client.messages.create(**kwargs)
        streamed.append((_kinds({"content": content}), reply.stop_reason))
        created.append(([b.type for b in whole.content], whole.stop_reason))
        assert [b.get("input") for b in content] == [b.model_dump().get("input") for b in whole.content]
        messages.append({"role": "assistant", "content": content})
        if reply.stop_reason == "end_turn":
            break
        if reply.stop_reason == "tool_use":
            messages.append(_results(content))
    assert streamed == created
    assert streamed[0] == (["server_tool_use", "web_search_tool_result"], "pause_turn")
    assert streamed[-1] == (["text"], "end_turn")
    assert all(e.status == 200 for e in api.exchanges)


def _timeline(reply: dict[str, Any], sent: list[dict[str, Any]]) -> Timeline:
    t = Timeline()
    t.start_attempt()
    t.add("model_request", index=1, messages=[sent[0]])
    t.add("model_response", index=1, status=200, tool_uses=[], text="", stop_reason="pause_turn", content=reply["content"])
    t.add("model_request", index=2, messages=sent)
    return t


def test_valid_sequence_accepts_a_paused_turn_sent_back_and_no_other_last_assistant_message() -> None:
    goal = {"role": "user", "content": "go"}
    paused = PlanModel(PLAN).respond({"model": "m", "messages": [goal], "tools": [ADD, SEARCH]})
    # The SDK's model_dump adds or drops empty fields: the blocks are told by type and id.
    dumped = [{**b, "caller": {"type": "direct"}} if b["type"] == "server_tool_use" else b for b in paused["content"]]
    assert valid_sequence(_timeline(paused, [goal, {"role": "assistant", "content": dumped}]), validate_messages, error_type=InvalidHistoryError) == []
    for edited in (paused["content"][:1], [{"type": "text", "text": "Searching"}]):
        found = valid_sequence(_timeline(paused, [goal, {"role": "assistant", "content": edited}]), validate_messages, error_type=InvalidHistoryError)
        assert [v.oracle for v in found] == ["valid_sequence"]
        assert "server_tool_use" in found[0].message
