"""takeover: a second worker takes a task over while the first is held at a point of its
run, and the first then wakes up. Sound agents pass; an agent that saves its own state on
top of the newer version, the common design (whose upsert writes a task B finished and
deleted back as running) and one that logs a lost compare-and-set and carries on are each
caught by the oracle their bug breaks."""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

import reference_agent
from pytest_agentckpt import (
    NotCheckableWarning,
    Plan,
    Step,
    TakeoverFailure,
    ToolCall,
    UnsafeToolWarning,
    takeover,
)
from tests.buggy_agents import common_design, overwrite_on_conflict, overwrite_running_on_conflict
from tests.buggy_agents._loop import Bugs, make_agent
from tests.harness.toolkit import search, toolbox
from tests.zoo.agents import SOUND as ZOO
from tests.zoo.agents import AsyncToolbox
from tests.zoo.designs import SOUND as DESIGNS


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    logging.disable(logging.WARNING)  # the buggy agents log every failed write
    yield
    logging.disable(logging.NOTSET)


REFERENCE = functools.partial(reference_agent.run, retry_backoff=0.0)

#: A read, a keyed write and an unkeyed e-mail: the conflict comes at an intent's save.
PLAN = Plan(
    (
        Step((ToolCall("search", {"query": "crash"}),)),
        Step((ToolCall("write_record", {"key": "a"}),)),
        Step((ToolCall("send_email", {"to": "ann"}),)),
    ),
    "done",
)


def _failing(failure: pytest.ExceptionInfo[TakeoverFailure]) -> dict[str, str]:
    """``POINT #N`` -> the first oracle it broke, from the report's list."""
    found = {}
    for line in str(failure.value).splitlines():
        if line.startswith("  worker A held at "):
            where, oracle = line[len("  worker A held at ") :].split(": ", 2)[:2]
            found[where] = oracle.split(" ", 1)[0]
    return found


def test_the_reference_agent_survives_a_takeover_at_every_point() -> None:
    with pytest.warns(UnsafeToolWarning, match="send_email"):  # unkeyed: see below
        stats = takeover(REFERENCE, toolbox(), plans=[PLAN])
    assert stats.failed == 0 and stats.plans == 1
    # Every point of the crash-free run, each met by worker A in its own run.
    assert stats.points == stats.passed >= 25 and stats.unreached == 0
    assert stats.summary().startswith(f"takeover: {stats.points} points of 1 plan(s)")


def test_drawn_plans_are_the_default_and_the_sound_loop_passes_them() -> None:
    stats = takeover(make_agent(Bugs()), toolbox(), examples=2, seed=1)
    assert stats.plans == 2 and stats.failed == 0 and stats.points > 50


def test_saving_on_top_of_the_newer_version_is_a_lost_update() -> None:
    with pytest.raises(TakeoverFailure) as caught:
        takeover(overwrite_on_conflict.run, toolbox(), plans=[PLAN])
    failing = _failing(caught)
    assert "no_lost_update" in set(failing.values()), failing
    report = str(caught.value)
    assert "worker A, waking up, changed its" in report and "a worker that no longer owned the task wrote over the checkpoint of the one that did" in report
    assert "HELD at" in report and "worker B takes the task over" in report and "worker A wakes up" in report
    # Held before the run's first save, A has nothing to lose to B yet: A's first write
    # creates the task, and B finds it.
    assert "iteration_start #1" not in failing or failing["iteration_start #1"] != "same_answer"


def test_overwriting_only_a_running_task_is_caught_mid_run_alone() -> None:
    # It backs off from a task it finds completed: once B has finished, A stops. Only
    # mid-run, with B paused after a save, does its "still running, so it is mine" show.
    with pytest.raises(TakeoverFailure) as caught:
        takeover(overwrite_running_on_conflict.run, toolbox(), plans=[PLAN])
    failing = _failing(caught)
    assert failing and set(failing.values()) == {"no_lost_update"}, failing
    assert all(where.endswith("(woken while B runs)") for where in failing), failing
    report = str(caught.value)
    assert "while worker B, which had taken the task over, was running it (paused after a save)" in report
    assert "does not make the task yours" in report
    assert "HELD after its save of version" in report and "worker B goes on" in report
    # The sound loop it was planted in passes both passes of every point.
    assert takeover(make_agent(Bugs()), toolbox(), plans=[PLAN]).failed == 0


class _LockedSaves:
    """A store wrapper that takes a lock of the process, per task, around each save."""

    locks: collections.defaultdict[str, threading.Lock] = collections.defaultdict(threading.Lock)

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def save(self, checkpoint: Any) -> Any:
        with self.locks[checkpoint.task_id]:
            return self._store.save(checkpoint)


def _locked_saves(task_id: str, goal: str, *, client: Any, store: Any, tools: Any) -> str:
    return make_agent(Bugs())(task_id, goal, client=client, store=_LockedSaves(store), tools=tools)


def test_a_woken_worker_waiting_on_a_lock_the_paused_one_holds_is_not_checkable() -> None:
    # B pauses after its first save, which the takeover's store makes inside the agent's
    # lock around it: A, woken up, waits at its next save. In one process that is the
    # lock, not the agent: not checkable, not hung; the warning says which worker waited.
    plan = Plan((Step((ToolCall("search", {"query": "crash"}),)),), "done")
    with pytest.warns(NotCheckableWarning, match="worker A, woken up, waited 0.3 s on something worker B held") as seen:
        stats = takeover(_locked_saves, toolbox(), plans=[plan], wait=0.3, max_points=4)
    assert stats.failed == 0 and stats.blocked >= 1, stats.summary()
    assert "while paused after a save" in str(seen[0].message)


def test_the_common_designs_upsert_writes_back_a_task_the_other_worker_finished() -> None:
    # The port saves every fifth tool turn only, by an upsert (it loads to learn the
    # version), and deletes its checkpoint on success. Held after its first save, A wakes
    # once B has finished and deleted the task, and its next save creates it again.
    long_plan = Plan(tuple(Step((ToolCall("write_record", {"key": f"k{i}"}),)) for i in range(11)), "done")
    with pytest.raises(TakeoverFailure) as caught:
        takeover(common_design.run, toolbox(), plans=[long_plan])
    failing = _failing(caught)
    assert "no_lost_update" in set(failing.values()), failing
    report = str(caught.value)
    assert "wrote the task again from its own stale state" in report
    assert "A held version 1" in report and "an upsert" in report
    # Held before its first save, A knows of no checkpoint: its create is not the upsert's.
    assert "iteration_start #1" not in failing


def test_carrying_on_after_a_lost_compare_and_set_is_caught() -> None:
    # The common design's "log the failed write and carry on", applied to a conflict.
    with pytest.raises(TakeoverFailure) as caught:
        takeover(make_agent(Bugs(load_error_is_none=True)), toolbox(), plans=[PLAN])
    failing = _failing(caught)
    assert set(failing.values()) == {"stops_after_conflict"}, failing
    assert "a ConflictError means stop" in str(caught.value)


@pytest.mark.parametrize("design", [*ZOO, *(f"design:{d}" for d in DESIGNS)])
def test_the_zoos_sound_designs_pass(design: str) -> None:
    # Designs unlike ours: threads, asyncio, their own session JSON, a ledger apart, an
    # outbox, event sourcing, a pause for approval, deleting the checkpoint on success.
    run = DESIGNS[design.split(":", 1)[1]] if design.startswith("design:") else ZOO[design]
    tools: Any = AsyncToolbox(toolbox()) if design == "gather" else toolbox()
    stats = takeover(run, tools, examples=1, seed=2)
    assert stats.failed == 0 and stats.points > 0


def test_a_worker_that_hangs_once_it_lost_its_task_fails_as_hung() -> None:
    from stores import ConflictError

    sound, unblock = make_agent(Bugs()), threading.Event()

    def hangs(task_id: str, goal: str, **kwargs: Any) -> str:
        try:
            return sound(task_id, goal, **kwargs)
        except ConflictError:
            unblock.wait(30)  # a lock it never gets back, say
            raise

    try:
        with pytest.raises(TakeoverFailure) as caught:
            takeover(hangs, toolbox(), plans=[PLAN], wait=0.3, max_points=3)
    finally:
        unblock.set()
    assert set(_failing(caught).values()) == {"worker_hung"}, str(caught.value)
    assert "worker A did not return within 0.3 s of waking up" in str(caught.value)


_THREAD_LOCKS: collections.defaultdict[str, threading.Lock] = collections.defaultdict(threading.Lock)
_LOOP_LOCKS: collections.defaultdict[str, asyncio.Lock] = collections.defaultdict(asyncio.Lock)


def _one_run_per_task(task_id: str, goal: str, **kwargs: Any) -> str:
    with _THREAD_LOCKS[task_id]:  # a service's "one run of a task at a time, in this process"
        return REFERENCE(task_id, goal, **kwargs)


async def _one_async_run_per_task(task_id: str, goal: str, **kwargs: Any) -> str:
    async with _LOOP_LOCKS[task_id]:
        result: str = await ZOO["gather"](task_id, goal, **kwargs)
        return result


@pytest.mark.parametrize("flavour", ["threading", "asyncio"])
def test_a_second_worker_waiting_on_a_lock_of_the_process_is_not_checkable_rather_than_hung(flavour: str) -> None:
    # Both workers are threads of one process: a lock per task makes B wait for the held A,
    # which a worker in another process would not. Not a failure of the agent, and the
    # takeover must end (it used to wait for B for ever); after two such points the rest
    # of the plan's points are not run.
    run: Any = _one_run_per_task if flavour == "threading" else _one_async_run_per_task
    tools: Any = toolbox() if flavour == "threading" else AsyncToolbox(toolbox())
    with pytest.warns(NotCheckableWarning, match="worker B waited 0.5 s on something worker A held") as seen:
        stats = takeover(run, tools, plans=[PLAN], wait=0.5)
    assert stats.failed == 0 and stats.passed == 0 and stats.blocked == stats.points >= 25
    assert stats.summary().endswith(f", {stats.blocked} not checkable (worker B blocked)")
    message = str(seen[0].message)
    assert "a lock of the process" in message and "give it a lease that expires" in message
    if flavour == "threading":  # where B waits is the agent's line; a waiting event loop has none
        assert "test_takeover.py" in message and "with _THREAD_LOCKS[task_id]" in message


def test_bad_arguments_are_refused_with_what_to_do() -> None:
    with pytest.raises(ValueError, match="examples must be an int >= 1"):
        takeover(REFERENCE, toolbox(), examples=0)
    with pytest.raises(ValueError, match="wait must be a positive number"):
        takeover(REFERENCE, toolbox(), wait=0)
    # Each mistake is refused before any plan runs, saying what to pass (it was an
    # AttributeError deep inside a run, or went unnoticed: client="bogus", max_points=0).
    for kwargs, error, says in [
        ({"tools": 5}, TypeError, "tools must be a toolbox"),
        ({"tools": [search]}, TypeError, "tools must be a toolbox"),
        ({"run": 5}, TypeError, "run must be a callable"),
        ({"run": "tests.nowhere:agent"}, ValueError, "run: cannot import 'tests.nowhere:agent'"),
        ({"client": "bogus"}, ValueError, "client must be 'sdk' or 'direct'"),
        ({"max_points": 0}, ValueError, "max_points must be an int >= 1"),
        ({"seed": "x"}, ValueError, "seed must be an int"),
        ({"plans": [5]}, ValueError, "plans must be a Plan or a non-empty list of Plan"),
        ({"plans": []}, ValueError, "plans must be a Plan or a non-empty list of Plan"),
        ({"goal": " "}, ValueError, "goal: the goal is empty"),
        ({"store": "bogus://x"}, ValueError, "unknown store scheme"),
    ]:
        arguments: dict[str, Any] = {"run": REFERENCE, "tools": toolbox(), "plans": [PLAN], **kwargs}
        with pytest.raises(error, match=says):
            takeover(arguments.pop("run"), arguments.pop("tools"), **arguments)
    never_done = make_agent(Bugs(), max_iterations=1)
    with pytest.raises(ValueError, match="does not complete the plan without faults"):
        takeover(never_done, toolbox(), plans=[PLAN])


class _Upserting:
    """A store wrapper that saves every checkpoint over whatever is stored (it learns the
    version from a load just before): an upsert, without compare-and-set."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def save(self, checkpoint: Any) -> Any:
        current = self._store.load(checkpoint.task_id)
        version = 0 if current is None else current.version
        return self._store.save(checkpoint.model_copy(update={"version": version}))


def _upserting_reference(task_id: str, goal: str, *, client: Any, store: Any, tools: Any) -> str:
    return REFERENCE(task_id, goal, client=client, store=_Upserting(store), tools=tools)


def test_a_lost_update_without_any_conflict_is_blamed_on_the_version_not_on_a_conflict() -> None:
    # A never met a ConflictError (its saves take the version from a fresh load): the
    # advice about what to do on a ConflictError would be advice for a case it never met.
    with pytest.raises(TakeoverFailure) as caught:
        takeover(_upserting_reference, toolbox(), plans=[PLAN])
    report = str(caught.value)
    assert "no_lost_update" in set(_failing(caught).values())
    assert "A never met a ConflictError" in report and "Save with the version you hold" in report
    assert "On a ConflictError the task belongs to another worker" not in report


def test_an_unkeyed_effect_both_workers_make_is_reported_as_an_unsafe_tool() -> None:
    # A held between its intent and its e-mail wakes up and sends it, after B answered the
    # call "outcome unknown" and the model asked for it again: no agent can avoid that, so
    # it is no failure, but takeover says so, as fuzz does, rather than nothing.
    email = Plan((Step((ToolCall("send_email", {"to": "ann"}),)),), "sent")
    with pytest.warns(UnsafeToolWarning, match="tool 'send_email' made its effect") as caught:
        stats = takeover(REFERENCE, toolbox(), plans=[email])
    assert stats.failed == 0
    assert "crash-free: 1" in str(caught[0].message)
    # A keyed tool's repeats are dropped by its key: nothing to report.
    keyed = Plan((Step((ToolCall("write_record", {"key": "a"}),)),), "written")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnsafeToolWarning)
        takeover(REFERENCE, toolbox(), plans=[keyed])


def test_the_report_names_each_other_oracle_once_and_never_the_first_again() -> None:
    from pytest_agentckpt import _takeover
    from pytest_agentckpt.oracles import Violation
    from pytest_agentckpt.timeline import Timeline

    point = _takeover._Point("tool_call", 2, Timeline())
    point.violations = [
        Violation("no_lost_update", "first"),
        Violation("no_lost_update", "second"),
        Violation("stops_after_conflict", "third"),
    ]
    report = _takeover._report(PLAN, [point], _takeover.TakeoverStats(plans=1, points=1, failed=1))
    assert "worker A held at tool_call #2: no_lost_update (also stops_after_conflict): first" in report
