"""Each oracle on hand-built timelines: it passes the correct story and fails the planted bug."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from pytest_agentckpt.oracles import (
    ORACLES,
    Baseline,
    ToolFlags,
    answer_in_doubt,
    completed_idempotent,
    effect_counts,
    iteration_monotone,
    no_duplicate_effect,
    recorded_work_not_redone,
    same_answer,
    valid_sequence,
)
from pytest_agentckpt.timeline import Timeline
from reference_agent.validation import InvalidHistoryError, validate_messages

GOAL = {"role": "user", "content": "go"}
USE = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "send", "input": {"to": "a"}}]}
RESULT = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "sent"}]}
ANSWER = {"role": "assistant", "content": [{"type": "text", "text": "done"}]}
FLAGS = {"send": ToolFlags(irreversible=True, idempotent=False), "put": ToolFlags(True, True)}


def _timeline(*events: tuple[str, dict[str, Any]]) -> Timeline:
    timeline = Timeline()
    timeline.start_attempt()
    for kind, data in events:
        if kind == "attempt":
            timeline.start_attempt()
        else:
            timeline.add(kind, **data)  # type: ignore[arg-type]
    return timeline


def _baseline(effects: dict[tuple[str, str], int], answer: str = "done") -> Baseline:
    return Baseline(answer=answer, effects=Counter(effects), model_turns=2, timeline=Timeline())


def _response(*uses: tuple[str, str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    return ("model_response", {"index": 1, "status": 200, "tool_uses": list(uses)})


def _effect(tool: str = "send", to: str = "a") -> tuple[str, dict[str, Any]]:
    return ("effect", {"tool": tool, "input": {"to": to}, "key": None})


def _save(messages: list[Any], iteration: int = 1, version: int = 1) -> tuple[str, dict[str, Any]]:
    return ("store_save", {"version": version, "iteration": iteration, "status": "running", "messages": messages})


SEND = ("send", '{"to":"a"}')


def test_the_six_oracles_are_named_in_the_design_order() -> None:
    assert ORACLES == (
        "valid_sequence",
        "no_duplicate_effect",
        "same_answer",
        "iteration_monotone",
        "recorded_work_not_redone",
        "completed_idempotent",
    )


def test_valid_sequence_reports_an_unanswered_tool_use_with_the_api_error() -> None:
    good = _timeline(("model_request", {"index": 1, "messages": [GOAL, USE, RESULT]}))
    bad = _timeline(("model_request", {"index": 2, "messages": [GOAL, USE, GOAL]}))
    assert valid_sequence(good, validate_messages, error_type=InvalidHistoryError) == []
    [violation] = valid_sequence(bad, validate_messages, error_type=InvalidHistoryError)
    assert violation.oracle == "valid_sequence"
    assert "HTTP 400" in violation.message and "tool_result" in violation.message
    assert list(violation.marks) == [1]


def test_valid_sequence_names_the_rule_a_history_that_starts_with_the_assistant_breaks() -> None:
    # A sliding window that cut the goal: the report used to name the tool_result rule.
    bad = _timeline(("model_request", {"index": 1, "messages": [USE, RESULT]}))
    [violation] = valid_sequence(bad, validate_messages, error_type=InvalidHistoryError)
    assert "first message must use" in violation.message
    assert "keeps the goal first" in violation.message
    assert "every tool_use needs exactly one tool_result" not in violation.message


def test_valid_sequence_names_the_unanswered_calls_of_an_empty_user_turn_not_a_paused_reply() -> None:
    # An outside round's agent dropped its settled results and sent "user: []" after the
    # calls: the advice was about pause_turn and prefills, which had nothing to do with it.
    empty = {"role": "user", "content": []}
    bad = _timeline(("model_request", {"index": 1, "messages": [GOAL, USE, empty]}))
    [violation] = valid_sequence(bad, validate_messages, error_type=InvalidHistoryError)
    assert "the call(s) t1 of messages.1 went unanswered" in violation.message
    assert "pause_turn" not in violation.message
    alone = _timeline(("model_request", {"index": 1, "messages": [GOAL, ANSWER, empty]}))
    [violation] = valid_sequence(alone, validate_messages, error_type=InvalidHistoryError)
    assert "messages.2 is a user turn with no content" in violation.message


def test_valid_sequence_marks_the_checkpoint_the_invalid_request_was_loaded_from() -> None:
    # A long timeline's excerpt keeps marked lines: the save that wrote the loaded history
    # (made after the reply, before its tools ran) is where the failure comes from.
    timeline = _timeline(
        ("store_save", {"task_id": "t", "version": 5, "iteration": 3, "status": "running", "messages": [GOAL, USE]}),
        ("crash", {"point": "before_tool_effect", "occurrence": 1}),
    )
    timeline.start_attempt("resume")
    timeline.add("store_load", found=True, version=5, iteration=3, task_id="t")
    timeline.add("model_request", index=2, messages=[GOAL, USE])
    [violation] = valid_sequence(timeline, validate_messages, error_type=InvalidHistoryError)
    save, load = timeline.of("store_save")[0], timeline.of("store_load")[0]
    assert violation.marks[save.seq] == "written here"
    assert violation.marks[load.seq] == "the checkpoint this attempt loaded"


def test_valid_sequence_checks_interleaved_thinking_against_the_replies_it_saw() -> None:
    from reference_agent.scripted import redacted_thinking_block, thinking_block
    from reference_agent.validation import thinking_shape

    reply = [
        thinking_block("first"),
        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
        redacted_thinking_block("between"),
        {"type": "tool_use", "id": "toolu_2", "name": "f", "input": {}},
    ]
    results = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in ("toolu_1", "toolu_2")]}
    response = ("model_response", {"index": 1, "status": 200, "tool_uses": [], "thinking_shape": thinking_shape(reply)})

    def request(content: list[dict[str, Any]], **flags: bool) -> tuple[str, dict[str, Any]]:
        messages = [GOAL, {"role": "assistant", "content": content}, results]
        return ("model_request", {"index": 2, "messages": messages, "thinking": True, **flags})

    dropped = [*reply[:2], reply[3]]
    caught = valid_sequence(_timeline(response, request(dropped, interleaved=True)), validate_messages, error_type=InvalidHistoryError)
    assert [v.oracle for v in caught] == ["valid_sequence"]
    assert "messages.1.content.2: `thinking` or `redacted_thinking` blocks" in caught[0].message
    assert "in its place among the tool calls" in caught[0].message
    moved = [reply[0], reply[2], reply[1], reply[3]]
    assert valid_sequence(_timeline(response, request(moved, interleaved=True)), validate_messages, error_type=InvalidHistoryError)
    # As it came: valid. Without interleaved thinking the turn need only open with its thinking.
    assert valid_sequence(_timeline(response, request(reply, interleaved=True)), validate_messages, error_type=InvalidHistoryError) == []
    assert valid_sequence(_timeline(response, request(dropped)), validate_messages, error_type=InvalidHistoryError) == []


def test_an_effect_performed_more_often_than_the_model_asked_is_the_agents_bug() -> None:
    timeline = _timeline(_response(("t1", "send", {"to": "a"})), _effect(), ("crash", {"point": "x", "occurrence": 1}), ("attempt", {}), _effect())
    violations, unsafe = no_duplicate_effect(timeline, _baseline({SEND: 1}), FLAGS, completed=True)
    assert [v.oracle for v in violations] == ["no_duplicate_effect"]
    assert "asked for it 1 time" in violations[0].message
    assert unsafe == []


def test_a_repeat_after_an_unrecorded_effect_of_a_keyless_tool_reports_the_tool_not_the_agent() -> None:
    timeline = _timeline(
        _response(("t1", "send", {"to": "a"})),
        _effect(),
        ("crash", {"point": "after_tool_effect", "occurrence": 1}),
        ("attempt", {}),
        _response(("t2", "send", {"to": "a"})),  # the model retried after "outcome unknown"
        _effect(),
    )
    violations, unsafe = no_duplicate_effect(timeline, _baseline({SEND: 1}), FLAGS, completed=True)
    assert violations == []
    assert [t.tool for t in unsafe] == ["send"] and "idempotency keys" in unsafe[0].describe()


def test_the_same_tool_use_id_in_two_conversations_is_two_requests_of_the_model() -> None:
    # A scripted model's ids are unique only within a conversation: two sub-tasks, each
    # its own conversation and checkpoint, both get "t1". The second sub-task's call is in
    # doubt after the crash and asked for again ("t2"): the tool is unsafe, the agent sound.
    def load(task: str) -> tuple[str, dict[str, Any]]:
        return ("store_load", {"found": False, "task_id": task})

    def ask(index: int, task_goal: str, *uses: tuple[str, str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
        request = {"index": index, "messages": [{"role": "user", "content": task_goal}]}
        return [("model_request", request), ("model_response", {"index": index, "status": 200, "tool_uses": list(uses)})]

    send = ("t1", "send", {"to": "a"})
    timeline = _timeline(
        load("t/sub-0"), *ask(1, "send to a", send), _effect(), ("store_save", {**_save([GOAL])[1], "task_id": "t/sub-0"}),
        load("t/sub-1"), *ask(2, "send to a", send), _effect(),
        ("crash", {"point": "after_tool_effect", "occurrence": 2}),
        ("attempt", {}),
        load("t/sub-1"), *ask(3, "send to a", ("t2", "send", {"to": "a"})), _effect(),
    )
    violations, unsafe = no_duplicate_effect(timeline, _baseline({SEND: 2}), FLAGS, completed=True)
    assert violations == []
    assert [t.tool for t in unsafe] == ["send"]
    # One conversation whose reply is fetched twice is still one request of the model.
    again = _timeline(
        *ask(1, "send to a", send), _effect(), ("crash", {"point": "after_tool_effect", "occurrence": 1}),
        ("attempt", {}), *ask(2, "send to a", send), _effect(),
    )
    violations, _ = no_duplicate_effect(again, _baseline({SEND: 1}), FLAGS, completed=True)
    assert "asked for it 1 time" in violations[0].message


def test_a_second_conversation_getting_a_call_under_a_fresh_id_is_not_the_first_asked_again() -> None:
    # Two parts of one task (each its own conversation and checkpoint) with the same plan:
    # the scripted model gives the second the call under a fresh id (t1_g1), as it does a
    # history sent again. The agent ran both, then crashed before saving their outcomes and
    # ran both again on resume: the report must not say that the model was asked again.
    def ask(index: int, goal: str, tool_use_id: str) -> list[tuple[str, dict[str, Any]]]:
        request = {"index": index, "messages": [{"role": "user", "content": goal}]}
        uses = [(tool_use_id, "send", {"to": "a"})]
        return [("model_request", request), ("model_response", {"index": index, "status": 200, "tool_uses": uses})]

    def save(task: str) -> tuple[str, dict[str, Any]]:
        return ("store_save", {**_save([GOAL])[1], "task_id": task})

    timeline = _timeline(
        save("t/eu"), *ask(1, "bill eu", "toolu_s0c0a0"), save("t/us"), *ask(2, "bill us", "toolu_s0c0a0_g1"),
        _effect(), ("crash", {"point": "before_tool_effect", "occurrence": 2}),
        ("attempt", {}), _effect(), _effect(),
    )
    [violation], _ = no_duplicate_effect(timeline, _baseline({SEND: 2}), FLAGS, completed=True)
    assert "model asked for it 2 time(s)" in violation.message
    assert "more often than the 2 times the model asked for it" in violation.message
    assert "under a new tool_use id" not in violation.message and "asked for once" not in violation.message


def test_the_same_repeat_is_the_agents_bug_when_a_durable_write_recorded_the_effect_first() -> None:
    timeline = _timeline(
        _response(("t1", "send", {"to": "a"})),
        _effect(),
        _save([GOAL]),
        ("crash", {"point": "after_checkpoint_write", "occurrence": 1}),
        ("attempt", {}),
        _response(("t2", "send", {"to": "a"})),
        _effect(),
    )
    violations, unsafe = no_duplicate_effect(timeline, _baseline({SEND: 1}), FLAGS, completed=True)
    assert [v.oracle for v in violations] == ["no_duplicate_effect"] and unsafe == []


def test_a_repeated_effect_of_a_key_honouring_tool_is_never_excused() -> None:
    put = ("put", '{"to":"a"}')
    timeline = _timeline(
        _response(("t1", "put", {"to": "a"})),
        _effect("put"),
        ("crash", {"point": "after_tool_effect", "occurrence": 1}),
        ("attempt", {}),
        _response(("t2", "put", {"to": "a"})),
        _effect("put"),
    )
    violations, _ = no_duplicate_effect(timeline, _baseline({put: 1}), FLAGS, completed=True)
    assert "honours idempotency keys, but a call came without one" in violations[0].message
    # The same repeat under two different keys: the report names them.
    keyed = _timeline(
        _response(("t1", "put", {"to": "a"})),
        ("effect", {"tool": "put", "input": {"to": "a"}, "key": "k-1"}),
        ("crash", {"point": "after_tool_effect", "occurrence": 1}),
        ("attempt", {}),
        _response(("t2", "put", {"to": "a"})),
        ("effect", {"tool": "put", "input": {"to": "a"}, "key": "k-2"}),
    )
    violations, _ = no_duplicate_effect(keyed, _baseline({put: 1}), FLAGS, completed=True)
    assert "different keys ('k-1', 'k-2')" in violations[0].message


@pytest.mark.parametrize(
    ("keys", "says"),
    [
        (("wf-7/step-2/t1", "wf-7/step-1/t1"), "the keys differ only in a number (1 and 2)"),
        (("t1-1733580000123", "t1-1733580000456"), None),  # a timestamp is no counter
        (("f54d-t1", "e6bc-t1"), None),
    ],
    ids=["step-counter", "timestamp", "random"],
)
def test_keys_that_differ_only_in_a_small_number_are_blamed_on_a_counter(keys: tuple[str, str], says: str | None) -> None:
    # An outside round's durable workflow retried a failed model call itself and numbered
    # its steps by every try: on the resume the same call had another step number. The
    # report advised a workflow id and step number, which the agent already used.
    put = ("put", '{"to":"a"}')
    timeline = _timeline(
        _response(("t1", "put", {"to": "a"})),
        ("effect", {"tool": "put", "input": {"to": "a"}, "key": keys[0]}),
        ("crash", {"point": "after_tool_effect", "occurrence": 1}),
        ("attempt", {}),
        ("effect", {"tool": "put", "input": {"to": "a"}, "key": keys[1]}),
    )
    [violation], _ = no_duplicate_effect(timeline, _baseline({put: 1}), FLAGS, completed=True)
    assert "different keys" in violation.message
    if says is None:
        assert "differ only in a number" not in violation.message
    else:
        assert says in violation.message and "counted otherwise on the resume" in violation.message


def test_an_error_answered_before_the_effect_is_not_blamed_for_a_repeat_after_it() -> None:
    # The first call timed out (no effect) and was answered "outcome unknown" as an error;
    # the model asked again and that call took effect. After a crash the resume ran it
    # again without its key. The old error, re-sent with every later history, is not
    # what made the repeat: the missing key is.
    put = ("put", '{"to":"a"}')
    use_1 = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "put", "input": {"to": "a"}}]}
    unknown = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": True,
                                            "content": "timed out, outcome unknown"}]}
    timeline = _timeline(
        _response(("t1", "put", {"to": "a"})),
        ("model_request", {"index": 2, "messages": [GOAL, use_1, unknown]}),
        _response(("t2", "put", {"to": "a"})),
        ("effect", {"tool": "put", "input": {"to": "a"}, "key": "k-2"}),
        ("crash", {"point": "after_tool_effect", "occurrence": 1}),
        ("attempt", {}),
        ("effect", {"tool": "put", "input": {"to": "a"}, "key": None}),
        ("model_request", {"index": 3, "messages": [GOAL, use_1, unknown]}),
    )
    [violation], _ = no_duplicate_effect(timeline, _baseline({put: 1}), FLAGS, completed=True)
    assert "timed out, outcome unknown" not in violation.message
    assert "a call came without one" in violation.message


def test_fewer_effects_than_a_crash_free_run_that_repeated_the_call_blames_that_run() -> None:
    # The crash-free run told the model a call had failed after its effect, and the model
    # asked again: two charges. A crashed run that charged once is the right one.
    told = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": True,
                                         "content": "cancelled, outcome unknown"}]}
    crash_free = _timeline(
        _response(("t1", "send", {"to": "a"})),
        _effect(),
        ("model_request", {"index": 2, "messages": [GOAL, USE, told]}),
        _response(("t2", "send", {"to": "a"})),
        _effect(),
    )
    baseline = Baseline(answer="done", effects=effect_counts(crash_free), model_turns=3, timeline=crash_free)
    crashed = _timeline(_response(("t1", "send", {"to": "a"})), _effect(), ("crash", {"point": "x", "occurrence": 1}))
    [violation], _ = no_duplicate_effect(crashed, baseline, FLAGS, completed=True)
    assert "happened 1 time(s), not 2 as in the crash-free run: the crash-free run is the one that went wrong" in violation.message
    assert "answered tool_use t1 with an error (cancelled, outcome unknown) although its effect had happened" in violation.message
    assert "an action was lost" not in violation.message and ".." not in violation.message


def test_an_error_answer_written_after_a_run_stopped_on_an_error_is_blamed_on_that_resume() -> None:
    # An outside round's job queue: a worker's "done" save met a store outage and the run
    # gave up; the resume answered the call "interrupted" and the model asked again. The
    # report said the tool raised after its effect, as in a tool_runner.
    told = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": True,
                                         "content": "interrupted by a restart: its outcome is unknown"}]}
    timeline = _timeline(
        _response(("t1", "send", {"to": "a"})),
        _effect(),
        ("store_save_failed", {"error": "injected store outage on save", "reason": "error"}),
        ("attempt", {}),
        ("model_request", {"index": 2, "messages": [GOAL, USE, told]}),
        _response(("t2", "send", {"to": "a"})),
        _effect(),
    )
    [violation], _ = no_duplicate_effect(timeline, _baseline({SEND: 1}), FLAGS, completed=True)
    assert "before the run stopped on an error: the resume answered the call that stop cut off" in violation.message
    assert "tool_runner" not in violation.message


@pytest.mark.parametrize(
    ("case", "excused"),
    [("in doubt", True), ("recorded first", False), ("keyed tool", False), ("not told unknown", False)],
)
def test_an_answer_that_differs_after_an_unsafe_tools_hidden_outcome_is_the_tools_not_the_agents(
    case: str, excused: bool
) -> None:
    # An outside round's plan-then-execute agent: the crash came after an unkeyed call's
    # effect and before its outcome was saved; the resume answered the call "outcome
    # unknown", and the model's summary then differed. same_answer blamed the agent.
    tool = "put" if case == "keyed tool" else "send"
    use = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": tool, "input": {"to": "a"}}]}
    told = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": case != "not told unknown",
                                         "content": "outcome unknown: check before doing it again"}]}
    timeline = _timeline(
        _response(("t1", tool, {"to": "a"})),
        _effect(tool),
        *([_save([GOAL, use])] if case == "recorded first" else []),
        ("crash", {"point": "after_tool_effect", "occurrence": 1}),
        ("attempt", {}),
        ("model_request", {"index": 2, "messages": [GOAL, use, told]}),
    )
    baseline = _baseline({(tool, '{"to":"a"}'): 1}, answer="done")
    assert same_answer("it may not have happened", baseline, completed=True, timeline=timeline)
    excuses = answer_in_doubt(timeline, FLAGS, baseline, "it may not have happened")
    assert bool(excuses) is excused
    if excused:
        assert excuses[0].tool == "send"
        assert "could only answer it \"outcome unknown\", and the run then answered" in excuses[0].describe()


def test_a_completed_run_missing_an_effect_fails() -> None:
    timeline = _timeline(_response(("t1", "send", {"to": "a"})))
    violations, _ = no_duplicate_effect(timeline, _baseline({SEND: 1}), FLAGS, completed=True)
    assert "an action was lost" in violations[0].message  # no crash in this timeline: no "across a crash"
    assert no_duplicate_effect(timeline, _baseline({SEND: 1}), FLAGS, completed=False)[0] == []


def test_a_call_answered_with_a_plain_result_it_never_ran_for_within_an_attempt_is_explained() -> None:
    # A framework that turns a tool's exception (a failed intent save before the call)
    # into its result, without is_error: the model takes the call for done.
    told = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "Error: store down"}]}
    timeline = _timeline(
        _response(("t1", "send", {"to": "a"})),
        ("store_save_failed", {"error": "injected store outage on save", "reason": "outage"}),
        ("model_request", {"index": 2, "messages": [GOAL, USE, told]}),
    )
    [violation], _ = no_duplicate_effect(timeline, _baseline({SEND: 1}), FLAGS, completed=True)
    assert "an action was lost across a fault" not in violation.message  # no fault event here
    assert "answered tool_use t1 with a result that is not an error (Error: store down)" in violation.message
    assert "Within one attempt" in violation.message and "is_error: true" in violation.message


def test_a_call_answered_queued_and_never_made_across_a_crash_names_the_outbox_fix_too() -> None:
    # An outbox answers "queued" on purpose: answering with is_error (the advice for an
    # outcome the agent cannot know) would have its model ask again; the fix is the outbox's.
    queued = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "queued"}]}
    timeline = _timeline(
        _response(("t1", "send", {"to": "a"})),
        ("crash", {"point": "after_checkpoint_write", "occurrence": 1}),
        ("attempt_end", {"outcome": "crash"}),
        ("attempt", {}),
        ("model_request", {"index": 2, "messages": [GOAL, USE, queued]}),
    )
    [violation], _ = no_duplicate_effect(timeline, _baseline({SEND: 1}), FLAGS, completed=True)
    assert "answered tool_use t1 with a result that is not an error (queued)" in violation.message
    assert "An agent with an outbox" in violation.message
    assert "dispatch what is left when it resumes" in violation.message


def test_a_call_answered_queued_then_lost_after_the_answer_is_blamed_on_the_dispatch() -> None:
    # An outbox answered "queued" in the attempt the model asked in, with nothing failing
    # in between, then saved the task completed and crashed before dispatching: no
    # framework turned an error into a result, and the advice must not say so.
    queued = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "queued"}]}
    timeline = _timeline(
        _response(("t1", "send", {"to": "a"})),
        ("model_request", {"index": 2, "messages": [GOAL, USE, queued]}),
        ("crash", {"point": "before_tool_effect", "occurrence": 1}),
        ("attempt_end", {"outcome": "crash"}),
        ("attempt", {}),
    )
    [violation], _ = no_duplicate_effect(timeline, _baseline({SEND: 1}), FLAGS, completed=True)
    assert "Within one attempt" not in violation.message and "exception" not in violation.message
    assert "Nothing failed between the request and that answer" in violation.message
    assert "ended before making the call" in violation.message
    assert "a task saved completed with entries left must still dispatch them" in violation.message


def test_an_unkeyed_call_retried_with_its_failed_outcome_save_in_one_attempt_is_told_so() -> None:
    # A retry around "call, then save the outcome": the save fails, the retry makes the
    # call again. Nothing was resumed: "settle it on resume" would be the wrong fix.
    timeline = _timeline(
        _response(("t1", "send", {"to": "a"})),
        _effect(),
        ("store_save_failed", {"error": "injected store outage on save", "reason": "outage"}),
        _effect(),
    )
    [violation], _ = no_duplicate_effect(timeline, _baseline({SEND: 1}), FLAGS, completed=True)
    assert "Both calls were made in attempt 1, with the same model reply, and a save failed" in violation.message
    assert "settle it on resume" not in violation.message
    # The same repeat across a resume keeps the resume's advice.
    resumed = _timeline(
        _response(("t1", "send", {"to": "a"})),
        _effect(),
        ("store_save_failed", {"error": "injected store outage on save", "reason": "outage"}),
        ("crash", {"point": "after_tool_effect", "occurrence": 1}),
        ("attempt", {}),
        _effect(),
    )
    [violation], _ = no_duplicate_effect(resumed, _baseline({SEND: 1}), FLAGS, completed=True)
    assert "Both calls" not in violation.message and "settle it on resume" in violation.message


def test_a_wrong_answer_without_a_crash_is_not_said_to_come_from_a_resume() -> None:
    timeline = _timeline(("api_fault", {"fault": "max_tokens", "index": 2}))
    [violation] = same_answer("the final an", _baseline({}, "the final answer"), completed=True, timeline=timeline)
    assert violation.message.startswith("the run under faults (no crash, no resume) answered \"the final an\"")
    assert "A reply was cut by max_tokens (request #2)" in violation.message
    resumed = _timeline(("crash", {"point": "after_model_call", "occurrence": 1}), ("attempt", {}))
    [violation] = same_answer("x", _baseline({}), completed=True, timeline=resumed)
    assert violation.message.startswith("the resumed run answered")


def test_keys_that_differ_because_the_call_id_changed_on_the_agents_side_are_told_so() -> None:
    # The model was asked once (toolu id t1); the repeat's key holds an id the model never
    # issued: the agent's serializer renumbered the call.
    put = ("put", {"to": "a"})
    timeline = _timeline(
        _response(("t1", *put)),
        ("effect", {"tool": "put", "input": {"to": "a"}, "key": "task/t1"}),
        ("crash", {"point": "after_tool_effect", "occurrence": 1}),
        ("attempt", {}),
        ("effect", {"tool": "put", "input": {"to": "a"}, "key": "task/call_1"}),
    )
    [violation], _ = no_duplicate_effect(timeline, _baseline({("put", '{"to":"a"}'): 1}), FLAGS, completed=True)
    assert "one key holds the tool_use id 't1' the model issued" in violation.message, violation.message
    assert "never from the attempt" not in violation.message


def test_same_answer_compares_only_completed_runs() -> None:
    assert same_answer("done", _baseline({}), completed=True) == []
    assert same_answer(None, _baseline({}), completed=False) == []
    [violation] = same_answer("done (resumed)", _baseline({}), completed=True)
    assert violation.oracle == "same_answer"


def test_iteration_monotone_fails_when_the_stored_iteration_goes_back() -> None:
    ok = _timeline(_save([GOAL], 1, 1), _save([GOAL], 1, 2), _save([GOAL], 2, 3))
    bad = _timeline(_save([GOAL], 3, 1), ("attempt", {}), _save([GOAL], 1, 2))
    assert iteration_monotone(ok) == []
    [violation] = iteration_monotone(bad)
    assert "went back from 3" in violation.message


def test_a_count_that_restarts_after_a_load_within_the_resumed_attempt_is_called_a_restart() -> None:
    # A framework's step count: the resume loads iteration 2, saves it back once, then
    # saves its own count, which started at 0 in this run.
    loaded = ("store_load", {"found": True, "version": 4, "iteration": 2, "task_id": None})
    timeline = _timeline(_save([GOAL], 2, 4), ("attempt", {}), loaded, _save([GOAL], 2, 5), _save([GOAL], 1, 6))
    [violation] = iteration_monotone(timeline)
    assert "attempt 2 loaded iteration 2 and then saved 1: its count started over" in violation.message
    assert "within one attempt" not in violation.message
    # Without a load before it, a count that goes back within an attempt is said to.
    [violation] = iteration_monotone(_timeline(_save([GOAL], 2, 1), _save([GOAL], 1, 2)))
    assert "the count went back within one attempt" in violation.message


def test_each_checkpoint_of_an_agent_that_keeps_several_counts_its_own_iterations() -> None:
    # A plan-and-execute agent: the plan in the task's checkpoint, each sub-task's
    # conversation in a checkpoint of its own, each counting from 0.
    def save(task: str, iteration: int, version: int) -> tuple[str, dict[str, Any]]:
        return ("store_save", {**_save([GOAL], iteration, version)[1], "task_id": task})

    ok = _timeline(save("t", 1, 1), save("t/sub-0", 0, 1), save("t/sub-0", 2, 2), save("t", 2, 2), save("t/sub-1", 0, 1))
    assert iteration_monotone(ok) == []
    bad = _timeline(save("t", 1, 1), save("t/sub-0", 2, 1), ("attempt", {}), save("t/sub-0", 1, 2))
    [violation] = iteration_monotone(bad)
    assert "went back from 2" in violation.message


def test_the_budget_spans_restarts_allowing_one_turn_per_crash() -> None:
    turns = [_response() for _ in range(4)]
    crash = ("crash", {"point": "after_model_call", "occurrence": 1})
    assert iteration_monotone(_timeline(*turns, crash), budget=3) == []
    [violation] = iteration_monotone(_timeline(*turns), budget=3)
    assert "budget of 3" in violation.message
    # A reply cut mid-stream was answered by the model: asked for again, it is a turn lost.
    cut = ("api_fault", {"fault": "stream_disconnect", "index": 2})
    assert iteration_monotone(_timeline(*turns, cut), budget=3) == []


def test_the_budget_allows_the_turns_an_attempt_lost_when_it_ended_before_saving_them() -> None:
    # Two turns, saved; then a reply whose save fails (a store outage the agent raises on):
    # the resumed agent asks for that turn again. The same loss as a crash before the save.
    saved = [_response(), _save([GOAL], 1, 1), _response(), _save([GOAL], 2, 2)]
    failed = ("attempt_end", {"outcome": "error", "detail": "StoreUnavailableError"})
    again = [_response(), _save([GOAL], 3, 3)]
    assert iteration_monotone(_timeline(*saved, _response(), failed, ("attempt", {}), *again), budget=3) == []
    # An agent that saves every third turn loses three turns to one crash.
    batch = [_response(), _response(), _response(), ("crash", {"point": "before_checkpoint_write", "occurrence": 1})]
    ended = ("attempt_end", {"outcome": "crash", "detail": "Crash"})
    assert iteration_monotone(_timeline(*saved, *batch, ended, ("attempt", {}), *again, *again), budget=4) == []
    # Turns that were saved are not lost: a budget reset after them is still caught.
    reset = [*saved, failed, ("attempt", {}), *again, *again, *again]
    [violation] = iteration_monotone(_timeline(*reset), budget=3)
    assert "plus 0 turn(s) lost to faults" in violation.message
    # An attempt that answered loses nothing, whatever it did not save.
    answered = ("attempt_end", {"outcome": "answer", "detail": "done"})
    [violation] = iteration_monotone(_timeline(*saved, _response(), _response(), answered), budget=3)
    assert "plus 0 turn(s)" in violation.message


def test_a_ledger_saved_between_batched_turns_does_not_make_them_saved() -> None:
    # An outside round's agent saved its conversation every third turn, and a ledger (a
    # checkpoint of its own, no history, no count) before each irreversible call: a crash
    # after a ledger save lost three turns, and the budget oracle counted one.
    saved = [_response(), _save([GOAL], 1, 1)]
    ledger = ("store_save", {**_save([], 0, 1)[1], "task_id": "t:ledger"})
    batch = [_response(), _response(), ledger, _response(), ("crash", {"point": "after_tool_effect", "occurrence": 1})]
    ended = ("attempt_end", {"outcome": "crash", "detail": "Crash"})
    again = [_response(), _save([GOAL], 2, 2), _response(), _save([GOAL], 3, 3), _response(), _save([GOAL], 4, 4)]
    assert iteration_monotone(_timeline(*saved, *batch, ended, ("attempt", {}), *again), budget=4) == []
    # A save of the conversation between them does record them.
    recorded = ("store_save", {**_save([GOAL], 3, 2)[1]})
    batch = [_response(), _response(), recorded, _response(), ("crash", {"point": "after_tool_effect", "occurrence": 1})]
    later = [_response(), _save([GOAL], 4, 3), _response(), _save([GOAL], 5, 4), _response(), _save([GOAL], 6, 5)]
    [violation] = iteration_monotone(_timeline(*saved, *batch, ended, ("attempt", {}), *later), budget=4)
    assert "plus 1 turn(s) lost to faults" in violation.message


def test_a_resumed_request_under_another_system_prompt_than_the_crash_free_one_is_advised_of() -> None:
    from pytest_agentckpt.oracles import resume_drift_advice

    def request(index: int, messages: list[Any], system: str, tools: tuple[str, ...] = ("search",)) -> tuple[str, dict[str, Any]]:
        return ("model_request", {"index": index, "messages": messages, "system": system, "tools": tools})

    reply = {"role": "assistant", "content": [{"type": "text", "text": "on it"}]}
    later = [GOAL, reply, {"role": "user", "content": "go on"}]
    clean = _timeline(request(1, [GOAL], "triage"), request(2, later, "billing"))
    resumed = _timeline(request(1, [GOAL], "triage"), ("attempt", {}), request(2, later, "triage"))
    [advice] = resume_drift_advice(resumed, clean)
    assert advice.topic == "resume_drift" and "another system prompt" in advice.message
    assert "request #2, the first of resumed attempt 2" in advice.message
    # The same steering: nothing; other tools: said so.
    assert resume_drift_advice(_timeline(request(1, [GOAL], "triage"), ("attempt", {}), request(2, later, "billing")), clean) == []
    tools = _timeline(request(1, [GOAL], "triage"), ("attempt", {}), request(2, later, "billing", ("search", "charge")))
    assert "other tools" in resume_drift_advice(tools, clean)[0].message
    # A prompt that differs from the crash-free run's before any resume (a clock in it):
    # nothing can be told from the resumed one.
    # The crash-free run sent the same history twice, the second time under another
    # prompt (a summary of it): a resume that begins with that second request drifted not.
    summary = _timeline(request(1, [GOAL], "triage"), request(2, later, "billing"), request(3, later, "summarise"))
    assert resume_drift_advice(
        _timeline(request(1, [GOAL], "triage"), ("attempt", {}), request(2, later, "summarise")), summary
    ) == []
    clock = _timeline(request(1, [GOAL], "triage at 12:01"), ("attempt", {}), request(2, later, "triage at 12:02"))
    assert resume_drift_advice(clock, _timeline(request(1, [GOAL], "triage at 12:00"), request(2, later, "billing"))) == []


def _asked(index: int, messages: list[Any], system: str | None, **extra: Any) -> tuple[str, dict[str, Any]]:
    return ("model_request", {"index": index, "messages": messages, "system": system, "tools": ("send",), **extra})


def _replied(index: int, *uses: tuple[str, str, dict[str, Any]], text: str = "") -> tuple[str, dict[str, Any]]:
    return ("model_response", {"index": index, "status": 200, "tool_uses": list(uses), "text": text})


SENT = ("t1", "send", {"to": "a"})


def test_a_summary_of_the_history_is_not_asking_again_for_its_reply() -> None:
    # A compacting agent sends the saved history up to the kept turn's reply, under a
    # summariser's prompt: the same messages as that reply's request, another question.
    def resumed(**summary: Any) -> Timeline:
        return _timeline(
            _asked(1, [GOAL], None), _replied(1, SENT), _save([GOAL, USE, RESULT], version=2),
            ("attempt", {}), ("store_load", {"found": True, "version": 2}),
            _asked(2, [GOAL], "Summarise the conversation.", **summary), _replied(2, text="a summary"),
            _save([{"role": "user", "content": "go; a summary"}, USE, RESULT], version=3),
        )

    # No tool can be called, and the reply held calls: nothing asked for again.
    assert recorded_work_not_redone(resumed(tool_choice={"type": "none"})) == []
    # Tools offered, another system prompt, and the reply to it is not what the history
    # goes on with.
    assert recorded_work_not_redone(resumed()) == []


def test_asking_again_under_a_system_prompt_changed_on_resume_is_still_redone_work() -> None:
    # The agent dropped the loaded reply and asked for it again, noting the resume in its
    # system prompt: the new reply takes the old one's place.
    again = ("t2", "send", {"to": "a"})
    redone = _timeline(
        _asked(1, [GOAL], "help"), _replied(1, SENT), _save([GOAL, USE], version=2),
        ("attempt", {}), ("store_load", {"found": True, "version": 2}),
        _asked(2, [GOAL], "help (resumed)"), _replied(2, again),
        _save([GOAL, {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "send", "input": {"to": "a"}}]}], version=3),
    )
    [violation] = recorded_work_not_redone(redone)
    assert "asks again for reply 1" in violation.message
    # The same system prompt: a repeat, whatever becomes of the new reply.
    same = _timeline(
        _asked(1, [GOAL], "help"), _replied(1, SENT), _save([GOAL, USE], version=2),
        ("attempt", {}), ("store_load", {"found": True, "version": 2}), _asked(2, [GOAL], "help"),
    )
    assert [v.oracle for v in recorded_work_not_redone(same)] == ["recorded_work_not_redone"]
    # tool_choice none, but the stored reply was text: it could be asked for again so.
    text = _timeline(
        _asked(1, [GOAL], "help"), _replied(1, text="done"), _save([GOAL, ANSWER], version=2),
        ("attempt", {}), ("store_load", {"found": True, "version": 2}),
        _asked(2, [GOAL], "help", tool_choice={"type": "none"}),
    )
    assert [v.oracle for v in recorded_work_not_redone(text)] == ["recorded_work_not_redone"]


def test_asking_again_for_a_reply_the_checkpoint_holds_is_redone_work() -> None:
    fresh = _timeline(_save([GOAL, USE]), ("attempt", {}), ("model_request", {"index": 2, "messages": [GOAL]}))
    [violation] = recorded_work_not_redone(fresh)
    assert violation.oracle == "recorded_work_not_redone" and "asks again for reply 1" in violation.message
    # Asking for the reply that was lost (not in the checkpoint) is fine.
    lost = _timeline(_save([GOAL]), ("attempt", {}), ("model_request", {"index": 2, "messages": [GOAL]}))
    assert recorded_work_not_redone(lost) == []


def test_a_second_conversation_like_the_first_is_not_redone_work_until_the_agent_reads_its_checkpoint() -> None:
    # Plan-and-execute in one checkpoint: two sub-tasks alike, the first just finished and
    # saved (history= finds its conversation), the second starts with the same message.
    second = _timeline(_save([GOAL, USE, RESULT, ANSWER]), ("model_request", {"index": 3, "messages": [GOAL]}))
    assert recorded_work_not_redone(second) == []
    # The same request after the agent read its checkpoint again (a resume, or a reload)
    # does ask for work the checkpoint holds.
    for between in (("store_load", {"found": True, "version": 1, "iteration": 1}), ("attempt", {})):
        again = _timeline(_save([GOAL, USE, RESULT, ANSWER]), between, ("model_request", {"index": 3, "messages": [GOAL]}))
        [violation] = recorded_work_not_redone(again)
        assert "asks again for reply 1" in violation.message


def test_reading_again_with_a_read_only_tool_after_a_restart_is_no_redone_work() -> None:
    # An agent that fetches its ticket again after a restart, in case it changed: a
    # read-only tool is re-run freely. The same repeat of an irreversible tool is not.
    def reread(tool: str) -> Timeline:
        use = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": tool, "input": {"to": "a"}}]}
        return _timeline(
            _response(("t1", tool, {"to": "a"})),
            ("tool_call", {"tool": tool, "input": {"to": "a"}, "key": None}),
            _save([GOAL, use, RESULT]),
            ("attempt", {}),
            ("tool_call", {"tool": tool, "input": {"to": "a"}, "key": None}),
        )

    kinds = {**FLAGS, "fetch": ToolFlags(irreversible=False, idempotent=False)}
    assert recorded_work_not_redone(reread("fetch"), kinds) == []
    assert [v.oracle for v in recorded_work_not_redone(reread("send"), kinds)] == ["recorded_work_not_redone"]
    # Without the kinds (a caller that has none), every repeat counts, as before.
    assert [v.oracle for v in recorded_work_not_redone(reread("fetch"))] == ["recorded_work_not_redone"]


def test_running_a_tool_whose_result_the_checkpoint_holds_is_redone_work() -> None:
    redone = _timeline(
        _response(("t1", "send", {"to": "a"})),
        ("tool_call", {"tool": "send", "input": {"to": "a"}, "key": None}),
        _save([GOAL, USE, RESULT]),
        ("attempt", {}),
        ("tool_call", {"tool": "send", "input": {"to": "a"}, "key": None}),
    )
    assert [v.oracle for v in recorded_work_not_redone(redone)] == ["recorded_work_not_redone"]
    pending = _timeline(
        _response(("t1", "send", {"to": "a"})),
        _save([GOAL, USE]),
        ("attempt", {}),
        ("tool_call", {"tool": "send", "input": {"to": "a"}, "key": None}),
    )
    assert recorded_work_not_redone(pending) == []


def test_a_call_made_after_its_result_was_saved_is_an_outbox_dispatch_not_redone_work() -> None:
    # An outbox agent answers the call ("queued") durably, then a dispatch step makes it:
    # no call ran before the answer was saved, so the saved result is not the call's.
    dispatched = _timeline(
        _response(("t1", "send", {"to": "a"})),
        _save([GOAL, USE, RESULT]),
        ("tool_call", {"tool": "send", "input": {"to": "a"}, "key": None}),
        ("attempt", {}),
        ("tool_call", {"tool": "send", "input": {"to": "a"}, "key": None}),
    )
    assert recorded_work_not_redone(dispatched) == []


def test_an_outbox_entry_with_the_same_input_as_an_earlier_one_is_its_own_call_when_its_key_differs() -> None:
    # Two calls asked with the same input (t1, t2). On resume the outbox dispatches t1's
    # entry before its answer is saved; later t2's entry (its own key) is dispatched after
    # its answer. The input matched t1's, whose result the checkpoint held and whose call
    # ran before that answer: judged by input alone, t2's first and only call was "redone".
    use2 = {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "send", "input": {"to": "a"}}]}
    result2 = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "queued"}]}

    def run(second_key: str) -> Timeline:
        return _timeline(
            _response(("t1", "send", {"to": "a"})),
            _save([GOAL, USE]),
            ("attempt", {}),
            ("tool_call", {"tool": "send", "input": {"to": "a"}, "key": "entry-t1"}),
            _save([GOAL, USE, RESULT], version=2),
            _response(("t2", "send", {"to": "a"})),
            _save([GOAL, USE, RESULT, use2, result2], iteration=2, version=3),
            ("tool_call", {"tool": "send", "input": {"to": "a"}, "key": second_key}),
        )

    assert recorded_work_not_redone(run("entry-t2")) == []
    # The same call under the key it already ran with is the recorded work again.
    [violation] = recorded_work_not_redone(run("entry-t1"))
    assert "runs again though checkpoint version" in violation.message


def test_an_agents_own_keyed_call_with_a_recorded_calls_input_is_not_that_call_redone() -> None:
    # A saga: the model's refund (t1, key k-t1) ran and its result was saved; later the
    # agent compensates with a refund of its own, the same input under its own key, and
    # crashes before its effect; the resume makes the compensation again under its key.
    def run(second_key: str) -> Timeline:
        return _timeline(
            _response(("t1", "send", {"to": "a"})),
            ("tool_call", {"tool": "send", "input": {"to": "a"}, "key": "k-t1"}),
            _save([GOAL, USE, RESULT]),
            ("tool_call", {"tool": "send", "input": {"to": "a"}, "key": "k-comp"}),
            ("attempt", {}),
            ("tool_call", {"tool": "send", "input": {"to": "a"}, "key": second_key}),
        )

    assert recorded_work_not_redone(run("k-comp")) == []
    # The model's own call again under its key is the recorded work, made again.
    [violation] = recorded_work_not_redone(run("k-t1"))
    assert "runs again though checkpoint version" in violation.message


def test_completed_idempotent_fails_on_any_model_or_tool_call_after_completion() -> None:
    rerun = _timeline(("model_request", {"index": 9, "messages": [GOAL]})).events
    [violation] = completed_idempotent(rerun, "done", "done")
    assert "1 model call(s) and 0 tool call(s)" in violation.message
    assert completed_idempotent([], "done", "done") == []
    assert completed_idempotent([], "other", "done")[0].oracle == "completed_idempotent"


DRAFT = {"role": "assistant", "content": [{"type": "text", "text": "Let me lo"}]}


def test_a_draft_saved_while_its_reply_was_streaming_is_not_a_recorded_reply() -> None:
    # The agent saves the text as it streams in; the crash comes before the stream ends;
    # the resumed agent drops the draft and asks again: nothing recorded is redone.
    request = ("model_request", {"index": 1, "messages": [GOAL]})
    streaming = ("model_response", {"index": 1, "status": 200, "tool_uses": [], "streamed": True})
    draft = _timeline(request, streaming, _save([GOAL, DRAFT]), ("attempt", {}),
                      ("model_request", {"index": 2, "messages": [GOAL]}))
    assert recorded_work_not_redone(draft) == []
    # Read to its end before the save, the reply is recorded: asking again redoes it.
    whole = _timeline(request, streaming, ("model_delivered", {"index": 1}), _save([GOAL, DRAFT]), ("attempt", {}),
                      ("model_request", {"index": 2, "messages": [GOAL]}))
    [violation] = recorded_work_not_redone(whole)
    assert "asks again for reply 1" in violation.message
    # A reply that does not stream is whole when it arrives.
    plain = _timeline(request, ("model_response", {"index": 1, "status": 200, "tool_uses": []}), _save([GOAL, USE]),
                      ("attempt", {}), ("model_request", {"index": 2, "messages": [GOAL]}))
    assert len(recorded_work_not_redone(plain)) == 1
    # A save mid-stream holding more than the draft (its next turn too) is judged as usual.
    later = _timeline(request, streaming, _save([GOAL, USE, RESULT]), ("attempt", {}),
                      ("model_request", {"index": 2, "messages": [GOAL]}))
    assert len(recorded_work_not_redone(later)) == 1


def test_a_checkpoint_deleted_and_saved_again_from_nothing_is_named_so_not_a_reset_count() -> None:
    # A step retried from a clean slate: its checkpoint deleted, then made again. The count
    # went back because the work was done again, not because a restart reset a counter.
    def save(iteration: int, version: int) -> tuple[str, dict[str, Any]]:
        return ("store_save", {**_save([GOAL], iteration=iteration, version=version)[1], "task_id": "t/step-0"})

    deleted = _timeline(save(0, 1), save(1, 2), ("store_delete", {"task_id": "t/step-0"}), save(0, 1))
    [violation] = iteration_monotone(deleted)
    assert "the agent deleted this checkpoint (attempt 1) and then saved it again from nothing" in violation.message
    assert "DELETED" in violation.marks.values()
    # Without the delete, across a restart: the count was reset.
    reset = _timeline(save(0, 1), save(1, 2), ("attempt", {}), save(0, 3))
    [violation] = iteration_monotone(reset)
    assert "a restart reset the count" in violation.message


def test_a_call_asked_again_after_the_agent_deleted_the_checkpoint_holding_it_is_named_so() -> None:
    use = {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_s0c0a0", "name": "send", "input": {"to": "a"}}]}

    def ask(index: int, tool_use_id: str) -> list[tuple[str, dict[str, Any]]]:
        request = {"index": index, "messages": [GOAL]}
        uses = [(tool_use_id, "send", {"to": "a"})]
        return [("model_request", request), ("model_response", {"index": index, "status": 200, "tool_uses": uses})]

    timeline = _timeline(
        ("store_load", {"found": False, "task_id": "t/step-0"}),
        *ask(1, "toolu_s0c0a0"), ("store_save", {**_save([GOAL, use])[1], "task_id": "t/step-0"}), _effect(),
        ("store_delete", {"task_id": "t/step-0"}),
        *ask(2, "toolu_s0c0a0_g1"), _effect(),
    )
    [violation], _ = no_duplicate_effect(timeline, _baseline({SEND: 1}), FLAGS, completed=True)
    assert "deleted that checkpoint and began again from nothing" in violation.message
    assert "resume went on from a checkpoint without it" not in violation.message


def test_a_call_asked_again_in_a_second_conversation_after_its_checkpoint_was_deleted_is_named_so() -> None:
    # An outside round's plan-and-execute agent: item 1 and item 2 each ask for the same
    # call (item 2 under a fresh id, as the model gives a call it issued before); item 2's
    # checkpoint is deleted and made again, and the model asked again. The diagnosis was
    # "derive the key from what a resume sees again", about keys that were derived so.
    item = {"role": "user", "content": "item 2"}

    def ask(index: int, opening: dict[str, Any], tool_use_id: str) -> list[tuple[str, dict[str, Any]]]:
        uses = [(tool_use_id, "put", {"to": "a"})]
        return [
            ("model_request", {"index": index, "messages": [opening]}),
            ("model_response", {"index": index, "status": 200, "tool_uses": uses}),
        ]

    def held(tool_use_id: str) -> dict[str, Any]:
        return {"role": "assistant", "content": [{"type": "tool_use", "id": tool_use_id, "name": "put", "input": {"to": "a"}}]}

    def put(key: str) -> tuple[str, dict[str, Any]]:
        return ("effect", {"tool": "put", "input": {"to": "a"}, "key": key})

    timeline = _timeline(
        ("store_load", {"found": False, "task_id": "t/item-1"}),
        *ask(1, GOAL, "toolu_s0c0a0"), ("store_save", {**_save([GOAL, held("toolu_s0c0a0")])[1], "task_id": "t/item-1"}),
        put("t/item-1.toolu_s0c0a0"),
        ("store_load", {"found": False, "task_id": "t/item-2"}),
        *ask(2, item, "toolu_s0c0a0_g1"), ("store_save", {**_save([item, held("toolu_s0c0a0_g1")])[1], "task_id": "t/item-2"}),
        put("t/item-2.toolu_s0c0a0_g1"),
        ("store_delete", {"task_id": "t/item-2"}),
        ("store_load", {"found": False, "task_id": "t/item-2"}),
        *ask(3, item, "toolu_s0c0a0_g2"), put("t/item-2.toolu_s0c0a0_g2"),
    )
    [violation], _ = no_duplicate_effect(timeline, _baseline({("put", '{"to":"a"}'): 2}), FLAGS, completed=True)
    assert "deleted the checkpoint that held it and began again from nothing" in violation.message
    assert "never from the attempt" not in violation.message


def test_a_cut_call_run_with_its_partial_input_is_told_so_not_called_dropped() -> None:
    # An outside round's twin ran the call of a reply cut by max_tokens (its last argument
    # missing, so the tool refused it) and went on: the report said it "drops" such calls.
    timeline = _timeline(
        ("model_request", {"index": 1, "messages": [GOAL]}),
        ("api_fault", {"fault": "max_tokens", "index": 1}),
        ("model_response", {"index": 1, "status": 200, "tool_uses": [("t1", "send", {})]}),
        ("tool_call", {"tool": "send", "input": {}, "key": None}),
    )
    [violation], _ = no_duplicate_effect(timeline, _baseline({SEND: 1}), FLAGS, completed=True)
    assert "the agent ran the cut call with the input it had ({})" in violation.message
    assert "drops a cut reply's calls" not in violation.message
    dropped = _timeline(
        ("model_request", {"index": 1, "messages": [GOAL]}),
        ("api_fault", {"fault": "max_tokens", "index": 1}),
        ("model_response", {"index": 1, "status": 200, "tool_uses": [("t1", "send", {})]}),
    )
    [violation], _ = no_duplicate_effect(dropped, _baseline({SEND: 1}), FLAGS, completed=True)
    assert "drops a cut reply's calls" in violation.message
