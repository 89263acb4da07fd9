"""The chaos engine without pytest's fixtures: crash-point enumeration, sampling, judging."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import anthropic
import pytest

import reference_agent
from pytest_agentckpt.chaos import (
    ChaosFailure,
    ChaosStats,
    ChaosTest,
    sample_plans,
    single_crash_plans,
)
from pytest_agentckpt.faults import FAULT_POINTS, CrashAt, FaultPlan
from reference_agent.offline import FakeMessagesAPI
from reference_agent.scripted import Plan, PlanModel, Step, ToolCall
from stores import open_store
from tests.buggy_agents import checkpoint_after_result
from tests.harness.toolkit import toolbox

PLAN = Plan(steps=(Step((ToolCall("send_email", {"to": "ann"}),)),), final_answer="sent")


def test_single_crash_plans_has_one_plan_per_occurrence_of_each_point() -> None:
    plans = single_crash_plans({"after_tool_effect": 2, "iteration_start": 1})
    assert [p.crashes for p in plans] == [
        (CrashAt("iteration_start", 1),),
        (CrashAt("after_tool_effect", 1),),
        (CrashAt("after_tool_effect", 2),),
    ]
    ordered = single_crash_plans(["before_model_call", "after_model_call", "before_model_call"])
    assert [p.describe() for p in ordered] == [
        "crash at before_model_call #1", "crash at after_model_call #1", "crash at before_model_call #2",
    ]
    assert all(p.size == 1 for p in plans + ordered)


def test_single_crash_plans_refuses_unknown_points() -> None:
    with pytest.raises(ValueError, match="unknown fault point"):
        single_crash_plans(["before_lunch"])
    with pytest.raises(ValueError, match="unknown fault points"):
        single_crash_plans({"before_lunch": 1})


def test_a_sample_is_reproducible_from_its_seed_and_keeps_the_order() -> None:
    plans = single_crash_plans({point: 5 for point in FAULT_POINTS})
    sample = sample_plans(plans, 7, seed=42)
    assert sample == sample_plans(plans, 7, seed=42)
    assert len(sample) == 7 and sample == sorted(sample, key=plans.index)
    assert {tuple(p.crashes) for p in sample_plans(plans, 7, seed=43)} != {tuple(p.crashes) for p in sample}
    with pytest.raises(ValueError, match="max_points"):
        sample_plans(plans, 0, seed=1)


def test_stats_survive_the_trip_an_xdist_worker_sends_them_on() -> None:
    stats = ChaosStats(tests=2, tests_failed=1, points_found=30, points_run=20, resumes=25, passed=18, failed=2, unsafe_tools={"send"})
    total = ChaosStats()
    total.merge(ChaosStats.from_dict(stats.to_dict()))
    total.merge(stats)
    assert total.points_run == 40 and total.failed == 4 and total.unsafe_tools == {"send"}
    assert total.summary_lines()[1] == "crash points: 40 run of 60 found (36 passed, 4 failed)"


def _experiment(
    agent: Any = None,
    *,
    plan: Plan = PLAN,
    store: Callable[[Any], Any] = lambda store: store,
    body: Callable[[dict[str, Any], ChaosTest], None] | None = None,
    **kwargs: Any,
) -> ChaosTest:
    """A chaos experiment on ``plan``: ``body(doors, test)`` (default: ``agent`` answers
    "sent"), on a fresh fake API, an in-memory store (through ``store``) and the toolbox."""
    doors: dict[str, Any] = {}

    def setup() -> None:
        api = FakeMessagesAPI(PlanModel(plan))
        test.instrument_api(api)
        doors.update(
            client=api.client(),
            store=test.instrument_store(store(open_store("memory://"))),
            tools=test.instrument_tools(toolbox()),
        )

    def call() -> None:
        if body is not None:
            body(doors, test)
        else:
            assert agent("t", "send it", **doors) == "sent"

    test = ChaosTest("engine", call_body=call, setup=setup, teardown=doors.clear, **kwargs)
    setup()
    return test


def test_the_engine_crashes_a_sound_agent_at_every_point_and_passes_it() -> None:
    test = _experiment(functools.partial(reference_agent.run, retry_backoff=0.0))
    try:
        stats = test.run()
    finally:
        test.close()
    assert stats.points_run == stats.points_found == stats.passed > 10
    assert stats.failed == 0 and stats.resumes >= stats.points_run
    # Every point was really crashed at, once.
    assert all(r.timeline.of("crash") and len(r.timeline.of("crash")) == 1 for r in test.results)
    assert {r.plan.crashes[0].point for r in test.results} >= {"after_tool_effect", "after_checkpoint_write"}


def test_the_engine_names_the_points_a_buggy_agent_fails_at() -> None:
    test = _experiment(checkpoint_after_result.run)
    try:
        with pytest.raises(ChaosFailure) as caught:
            test.run()
    finally:
        test.close()
    failing = {r.plan.describe(): r.violations[0].oracle for r in caught.value.failures}
    # After the e-mail went out and before the save of its result: the resumed agent
    # sends it again. Every other point is survived.
    assert failing == {
        "crash at after_tool_effect #1": "no_duplicate_effect",
        "crash at before_checkpoint_write #3": "no_duplicate_effect",
    }
    report = str(caught.value)
    assert report.splitlines()[0].startswith("agentckpt chaos: 2 of ")
    assert "timeline of crash at after_tool_effect #1:" in report and "DUPLICATE" in report
    # Each point's line cuts the oracle's message; the first one cut is shown whole.
    full = caught.value.failures[0].violations[0].message
    assert len(full) > 200 and full not in report
    assert "no_duplicate_effect at crash at after_tool_effect #1, in full:" in report
    assert " ".join(full.split()) in " ".join(report.split())


def test_a_body_that_never_completes_after_the_crash_is_reported() -> None:
    calls = []

    def flaky(task_id: str, goal: str, **doors: Any) -> str:
        calls.append(1)
        if len(calls) > 2:  # as it is, and the completed task, pass; every resume fails
            raise RuntimeError("lost my way")
        return str(reference_agent.run(task_id, goal, retry_backoff=0.0, **doors))

    test = _experiment(flaky, max_resumes=2, max_points=1)
    try:
        with pytest.raises(ChaosFailure) as caught:
            test.run()
    finally:
        test.close()
    (result,) = caught.value.failures
    assert result.resumes == 2
    assert "resumes_to_completion" in [v.oracle for v in result.violations]
    assert "lost my way" in str(caught.value)


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="max_resumes"):
        ChaosTest("t", call_body=lambda: None, setup=lambda: None, teardown=lambda: None, max_resumes=-1)
    with pytest.raises(ValueError, match="max_points"):
        ChaosTest("t", call_body=lambda: None, setup=lambda: None, teardown=lambda: None, max_points=0)
    assert FaultPlan().size == 0


class _Paused(Exception):
    """The test's own way to stop the agent after one turn (a pause for approval)."""


TWO_STEPS = Plan(
    steps=(Step((ToolCall("search", {"query": "ann"}),)), Step((ToolCall("send_email", {"to": "ann"}),))),
    final_answer="sent",
)


def _pause_at_the_second_turn(doors: dict[str, Any], test: ChaosTest) -> None:
    """A test that stops the agent at the start of its second turn, every time it runs:
    its task is left running, and each rerun takes it one turn further."""
    turns: list[int] = []

    def pause(event: Any) -> None:
        if event.kind == "iteration":
            turns.append(event.iteration)
            if len(turns) == 2:
                raise _Paused

    with pytest.raises(_Paused):
        reference_agent.run("t", "send it", on_event=pause, retry_backoff=0.0, **doors)
    checkpoint = doors["store"].load("t")
    assert checkpoint is not None and checkpoint.status == "running"


def test_a_test_that_leaves_its_task_unfinished_is_not_failed_for_the_work_a_rerun_goes_on_with() -> None:
    # Running it again resumes the task and asks the model: not "a completed task redone".
    # A resume after a late crash sends the e-mail the first run never reached: not an
    # effect beyond the crash-free run's. Both were false alarms.
    test = _experiment(plan=TWO_STEPS, body=_pause_at_the_second_turn)
    try:
        stats = test.run()
    finally:
        test.close()
    assert stats.failed == 0 and stats.points_run > 5
    assert any(r.timeline.of("effect") and r.timeline.of("effect")[-1].data["tool"] == "send_email" for r in test.results)
    assert "the test leaves its task unfinished" in test.not_checkable["completed_idempotent"]


def _completes_before_its_effect(store: Any) -> Any:
    """The store of an agent that marks its task completed when it records the intent of
    its last call, before the call: a crash in between loses the call."""
    from stores import Checkpoint

    class CompletesEarly:
        def __getattr__(self, name: str) -> Any:
            return getattr(store, name)

        def save(self, checkpoint: Checkpoint) -> Checkpoint:
            if any(a.tool_name == "send_email" and a.state == "intent" for a in checkpoint.actions):
                checkpoint = checkpoint.model_copy(update={"status": "completed", "final_answer": "sent"})
            return store.save(checkpoint)  # type: ignore[no-any-return]

    return CompletesEarly()


def _lost_to_the_early_completion(body: Callable[[dict[str, Any], ChaosTest], None], **kwargs: Any) -> tuple[ChaosFailure, list[Any]]:
    """``body`` run under chaos with a store that completes the task before its last call:
    the failure, and its points that name the lost action."""
    test = _experiment(store=_completes_before_its_effect, body=body, **kwargs)
    try:
        with pytest.raises(ChaosFailure) as caught:
            test.run()
    finally:
        test.close()
    lost = [r for r in caught.value.failures if r.violations[0].oracle == "no_duplicate_effect"]
    assert lost and "an action was lost" in lost[0].violations[0].message
    return caught.value, lost


def test_a_lost_action_the_tests_own_assertion_caught_is_named_not_called_a_fragile_assertion() -> None:
    def body(doors: dict[str, Any], test: ChaosTest) -> None:
        reference_agent.run("t", "send it", retry_backoff=0.0, **doors)
        assert test.world.count("send_email", {"to": "ann"}) == 1  # an outcome, as the docs ask

    failure, _ = _lost_to_the_early_completion(body)
    assert "the oracles found nothing wrong" not in str(failure)


def test_a_check_of_the_test_that_raises_after_its_agent_finished_is_its_verdict_not_the_agent_raising() -> None:
    # An outside round's test read its effects with world.LOG["t1"]: a lost effect made it
    # a KeyError, taken for the agent raising, resumed three times and reported as
    # "did not pass after 3 resume(s)", which hid the lost action the oracle names.
    def body(doors: dict[str, Any], test: ChaosTest) -> None:
        reference_agent.run("t", "send it", retry_backoff=0.0, **doors)
        sent = {"ann": 1} if test.world.count("send_email", {"to": "ann"}) else {}
        assert sent["ann"] == 1  # a KeyError, not an AssertionError, when the e-mail was lost

    failure, lost = _lost_to_the_early_completion(body, test_code=body.__code__)
    assert all(r.resumes == 1 for r in lost)  # the resume after the crash, not three
    report = str(failure)
    assert "resumes_to_completion" not in report and "KeyError" in report


def test_a_rerun_failing_only_the_tests_assertions_without_agent_work_is_not_blamed_on_the_agent() -> None:
    answers: list[str] = []

    def body(doors: dict[str, Any], test: ChaosTest) -> None:
        answers.append(reference_agent.run("t", "send it", retry_backoff=0.0, **doors))
        assert len(answers) == 1, "asserts what only a first run sees"

    test = _experiment(body=body, max_points=1)
    try:
        with pytest.raises(ChaosFailure) as caught:
            test.run()
    finally:
        test.close()
    report = str(caught.value)
    assert "test_assertions" in report and "its assertions must hold on a rerun" in report
    assert "completed_idempotent" not in report


def test_a_test_whose_agent_raises_while_the_api_stays_down_leaves_its_task_unfinished() -> None:
    # The test checks that the agent lets the API's error out when every request is
    # overloaded. Its task never completed: running it again asks the model again, which
    # is no "completed task redone" (an outside round's false alarm).
    doors: dict[str, Any] = {}

    def setup() -> None:
        api = FakeMessagesAPI(PlanModel(PLAN))
        api.fail_next("overloaded", times=1000)
        test.instrument_api(api)
        doors.update(
            client=api.client(max_retries=1),
            store=test.instrument_store(open_store("memory://")),
            tools=test.instrument_tools(toolbox()),
        )

    def call() -> None:
        with pytest.raises(anthropic.APIStatusError):
            reference_agent.run("t", "send it", retry_backoff=0.0, **doors)

    test = ChaosTest("engine", call_body=call, setup=setup, teardown=doors.clear)
    setup()
    try:
        stats = test.run()
    finally:
        test.close()
    assert stats.failed == 0
    assert "last request got no reply" in test.not_checkable["completed_idempotent"]
