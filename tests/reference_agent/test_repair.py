"""repair_history: every truncation of a valid history repairs to a valid one."""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from reference_agent.repair import (
    answer_pending,
    pending_tool_uses,
    repair_history,
    repair_history_report,
    unknown_outcome_result,
)
from reference_agent.validation import InvalidHistoryError, validate_messages
from stores import ActionRecord, RecordedResult

_words = st.text(alphabet="abcdefghij ", min_size=1, max_size=12).map(lambda s: "w" + s.strip())


@st.composite
def valid_histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A small valid tool-loop history: user goal, then turns of (parallel) tool calls."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": draw(_words)}]
    next_id = 0
    for _ in range(draw(st.integers(0, 4))):
        content: list[dict[str, Any]] = []
        if draw(st.booleans()):
            content.append({"type": "thinking", "thinking": draw(_words), "signature": "sig" + str(next_id)})
        if draw(st.booleans()):
            content.append({"type": "text", "text": draw(_words)})
        ids = []
        for _ in range(draw(st.integers(0, 3))):
            next_id += 1
            ids.append(f"toolu_{next_id}")
            content.append({"type": "tool_use", "id": ids[-1], "name": "t", "input": {"n": next_id}})
        if not content or content[-1]["type"] == "thinking":
            content.append({"type": "text", "text": draw(_words)})
        messages.append({"role": "assistant", "content": content})
        if ids:
            order = draw(st.permutations(ids))
            reply: list[dict[str, Any]] = [
                {"type": "tool_result", "tool_use_id": i, "content": f"result {i}",
                 **({"is_error": True} if draw(st.booleans()) else {})}
                for i in order
            ]
            if draw(st.booleans()):
                reply.append({"type": "text", "text": draw(_words)})
            messages.append({"role": "user", "content": reply})
        else:
            messages.append({"role": "user", "content": draw(_words)})
    validate_messages(messages)
    return messages


@st.composite
def truncations(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[ActionRecord]]:
    """A prefix of a valid history, possibly cut inside its last message, and a ledger."""
    history = draw(valid_histories())
    cut = draw(st.integers(1, len(history)))
    messages = json.loads(json.dumps(history[:cut]))
    last = messages[-1]
    if isinstance(last["content"], list) and draw(st.booleans()):
        last["content"] = last["content"][: draw(st.integers(0, len(last["content"])))]
    ids = [b["id"] for m in history for b in m["content"] if isinstance(m["content"], list)
           and b["type"] == "tool_use"]
    actions = []
    for tool_use_id in ids:
        state: Literal["none", "intent", "done"] = draw(st.sampled_from(["none", "intent", "done"]))
        if state == "none":
            continue
        result = RecordedResult(content=f"ledger {tool_use_id}") if state == "done" else None
        actions.append(ActionRecord(tool_use_id=tool_use_id, tool_name="t", input={},
                                    idempotency_key="k" + tool_use_id,
                                    state="done" if state == "done" else "intent", result=result))
    return messages, actions


def _validate(messages: list[dict[str, Any]]) -> None:
    ends_in_reply = messages[-1]["role"] == "assistant"
    validate_messages(messages, allow_prefill=ends_in_reply)


def _results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [b for m in messages if isinstance(m["content"], list) for b in m["content"]
            if b["type"] == "tool_result"]


@given(truncations())
def test_every_truncation_repairs_to_a_history_the_api_accepts(case: Any) -> None:
    messages, actions = case
    repaired = repair_history(messages, actions)
    assume(repaired)
    _validate(repaired)


@given(truncations())
def test_repair_is_idempotent(case: Any) -> None:
    messages, actions = case
    once = repair_history(messages, actions)
    assert repair_history(once, actions) == once
    assert not repair_history_report(once, actions)[1].changed


@given(truncations())
def test_repair_never_drops_a_result_that_was_present(case: Any) -> None:
    messages, actions = case
    repaired = repair_history(messages, actions)
    kept = _results(repaired)
    for result in _results(messages):
        assert result in kept


@given(truncations())
def test_repair_leaves_everything_before_the_damage_unchanged(case: Any) -> None:
    messages, actions = case
    repaired, report = repair_history_report(messages, actions)
    if report.first_damage is None:
        assert repaired == messages
    else:
        assert repaired[: report.first_damage] == messages[: report.first_damage]


@given(truncations())
def test_missing_results_come_from_the_ledger_or_say_unknown_never_retry(case: Any) -> None:
    messages, actions = case
    present = {b["tool_use_id"] for b in _results(messages)}
    ledger = {a.tool_use_id: a for a in actions}
    for block in _results(repair_history(messages, actions)):
        if block["tool_use_id"] in present:
            continue
        record = ledger.get(block["tool_use_id"])
        if record is not None and record.state == "done":
            assert block["content"] == f"ledger {block['tool_use_id']}"
        else:
            assert block["is_error"] is True
            assert block["content"].startswith("UNKNOWN OUTCOME")
            assert "please retry" not in block["content"].lower()


@given(truncations())
def test_pending_calls_left_to_the_agent_complete_to_a_valid_history(case: Any) -> None:
    messages, actions = case
    repaired, report = repair_history_report(messages, actions, keep_pending=True)
    assume(repaired)
    assert [b["id"] for b in report.pending] == [b["id"] for b in pending_tool_uses(repaired)]
    answered = answer_pending(
        repaired,
        [{"type": "tool_result", "tool_use_id": b["id"], "content": "ran"} for b in report.pending],
    )
    _validate(answered)


def _turn(*ids: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [
        {"type": "tool_use", "id": i, "name": "send", "input": {}} for i in ids]}


def test_an_unanswered_call_is_rejected_by_the_api_until_repaired() -> None:
    history = [{"role": "user", "content": "go"}, _turn("toolu_a")]
    with pytest.raises(InvalidHistoryError, match="without `tool_result`"):
        validate_messages(history)
    validate_messages(repair_history(history, []))


def test_partial_parallel_results_are_kept_and_the_rest_answered_after_them() -> None:
    present = {"type": "tool_result", "tool_use_id": "toolu_a", "content": "sent"}
    history = [
        {"role": "user", "content": "go"},
        _turn("toolu_a", "toolu_b"),
        {"role": "user", "content": [present, {"type": "text", "text": "note"}]},
    ]
    repaired, report = repair_history_report(history, [])
    content = repaired[-1]["content"]
    assert content[0] == present
    assert content[1]["tool_use_id"] == "toolu_b"
    assert content[1]["is_error"] is True
    assert content[2] == {"type": "text", "text": "note"}
    assert [s.kind for s in report.steps] == ["answered_unknown"]


def test_a_recorded_outcome_answers_its_call_instead_of_unknown() -> None:
    action = ActionRecord(
        tool_use_id="toolu_a", tool_name="send", input={}, idempotency_key="k", state="done",
        result=RecordedResult(content="sent #1"),
    )
    repaired = repair_history([{"role": "user", "content": "go"}, _turn("toolu_a")], [action])
    assert repaired[-1]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "sent #1"}
    ]


def test_an_intent_without_outcome_is_answered_unknown() -> None:
    action = ActionRecord(tool_use_id="toolu_a", tool_name="send", input={}, idempotency_key="k")
    repaired = repair_history([{"role": "user", "content": "go"}, _turn("toolu_a")], [action])
    assert repaired[-1]["content"][0] == unknown_outcome_result("send", "toolu_a").to_block("toolu_a")


def test_orphan_and_duplicate_results_are_dropped_and_results_moved_first() -> None:
    history = [
        {"role": "user", "content": "go"},
        _turn("toolu_a"),
        {"role": "user", "content": [
            {"type": "text", "text": "before"},
            {"type": "tool_result", "tool_use_id": "toolu_a", "content": "one"},
            {"type": "tool_result", "tool_use_id": "toolu_a", "content": "two"},
            {"type": "tool_result", "tool_use_id": "toolu_zz", "content": "orphan"},
        ]},
    ]
    repaired, report = repair_history_report(history, [])
    assert repaired[-1]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "one"},
        {"type": "text", "text": "before"},
    ]
    assert {s.kind for s in report.steps} == {
        "dropped_duplicate_result", "dropped_orphan_result", "moved_results_first"}
    assert report.first_damage == 2
    validate_messages(repaired)


def test_a_call_followed_by_another_reply_is_answered_in_between() -> None:
    history = [
        {"role": "user", "content": "go"},
        _turn("toolu_a"),
        {"role": "assistant", "content": "later"},
        {"role": "user", "content": "and?"},
    ]
    repaired = repair_history(history, [])
    assert repaired[2]["role"] == "user"
    assert repaired[2]["content"][0]["tool_use_id"] == "toolu_a"
    validate_messages(repaired)


def test_a_reply_cut_after_its_thinking_is_dropped() -> None:
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "s"}]},
    ]
    repaired, report = repair_history_report(history, [])
    assert repaired == history[:1]
    assert [s.kind for s in report.steps] == ["dropped_cut_thinking"]


def test_a_valid_history_is_returned_unchanged_and_not_aliased() -> None:
    history = [{"role": "user", "content": "go"}, _turn("toolu_a"), {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "ok"}]}]
    repaired, report = repair_history_report(history, [])
    assert repaired == history and not report.changed
    repaired[1]["content"][0]["input"]["x"] = 1
    assert history[1]["content"][0]["input"] == {}
