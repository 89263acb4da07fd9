"""The checkpointed loop, in process: crashes, resumes, stop reasons, store failures."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from reference_agent import (
    CannedModel,
    ContextWindowExceededError,
    FakeMessagesAPI,
    IntentNotRecordedError,
    InvalidHistoryError,
    IterationBudgetExceededError,
    ModelRefusalError,
    TaskOwnedElsewhereError,
    Toolbox,
    ToolSpec,
    World,
    demo_plan,
    demo_toolbox,
    run,
)
from reference_agent.agent import AgentEvent, idempotency_key_for
from reference_agent.demo_tools import DEMO_GOAL
from stores import Checkpoint, CheckpointStore, CorruptCheckpointError, StoreUnavailableError
from stores.memory import MemoryStore


class Crash(BaseException):
    """An injected crash: not an Exception, so no `except Exception` swallows it."""


IRREVERSIBLE = ("write_record", "send_message", "create_file")


class FaultyStore:
    """A store wrapper: crash or fail at chosen saves; records the iterations saved."""

    def __init__(self, inner: CheckpointStore) -> None:
        self.inner = inner
        self.saves = 0
        self.crash_before: set[int] = set()
        self.crash_after: set[int] = set()
        self.fail: Callable[[int, Checkpoint], bool] = lambda n, cp: False
        self.fail_after_write: set[int] = set()
        self.iterations: list[int] = []

    def load(self, task_id: str) -> Checkpoint | None:
        return self.inner.load(task_id)

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        self.saves += 1
        n = self.saves
        if n in self.crash_before:
            raise Crash(f"before save {n}")
        if self.fail(n, checkpoint):
            raise StoreUnavailableError(f"store down at save {n}")
        saved = self.inner.save(checkpoint)
        self.iterations.append(saved.iteration)
        if n in self.crash_after:
            raise Crash(f"after save {n}")
        if n in self.fail_after_write:
            raise StoreUnavailableError(f"acknowledgement of save {n} lost")
        return saved

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Harness:
    """The demo task with a World, a fake API, a faulty store and counted tool calls."""

    def __init__(self, **api_kwargs: Any) -> None:
        self.world = World()
        self.api = FakeMessagesAPI(demo_plan(), **api_kwargs)
        self.client = self.api.client(max_retries=0)
        self.store = FaultyStore(MemoryStore())
        self.tool_calls: list[str] = []
        self.crash_tool: dict[tuple[str, int], str] = {}  # (tool, nth call) -> before/after
        self.events: list[AgentEvent] = []
        counts: dict[str, int] = {}

        def wrap(spec: ToolSpec) -> Callable[..., Any]:
            def call(**kwargs: Any) -> Any:
                counts[spec.name] = counts.get(spec.name, 0) + 1
                self.tool_calls.append(spec.name)
                where = self.crash_tool.pop((spec.name, counts[spec.name]), None)
                if where == "before":
                    raise Crash(f"before {spec.name}")
                result = spec.function(**kwargs)
                if where == "after":
                    raise Crash(f"after {spec.name}")
                return result

            return call

        self.tools: Toolbox = demo_toolbox(self.world).replace_functions(wrap)

    def run(self, **kwargs: Any) -> str:
        return run("task", DEMO_GOAL, client=self.client, store=self.store, tools=self.tools,
                   on_event=self.events.append, retry_backoff=0, **kwargs)

    def run_to_end(self, max_restarts: int = 10, **kwargs: Any) -> tuple[str, int]:
        for restart in range(max_restarts):
            try:
                return self.run(**kwargs), restart
            except Crash:
                continue
        raise AssertionError("did not finish")

    def effects(self, tool: str) -> int:
        return len(self.world.effects(tool))


@pytest.fixture(scope="module")
def crash_free() -> Harness:
    h = Harness()
    h.answer = h.run()  # type: ignore[attr-defined]
    return h


def assert_survived(h: Harness, crash_free: Harness, answer: str) -> None:
    """The oracles: valid requests, effects once, same answer, iterations monotonic."""
    assert all(e.status == 200 for e in h.api.exchanges), [e.status for e in h.api.exchanges]
    assert answer == crash_free.answer  # type: ignore[attr-defined]
    assert h.effects("write_record") == 2
    assert h.effects("send_message") == 1
    unknown = [e for e in h.events if e.kind == "tool_call" and e.data["outcome"] == "unknown"]
    # create_file takes no key: a crash that hid its outcome (effect done or not) is
    # answered UNKNOWN and the scripted model calls it again (the harness's "unsafe
    # tool"); the agent itself never repeats it.
    assert 1 <= h.effects("create_file") <= 1 + len(unknown)
    assert h.store.iterations == sorted(h.store.iterations)
    cp = h.store.load("task")
    assert cp is not None and cp.status == "completed" and cp.final_answer == answer


def test_an_uninterrupted_run_acts_once_and_keeps_a_completed_checkpoint(crash_free: Harness) -> None:
    cp = crash_free.store.load("task")
    assert cp is not None
    assert (cp.status, cp.iteration, crash_free.api.model_calls) == ("completed", 7, 7)
    assert crash_free.store.saves == SAVES_IN_A_RUN
    assert [crash_free.effects(t) for t in IRREVERSIBLE] == [2, 1, 1]
    assert [a.state for a in cp.actions] == ["done"] * 4
    assert all(a.idempotency_key == idempotency_key_for("task", a.tool_use_id) for a in cp.actions)
    assert cp.artifacts and len(cp.completed_tasks) == 8


def test_running_a_completed_task_again_makes_no_model_or_tool_call(crash_free: Harness) -> None:
    calls, tools = crash_free.api.model_calls, len(crash_free.tool_calls)
    assert crash_free.run() == crash_free.answer  # type: ignore[attr-defined]
    assert (crash_free.api.model_calls, len(crash_free.tool_calls)) == (calls, tools)


SAVES_IN_A_RUN = 22


@pytest.mark.parametrize("where", ["before", "after"])
@pytest.mark.parametrize("save", range(1, SAVES_IN_A_RUN + 1))
def test_a_crash_at_any_checkpoint_write_resumes_without_duplicates(
    crash_free: Harness, save: int, where: str
) -> None:
    h = Harness()
    (h.store.crash_before if where == "before" else h.store.crash_after).add(save)
    answer, restarts = h.run_to_end()
    assert restarts == 1
    assert_survived(h, crash_free, answer)


@pytest.mark.parametrize("where", ["before", "after"])
@pytest.mark.parametrize("call", [("write_record", 1), ("write_record", 2), ("send_message", 1),
                                  ("create_file", 1), ("search", 1), ("fetch_page", 2)])
def test_a_crash_around_a_tool_effect_resumes_without_duplicates(
    crash_free: Harness, call: tuple[str, int], where: str
) -> None:
    h = Harness()
    h.crash_tool[call] = where
    answer, restarts = h.run_to_end()
    assert restarts == 1
    assert_survived(h, crash_free, answer)


def test_an_idempotent_intent_without_outcome_is_rerun_with_the_same_key(crash_free: Harness) -> None:
    h = Harness()
    h.crash_tool[("send_message", 1)] = "after"  # the effect happened, the outcome is lost
    answer, _ = h.run_to_end()
    reruns = [e for e in h.events if e.kind == "tool_call" and e.data["outcome"] == "rerun_with_key"]
    assert [e.data["tool"] for e in reruns] == ["send_message"]
    assert h.effects("send_message") == 1
    assert_survived(h, crash_free, answer)


def test_an_unsafe_intent_without_outcome_is_answered_unknown_never_retry() -> None:
    h = Harness()
    h.crash_tool[("create_file", 1)] = "after"
    h.run_to_end()
    cp = h.store.load("task")
    assert cp is not None
    record = next(a for a in cp.actions if a.tool_name == "create_file")
    assert record.state == "unknown" and record.result is not None
    assert str(record.result.content).startswith("UNKNOWN OUTCOME")
    assert "retry" not in str(record.result.content).lower().replace("before any retry", "")
    # The agent answered UNKNOWN; the scripted model retried on its own with a new id.
    assert h.effects("create_file") == 2


def test_a_reply_lost_in_a_crash_is_asked_for_again(crash_free: Harness) -> None:
    h = Harness()
    fired: list[int] = []

    def lose_third_reply(event: str, index: int, body: dict[str, Any]) -> None:
        if event == "response" and index == 2 and not fired:
            fired.append(index)
            raise Crash("reply lost")

    h.api.add_hook(lose_third_reply)
    answer, restarts = h.run_to_end()
    assert restarts == 1
    assert_survived(h, crash_free, answer)


def test_the_iteration_budget_spans_restarts(crash_free: Harness) -> None:
    h = Harness()
    h.store.crash_after.add(8)  # a crash in iteration 3
    with pytest.raises(IterationBudgetExceededError, match="max_iterations=5"):
        h.run_to_end(max_iterations=5)
    cp = h.store.load("task")
    assert cp is not None and (cp.status, cp.iteration) == ("failed", 5)
    # A larger budget resumes the same task: 7 model calls in all, not 7 more.
    answer = h.run(max_iterations=10)
    assert h.api.model_calls == 7
    assert_survived(h, crash_free, answer)


def test_routine_save_failures_are_reported_and_the_run_goes_on(crash_free: Harness) -> None:
    h = Harness()
    h.store.fail = lambda n, cp: n % 2 == 0 and not cp.actions
    answer = h.run()
    failed = [e for e in h.events if e.kind == "checkpoint_failed"]
    assert failed and all(not e.data["required"] for e in failed)
    assert_survived(h, crash_free, answer)


def test_an_intent_that_cannot_be_recorded_blocks_its_action_then_resumes(crash_free: Harness) -> None:
    h = Harness()
    down = {"on": True}
    h.store.fail = lambda n, cp: down["on"] and any(a.state == "intent" for a in cp.actions)
    with pytest.raises(IntentNotRecordedError, match="not performed"):
        h.run(save_attempts=3)
    assert h.effects("write_record") == 0
    assert "write_record" not in h.tool_calls
    down["on"] = False
    answer = h.run()
    assert_survived(h, crash_free, answer)


@pytest.mark.parametrize("url", ["memory://", "sqlite"])
def test_a_checkpoint_no_store_can_hold_stops_the_run_at_once_naming_the_place(url: str, tmp_path: Any) -> None:
    # An outside round: metadata with a NaN made every save fail; the run retried them as a
    # store outage and ended with "the checkpoint store stayed unavailable for 5 attempts".
    from stores import UnstorableCheckpointError, open_store

    store = open_store(url if url != "sqlite" else f"sqlite:///{tmp_path / 'c.db'}")
    events: list[AgentEvent] = []
    with pytest.raises(UnstorableCheckpointError, match=r"at metadata\.a .*nan"):
        run("n1", "g", client=FakeMessagesAPI(demo_plan()).client(), store=store,
            tools=demo_toolbox(World()), metadata={"a": float("nan")}, on_event=events.append)
    assert [e.kind for e in events if e.kind in ("checkpoint_failed", "stopped")] == ["stopped"]
    assert events[-1].data["reason"] == "unstorable"
    assert store.load("n1") is None
    store.close()


def test_an_intent_of_a_tool_gone_from_the_toolbox_is_settled_as_unknown_not_as_no_such_tool() -> None:
    # An outside round: a resume after a deploy that removed the tool answered the call
    # "no tool named 'wire_money'" (as if it never happened) and left the intent pending.
    from stores import ActionRecord

    store = MemoryStore()
    use = {"type": "tool_use", "id": "toolu_w", "name": "wire_money", "input": {"to": "x"}}
    store.save(Checkpoint(
        task_id="t", goal="g",
        messages=[{"role": "user", "content": "g"}, {"role": "assistant", "content": [use]}],
        actions=[ActionRecord(tool_use_id="toolu_w", tool_name="wire_money", input={"to": "x"}, idempotency_key="k")],
    ))
    events: list[AgentEvent] = []
    run("t", "g", client=FakeMessagesAPI(demo_plan()).client(), store=store, tools=demo_toolbox(World()),
        on_event=events.append)
    calls = [e.data for e in events if e.kind == "tool_call" and e.data["tool"] == "wire_money"]
    assert [c["outcome"] for c in calls] == ["unknown"]
    saved = store.load("t")
    assert saved is not None and saved.actions[0].state == "unknown"
    answer = saved.messages[2]["content"][0]
    assert answer["is_error"] is True and "UNKNOWN OUTCOME" in str(answer["content"])


def test_a_lost_acknowledgement_is_not_mistaken_for_another_worker(crash_free: Harness) -> None:
    h = Harness()
    h.store.fail_after_write.update({3, 9})
    answer = h.run()
    assert_survived(h, crash_free, answer)


def test_a_task_deleted_while_it_runs_is_said_to_be_deleted_not_owned_elsewhere() -> None:
    # A CLI round deleted a task while its run went on: the run said another worker owned
    # it and had saved first; no one had.
    h = Harness()
    inner = h.store.inner

    def deleted_meanwhile(n: int, cp: Checkpoint) -> bool:
        if n == 6:
            inner.delete("task")
        return False

    h.store.fail = deleted_meanwhile
    with pytest.raises(TaskOwnedElsewhereError, match="checkpoint was deleted while this worker ran it"):
        h.run()
    assert inner.load("task") is None  # not created anew


def test_another_worker_writing_the_task_stops_this_one_cleanly() -> None:
    h = Harness()
    inner = h.store.inner

    def other_worker_writes(n: int, cp: Checkpoint) -> bool:
        if n == 6:
            stored = inner.load("task")
            assert stored is not None
            inner.save(stored)  # the other worker's save moves the version on
        return False

    h.store.fail = other_worker_writes
    with pytest.raises(TaskOwnedElsewhereError, match="another worker owns"):
        h.run()
    effects = len(h.world.effects())
    assert [e.data["reason"] for e in h.events if e.kind == "stopped"] == ["conflict"]
    assert effects <= 1


def test_a_load_error_propagates_and_is_never_taken_for_no_checkpoint() -> None:
    class Corrupt(FaultyStore):
        def load(self, task_id: str) -> Checkpoint | None:
            raise CorruptCheckpointError(task_id, "bad bytes")

    h = Harness()
    h.store = Corrupt(MemoryStore())
    with pytest.raises(CorruptCheckpointError):
        h.run()
    assert h.api.model_calls == 0 and h.store.saves == 0


def test_an_invalid_stored_history_fails_before_any_request() -> None:
    h = Harness()
    h.store.inner.save(Checkpoint(task_id="task", goal="g", messages=[
        {"role": "user", "content": [{"type": "text", "text": "  "}]}]))
    with pytest.raises(InvalidHistoryError) as raised:
        h.run()
    assert h.api.exchanges == []
    # Refused before the repair's save: the task names its delete command in the CLI.
    assert isinstance(raised.value, CorruptCheckpointError)
    assert h.store.saves == 0


@pytest.mark.parametrize("stored", [
    [{"role": "user"}],                                       # no content: repair drops it
    [{"role": "user", "content": [{"type": "tool_result"}]}],  # an orphan result only
    [{"role": "robot", "content": "hi"}],
    [{"role": "assistant", "content": "hi"}, {"role": "user", "content": "go"}],
])
def test_a_stored_history_repair_cannot_mend_is_corrupt_and_left_as_it_is(
    stored: list[dict[str, Any]],
) -> None:
    h = Harness()
    h.store.inner.save(Checkpoint(task_id="task", goal="g", messages=stored))
    with pytest.raises(CorruptCheckpointError, match="cannot be resumed"):
        h.run()
    assert h.api.exchanges == [] and h.store.saves == 0
    loaded = h.store.inner.load("task")
    assert loaded is not None and loaded.messages == stored


def test_a_wrong_client_store_or_tools_is_a_type_error_before_anything_is_written() -> None:
    store = MemoryStore()
    client = FakeMessagesAPI(demo_plan()).client()
    tools = Toolbox([])
    for kwargs, says in [
        ({"store": None}, "store must be a checkpoint store"),
        ({"store": "memory://"}, "store must be a checkpoint store"),
        ({"tools": [print]}, "tools must be a Toolbox"),
        ({"client": None}, "client must be an anthropic.Anthropic client"),
    ]:
        arguments: dict[str, Any] = {"client": client, "store": store, "tools": tools, **kwargs}
        with pytest.raises(TypeError, match=says):
            run("task", "g", **arguments)
    assert store.load("task") is None


def test_agent_state_in_the_metadata_that_is_not_an_object_is_corrupt() -> None:
    h = Harness()
    h.store.inner.save(Checkpoint(task_id="task", goal="g", messages=[{"role": "user", "content": "g"}],
                                  metadata={"reference_agent": "x"}))
    with pytest.raises(CorruptCheckpointError, match="metadata\\['reference_agent'\\]"):
        h.run()
    assert h.api.exchanges == [] and h.store.saves == 0


def test_checkpoint_every_n_saves_less_and_still_acts_once(crash_free: Harness) -> None:
    h = Harness()
    answer = h.run(checkpoint_every=3)
    assert h.store.saves < crash_free.store.saves
    assert_survived(h, crash_free, answer)
    h2 = Harness()
    h2.store.crash_after.add(5)
    answer, _ = h2.run_to_end(checkpoint_every=3)
    assert_survived(h2, crash_free, answer)


# -- stop reasons --------------------------------------------------------------------


def _echo_tools(calls: list[dict[str, Any]]) -> Toolbox:
    def echo(text: str) -> str:
        calls.append({"text": text})
        return text

    return Toolbox([ToolSpec.from_function(echo, description="Echo.")])


def _canned(*replies: Any, **kwargs: Any) -> tuple[FakeMessagesAPI, MemoryStore]:
    return FakeMessagesAPI(CannedModel(list(replies)), **kwargs), MemoryStore()


TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {"text": "hi"}}


def test_max_tokens_never_runs_a_cut_off_tool_call_and_asks_to_continue() -> None:
    api, store = _canned(
        {"content": [{"type": "text", "text": "Let me "}, TOOL_USE], "stop_reason": "max_tokens"},
        "done",
    )
    calls: list[dict[str, Any]] = []
    assert run("t", "g", client=api.client(), store=store, tools=_echo_tools(calls)) == "done"
    assert calls == []
    sent = api.requests[1]["messages"]
    assert sent[1] == {"role": "assistant", "content": [{"type": "text", "text": "Let me"}]}
    assert "NOT executed" in sent[2]["content"]


def test_pause_turn_sends_the_paused_reply_back_to_continue() -> None:
    api, store = _canned(
        {"content": [{"type": "text", "text": "Searching"}], "stop_reason": "pause_turn"},
        "found it",
    )
    assert run("t", "g", client=api.client(), store=store, tools=Toolbox([])) == "found it"
    assert api.requests[1]["messages"][-1]["role"] == "assistant"


def test_stop_sequence_completes_with_the_text() -> None:
    api, store = _canned({"content": [{"type": "text", "text": "42"}], "stop_reason": "stop_sequence"})
    assert run("t", "g", client=api.client(), store=store, tools=Toolbox([])) == "42"
    cp = store.load("t")
    assert cp is not None and cp.status == "completed"


@pytest.mark.parametrize(
    ("stop_reason", "error"),
    [("refusal", ModelRefusalError), ("model_context_window_exceeded", ContextWindowExceededError)],
)
def test_refusal_and_full_context_stop_with_a_failed_checkpoint(
    stop_reason: str, error: type[Exception]
) -> None:
    api, store = _canned({"content": [{"type": "text", "text": "No."}], "stop_reason": stop_reason})
    with pytest.raises(error):
        run("t", "g", client=api.client(), store=store, tools=Toolbox([]))
    cp = store.load("t")
    assert cp is not None and cp.status == "failed"
    # Running it again reports the failure without calling the model.
    with pytest.raises(Exception, match="failed earlier"):
        run("t", "g", client=api.client(), store=store, tools=Toolbox([]))
    assert api.model_calls == 1


def test_thinking_blocks_and_signatures_are_stored_and_sent_back_unchanged() -> None:
    thinking = {"type": "thinking", "thinking": "I should echo.", "signature": "c2lnbmF0dXJl=="}
    api, store = _canned({"content": [thinking, TOOL_USE]}, "echoed")
    calls: list[dict[str, Any]] = []
    run("t", "g", client=api.client(), store=store, tools=_echo_tools(calls))
    assert api.requests[1]["messages"][1]["content"][0] == thinking
    cp = store.load("t")
    assert cp is not None and cp.messages[1]["content"][0] == thinking
    assert calls == [{"text": "hi"}]


def test_tool_calls_are_answered_even_when_the_stop_reason_says_end_turn() -> None:
    api, store = _canned({"content": [TOOL_USE], "stop_reason": "end_turn"}, "ok")
    calls: list[dict[str, Any]] = []
    assert run("t", "g", client=api.client(), store=store, tools=_echo_tools(calls)) == "ok"
    assert calls == [{"text": "hi"}]


def test_a_repeat_safe_intent_without_outcome_is_rerun_not_answered_unknown() -> None:
    # create_file declared repeat-safe (an overwrite): a crash after its effect hides the
    # outcome, and the resume runs it again instead of answering UNKNOWN.
    h = Harness()
    h.tools = Toolbox(
        dataclasses.replace(spec, idempotent=False, repeat_safe=True)
        if spec.name == "create_file" else spec
        for spec in h.tools
    )
    h.crash_tool[("create_file", 1)] = "after"
    answer, restarts = h.run_to_end()
    assert restarts == 1
    outcomes = [e.data["outcome"] for e in h.events
                if e.kind == "tool_call" and e.data["tool"] == "create_file"]
    assert outcomes == ["rerun"]  # the first attempt crashed before its event
    assert h.effects("create_file") == 2  # the repeat, harmless for a repeat-safe tool
    cp = h.store.load("task")
    assert cp is not None and cp.status == "completed" and cp.final_answer == answer
    record = next(a for a in cp.actions if a.tool_name == "create_file")
    assert record.state == "done" and not str(record.result.content).startswith("UNKNOWN")


def test_each_request_after_the_first_is_checked_on_its_new_messages_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A long run is not quadratic in the agent's own check: every request but the first of
    # a run extends the last one, and the validator reads only what it adds.
    from reference_agent.validation import RequestValidator

    known: dict[int, list[tuple[int, int]]] = {}
    validate = RequestValidator.validate

    def spy(self: RequestValidator, messages: Any, **kwargs: Any) -> int:
        start = validate(self, messages, **kwargs)
        known.setdefault(id(self), []).append((start, len(messages)))
        return start

    monkeypatch.setattr(RequestValidator, "validate", spy)
    h = Harness()
    h.run()
    # Two validators saw the run: the agent's own and the fake API's.
    assert len(known) == 2
    for checks in known.values():
        assert len(checks) == h.api.model_calls == 7
        assert checks[0][0] == 0
        assert all(0 < start < total for start, total in checks[1:]), checks


# -- tracing -------------------------------------------------------------------------------
class _RecordingTracer:
    """A tracer of the test's own: every span it is asked for, with its attributes."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, dict[str, Any]]] = []

    def start_as_current_span(self, name: str, attributes: dict[str, Any] | None = None) -> Any:
        import contextlib

        from opentelemetry import trace

        self.spans.append((name, dict(attributes or {})))
        return contextlib.nullcontext(trace.INVALID_SPAN)


def test_spans_reach_a_tracer_that_records(monkeypatch: pytest.MonkeyPatch) -> None:
    import reference_agent.agent as agent_module

    tracer = _RecordingTracer()
    monkeypatch.setattr(agent_module, "_tracer", tracer)
    Harness().run()
    names = [name for name, _ in tracer.spans]
    assert names[0] == "agentckpt.load" and "agentckpt.save" in names
    saves = [attributes for name, attributes in tracer.spans if name == "agentckpt.save"]
    assert all(a["agentckpt.task_id"] == "task" and "agentckpt.save.reason" in a for a in saves)
    assert [a["agentckpt.version"] for a in saves] == sorted(a["agentckpt.version"] for a in saves)


def test_without_a_tracer_provider_a_span_is_the_current_one() -> None:
    # The no-op tracer makes the current (non-recording) span current again; the agent
    # hands that span back without the tracer's machinery.
    from opentelemetry import trace

    import reference_agent.agent as agent_module

    assert agent_module._tracing_off()
    current = trace.get_current_span()
    with trace.use_span(trace.NonRecordingSpan(current.get_span_context())) as outer:
        loop = agent_module._Loop(
            "t", "g", client=None, store=None, tools=None, max_iterations=1, checkpoint_every=1,  # type: ignore[arg-type]
            model="m", max_tokens=8, system=None, metadata=None, on_event=None, save_attempts=1,
            retry_backoff=0.0,
        )
        with loop.span("agentckpt.save", reason="x") as span:
            assert span is outer is trace.get_current_span()


@pytest.mark.parametrize(
    ("kwargs", "error", "says"),
    [
        ({"max_iterations": "5"}, ValueError, "max_iterations must be an int >= 1, not '5'"),
        ({"checkpoint_every": True}, ValueError, "checkpoint_every must be an int >= 1, not True"),
        ({"metadata": "x"}, TypeError, "metadata must be a mapping"),
        ({"on_event": 5}, TypeError, "on_event must be a function of an AgentEvent"),
        ({"retry_backoff": -1}, ValueError, "retry_backoff must be a number of seconds, 0 or more"),
    ],
)
def test_a_bad_argument_is_refused_before_anything_is_written(kwargs: dict[str, Any], error: type[Exception], says: str) -> None:
    # They were a TypeError from a comparison, a ValueError from dict(), a TypeError from
    # a call deep in the loop, or taken as they were (an outside round).
    store = MemoryStore()
    with pytest.raises(error, match=says):
        run("bad", "g", client=FakeMessagesAPI(demo_plan()).client(), store=store, tools=demo_toolbox(World()), **kwargs)
    assert store.load("bad") is None
