"""The advice beside a verdict never contradicts it, and names the cause the timeline shows."""

from __future__ import annotations

import copy
import functools
import uuid
import warnings
from typing import Any

import pytest

import reference_agent
from pytest_agentckpt import (
    ApiFault,
    CrashAt,
    FaultPlan,
    OracleFailure,
    Plan,
    ResumeDriftWarning,
    fuzz,
    replay,
)
from pytest_agentckpt.oracles import give_up_advice
from pytest_agentckpt.timeline import Timeline
from tests.harness.toolkit import toolbox


def _gave_up_on_a_failed_write(*, saved_before_the_effect: bool, key: str | None = None) -> Timeline:
    timeline = Timeline()
    timeline.start_attempt()
    timeline.add("model_response", index=1, status=200, tool_uses=[("toolu_1", "send", {"to": "bob"})])
    if saved_before_the_effect:  # the reply, or an intent: the call is durable before it runs
        timeline.add("store_save", task_id="t", version=1, iteration=1, status="running", messages=[])
    timeline.add("effect", tool="send", input={"to": "bob"}, key=key)
    timeline.add("store_save_failed", error="injected store outage on save", reason="outage")
    timeline.add("attempt_end", outcome="error", error="StoreUnavailableError")
    return timeline


def test_giving_up_on_an_outcome_write_is_called_allowed_when_the_call_was_durable_before_it_ran() -> None:
    advice = give_up_advice(_gave_up_on_a_failed_write(saved_before_the_effect=True))
    assert [a.topic for a in advice] == ["store_give_up"]
    assert "that is allowed" in advice[0].message
    assert "in doubt" in advice[0].message


def test_a_keyed_call_left_unrecorded_is_not_called_in_doubt() -> None:
    # Its resume sends it again under the same key, and the tool drops the repeat.
    advice = give_up_advice(_gave_up_on_a_failed_write(saved_before_the_effect=True, key="t-toolu_1"))
    assert [a.topic for a in advice] == ["store_give_up"]
    assert "in doubt" not in advice[0].message
    assert "same key" not in advice[0].message and "its idempotency key" in advice[0].message


def test_a_repeat_safe_call_left_unrecorded_is_not_told_about_a_key() -> None:
    # An outside round's status update (repeat-safe, sent with a key it ignores) was told
    # that the resume sends it again with its idempotency key and the tool drops the repeat.
    from pytest_agentckpt.oracles import ToolFlags

    timeline = _gave_up_on_a_failed_write(saved_before_the_effect=True, key="t-toolu_1")
    advice = give_up_advice(timeline, {"send": ToolFlags(True, False, repeat_safe=True)})
    assert "a repeat of it has no second effect" in advice[0].message
    assert "idempotency key" not in advice[0].message and "in doubt" not in advice[0].message
    # Unkeyed, it is in doubt; keyed, the key drops the repeat (as without the tools' kinds).
    assert "in doubt" in give_up_advice(
        _gave_up_on_a_failed_write(saved_before_the_effect=True), {"send": ToolFlags(True, False)})[0].message


def test_it_is_not_called_allowed_when_nothing_of_the_call_was_saved_before_it_ran() -> None:
    # An agent that saves only after its tools ran: the failed write was the first, and a
    # resume cannot know the effect is in doubt. The verdict says what to do.
    assert give_up_advice(_gave_up_on_a_failed_write(saved_before_the_effect=False)) == []


def _under_a_new_task_id_each_start(task_id: str, goal: str, **kwargs: Any) -> str:
    # The planted bug: the id the agent saves under is made anew at each start.
    return reference_agent.run(f"{task_id}-{uuid.uuid4().hex[:8]}", goal, retry_backoff=0.0, **kwargs)


def _plan(name: str, tool_input: dict[str, str]) -> Plan:
    return Plan.from_dict({"steps": [{"calls": [{"name": name, "input": tool_input}], "text": None}], "final_answer": "done"})


@pytest.mark.parametrize(
    ("name", "tool_input"), [("write_record", {"key": "a"}), ("send_email", {"to": "ann"})], ids=["keyed", "unkeyed"]
)
def test_a_resume_that_loads_another_task_id_is_told_so(name: str, tool_input: dict[str, str]) -> None:
    # The reply and the intent were saved, under the first attempt's id; the resume loaded
    # its own id, found nothing, and the model asked again under a new tool_use id.
    with pytest.raises(OracleFailure) as caught:
        replay(
            _under_a_new_task_id_each_start, toolbox(), _plan(name, tool_input),
            # After the call's outcome was saved: its repeat is no crash's doing.
                FaultPlan(crashes=(CrashAt("before_model_call", 2),)),
        )
    message = str(caught.value)
    assert "no_duplicate_effect" in message.splitlines()[0]
    assert "loaded another" in message, message
    assert "task_id it is given" in message
    # Not the advice for an agent that never saved the reply, nor the listing example.
    assert "had not saved" not in message
    assert "task@10" not in message
    assert "Record the intent durably" not in message


# An agent that keeps its state in its own storage (here a dict that outlives attempts)
# and persists each step in a `finally:`, as some frameworks' after-step hooks do: on an
# exception it records the step as done. A killed process writes nothing; a crash raised
# in process unwinds through the `finally:`.
_OWN_STORAGE: dict[str, dict[str, Any]] = {}


def _persisting_in_finally(
    task_id: str,
    goal: str,
    *,
    client: Any,
    store: Any,
    tools: Any,
    sound: bool = False,
    goal_again: bool = False,
    renumber: bool = False,
    drop_cut: bool = False,
) -> str:
    state = _OWN_STORAGE.setdefault(task_id, {"messages": [{"role": "user", "content": goal}], "next": "model"})
    if renumber:
        # A lossy load (to a framework's own message type and back): tool_use ids renumbered,
        # the tool_result ids kept.
        uses = [b for m in state["messages"] if isinstance(m["content"], list) for b in m["content"] if b["type"] == "tool_use"]
        for n, block in enumerate(uses, 1):
            block["id"] = f"toolu_restored_{n}"
    if goal_again and state["next"] == "model" and len(state["messages"]) > 1:
        # A resume that hands the framework the goal again, after the restored history.
        state["messages"].append({"role": "user", "content": goal})
    while state["next"] != "done":
        step, new = state["next"], copy.deepcopy(state)
        succeeded = False
        try:
            if step == "model":
                reply = client.messages.create(
                    model="claude-sonnet-4-5", max_tokens=1024, messages=new["messages"], tools=tools.definitions()
                )
                content = [b.model_dump(mode="json", exclude_unset=True) for b in reply.content]
                if drop_cut and reply.stop_reason == "max_tokens":
                    # A framework that drops a cut reply's calls and goes on with the rest.
                    content = [b for b in content if b["type"] != "tool_use"] or [{"type": "text", "text": "?"}]
                new["messages"].append({"role": "assistant", "content": content})
                uses = [b for b in content if b["type"] == "tool_use"]
                new["next"] = "tools" if uses else "done"
                new["answer"] = "".join(b.get("text", "") for b in content if b["type"] == "text")
            else:
                results = []
                for use in [b for b in new["messages"][-1]["content"] if b["type"] == "tool_use"]:
                    result = tools.call(use["name"], use["input"], idempotency_key=f"{task_id}:{use['id']}")
                    results.append({"type": "tool_result", "tool_use_id": use["id"], "content": result.content})
                new["messages"].append({"role": "user", "content": results})
                new["next"] = "model"
            succeeded = True
        finally:
            if succeeded:
                state = _OWN_STORAGE[task_id] = new
            elif not sound:
                # The planted hazard: the step is recorded as done although it raised.
                state["next"] = {"model": "tools", "tools": "model"}[step]
    return str(state["answer"])


def test_an_agent_that_writes_its_own_state_while_a_crash_unwinds_is_pointed_to_process_mode() -> None:
    scenario = (_plan("write_record", {"key": "a"}), FaultPlan(crashes=(CrashAt("after_tool_effect", 1),)))
    replay(functools.partial(_persisting_in_finally, sound=True), toolbox(), *scenario)
    with pytest.raises(OracleFailure) as caught:
        replay(_persisting_in_finally, toolbox(), *scenario)
    message = str(caught.value)
    assert "valid_sequence" in message.splitlines()[0], message
    advice = [line for line in message.splitlines() if line.startswith("advice:")]
    assert advice and "SystemExit" in advice[0] and 'mode="process"' in advice[0], message


def test_an_agent_that_saves_through_the_store_is_not_told_so() -> None:
    with pytest.raises(OracleFailure) as caught:
        replay(
            _under_a_new_task_id_each_start, toolbox(), _plan("write_record", {"key": "a"}),
            FaultPlan(crashes=(CrashAt("before_model_call", 2),)), ignore_oracles=["completed_idempotent"],
        )
    assert "SystemExit" not in str(caught.value)


def test_a_resume_that_sends_the_goal_again_is_warned_of() -> None:
    scenario = (_plan("write_record", {"key": "a"}), FaultPlan(crashes=(CrashAt("before_model_call", 2),)))
    with pytest.warns(ResumeDriftWarning, match="sends the task's opening message") as caught:
        fuzz(
            functools.partial(_persisting_in_finally, sound=True, goal_again=True), toolbox(),
            plans=[scenario[0]], max_examples=10, seed=1, systematic=True,
        )
    drift = next(str(w.message) for w in caught if issubclass(w.category, ResumeDriftWarning))
    assert "2 times" in drift and "no request of the crash-free run sent it more than 1" in drift, drift
    # The same agent resuming with its history alone is not warned of.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warnings.simplefilter("error", ResumeDriftWarning)
        fuzz(
            functools.partial(_persisting_in_finally, sound=True), toolbox(),
            plans=[scenario[0]], max_examples=10, seed=1, systematic=True,
        )


def test_a_history_whose_ids_were_rewritten_on_load_is_told_so() -> None:
    with pytest.raises(OracleFailure) as caught:
        replay(
            functools.partial(_persisting_in_finally, sound=True, renumber=True), toolbox(),
            _plan("search", {"query": "crash"}), FaultPlan(crashes=(CrashAt("before_model_call", 2),)),
        )
    message = str(caught.value)
    assert "valid_sequence" in message.splitlines()[0], message
    assert "tool_use ids the model never issued (toolu_restored_1)" in message
    assert "not repaired" not in message.splitlines()[1]


def test_an_action_lost_to_a_reply_cut_by_max_tokens_is_told_so() -> None:
    with pytest.raises(OracleFailure) as caught:
        replay(
            functools.partial(_persisting_in_finally, sound=True, drop_cut=True), toolbox(),
            _plan("write_record", {"key": "a"}), FaultPlan(api_faults=(ApiFault("max_tokens", 1),)),
        )
    message = str(caught.value)
    assert "an action was lost across a fault" in message, message
    assert "A reply was cut by max_tokens (request #1)" in message


def test_the_same_finding_in_both_runs_is_said_once() -> None:
    # Run again once complete, the agent starts over in the crash-free run and in the run
    # under faults alike: one line, not the same line twice (once "in the crash-free run").
    with pytest.raises(OracleFailure) as caught:
        replay(
            _under_a_new_task_id_each_start, toolbox(), _plan("write_record", {"key": "a"}),
            FaultPlan(crashes=(CrashAt("before_model_call", 2),)),
        )
    lines = [line for line in str(caught.value).splitlines() if line.strip().startswith("completed_idempotent:")]
    assert len(lines) == 1, lines


def test_an_action_lost_where_a_crash_and_an_api_fault_both_came_names_both() -> None:
    # An outside round's report said "across a crash" where a cut stream lost the action.
    with pytest.raises(OracleFailure) as caught:
        replay(
            functools.partial(_persisting_in_finally, sound=True, drop_cut=True), toolbox(),
            _plan("write_record", {"key": "a"}),
            FaultPlan(crashes=(CrashAt("before_model_call", 1),), api_faults=(ApiFault("max_tokens", 2),)),
        )
    message = str(caught.value)
    assert "an action was lost across the faults (a crash, and an API or store fault)" in message, message


def test_a_call_run_from_a_cut_stream_is_told_so_not_blamed_on_an_outbox() -> None:
    # An outside round's streaming agent kept a reply a dropped connection cut, ran its bulk
    # send with the part of the input that had come (another input: the asked-for call
    # never ran) and answered it: the report spoke of an outbox the agent does not have.
    from pytest_agentckpt.oracles import _plain_answer_of_unrun_call, canonical
    from pytest_agentckpt.timeline import Timeline

    asked = {"recipients": ["bob"], "body": "invoice"}
    timeline = Timeline()
    timeline.start_attempt()
    timeline.add("model_request", index=1, messages=[{"role": "user", "content": "go"}])
    timeline.add("api_fault", fault="stream_disconnect", index=1)
    timeline.add("model_response", index=1, status=200, tool_uses=[("toolu_s0c0a0", "send_bulk", asked)])
    timeline.add("tool_call", tool="send_bulk", input={"body": "invoice"}, key=None)
    timeline.add("model_request", index=2, messages=[{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_s0c0a0", "content": "sent to "}]}])
    said = _plain_answer_of_unrun_call(timeline, "send_bulk", canonical(asked), [(None, "go", "toolu_s0c0a0")])
    assert said is not None
    assert "cut short (stream_disconnect on model request #1)" in said and "outbox" not in said, said


def test_a_call_split_into_parts_is_told_the_model_asked_for_the_whole() -> None:
    # An outside round's bulk sender made one call per recipient of the model's one call:
    # "asked for it 0 times" read as though the agent had made the call up.
    from collections import Counter

    from pytest_agentckpt.oracles import Baseline, ToolFlags, canonical, no_duplicate_effect

    whole, part = {"to": ["ann", "bob"]}, {"to": ["ann"]}
    timeline = Timeline()
    timeline.start_attempt()
    timeline.add("model_response", index=1, status=200, tool_uses=[("toolu_s0c0a0", "send", whole)])
    timeline.add("effect", tool="send", input=part, key=None)
    timeline.add("effect", tool="send", input=part, key=None)
    baseline = Baseline(answer="done", effects=Counter({("send", canonical(part)): 1}), model_turns=1, timeline=Timeline())
    violations, _unsafe = no_duplicate_effect(timeline, baseline, {"send": ToolFlags(True, False)}, completed=True)
    assert "asked for it 0 time(s)" in violations[0].message
    assert 'The model asked for send with another input ({"to":["ann","bob"]})' in violations[0].message


def test_a_resume_that_loaded_nothing_from_the_store_is_told_it_went_on_from_state_kept_elsewhere() -> None:
    # An outside round's agent read a cache of its own first, found an older copy and asked
    # again for a reply the store held: "did not resume from its checkpoint", with no why.
    from pytest_agentckpt.oracles import _not_resumed_hint

    timeline = Timeline()
    timeline.start_attempt()
    durable = timeline.add("store_save", task_id="t", version=2, iteration=1, status="running", messages=[])
    timeline.add("crash", point="after_checkpoint_write", occurrence=1)
    timeline.start_attempt()
    asked = timeline.add("model_request", index=2, messages=[{"role": "user", "content": "go"}])
    assert "loaded nothing from the store" in _not_resumed_hint(timeline, durable, asked)
    # One that loaded the task and found none is told that instead.
    timeline = Timeline()
    timeline.start_attempt()
    durable = timeline.add("store_save", task_id="t", version=2, iteration=1, status="running", messages=[])
    timeline.start_attempt()
    timeline.add("store_load", task_id="t", found=False)
    asked = timeline.add("model_request", index=2, messages=[{"role": "user", "content": "go"}])
    assert "the load found none" in _not_resumed_hint(timeline, durable, asked)
