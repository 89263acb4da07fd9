"""The harness's verdicts hold for agents unlike ours: a crash ends the whole attempt, only
generations are model calls, the end of an attempt puts an unrecorded effect in doubt, hints
follow the timeline, repeat-safe tools never duplicate, runaways and nondeterministic verdicts
are reported as such."""

from __future__ import annotations

import asyncio
import itertools
import re
import threading
import warnings
from collections import Counter
from typing import Any

import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt import Plan, Step, ToolCall, UnsafeToolWarning, replay
from pytest_agentckpt.faults import (
    Crash,
    CrashAt,
    FaultInjector,
    FaultPlan,
    FaultyStore,
    InstrumentedToolbox,
)
from pytest_agentckpt.harness import NondeterministicFailure, OracleFailure, fuzz
from pytest_agentckpt.oracles import (
    Baseline,
    ToolFlags,
    effects_in_doubt,
    no_duplicate_effect,
    valid_sequence,
)
from pytest_agentckpt.timeline import Timeline
from reference_agent.validation import InvalidHistoryError, validate_messages
from reference_agent.world import World
from stores import open_store
from tests.zoo.agents import AsyncToolbox

from .toolkit import toolbox


def _instrumented(plan: FaultPlan, tools: Any = None) -> tuple[InstrumentedToolbox, FaultInjector, World]:
    world = World()
    injector = FaultInjector(plan)
    injector.timeline.start_attempt()
    return InstrumentedToolbox(tools or toolbox(), world, injector), injector, world


# -- 3: a crash ends the whole attempt ---------------------------------------------------------
def test_after_a_crash_every_call_of_the_attempt_from_any_thread_raises_and_does_nothing() -> None:
    tools, injector, world = _instrumented(FaultPlan((CrashAt("after_tool_effect", 1),)))
    with pytest.raises(Crash):
        tools.call("write_record", {"key": "a"}, idempotency_key="k1")
    raised: list[BaseException] = []

    def sibling() -> None:
        try:
            tools.call("send_email", {"to": "ann"})
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=sibling)
    thread.start()
    thread.join()
    assert len(raised) == 1 and isinstance(raised[0], Crash)
    store = FaultyStore(open_store("memory://"), injector)
    with pytest.raises(Crash):
        store.load("t")
    with pytest.raises(Crash):
        injector.model_hook("request", 0, {"max_tokens": 8, "messages": []})
    assert [e.tool for e in world.effects()] == ["write_record"]  # the sibling did nothing
    assert [e.data["tool"] for e in injector.timeline.of("tool_call")] == ["write_record"]
    injector.attempt_started()  # the next attempt is alive again
    assert not tools.call("send_email", {"to": "ann"}).is_error
    world.close()


def test_a_crash_inside_an_async_tool_ends_the_attempt_for_its_gathered_siblings() -> None:
    tools, _injector, world = _instrumented(FaultPlan((CrashAt("after_tool_effect", 1),)), AsyncToolbox(toolbox()))

    async def batch() -> Any:
        return await asyncio.gather(
            tools.call("send_email", {"to": "ann"}), tools.call("send_email", {"to": "bob"})
        )

    with pytest.raises(Crash):
        asyncio.run(batch())
    assert [e.input for e in world.effects()] == [{"to": "ann"}]
    world.close()


def test_an_async_tool_without_faults_answers_and_records_its_effect() -> None:
    tools, injector, world = _instrumented(FaultPlan(), AsyncToolbox(toolbox()))

    async def one() -> Any:
        return await tools.call("write_record", {"key": "a"}, idempotency_key="k")

    assert asyncio.run(one()).content == "record a written"
    assert asyncio.run(one()).content == "record a written"  # the key is honoured
    assert len(world.effects()) == 1
    assert len(injector.timeline.of("effect")) == 1
    world.close()


# -- 4: only generations are model calls ---------------------------------------------------------
def test_count_tokens_meets_no_fault_point_and_is_not_a_model_request() -> None:
    injector = FaultInjector(FaultPlan((CrashAt("before_model_call", 1),)))
    injector.timeline.start_attempt()
    injector.model_hook("request", 0, {"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert injector.timeline.of("model_request") == [] and injector.hits == Counter()
    with pytest.raises(Crash):
        injector.model_hook("request", 1, {"model": "m", "max_tokens": 8, "messages": []})


# -- 2: the end of an attempt puts an unrecorded effect in doubt -----------------------------
def _send_twice(end: str, asked: int) -> Timeline:
    t = Timeline()
    t.start_attempt()
    t.add("model_response", index=1, status=200, tool_uses=[("t1", "send", {"to": "a"})], text="")
    t.add("effect", tool="send", input={"to": "a"}, key=None)
    t.add("attempt_end", outcome=end, detail="")
    t.start_attempt()
    if asked > 1:
        t.add("model_response", index=2, status=200, tool_uses=[("t2", "send", {"to": "a"})], text="")
    t.add("effect", tool="send", input={"to": "a"}, key=None)
    return t


def _baseline(effects: dict[tuple[str, str], int]) -> Baseline:
    return Baseline(answer="done", effects=Counter(effects), model_turns=1, timeline=Timeline())


SEND = ("send", '{"to":"a"}')


@pytest.mark.parametrize("end", ["crash", "error", "stopped"])
def test_an_effect_then_the_end_of_the_attempt_is_in_doubt_not_the_agents_bug(end: str) -> None:
    timeline = _send_twice(end, asked=2)
    assert len(effects_in_doubt(timeline)) == 1
    violations, unsafe = no_duplicate_effect(timeline, _baseline({SEND: 1}), {"send": ToolFlags(True, False)}, completed=True)
    assert violations == [] and [u.tool for u in unsafe] == ["send"]


def test_an_action_performed_more_often_than_the_model_asked_is_always_the_agents_bug() -> None:
    timeline = _send_twice("error", asked=1)
    violations, unsafe = no_duplicate_effect(timeline, _baseline({SEND: 1}), {"send": ToolFlags(True, False)}, completed=True)
    assert [v.oracle for v in violations] == ["no_duplicate_effect"] and unsafe == []
    assert "asked for it 1 time" in violations[0].message


# -- 10: repeat-safe tools -------------------------------------------------------------------------
def test_a_repeat_of_a_repeat_safe_tool_is_never_a_duplicate() -> None:
    timeline = _send_twice("error", asked=1)
    flags = {"send": ToolFlags(True, False, repeat_safe=True)}
    violations, unsafe = no_duplicate_effect(timeline, _baseline({SEND: 1}), flags, completed=True)
    assert violations == [] and unsafe == []
    assert flags["send"].kind == "repeat-safe"


def test_the_harness_reads_repeat_safe_from_the_toolbox_spec() -> None:
    from pytest_agentckpt._scenario import _tool_flags

    class Spec:
        irreversible, idempotent, repeat_safe = True, False, True

    class Box:
        def definitions(self) -> list[dict[str, Any]]:
            return [{"name": "put"}]

        def spec(self, name: str) -> Spec:
            return Spec()

    assert _tool_flags(Box()) == {"put": ToolFlags(True, False, repeat_safe=True)}


# -- 5: hints follow the timeline ---------------------------------------------------------------------
def test_a_crash_free_invalid_history_never_blames_repair_after_a_crash() -> None:
    t = Timeline()
    t.start_attempt()
    t.add("model_request", index=1, messages=[{"role": "assistant", "content": "x"}])
    (violation,) = valid_sequence(t, validate_messages, error_type=InvalidHistoryError)
    assert "after a crash" not in violation.message and "No crash came before it" in violation.message


# -- 9: runaways --------------------------------------------------------------------------------
def _runaway(task_id: str, goal: str, *, client: Any, store: Any, tools: Any) -> str:
    while True:  # never accepts the answer
        client.messages.create(model="m", max_tokens=64, messages=[{"role": "user", "content": goal}])


def test_a_runaway_agent_is_stopped_early_and_reported_once_with_its_plan() -> None:
    with pytest.raises(OracleFailure) as caught:
        fuzz(_runaway, toolbox(), seed=1, max_examples=20, database=InMemoryExampleDatabase(), client="direct")
    failure = caught.value
    assert failure.oracle == "runaway" and failure.oracles == ["runaway"]
    report = str(failure)
    assert report.count("harness check runaway failed") == 1 and "plan:" in report
    assert "more than the 12 this scenario may make" in report  # a plan of no steps: 12, not 400


# -- 6: nondeterministic verdicts ----------------------------------------------------------------
def _flip_flop_agent() -> Any:
    """Sound, but every other resumed run changes its answer: the verdict of a scenario
    with a crash flips between one run and the next (as thread races make it flip)."""
    from tests.zoo.agents import SOUND

    sound = SOUND["threads"]
    resumed_runs = itertools.count()

    def run(task_id: str, goal: str, *, client: Any, store: Any, tools: Any) -> str:
        before = store.load(task_id)
        answer = sound(task_id, goal, client=client, store=store, tools=tools)
        resumed = before is not None and before.status == "running"
        return answer + (" (again)" if resumed and next(resumed_runs) % 2 == 0 else "")

    return run


def test_a_verdict_that_does_not_reproduce_is_reported_as_nondeterministic_with_both_timelines() -> None:
    with pytest.raises(NondeterministicFailure) as caught:
        fuzz(_flip_flop_agent(), toolbox(), seed=5, max_examples=60, database=InMemoryExampleDatabase(),
             client="direct", unsafe_tools="ignore")
    report = str(caught.value)
    assert report.startswith("agentckpt: nondeterministic verdict")
    assert "=== the failing run ===" in report and "=== the same scenario, run again ===" in report
    assert "Flaky" not in type(caught.value).__name__


# -- faults the crash-free run never reaches ----------------------------------------------------
def _counting_executor() -> tuple[Any, list[str]]:
    import reference_agent
    from pytest_agentckpt._scenario import _Executor

    runs: list[str] = []

    def agent(task_id: str, goal: str, **kwargs: Any) -> str:
        runs.append(task_id)
        return reference_agent.run(task_id, goal, retry_backoff=0.0, **kwargs)

    executor = _Executor(agent, toolbox(), store=None, budget=None, max_resumes=None, goal="g")
    return executor, runs


def test_faults_the_crash_free_run_never_reaches_are_judged_on_that_run_without_running_it_again() -> None:
    from pytest_agentckpt._judge import _evaluate
    from pytest_agentckpt.faults import ApiFault, StoreFault
    from reference_agent.scripted import Plan, Step, ToolCall

    executor, runs = _counting_executor()
    plan = Plan((Step((ToolCall("send_email", {"to": "ann"}),)),), "answer a")
    _, clean = executor.baseline(plan)
    effects, requests, saves = clean.hits["after_tool_effect"], clean.requests, clean.store_ops["save"]
    assert effects >= 1 and requests >= 2 and saves >= 2
    unreached = [
        FaultPlan((CrashAt("after_tool_effect", effects + 1),)),
        FaultPlan(api_faults=(ApiFault("overloaded", requests + 1),)),
        FaultPlan(store_faults=(StoreFault("store_outage", "save", saves + 1),)),
    ]
    for faults in unreached:
        before = len(runs)
        verdict = _evaluate(executor, plan, faults, None)
        assert len(runs) == before and verdict.outcome is clean and not verdict.violations, faults
    reached = [
        FaultPlan((CrashAt("after_tool_effect", effects),)),
        FaultPlan(api_faults=(ApiFault("overloaded", requests),)),
        FaultPlan(store_faults=(StoreFault("store_outage", "save", saves),)),
    ]
    for faults in reached:
        before = len(runs)
        verdict = _evaluate(executor, plan, faults, None)
        assert len(runs) > before and verdict.outcome is not clean, faults
    executor.close()


def test_a_stream_fault_reaches_only_a_request_that_streamed() -> None:
    from pytest_agentckpt._scenario import _Outcome
    from pytest_agentckpt.faults import ApiFault

    outcome = _Outcome(Timeline(), completed=True, answer="a", error=None)
    outcome.counted, outcome.requests, outcome.streamed = True, 3, frozenset({2})
    assert not outcome.reaches(FaultPlan(api_faults=(ApiFault("stream_disconnect", 1),)))
    assert outcome.reaches(FaultPlan(api_faults=(ApiFault("stream_error", 2),)))
    assert outcome.reaches(FaultPlan(api_faults=(ApiFault("disconnect", 1),)))


def test_the_crash_free_run_records_which_requests_streamed() -> None:
    from pytest_agentckpt._scenario import _Executor
    from reference_agent.scripted import Plan, Step, ToolCall
    from tests.zoo.agents import SOUND

    plan = Plan((Step((ToolCall("send_email", {"to": "ann"}),)),), "answer a")
    streams = _Executor(SOUND["streams"], toolbox(), store=None, budget=None, max_resumes=None, goal="g")
    _, clean = streams.baseline(plan)
    assert clean.requests >= 2 and clean.streamed == frozenset(range(1, clean.requests + 1))
    streams.close()
    executor, _ = _counting_executor()
    _, clean = executor.baseline(plan)
    assert clean.requests >= 2 and clean.streamed == frozenset()
    executor.close()


def test_a_run_whose_counts_are_not_known_is_taken_to_reach_every_fault() -> None:
    from pytest_agentckpt._scenario import _Outcome

    outcome = _Outcome(Timeline(), completed=True, answer="a", error=None)
    assert outcome.reaches(FaultPlan((CrashAt("after_tool_effect", 9),)))
    outcome.counted = True
    assert not outcome.reaches(FaultPlan((CrashAt("after_tool_effect", 9),)))
    assert not outcome.reaches(FaultPlan())


def test_an_also_failed_section_is_named_for_the_oracle_it_was_shrunk_for() -> None:
    # The smallest example for no_duplicate_effect may break a more important oracle too;
    # its section is still the no_duplicate_effect one, not a second valid_sequence.
    from pytest_agentckpt._judge import _Verdict
    from pytest_agentckpt._scenario import _Outcome
    from pytest_agentckpt._search import _led_by
    from pytest_agentckpt.oracles import Violation
    from reference_agent.scripted import Plan

    def verdict(*oracles: str) -> _Verdict:
        outcome = _Outcome(Timeline(), completed=True, answer="a", error=None)
        return _Verdict(Plan((), "a"), FaultPlan(), outcome, [Violation(o, f"{o} broke") for o in oracles], [], False)

    lead = verdict("valid_sequence")
    other = _led_by(verdict("valid_sequence", "no_duplicate_effect"), "no_duplicate_effect")
    failure = lead.failure("reproduce: here", found_after=1, others=[other])
    assert "=== also failed: no_duplicate_effect (its own smallest example) ===" in str(failure)
    assert "=== also failed: valid_sequence" not in str(failure)
    assert [e.oracle for e in failure.examples] == ["valid_sequence", "no_duplicate_effect"]


@pytest.mark.parametrize(
    ("again", "said"),
    [
        ((), "no_duplicate_effect failed in one run of this scenario and the same scenario run again passed"),
        (("no_duplicate_effect",), "no_duplicate_effect failed in some runs of this scenario and not in others"),
        (("same_answer",), "one run of this scenario failed no_duplicate_effect, and the same scenario run again failed same_answer"),
    ],
)
def test_a_nondeterministic_verdict_says_what_each_run_failed_without_contradicting_itself(
    again: tuple[str, ...], said: str
) -> None:
    from types import SimpleNamespace

    from pytest_agentckpt._judge import _unreproducible
    from pytest_agentckpt.oracles import Violation

    def verdict(oracles: tuple[str, ...]) -> Any:
        return SimpleNamespace(
            oracles=list(oracles), violations=[Violation(o, f"{o} broke") for o in oracles],
            section=lambda reproduce, limit=None: "a section", outcome=SimpleNamespace(timeline=Timeline()),
            faults=FaultPlan(), plan=None, not_checkable={}, advice=[],
        )

    report = str(_unreproducible(verdict(("no_duplicate_effect",)), verdict(again), "seed=1", found_after=None))
    assert report.startswith(f"agentckpt: nondeterministic verdict: {said}"), report


def test_the_agent_runs_after_a_failure_outside_the_harness_s_except_block() -> None:
    # After the first failure the harness runs the agent again (the search on, the
    # minimizer). Run from inside its `except OracleFailure`, every exception the agent
    # raised there had the failure's whole report as its context, and an agent (or its
    # SDK) that logs a handled error printed those reports in the captured log.
    from tests.buggy_agents.checkpoint_after_result import run as buggy
    from tests.harness.toolkit import toolbox

    contexts: list[BaseException | None] = []

    def run(task_id: str, goal: str, **kwargs: Any) -> Any:
        try:
            raise RuntimeError("handled inside the agent")
        except RuntimeError as error:
            contexts.append(error.__context__)
        return buggy(task_id, goal, **kwargs)

    with pytest.raises(OracleFailure):
        fuzz(run, toolbox(), seed=1, max_examples=60, database=InMemoryExampleDatabase(), unsafe_tools="ignore")
    assert len(contexts) > 60  # the runs after the failure are among them
    assert [c for c in contexts if isinstance(c, OracleFailure)] == []


def test_a_run_that_cannot_take_the_harness_s_arguments_is_refused_before_anything_runs() -> None:
    from tests.harness.toolkit import toolbox

    calls: list[str] = []

    def run(task_id: str, goal: str) -> str:
        calls.append(task_id)
        return "done"

    with pytest.raises(TypeError, match=r"run must accept run\(task_id, goal, \*, client, store, tools\).*"
                       r"run\(task_id: 'str', goal: 'str'\) -> 'str' does not .*unexpected keyword argument 'client'"):
        fuzz(run, toolbox(), seed=1, max_examples=5, database=InMemoryExampleDatabase())
    assert calls == []


def test_a_save_that_conflicts_because_the_attempt_never_loaded_is_explained() -> None:
    # An agent that resumes from a copy of its last acknowledged save (never loading)
    # saves with a version from before the crash: the store's ConflictError says "another
    # writer saved first", which there was not. The report says what happened instead.
    from tests.harness.toolkit import toolbox
    from tests.zoo._base import Loop, agent

    cache: dict[str, Any] = {}

    class Cached:
        def __init__(self, store: Any) -> None:
            self.store = store

        def __getattr__(self, name: str) -> Any:
            return getattr(self.store, name)

        def load(self, task_id: str) -> Any:
            if task_id in cache:  # the bug: the copy kept in memory, not the store's
                return cache[task_id].model_copy(deep=True)
            return self.store.load(task_id)

        def save(self, checkpoint: Any) -> Any:
            saved = self.store.save(checkpoint)
            cache[checkpoint.task_id] = saved.model_copy(deep=True)
            return saved

    sound = agent(Loop)

    def run(task_id: str, goal: str, *, client: Any, store: Any, tools: Any) -> str:
        return sound(task_id, goal, client=client, store=Cached(store), tools=tools)

    with pytest.raises(OracleFailure) as caught:
        fuzz(run, toolbox(), seed=1, max_examples=100, database=InMemoryExampleDatabase(), unsafe_tools="ignore")
    report = str(caught.value)
    assert "ConflictError" in report
    assert "The last attempt saved without loading the checkpoint first (no checkpoint load in it)" in report


def test_an_agent_stopped_by_its_own_budget_after_faults_took_turns_is_not_blamed() -> None:
    # An outside round's agent kept a turn budget across restarts, as it must, equal to
    # what the task takes without faults. A crash after an unkeyed call's effect left its
    # outcome unknown; the model asked again, a turn no agent avoids, and the budget ran
    # out: the run never finished, and resumes_to_completion blamed the agent.
    from tests.buggy_agents._loop import Bugs, make_agent

    plan = Plan((Step((ToolCall("send_email", {"to": "ann"}),)),), "done")
    crash = FaultPlan.from_dict({"crashes": [["after_tool_effect", 1]], "api_faults": [], "store_faults": []})
    agent = make_agent(Bugs(), max_iterations=2)  # the crash-free run takes 2 turns
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsafeToolWarning)  # send_email has no key
        replay(agent, toolbox(), plan, crash, budget=2)
        # Told of no budget, the harness cannot know: it says what to pass.
        with pytest.raises(OracleFailure, match="resumes_to_completion") as caught:
            replay(agent, toolbox(), plan, crash)
        assert "pass that limit as budget= to fuzz" in str(caught.value)
        # A budget that would have let it finish (the agent stopped short of it) is no excuse.
        with pytest.raises(OracleFailure, match="resumes_to_completion") as caught:
            replay(agent, toolbox(), plan, crash, budget=3)
        assert "budget=" not in str(caught.value).split("\n")[1]


def test_an_agent_that_completes_at_its_own_budget_after_faults_took_turns_is_not_blamed() -> None:
    # An outside round's durable-execution agent completes the task with "budget exhausted"
    # at its turn limit instead of raising: same_answer blamed it, with budget= given, and
    # an action it had no turn left for was called lost. Raising there passed.
    from tests.buggy_agents._loop import Bugs, make_agent

    plan = Plan((Step((ToolCall("send_email", {"to": "ann"}),)), Step((ToolCall("write_record", {"key": "a"}),))), "done")
    one = FaultPlan.from_dict({"crashes": [["after_tool_effect", 1]], "api_faults": [], "store_faults": []})
    two = FaultPlan.from_dict({"crashes": [["after_tool_effect", 1], ["after_tool_effect", 2]], "api_faults": [], "store_faults": []})
    agent = make_agent(Bugs(), max_iterations=3, complete_at_budget=True)  # the crash-free run takes 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsafeToolWarning)  # send_email has no key
        for faults in (one, two):
            replay(agent, toolbox(), plan, faults, budget=3)
        # Told of no budget: the answer, and the action lost under two crashes, each say what to pass.
        with pytest.raises(OracleFailure, match="same_answer") as caught:
            replay(agent, toolbox(), plan, one)
        assert "If it gave that answer at a turn limit of its own" in str(caught.value)
        with pytest.raises(OracleFailure, match="no_duplicate_effect") as caught:
            replay(agent, toolbox(), plan, two)
        lost = str(caught.value).split("\n")[1]
        assert "write_record" in lost and "an action was lost" in lost and "pass that limit as budget=" in lost
        # A budget it stopped short of is no excuse.
        with pytest.raises(OracleFailure, match="same_answer"):
            replay(agent, toolbox(), plan, one, budget=4)
    # The hint is for an agent that ended the task while the model still asked for tools:
    # one that changes the model's own final answer on resume gets none.
    changes = make_agent(Bugs(answer_changes_on_resume=True))
    with pytest.raises(OracleFailure, match="same_answer") as caught:
        replay(changes, toolbox(), Plan((Step((ToolCall("search", {"query": "q"}),)),), "done"),
               FaultPlan.from_dict({"crashes": [["after_model_call", 1]], "api_faults": [], "store_faults": []}))
    assert "budget=" not in str(caught.value)


def test_replay_and_fault_plans_refuse_what_they_cannot_run_before_anything_runs() -> None:
    # A dict or None was an AttributeError deep in a run; a typo'd key was read as no
    # faults at all, and the replay of a failure passed (an outside round).
    plan = Plan((Step((ToolCall("search", {"query": "q"}),)),), "done")
    from tests.buggy_agents._loop import Bugs, make_agent

    agent = make_agent(Bugs())
    with pytest.raises(TypeError, match=r"plan must be a Plan \(Plan.from_dict"):
        replay(agent, toolbox(), plan.to_dict(), FaultPlan())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"fault_plan must be a FaultPlan \(FaultPlan.from_dict"):
        replay(agent, toolbox(), plan, None)  # type: ignore[arg-type]
    for data, says in [
        ({"crash": [["after_tool_effect", 1]]}, "unknown key(s) crash"),
        ({"crashes": "after_tool_effect"}, "fault plan['crashes'] must be a list"),
        ({"crashes": [["after_tool_effect"]]}, "fault plan['crashes']: each entry is a list, [[point, occurrence], ...], not ['after_tool_effect']"),
        (None, "a fault plan is a dict"),
    ]:
        with pytest.raises(ValueError, match=re.escape(says)):
            FaultPlan.from_dict(data)  # type: ignore[arg-type]
    every = FaultPlan.from_dict({"crashes": [["after_tool_effect", 1]], "crash_fractions": [0.5]})
    assert FaultPlan.from_dict(every.to_dict()) == every


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_generator_function_for_run_is_refused_saying_why(kind: str) -> None:
    # Its body never ran; the report blamed completed_idempotent (an outside round).
    def gen(task_id: str, goal: str, **kwargs: Any) -> Any:
        yield "answer"

    async def agen(task_id: str, goal: str, **kwargs: Any) -> Any:
        yield "answer"

    with pytest.raises(TypeError, match=r"is a generator function \(it yields\), so calling it runs none of its body"):
        fuzz(gen if kind == "sync" else agen, toolbox(), max_examples=2)
