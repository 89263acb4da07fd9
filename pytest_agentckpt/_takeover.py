"""Two workers on one task: a takeover at every point of a run.

A supervisor that gives up on a worker (its lease ran out, its host stopped answering)
starts another on the same task. The first is not always dead: a worker paused by a long
garbage collection, a frozen VM or a network partition wakes up later and carries on with
the state it holds. The store's compare-and-set stops its next save (``ConflictError``);
what the agent does then is the agent's. :func:`takeover` puts an agent in that
situation at every point of a crash-free run:

1. worker A runs the task and is held at the point (not crashed: its thread waits there),
   called again after each clean stop (a pause for an approval) as the crash-free run was;
2. worker B, a fresh call of the agent on the same task and store, takes it over and
   runs it to the end;
3. A wakes up and goes on, as a paused process does, until it returns or raises.

Each point is run a second time with the workers interleaved mid-run: B pauses right
after its first save of the task, A wakes up and goes on until it returns, then B goes on
to the end.

The oracles:

- ``no_lost_update``: once B has saved (finished, or paused mid-run), nothing A writes
  may change the checkpoint B left. An agent that answers a ``ConflictError`` by loading the newer version and saving
  its own state on top erases B's work (the classic "refresh the version and retry", and
  what an upsert does); one that does so only over a version still running (it checks the
  status, not the version) erases it mid-run. A design that deletes its checkpoint on success leaves nothing to
  lose: what a re-run of it does is the completed-task oracle's to judge, in ``fuzz``;
  but an A that held a version and writes the task again after B deleted it made its
  save with a version it did not hold (an upsert): the finished task is running again;
- ``stops_after_conflict``: after its first lost compare-and-set, A makes no model call
  and no irreversible tool call: the task is someone else's now;
- a stateless step worker (it loads the task at each step and saves with the version it
  loaded) that wakes mid-run goes on from B's checkpoint: that is no lost update (B's
  history is the start of A's, and all A adds was asked for after its load), and then B,
  stale, must not perform an irreversible effect it had not recorded before its pause;
- ``valid_sequence`` and ``same_answer``, as in :func:`~pytest_agentckpt.fuzz`, for the
  requests of both workers and B's answer;
- ``worker_hung``: worker A neither reached its point nor returned, or did not return
  after waking up, within ``wait`` seconds.

What A does before its first conflict is not judged here: it holds a state it has no
reason to doubt, and a crash-resume search (``fuzz``) judges the same steps.

>>> from pytest_agentckpt import TakeoverStats
>>> TakeoverStats(plans=1, points=3, passed=3).summary()
'takeover: 3 points of 1 plan(s), 3 passed, 0 failed, 0 not reached'
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stores import Checkpoint

from ._scenario import _where
from .faults import FaultInjector, FaultPlan, FaultyStore, InstrumentedToolbox
from .oracles import (
    ToolFlags,
    UnsafeTool,
    Violation,
    _short,
    canonical,
    effect_counts,
    same_answer,
    valid_sequence,
)
from .timeline import Timeline

__all__ = ["TakeoverFailure", "TakeoverStats", "takeover"]

#: What a takeover compares of the stored checkpoint: everything but the version and the
#: time of the write (a save that changes nothing else erases nothing).
_VOLATILE = {"version", "updated_at"}
#: Calls of worker B: the first takes the task over, the others resume it after a clean stop.
_B_ATTEMPTS = 8
#: Points of a plan where worker B blocked after which its other points are not run.
_BLOCKED_LIMIT = 2


@dataclass
class TakeoverStats:
    """What :func:`takeover` ran."""

    plans: int = 0
    points: int = 0
    passed: int = 0
    failed: int = 0
    #: Points worker A never reached in its run (its path differs from the crash-free run's).
    unreached: int = 0
    #: Points where worker B waited ``wait`` seconds on something worker A held while
    #: paused: not checkable in one process (see :func:`takeover`).
    blocked: int = 0
    #: Drawn plans left out because they failed without a fault (a tool's error the agent
    #: sent on to the model, or gave up on).
    discarded: int = 0

    def summary(self) -> str:
        text = (
            f"takeover: {self.points} points of {self.plans} plan(s), {self.passed} passed, "
            f"{self.failed} failed, {self.unreached} not reached"
        )
        text += f", {self.blocked} not checkable (worker B blocked)" if self.blocked else ""
        return text + (
            f"; {self.discarded} drawn plan(s) left out: they failed without a fault" if self.discarded else ""
        )


@dataclass
class _Point:
    point: str
    occurrence: int
    timeline: Timeline
    violations: list[Violation] = field(default_factory=list)
    #: Worker B's answer, when it returned one.
    answer: Any = None
    answered: bool = False
    #: Set when worker B waited the whole ``wait`` while A was held (or, mid-run, A the
    #: whole ``wait`` while B was paused): where the waiting worker was.
    blocked: str | None = None
    #: Worker A woke up while worker B, paused after its first save, was still running the task.
    midrun: bool = False

    def describe(self) -> str:
        return f"worker A held at {self.point} #{self.occurrence}" + (" (woken while B runs)" if self.midrun else "")


class TakeoverFailure(AssertionError):
    """A takeover broke an oracle; the message names it, the point and the plan, with the
    timeline of the first failing point (attempt 1 is worker A, then worker B's, then worker
    A's after it woke up)."""


class _HoldingInjector(FaultInjector):
    """Holds the thread that meets ``point`` for the ``occurrence``-th time until released.

    The point may be met with the injector's lock held (a model request's hooks): the
    wait releases it, as a condition variable does, so the other worker can go on.
    """

    def __init__(self, point: str, occurrence: int, timeline: Timeline) -> None:
        super().__init__(FaultPlan(), timeline)
        self._target = (point, occurrence)
        self._woken = threading.Condition(self._lock)
        #: Set when the point holds its thread, or (set by the caller) when that thread ended.
        self.settled = threading.Event()
        self.holding = False
        self._released = False

    def hit(self, point: Any) -> None:
        super().hit(point)
        with self._woken:
            if self.holding or (point, self.hits[point]) != self._target:
                return
            self.holding = True
            self.timeline.add("held", point=point, occurrence=self.hits[point])
            self.settled.set()
            while not self._released:
                self._woken.wait()

    def release(self) -> None:
        with self._woken:
            self._released = True
            self._woken.notify_all()


class _WatchedStore(FaultyStore):
    """Records what each write of the task's checkpoint leaves stored, once ``watching`` is
    set (worker A woken up): a write counts in the phase it started in (A held after a
    write wakes up with it done). Checkpoints of other ids (a ledger kept apart) are not
    the task's: the compare of what B left is of the task's own."""

    watching: list[dict[str, Any] | None] | None = None
    task_id: str = ""
    #: Set (mid-run) while worker B runs: its first save of the task that goes through
    #: pauses it there, with ``paused`` set, until ``go_on`` is.
    pause_next_save: bool = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.paused = threading.Event()
        self.go_on = threading.Event()

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        watching = self.watching
        saved = super().save(checkpoint)
        if saved.task_id != self.task_id:
            return saved
        if watching is not None:
            watching.append(_dump(saved))
        if self.pause_next_save:
            self.pause_next_save = False
            self.injector.timeline.add("held", point="worker B's save", version=saved.version)
            self.paused.set()
            self.go_on.wait()
        return saved

    def delete(self, task_id: str) -> None:
        watching = self.watching
        super().delete(task_id)
        if watching is not None and task_id == self.task_id:
            watching.append(None)


def _dump(checkpoint: Checkpoint | None) -> dict[str, Any] | None:
    return None if checkpoint is None else checkpoint.model_dump(mode="json", exclude=_VOLATILE)


def takeover(
    run: Callable[..., Any],
    tools: Any,
    *,
    plans: Sequence[Any] | None = None,
    examples: int = 3,
    seed: int = 0,
    goal: str = "Carry out the task.",
    store: Any = None,
    client: str = "sdk",
    max_points: int | None = None,
    wait: float = 30.0,
) -> TakeoverStats:
    """Run ``run`` with a second worker taking its task over at every point of its runs.

    ``plans``: the plans (:class:`~pytest_agentckpt.Plan`) the scripted model follows;
    by default ``examples`` plans of at least two steps drawn from the tools with ``seed``.
    ``store``: as in :func:`~pytest_agentckpt.fuzz` (a URL, a store, a factory; in memory
    by default). ``max_points``: at most this many points per plan (the first ones).
    ``wait``: seconds a worker may take (A to reach its point, A after waking up) before
    the point fails as hung. A worker B that has not finished within ``wait`` seconds
    waits on something the held A holds: both are threads of one process, so that may
    be a lock of the process, and the point is counted not checkable
    (:class:`~pytest_agentckpt.NotCheckableWarning`), not failed.

    Raises :class:`TakeoverFailure` naming the oracle, the point and the plan; returns the
    counts otherwise. Agents given as ``async def`` run too, each worker on its own event
    loop.
    """
    from reference_agent.scripted import Plan

    from ._scenario import (
        _check_client,
        _check_count,
        _check_goal,
        _check_tools,
        _Executor,
        _load_tools,
        _open_store_source,
        _resolve_run,
    )
    from .chaos import single_crash_plans

    # Every argument is checked before anything runs, as fuzz does: a mistake is a
    # ValueError or TypeError saying what to pass, not an error deep inside a run.
    run = _resolve_run(run)
    if isinstance(tools, str):
        tools = _load_tools(tools)
    _check_tools(tools)
    _check_count("examples", examples, 1)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValueError(f"seed must be an int, not {seed!r}")
    _check_count("max_points", max_points, 1, optional=True)
    if isinstance(wait, bool) or not isinstance(wait, int | float) or not wait > 0:
        raise ValueError(f"wait must be a positive number of seconds, not {wait!r}")
    goal = _check_goal(goal)
    _check_client(client)
    if plans is not None:
        plans = [plans] if isinstance(plans, Plan) else list(plans)
        if not plans or not all(isinstance(p, Plan) for p in plans):
            raise ValueError("plans must be a Plan or a non-empty list of Plan")
    _open_store_source(store)  # validates the argument before any plan runs
    executor = _Executor(
        run, tools, store=store, budget=None, max_resumes=None, goal=goal, client=client  # type: ignore[arg-type]
    )
    stats = TakeoverStats()
    unsafe: dict[tuple[str, str], UnsafeTool] = {}
    try:
        chosen = list(plans) if plans is not None else _draw_plans(tools, examples, seed)
        last_infeasible = ""
        for plan in chosen:
            baseline, clean = executor.baseline(plan)
            if clean.infeasible is not None:
                if plans is None:
                    # A drawn plan whose tool failed for its inputs: left out, as fuzz does.
                    stats.discarded += 1
                    last_infeasible = clean.infeasible
                    continue
                raise ValueError(f"takeover: the plan cannot run without faults: {clean.infeasible}")
            if not clean.completed:
                raise ValueError(
                    f"takeover: the agent does not complete the plan without faults ({clean.error}); "
                    "fix that first (fuzz reports it with its timeline)"
                )
            stats.plans += 1
            # The points of the run to its completion (not of the completed task's re-run).
            hits = clean.counts.hits if clean.counts is not None else clean.hits
            # The calls it took to complete the task (an agent that stops cleanly, for an
            # approval say, is called again): worker A is called as often, at most.
            calls = clean.timeline.attempt - (1 if clean.rerun_from is not None else 0)
            points = [crash for p in single_crash_plans(hits) for crash in p.crashes]
            failures: list[_Point] = []
            blocked: list[_Point] = []
            blocked_before = stats.blocked
            chosen_points = points[:max_points]
            for n, crash in enumerate(chosen_points):
                if len(blocked) >= _BLOCKED_LIMIT:
                    # Each blocked point costs ``wait`` seconds: the rest of the plan's
                    # points are not run, and counted with them.
                    stats.points += len(chosen_points) - n
                    stats.blocked += len(chosen_points) - n
                    break
                # Each point twice: A wakes once B has finished the task, then (if that
                # passed) while B, paused after its first save, still runs it.
                verdict: _Point | None = None
                for midrun in (False, True):
                    result = _run_point(
                        executor, plan, crash.point, crash.occurrence, wait, calls=calls, midrun=midrun
                    )
                    if result is None:
                        break
                    verdict = result
                    if result.blocked is not None:
                        break
                    result.violations += same_answer(result.answer, baseline, completed=result.answered)
                    for found in _repeated_unkeyed(result.timeline, executor.flags, baseline.effects):
                        unsafe.setdefault((found.tool, canonical(found.input)), found)
                    if result.violations:
                        break
                if verdict is None:
                    stats.unreached += 1
                    continue
                stats.points += 1
                if verdict.blocked is not None:
                    stats.blocked += 1
                    blocked.append(verdict)
                elif verdict.violations:
                    stats.failed += 1
                    failures.append(verdict)
                else:
                    stats.passed += 1
            if blocked:
                _warn_blocked(blocked, wait, stats.blocked - blocked_before)
            if failures:
                raise TakeoverFailure(_report(plan, failures, stats))
        if chosen and stats.plans == 0:
            raise ValueError(
                f"takeover: every one of the {len(chosen)} plans drawn over these tools failed without a "
                f"fault, so there is nothing to take over: {last_infeasible}. Give the tools inputs they "
                "accept (tighter input_schema: enum, pattern) or pass plans= that work"
            )
    finally:
        executor.close()
    if unsafe:
        _warn_unsafe(list(unsafe.values()))
    if stats.unreached:
        _warn_unreached(stats)
    return stats


def _warn_unreached(stats: TakeoverStats) -> None:
    """Points worker A never reached were passed over without a word: an outside round's
    approval agent (it returns "waiting for approval" and is resumed once approved) had 15
    of 24 points not reached while A was its first call only. A is now resumed after clean
    stops; what is left unreached is said."""
    import warnings

    from ._search import NotCheckableWarning

    warnings.warn(
        f"agentckpt takeover: {stats.unreached} point(s) not checkable, worker A never reached "
        "them: A, called as the crash-free run was (again after each clean stop while the task "
        "was still running, as many times at most), returned before each of those points, so "
        "its path left the crash-free run's (state kept in the process between calls, say, or "
        "a number of calls that differs from run to run). Test what the agent does there "
        "against another worker with two calls of your own (resume both, let one save, then "
        "the other)",
        NotCheckableWarning,
        stacklevel=3,
    )


def _repeated_unkeyed(
    timeline: Timeline, flags: Mapping[str, ToolFlags], expected: Mapping[tuple[str, str], int]
) -> list[UnsafeTool]:
    """The effects of tools without keys that the two workers made more often than the
    crash-free run did."""
    import json

    found = []
    for (tool, raw), times in effect_counts(timeline).items():
        tool_flags = flags.get(tool)
        tool_input = json.loads(raw)
        if tool_flags is None:
            continue
        tool_flags = tool_flags.for_input(tool_input)
        if tool_flags.can_duplicate and not tool_flags.idempotent and times > expected.get((tool, raw), 0):
            found.append(UnsafeTool(tool, tool_input, times, expected.get((tool, raw), 0)))
    return found


def _warn_unsafe(found: list[UnsafeTool]) -> None:
    import warnings

    from ._search import UnsafeToolWarning

    for tool in found[:3]:
        warnings.warn(
            f"agentckpt takeover: tool {tool.tool!r} made its effect {_short(tool.input)} "
            f"{tool.times} times with two workers on the task (crash-free: {tool.expected}). A "
            "worker held between its intent and the call wakes up and makes it, whatever the "
            "other worker settled meanwhile: only an idempotency key the tool honours (or a "
            "fence the resource checks) makes such a tool safe. fuzz tells a repeat the agent "
            "could have avoided from one no agent can",
            UnsafeToolWarning,
            stacklevel=3,
        )


def _draw_plans(tools: Any, examples: int, seed: int) -> list[Any]:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis.database import InMemoryExampleDatabase

    from .strategies import plans

    drawn: list[Any] = []

    @hypothesis_seed(seed)
    @settings(
        max_examples=examples,
        database=InMemoryExampleDatabase(),
        suppress_health_check=list(HealthCheck),
        deadline=None,
    )
    @given(plans(tools, min_steps=2))
    def collect(plan: Any) -> None:
        drawn.append(plan)

    collect()
    return drawn[:examples]


def _stored(executor: Any, task_id: str) -> dict[str, Any] | None:
    return _dump(executor.store.load(task_id))


def _run_point(
    executor: Any, plan: Any, point: str, occurrence: int, wait: float, *, calls: int = 1, midrun: bool = False
) -> _Point | None:
    """One point: worker A held there (called up to ``calls`` times, as many as the
    crash-free run took, while it stops cleanly before reaching it), B taking over."""
    from reference_agent.offline import FakeMessagesAPI
    from reference_agent.scripted import PlanModel
    from reference_agent.validation import InvalidHistoryError, validate_messages

    from ._scenario import request_rules_hook

    timeline = Timeline()
    injector = _HoldingInjector(point, occurrence, timeline)
    api = FakeMessagesAPI(PlanModel(plan, strict_tools=True), validate=True)
    rules = request_rules_hook(timeline)
    api.add_hook(injector.model_hook)
    api.add_hook(rules)
    api.add_delivery_hook(injector.model_delivered)
    executor.router.use(api)
    executor.world.clear()
    task_id = f"takeover-{executor._prefix}-{next(executor._ids)}"
    store = _WatchedStore(executor.store, injector, history=executor.history)
    store.task_id = task_id
    tools = InstrumentedToolbox(executor.tools, executor.world, injector)
    result = _Point(point, occurrence, timeline, midrun=midrun)
    outcome_a: list[BaseException | None] = []
    answer_a: list[Any] = []

    def worker_a() -> None:
        # Resumed as the crash-free run was, while it stops cleanly with the task still
        # running (a pause for an approval, a turn limit per call), until it reaches its
        # point: a point of a later call is one a resumed A is held at. Once held, A's
        # call is the one that wakes up; nothing resumes it after that.
        try:
            for n in range(calls):
                if n:
                    a_attempts.append(timeline.start_attempt("worker A resumes"))
                    injector.attempt_started()
                try:
                    answer = executor._call(task_id, store, tools)
                except Exception as exc:
                    if injector.holding or not _resume_a(executor, task_id, timeline, n + 1, calls):
                        raise
                    timeline.add("attempt_end", outcome="error", detail=f"{type(exc).__name__}: {exc}")
                    continue
                if injector.holding or not _resume_a(executor, task_id, timeline, n + 1, calls):
                    answer_a.append(answer)
                    break
                timeline.add("attempt_end", outcome="stopped", detail=str(answer))
            outcome_a.append(None)
        except BaseException as exc:  # whatever A raises is its outcome
            outcome_a.append(exc)
        finally:
            injector.settled.set()

    a_attempts = [timeline.start_attempt("worker A")]
    injector.attempt_started()
    thread = threading.Thread(target=worker_a, name="agentckpt-worker-a", daemon=True)
    try:
        thread.start()
        settled = injector.settled.wait(wait)
        if not injector.holding:
            injector.release()
            thread.join(wait)
            if not settled:
                result.violations.append(
                    Violation("worker_hung", f"worker A neither reached {point} #{occurrence} nor returned within {wait:g} s")
                )
                return result
            return None  # A finished without meeting the point: another path than the crash-free run's
        # Worker B runs the task to its end, resumed as a supervisor would resume it while
        # it stops cleanly with the task still running (a pause, a budget of its own). It
        # runs in a thread of its own too, so that a B waiting on something A holds does
        # not hang the takeover.
        b_attempts: set[int] = set()
        raised_b: list[BaseException] = []
        b_ended = threading.Event()

        def worker_b() -> None:
            try:
                resume_b()
            except BaseException as exc:  # a crash or an interrupt: raised in the caller's thread
                raised_b.append(exc)
            finally:
                b_ended.set()
                store.paused.set()  # a B that ends without pausing wakes the wait below too

        def resume_b() -> None:
            for n in range(_B_ATTEMPTS):
                b_attempts.add(timeline.start_attempt("worker B takes the task over" if n == 0 else "worker B resumes"))
                injector.attempt_started()
                try:
                    result.answer = executor._call(task_id, store, tools)
                except Exception as exc:
                    detail = f"{type(exc).__name__}: {exc}"
                    timeline.add("attempt_end", outcome="error", detail=detail)
                    result.answered = False
                    if n == _B_ATTEMPTS - 1:
                        result.violations.append(
                            Violation(
                                "same_answer",
                                f"worker B, taking the task over from a worker held at {point} #{occurrence}, "
                                f"did not finish it: {detail}",
                            )
                        )
                    continue
                result.answered = True
                if executor._still_running(task_id, timeline):
                    timeline.add("attempt_end", outcome="stopped", detail=str(result.answer))
                    continue
                timeline.add("attempt_end", outcome="answer", detail=str(result.answer))
                break

        thread_b = threading.Thread(target=worker_b, name="agentckpt-worker-b", daemon=True)
        # Mid-run, B pauses after its first save of the task: A then wakes up while the
        # task is B's and still running (a worker that checks the status, not the
        # version, before writing over it is caught only so). A B that never saves (it
        # found the task done) ends instead, and the point is judged as the other kind.
        store.pause_next_save = midrun
        thread_b.start()
        store.paused.wait(wait)
        store.pause_next_save = False  # B paused, ended, or is blocked: no other save pauses
        if not store.paused.is_set():
            # B waits on something A holds while it is paused. Both workers are threads of
            # one process here, so that may be a lock of the process, which a worker in
            # another process would not wait for: the point is not checkable, not failed.
            result.blocked = _where(thread_b)
            injector.release()
            store.go_on.set()
            thread.join(wait)
            thread_b.join(wait)
            return result
        if not b_ended.is_set():
            return _wake_a_while_b_runs(
                executor, result, thread, thread_b, injector, store, b_attempts, raised_b, outcome_a, answer_a, wait
            )
        thread_b.join(wait)
        if raised_b:
            raise raised_b[0]
        b_wrote = any(e.attempt in b_attempts for e in timeline.of("store_save", "store_delete"))
        taken_over, woken, writes = _wake_a(executor, store, injector, thread, wait, "worker A wakes up")
        if thread.is_alive():
            result.violations.append(
                Violation("worker_hung", f"worker A did not return within {wait:g} s of waking up")
            )
        else:
            _a_ended(timeline, outcome_a, answer_a)
        store.watching = None
        # Only a checkpoint B wrote and left can be lost: a B that found the task done wrote
        # nothing, and one that deleted the checkpoint on success left nothing but the
        # task's end (below). A write of A's that leaves the checkpoint as B left it loses
        # nothing.
        after = _stored(executor, task_id)
        changed = [w for w in [*writes, after] if w != taken_over]
        if b_wrote and taken_over is not None and changed:
            result.violations.append(_lost_update(taken_over, changed[0], timeline, woken))
        elif b_wrote and taken_over is None and any(w is not None for w in writes):
            # B finished and deleted the checkpoint; A wrote the task again. A worker held
            # before its first save may (a design that deletes on success, whose re-runs
            # the completed-task oracle judges); one that held a version may not: its save
            # with that version is refused, so a write that went through was an upsert.
            held = _held_version(timeline, a_attempts[-1], task_id)
            if held is not None:
                written = next(w for w in writes if w is not None)
                result.violations.append(_recreated(held, written, after, timeline, woken))
        result.violations += _went_on(timeline, executor.flags, woken)
        result.violations += valid_sequence(timeline, validate_messages, error_type=InvalidHistoryError)
        return result
    finally:
        injector.release()
        store.go_on.set()
        api.remove_hook(injector.model_hook)
        api.remove_hook(rules)
        executor.store.delete(task_id)


def _resume_a(executor: Any, task_id: str, timeline: Timeline, made: int, calls: int) -> bool:
    """Whether worker A, back from its ``made``-th call before reaching its point, is
    called again: the crash-free run took ``calls`` calls to complete the task, this is
    fewer, and the task is still running, as a supervisor resumes a worker that stopped
    cleanly."""
    return made < calls and executor._still_running(task_id, timeline)


def _a_ended(timeline: Timeline, outcome_a: list[BaseException | None], answer_a: list[Any]) -> None:
    """Record how worker A's run ended, once it returned or raised after waking up."""
    if outcome_a and outcome_a[0] is not None:
        error = outcome_a[0]
        timeline.add("attempt_end", outcome="error", detail=f"{type(error).__name__}: {error}")
    else:
        timeline.add(
            "attempt_end",
            outcome="answer",
            detail=f"worker A returned {answer_a[0]!r:.200}" if answer_a else "worker A returned",
        )


def _wake_a(
    executor: Any, store: _WatchedStore, injector: _HoldingInjector, thread: threading.Thread, wait: float, note: str
) -> tuple[dict[str, Any] | None, int, list[dict[str, Any] | None]]:
    """Wake worker A up and wait (at most ``wait`` seconds) for it to return: what B left
    stored before, A's attempt, and what each write of A's left."""
    taken_over = _stored(executor, store.task_id)
    woken = injector.timeline.start_attempt(note)
    injector.attempt_started()
    writes: list[dict[str, Any] | None] = []
    store.watching = writes
    injector.release()
    thread.join(wait)
    return taken_over, woken, writes


def _wake_a_while_b_runs(
    executor: Any,
    result: _Point,
    thread: threading.Thread,
    thread_b: threading.Thread,
    injector: _HoldingInjector,
    store: _WatchedStore,
    b_attempts: set[int],
    raised_b: list[BaseException],
    outcome_a: list[BaseException | None],
    answer_a: list[Any],
    wait: float,
) -> _Point:
    """Worker B is paused after its first save of the task: A wakes up and goes on until
    it returns, then B goes on to the end. Nothing A writes meanwhile may change what B
    left: the task is B's, running, at a version A never held."""
    from reference_agent.validation import InvalidHistoryError, validate_messages

    timeline = result.timeline
    taken_over, woken, writes = _wake_a(
        executor, store, injector, thread, wait, "worker A wakes up while worker B runs the task"
    )
    store.watching = None
    if thread.is_alive():
        # A waits on something the paused B holds (a lock of the process, as B waits on
        # the held A's in the other kind of point): not checkable, not failed.
        result.blocked = _where(thread)
        store.go_on.set()
        thread.join(wait)
        thread_b.join(wait)
        return result
    _a_ended(timeline, outcome_a, answer_a)
    after = _stored(executor, store.task_id)
    changed = [w for w in [*writes, after] if w != taken_over]
    # A worker that loads the task afresh at each step and saves with the version it
    # loaded (a stateless step worker) goes on from B's checkpoint: no lost update, and
    # then B, stale, is the one that must stop before it acts (an outside round's agent).
    went_on_from_b = bool(changed) and _built_on(taken_over, changed, timeline, woken)
    if changed and not went_on_from_b:
        result.violations.append(_lost_update(taken_over, changed[0], timeline, woken, running=True))
    if not went_on_from_b:
        # (One that went on from B's checkpoint after a conflict retried from the newer
        # state, as optimistic concurrency does: the stale one is B now.)
        result.violations += _went_on(timeline, executor.flags, woken)
    going_on = timeline.start_attempt("worker B goes on")
    b_attempts.add(going_on)
    injector.attempt_started()
    store.go_on.set()
    thread_b.join(wait)
    if thread_b.is_alive():
        result.violations.append(
            Violation("worker_hung", f"worker B did not finish the task within {wait:g} s once worker A had returned")
        )
    elif raised_b:
        raise raised_b[0]
    if went_on_from_b:
        result.violations += _stale_b_acted(timeline, executor.flags, going_on, taken_over)
        if answer_a and after is not None and after.get("status") == "completed":
            # A finished the task, and B, stale, stood down: the task's answer is A's.
            result.answer, result.answered = answer_a[0], True
    result.violations += valid_sequence(timeline, validate_messages, error_type=InvalidHistoryError)
    return result


def _built_on(
    taken_over: dict[str, Any] | None, changed: list[dict[str, Any] | None], timeline: Timeline, woken: int
) -> bool:
    """Whether every checkpoint worker A left after waking goes on from the one B left:
    B's history is the start of A's, A's iteration is not behind, A loaded the task
    before its first save of the attempt, and what A's history adds was asked for after
    that load: each ``tool_use`` in it, and no more replies than the model gave since
    (nothing from before its pause merged in). A worker that loads the newer version
    after a ConflictError and saves its own state on top fails the first: B's history is
    not the start of its own."""
    if taken_over is None or any(w is None for w in changed):
        return False
    events = [e for e in timeline.events if e.attempt == woken]
    load = next((e for e in events if e.kind == "store_load" and e.data.get("found")), None)
    first_save = next((e for e in events if e.kind == "store_save"), None)
    if load is None or (first_save is not None and first_save.seq < load.seq):
        return False
    replies = [e for e in events if e.kind == "model_response" and e.seq > load.seq]
    asked = {str(tool_use_id) for e in replies for tool_use_id, _name, _input in e.data.get("tool_uses", ())}
    theirs = list(taken_over.get("messages") or [])
    for written in changed:
        assert written is not None
        mine = list(written.get("messages") or [])
        if mine[: len(theirs)] != theirs or (written.get("iteration") or 0) < (taken_over.get("iteration") or 0):
            return False
        added = [m for m in mine[len(theirs) :] if isinstance(m, dict)]
        if sum(m.get("role") == "assistant" for m in added) > len(replies):
            return False
        for message in added:
            content = message.get("content")
            for block in content if isinstance(content, list) else ():
                if isinstance(block, dict) and block.get("type") == "tool_use" and str(block.get("id")) not in asked:
                    return False
    return True


def _stale_b_acted(
    timeline: Timeline, flags: Mapping[str, ToolFlags], going_on: int, taken_over: dict[str, Any] | None
) -> list[Violation]:
    """Worker A went on with the task from B's checkpoint while B was paused: B, going on
    from its own state, must not perform an irreversible effect it had not recorded (its
    next save of the task must conflict first: the intent saved before the call). One
    whose intent B saved before it paused was B's to make: A found the intent, and
    settles it as a resume does."""
    recorded = [
        (action.get("tool_name"), canonical(action.get("input")))
        for action in (taken_over or {}).get("actions") or ()
        if isinstance(action, dict) and action.get("result") is None
    ]
    # A call a key makes harmless (the world replayed it) is no action: only effects.
    acted = [
        e
        for e in timeline.of("effect")
        if e.attempt == going_on
        and _changes(flags.get(str(e.data.get("tool"))), e.data.get("input"))
        and (e.data.get("tool"), canonical(e.data.get("input"))) not in recorded
    ]
    if not acted:
        return []
    return [
        Violation(
            "stops_after_conflict",
            f"worker A, woken up, went on with the task from the checkpoint worker B had saved "
            f"(it loaded it and saved over it with its version: fine); then worker B, going on "
            f"from its own state, performed {acted[0].data.get('tool')} ({len(acted)} irreversible "
            "effect(s)): both workers acted on the task. Save the intent of each irreversible "
            "call before making it: the stale worker's save then conflicts, and it stops",
        )
    ]


def _lost_update(
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    timeline: Timeline,
    woken: int,
    *,
    running: bool = False,
) -> Violation:
    saves = [e for e in timeline.of("store_save") if e.attempt == woken]
    what = "deleted it" if after is None else "changed it"
    if before is not None and after is not None:
        changed = sorted(k for k in before if before.get(k) != after.get(k))
        what = f"changed its {', '.join(changed)}"
    conflicted = any(
        e.attempt == woken and e.data.get("reason") == "conflict" for e in timeline.of("store_save_failed")
    )
    advice = (
        "On a ConflictError the task belongs to another worker: stop, and do not load the "
        "newer version to save your own state on top of it"
        + (
            " (that the newer version is still running does not make the task yours: "
            "the worker that took it over is running it)"
            if running
            else ""
        )
        if conflicted
        else "A never met a ConflictError: its saves went through with a version it did not "
        "hold (learnt from a fresh load just before, as an upsert does, or none at all). Save "
        "with the version you hold, so that the store refuses a stale save; a lock or lease "
        "checked without a fence on each save does not stop a worker whose lease ran out "
        "while it was paused"
    )
    when = (
        "while worker B, which had taken the task over, was running it (paused after a save)"
        if running
        else "after worker B had taken the task over and finished it"
    )
    return Violation(
        "no_lost_update",
        f"{when}, worker A, waking up, {what} ({len(saves)} save(s) of its own went through): "
        f"a worker that no longer owned the task wrote over the checkpoint of the one that did. {advice}",
    )


def _warn_blocked(blocked: list[_Point], wait: float, total: int) -> None:
    import warnings

    from ._search import NotCheckableWarning

    first = blocked[0]
    where = f", waiting at {first.blocked}" if first.blocked else ""
    if first.midrun:
        who = (
            f"worker A, woken up, waited {wait:g} s on something worker B held while paused after "
            f"a save (A had been held at {first.point} #{first.occurrence}){where}"
        )
    else:
        who = (
            f"worker B waited {wait:g} s on something worker A held while paused at "
            f"{first.point} #{first.occurrence}{where}"
        )
    warnings.warn(
        f"agentckpt takeover: {total} point(s) not checkable: {who}. Both "
        "workers are threads of one process here: a lock of the process (a threading.Lock or "
        "asyncio.Lock per task) makes one wait for the other, which a worker in another process would not. "
        "If it is a lock every worker sees (a database or Redis lock), give it a lease that expires: "
        "a paused worker holding it forever bricks its task",
        NotCheckableWarning,
        stacklevel=3,
    )


def _held_version(timeline: Timeline, attempt: int, task_id: str) -> int | None:
    """The version of the task's checkpoint worker A last saved or loaded before it was
    held, if any."""
    held = None
    for e in timeline.of("store_save", "store_load"):
        if e.attempt != attempt or e.data.get("task_id") != task_id:
            continue
        if e.kind == "store_save" or e.data.get("found"):
            held = e.data.get("version")
    return held


def _recreated(
    held: int, written: dict[str, Any], after: dict[str, Any] | None, timeline: Timeline, woken: int
) -> Violation:
    saves = [e for e in timeline.of("store_save") if e.attempt == woken]
    where = f"{written.get('status')} at iteration {written.get('iteration')}"
    left = (
        f"the store shows it {where}"
        if after is not None
        else f"it showed {where} until A deleted it again; had A stopped there, the task would be run again"
    )
    return Violation(
        "no_lost_update",
        f"worker B had taken the task over, finished it and deleted its checkpoint; worker A, "
        f"waking up, wrote the task again from its own stale state ({len(saves)} save(s) of its "
        f"own went through; {left}). A held version {held}: a save made with it would have "
        "been refused. Save with the version you hold, never one learnt from a fresh load "
        "(an upsert), nor as a new checkpoint",
    )


def _changes(flags: ToolFlags | None, tool_input: Any) -> bool:
    """Whether a call changes the world: by its command's kind for a client tool (the
    editor's ``view`` changes nothing)."""
    return flags is not None and flags.for_input(tool_input).irreversible


def _went_on(timeline: Timeline, flags: Mapping[str, ToolFlags], woken: int) -> list[Violation]:
    conflict = next(
        (
            e
            for e in timeline.of("store_save_failed")
            if e.attempt == woken and e.data.get("reason") == "conflict"
        ),
        None,
    )
    if conflict is None:
        return []
    later = [
        e
        for e in timeline.events[conflict.seq + 1 :]
        if e.attempt == woken
        and (
            e.kind == "model_request"
            or (e.kind == "tool_call" and _changes(flags.get(str(e.data.get("tool"))), e.data.get("input")))
        )
    ]
    if not later:
        return []
    first = later[0]
    what = "asked the model again" if first.kind == "model_request" else f"called {first.data.get('tool')}"
    return [
        Violation(
            "stops_after_conflict",
            f"worker A lost a compare-and-set (another worker has the task) and then {what} "
            f"({len(later)} such call(s) after the conflict): a ConflictError means stop, not retry "
            "nor carry on",
        )
    ]


def _report(plan: Any, failures: list[_Point], stats: TakeoverStats) -> str:
    lines = [f"agentckpt takeover: {len(failures)} point(s) failed ({stats.summary()}):"]
    for result in failures:
        head, *others = result.violations
        named = dict.fromkeys(v.oracle for v in others if v.oracle != head.oracle)
        also = f" (also {', '.join(named)})" if named else ""
        lines.append(f"  {result.describe()}: {head.oracle}{also}: {head.message}")
    first = failures[0]
    lines.append(f"plan: {plan.to_dict()}")
    order = (
        "worker A's attempts (resumed after each clean stop) up to its hold; then worker B's, "
        "paused after a save; worker A woken up; worker B going on"
        if first.midrun
        else "worker A's attempts (resumed after each clean stop) up to its hold; then worker B's; "
        "the last: worker A woken up"
    )
    lines.append(f"timeline of {first.describe()} ({order}):")
    lines.append(first.timeline.format())
    return "\n".join(lines)
