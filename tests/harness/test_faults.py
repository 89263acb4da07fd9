"""Each fault point crashes where its documentation says; the store wrapper injects faults."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_agentckpt._scenario import _Executor, _Outcome
from pytest_agentckpt.faults import (
    FAULT_POINTS,
    ApiFault,
    Crash,
    CrashAt,
    FaultInjector,
    FaultPlan,
    FaultyStore,
    StoreFault,
    instrument_toolbox,
)
from pytest_agentckpt.timeline import Event, Timeline
from reference_agent.scripted import Plan, Step, ToolCall
from reference_agent.world import World
from stores import Checkpoint, StoreUnavailableError, open_store

from ..buggy_agents._loop import make_agent
from .toolkit import toolbox

# One step of two parallel calls (the second irreversible), then a second step.
PLAN = Plan(
    steps=(
        Step((ToolCall("search", {"query": "crash"}), ToolCall("send_email", {"to": "ann"}))),
        Step((ToolCall("write_record", {"key": "a"}),)),
    ),
    final_answer="all done",
)


@pytest.fixture
def executor() -> Iterator[_Executor]:
    ex = _Executor(make_agent(), toolbox(), store=None, budget=None, max_resumes=None, goal="g")
    try:
        yield ex
    finally:
        ex.close()


def _run(executor: _Executor, *crashes: CrashAt, **faults: Any) -> _Outcome:
    return executor.execute(PLAN, FaultPlan(crashes=crashes, **faults))


def _before_crash(outcome: _Outcome) -> Event:
    crash = outcome.timeline.of("crash")[0]
    return outcome.timeline.events[crash.seq - 1]


def test_crash_is_a_base_exception_so_except_exception_cannot_swallow_it() -> None:
    assert not issubclass(Crash, Exception)
    # A SystemExit: asyncio lets it through the event loop (tests/zoo/test_detached.py).
    assert issubclass(Crash, SystemExit)
    injector = FaultInjector(FaultPlan((CrashAt("before_model_call"),)))

    def agent_with_a_broad_handler() -> None:
        try:
            injector.hit("before_model_call")
        except Exception:
            pytest.fail("Crash was caught by except Exception")

    with pytest.raises(Crash):
        agent_with_a_broad_handler()


def _catches_the_crash(then: str) -> Any:
    """The reference agent behind a handler that catches what ``except Exception`` does
    not, and returns (or raises) instead: a worker that reports "interrupted"."""
    inner = make_agent()

    def run(task_id: str, goal: str, **kwargs: Any) -> Any:
        try:
            return inner(task_id, goal, **kwargs)
        except Exception:
            raise
        except BaseException as exc:
            if then == "returns":
                return "interrupted"
            raise RuntimeError("interrupted") from exc

    return run


@pytest.mark.parametrize("then", ["returns", "raises"])
def test_an_agent_that_catches_the_crash_and_goes_on_is_dead_all_the_same(then: str) -> None:
    # A killed process neither returns nor raises. Before, a caught crash whose agent
    # returned ended the attempt as an answer: the task was judged finished with
    # "interrupted", the crash-free run's effects missing (no_duplicate_effect, same_answer).
    ex = _Executor(_catches_the_crash(then), toolbox(), store=None, budget=None, max_resumes=None, goal="g")
    try:
        outcome = _run(ex, CrashAt("after_tool_effect", 1))
    finally:
        ex.close()
    ends = outcome.timeline.of("attempt_end")
    assert ends[0].data["outcome"] == "crash"
    assert "caught by the agent, which then " + ("returned" if then == "returns" else "raised RuntimeError") in ends[0].data["detail"]
    assert outcome.completed and outcome.answer == "all done"


@pytest.mark.parametrize("point", FAULT_POINTS)
def test_every_fault_point_fires_and_the_agent_resumes_to_the_same_answer(
    executor: _Executor, point: str
) -> None:
    outcome = _run(executor, CrashAt(point, 1))  # type: ignore[arg-type]
    crashes = outcome.timeline.of("crash")
    assert [c.data["point"] for c in crashes] == [point]
    assert outcome.completed and outcome.answer == "all done"
    assert outcome.timeline.attempt >= 3  # crashed attempt, resume, run after completion


def test_before_model_call_crashes_after_the_request_arrives_and_before_any_reply(executor: _Executor) -> None:
    outcome = _run(executor, CrashAt("before_model_call", 2))
    assert _before_crash(outcome).kind == "model_request"
    assert outcome.timeline.of("model_request")[1].data["index"] == 2
    # The model never answered request 2 in that attempt.
    assert [e.data["index"] for e in outcome.timeline.of("model_response")][:2] == [1, 3]


def test_after_model_call_crashes_once_the_reply_is_built(executor: _Executor) -> None:
    outcome = _run(executor, CrashAt("after_model_call", 1))
    before = _before_crash(outcome)
    assert before.kind == "model_response" and before.data["status"] == 200
    # The lost reply was never saved: the first save after it comes from the resume.
    crash = outcome.timeline.of("crash")[0]
    assert next(e for e in outcome.timeline.events[crash.seq :] if e.kind == "store_save").attempt == 2


def test_iteration_start_fires_on_the_first_request_of_each_attempt_and_not_on_a_retry(
    executor: _Executor,
) -> None:
    outcome = executor.execute(PLAN, FaultPlan(api_faults=(ApiFault("server_error", 1),)))
    # One retried request (same body) + 3 iterations: the retry is not a new iteration.
    assert len(outcome.timeline.of("model_request")) == 4
    assert outcome.hits["iteration_start"] == 3
    assert outcome.hits["before_model_call"] == 4


def test_between_parallel_tools_fires_before_the_second_call_of_a_batch(executor: _Executor) -> None:
    outcome = _run(executor, CrashAt("between_parallel_tools", 1))
    before = _before_crash(outcome)
    assert before.kind == "tool_call" and before.data["tool"] == "send_email"
    assert next(e.data["tool"] for e in outcome.timeline.of("tool_call")) == "search"
    # The crash came before send_email took effect.
    crash = outcome.timeline.of("crash")[0]
    assert not [e for e in outcome.timeline.events[: crash.seq] if e.kind == "effect"]


def test_before_tool_effect_leaves_no_effect_and_after_tool_effect_leaves_one(executor: _Executor) -> None:
    # Occurrence 2 is send_email (search is occurrence 1).
    before = _run(executor, CrashAt("before_tool_effect", 2))
    crash = before.timeline.of("crash")[0]
    assert not [e for e in before.timeline.events[: crash.seq] if e.kind == "effect"]
    after = _run(executor, CrashAt("after_tool_effect", 2))
    crash = after.timeline.of("crash")[0]
    assert [e.data["tool"] for e in after.timeline.events[: crash.seq] if e.kind == "effect"] == ["send_email"]


def test_after_checkpoint_write_is_durable_but_before_checkpoint_write_is_not(executor: _Executor) -> None:
    before = _run(executor, CrashAt("before_checkpoint_write", 2))
    after = _run(executor, CrashAt("after_checkpoint_write", 2))
    saves_before = [e for e in before.timeline.events[: before.timeline.of("crash")[0].seq] if e.kind == "store_save"]
    saves_after = [e for e in after.timeline.events[: after.timeline.of("crash")[0].seq] if e.kind == "store_save"]
    assert len(saves_before) == 1  # the second save never happened
    assert len(saves_after) == 2  # it happened; only the acknowledgement was lost
    load = after.timeline.of("store_load")[1]
    assert load.data["version"] == saves_after[-1].data["version"]


def test_occurrences_count_across_resumes(executor: _Executor) -> None:
    outcome = _run(executor, CrashAt("before_model_call", 1), CrashAt("before_model_call", 2))
    crashes = outcome.timeline.of("crash")
    assert [(c.attempt, c.data["occurrence"]) for c in crashes] == [(1, 1), (2, 2)]


def test_api_faults_reach_the_sdk_and_its_retries_absorb_them(executor: _Executor) -> None:
    for kind in ("rate_limit", "server_error", "overloaded", "timeout", "disconnect", "lost_response"):
        outcome = executor.execute(PLAN, FaultPlan(api_faults=(ApiFault(kind, 2),)))
        assert [e.data["fault"] for e in outcome.timeline.of("api_fault")] == [kind]
        assert outcome.completed and outcome.answer == "all done", kind


def test_a_stream_fault_cuts_only_a_streamed_reply(executor: _Executor) -> None:
    # The executor's agent does not stream: nothing to cut, so nothing is injected or shown.
    for kind in ("stream_disconnect", "stream_error"):
        outcome = executor.execute(PLAN, FaultPlan(api_faults=(ApiFault(kind, 2),)))
        assert outcome.timeline.of("api_fault") == [] and outcome.completed, kind


# -- the store wrapper ----------------------------------------------------------------------
def _store(*faults: StoreFault, crashes: tuple[CrashAt, ...] = ()) -> FaultyStore:
    return FaultyStore(open_store("memory://"), FaultInjector(FaultPlan(crashes=crashes, store_faults=faults)))


def test_store_outage_fails_the_named_load_and_only_it() -> None:
    store = _store(StoreFault("store_outage", "load", 2))
    assert store.load("t") is None
    with pytest.raises(StoreUnavailableError):
        store.load("t")
    assert store.load("t") is None


def test_store_outage_on_save_writes_nothing() -> None:
    store = _store(StoreFault("store_outage", "save", 1, length=2))
    for _ in range(2):
        with pytest.raises(StoreUnavailableError):
            store.save(Checkpoint(task_id="t"))
    assert store.inner.load("t") is None
    assert store.save(Checkpoint(task_id="t")).version == 1
    assert [e.data["reason"] for e in store.injector.timeline.of("store_save_failed")] == ["outage", "outage"]


def test_slow_store_delays_the_operation() -> None:
    store = _store(StoreFault("slow_store", "save", 1, delay=0.05))
    started = time.perf_counter()
    store.save(Checkpoint(task_id="t"))
    assert time.perf_counter() - started >= 0.05
    assert store.injector.timeline.of("store_delay")


def test_crash_after_checkpoint_write_leaves_the_checkpoint_stored() -> None:
    store = _store(crashes=(CrashAt("after_checkpoint_write", 1),))
    with pytest.raises(Crash):
        store.save(Checkpoint(task_id="t", goal="kept"))
    stored = store.inner.load("t")
    assert stored is not None and stored.goal == "kept"


def test_crash_before_checkpoint_write_leaves_nothing_stored() -> None:
    store = _store(crashes=(CrashAt("before_checkpoint_write", 1),))
    with pytest.raises(Crash):
        store.save(Checkpoint(task_id="t"))
    assert store.inner.load("t") is None


def test_a_saved_snapshot_does_not_change_when_the_agent_mutates_its_messages() -> None:
    store = _store()
    checkpoint = Checkpoint(task_id="t", messages=[{"role": "user", "content": []}])
    store.save(checkpoint)
    checkpoint.messages[0]["content"].append({"type": "text", "text": "later"})
    assert store.injector.timeline.of("store_save")[0].data["messages"] == [{"role": "user", "content": []}]


def _saved_views(store: FaultyStore) -> list[Any]:
    return [e.data["messages"] for e in store.injector.timeline.of("store_save")]


def test_each_save_keeps_its_own_view_when_later_saves_reuse_the_copies() -> None:
    # Saves that extend the last one's history reuse its copies of the messages they
    # repeat: every view must still be what that save wrote, whatever the agent does to
    # its message objects afterwards (in place, in the prefix the saves share).
    store = _store()
    first = {"role": "user", "content": [{"type": "text", "text": "a"}]}
    checkpoint = store.save(Checkpoint(task_id="t", messages=[first]))
    checkpoint.messages.append({"role": "assistant", "content": [{"type": "text", "text": "b"}]})
    checkpoint = store.save(checkpoint)
    checkpoint = store.save(checkpoint)  # the same history again
    first["content"][0]["text"] = "z"  # in place, same length: the next save must see it
    checkpoint = store.save(checkpoint)
    checkpoint.messages.append({"role": "user", "content": "c"})
    store.save(checkpoint)
    a = {"role": "user", "content": [{"type": "text", "text": "a"}]}
    edited = {"role": "user", "content": [{"type": "text", "text": "z"}]}
    b = {"role": "assistant", "content": [{"type": "text", "text": "b"}]}
    c = {"role": "user", "content": "c"}
    views = _saved_views(store)
    assert views == [[a], [a, b], [a, b], [edited, b], [edited, b, c]]
    first["content"].append({"type": "text", "text": "later"})  # after every save
    assert _saved_views(store) == views
    # No view aliases the agent's objects, nor another view's list.
    assert all(m is not first for view in views for m in view)
    assert len({id(view) for view in views}) == len(views)


def test_a_number_that_grows_is_not_mistaken_for_the_same_message() -> None:
    # JSON prefixes: "[1" is a prefix of "[12": the copy must be of 12, not of 1.
    store = FaultyStore(open_store("memory://"), FaultInjector(), history=lambda cp: cp.metadata.get("h"))
    checkpoint = store.save(Checkpoint(task_id="t", metadata={"h": [1]}))
    checkpoint.metadata["h"] = [12, 3]
    store.save(checkpoint)
    assert _saved_views(store) == [[1], [12, 3]]


def test_closing_the_wrapper_leaves_the_harness_store_open() -> None:
    store = _store()
    store.close()
    assert store.save(Checkpoint(task_id="t")).version == 1


# -- the toolbox wrapper ---------------------------------------------------------------------
def test_instrumented_toolbox_records_irreversible_effects_in_the_world_and_honours_keys() -> None:
    world = World()
    tools = instrument_toolbox(toolbox(), world, FaultInjector())
    tools.call("write_record", {"key": "a"}, idempotency_key="k1")
    tools.call("write_record", {"key": "a"}, idempotency_key="k1")
    tools.call("send_email", {"to": "ann"}, idempotency_key="k2")
    tools.call("send_email", {"to": "ann"}, idempotency_key="k2")
    tools.call("search", {"query": "keys"})
    assert world.count("write_record", {"key": "a"}) == 1  # honours keys
    assert world.count("send_email", {"to": "ann"}) == 2  # takes no key
    assert world.effects("search") == []  # reversible: no effect recorded
    assert tools.definitions() == toolbox().definitions()


class _PlainToolbox:
    """A toolbox that is not the reference Toolbox: only the contract's three methods."""

    def __init__(self) -> None:
        self._inner = toolbox()

    def definitions(self) -> list[dict[str, Any]]:
        return self._inner.definitions()

    def spec(self, name: str) -> Any:
        return self._inner.spec(name)

    def call(self, name: str, input: Any, *, idempotency_key: str | None = None) -> Any:
        return self._inner.call(name, input, idempotency_key=idempotency_key)


def test_a_toolbox_of_the_contract_only_is_instrumented_at_call() -> None:
    world = World()
    injector = FaultInjector(FaultPlan((CrashAt("after_tool_effect", 2),)))
    tools = instrument_toolbox(_PlainToolbox(), world, injector)
    assert tools.call("send_email", {"to": "bob"}).content == "mail to bob sent"
    with pytest.raises(Crash):
        tools.call("send_email", {"to": "bob"})
    assert world.count("send_email", {"to": "bob"}) == 2


# -- what a scenario leaves behind ------------------------------------------------------------
def test_a_scenario_leaves_no_garbage_cycles() -> None:
    # In a fresh process: in a worker of this suite, state that earlier tests left made the
    # fake part of a cycle (not reproduced alone; see the project's notes), which is about
    # that state, not about a scenario.
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    child = subprocess.run(
        [sys.executable, "-c", "from tests.harness.test_faults import _scenario_cycles; _scenario_cycles()"],
        cwd=root, capture_output=True, text=True, timeout=300,
    )
    assert child.returncode == 0, child.stderr[-3000:]


def _scenario_cycles() -> None:
    # The fake, its hooks, the injector, the instrumented toolbox and a crash's traceback
    # are freed when a scenario ends, by reference counting: left in reference cycles,
    # they were a tenth of a fuzz run in garbage-collector passes.
    import functools
    import gc

    import reference_agent
    from pytest_agentckpt.fake_api import instant_retries

    ex = _Executor(
        functools.partial(reference_agent.run, retry_backoff=0.0), toolbox(), store=None, budget=None,
        max_resumes=None, goal="g",
    )
    faults = FaultPlan(
        crashes=(CrashAt("after_tool_effect", 1), CrashAt("after_checkpoint_write", 4)),
        api_faults=(ApiFault("overloaded", 2),),
    )
    # Two scenarios measured one after the other: garbage made once (a cache some earlier
    # test of the same worker left to fill) shows in the first only; a scenario's own
    # cycles would show in both.
    unreachable: list[list[str]] = []
    try:
        with instant_retries(0.0):
            ex.execute(PLAN, faults)  # the SDK client and the caches are made once
            gc.collect()
            for _ in range(2):
                gc.disable()
                gc.set_debug(gc.DEBUG_SAVEALL)
                try:
                    outcome = ex.execute(PLAN, faults)
                    gc.collect()
                    unreachable.append(sorted({type(o).__name__ for o in gc.garbage}))
                    gc.garbage.clear()
                finally:
                    gc.set_debug(0)
                    gc.enable()
                assert outcome.completed and outcome.crashes == 2
    finally:
        ex.close()
    assert unreachable[-1] == [], unreachable


def test_each_load_and_save_names_its_checkpoint_and_the_timeline_shows_it_when_there_are_several() -> None:
    store = _store()
    timeline = store.injector.timeline
    timeline.start_attempt()
    store.save(Checkpoint(task_id="t1", messages=[{"role": "user", "content": "go"}]))
    assert "[t1]" not in timeline.format()  # one checkpoint: nothing to tell apart
    store.load("t1/sub-0")
    store.save(Checkpoint(task_id="t1/sub-0"))
    assert [e.data["task_id"] for e in timeline.of("store_load", "store_save")] == ["t1", "t1/sub-0", "t1/sub-0"]
    lines = timeline.format().splitlines()
    assert lines[1].endswith("status running, 1 messages [t1]")
    assert lines[2].endswith("checkpoint load: none [t1/sub-0]")


def test_a_save_without_the_history_where_the_harness_looks_is_shown_not_a_type_error() -> None:
    # An agent with its own state format, fuzzed without history=: its saves hold no history.
    store = _store()
    store.injector.timeline.start_attempt()
    store.save(Checkpoint(task_id="t1", artifacts={"session": "{}"}))
    assert store.injector.timeline.format().splitlines()[1].endswith("status running, history not found")


def test_a_reply_is_numbered_by_its_own_request_when_another_workers_came_in_between() -> None:
    # Two workers on one fake (takeover): A's request, then B's request and reply, then
    # A's reply. A's reply was numbered by the last request (B's), so a request had two
    # replies and another none in the timeline.
    timeline = Timeline()
    timeline.start_attempt()
    injector = FaultInjector(FaultPlan(), timeline)
    body = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "go"}]}

    def reply(text: str) -> dict[str, Any]:
        return {"id": f"msg_{text}", "type": "message", "role": "assistant", "stop_reason": "end_turn",
                "content": [{"type": "text", "text": text}]}

    injector.model_hook("request", 10, body)
    injector.model_hook("request", 11, {**body, "messages": [{"role": "user", "content": "b"}]})
    injector.model_hook("response", 11, reply("b"))
    injector.model_hook("response", 10, reply("a"))
    requests = [e.data["index"] for e in timeline.of("model_request")]
    replies = {e.data["text"]: e.data["index"] for e in timeline.of("model_response")}
    assert requests == [1, 2] and replies == {"b": 2, "a": 1}
