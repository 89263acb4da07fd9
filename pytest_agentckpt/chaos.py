"""Chaos mode: a test's own body, rerun with a crash at each fault point it passes.

A team's test that drives its agent through the plugin's fixtures (a client of the fake
Messages API, a checkpoint store, and the toolbox of ``agentckpt_tools``) is run once as
it is, with every fault point it passes recorded. Then, for each single point, the test
is run again on fresh fixture values with a crash there; after the crash leaves the test
body, the body is called again on the *same* fixture values (the store, the World and the
fake API survive, as they would survive the death of a process), a bounded number of
times, and once more after it completes to check that the completed task makes no model
or tool call. Each rerun is judged by the test's own assertions and by the oracles of
:mod:`pytest_agentckpt.oracles`.

This module is the engine and knows nothing of pytest; ``pytest_agentckpt.fixtures.chaos``
wires it to ``--agentckpt-chaos`` and ``@pytest.mark.agentckpt_chaos``.

>>> [p.describe() for p in single_crash_plans({"before_model_call": 2, "after_model_call": 1})]
['crash at before_model_call #1', 'crash at before_model_call #2', 'crash at after_model_call #1']
"""

from __future__ import annotations

import random
import textwrap
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import CodeType
from typing import TYPE_CHECKING, Any

from ._totals import Totals
from .faults import (
    FAULT_POINTS,
    Crash,
    CrashAt,
    FaultInjector,
    FaultPlan,
    FaultyStore,
    HistoryLocator,
    InstrumentedToolbox,
)
from .oracles import (
    HISTORY_ORACLES,
    TOOL_ORACLES,
    Baseline,
    ToolFlags,
    UnsafeTool,
    Violation,
    canonical,
    completed_idempotent,
    effect_counts,
    history_not_found,
    iteration_monotone,
    model_turns,
    no_duplicate_effect,
    recorded_work_not_redone,
    valid_sequence,
)
from .timeline import Event, Timeline

if TYPE_CHECKING:
    from reference_agent.world import World

__all__ = [
    "DEFAULT_MAX_POINTS",
    "DEFAULT_MAX_RESUMES",
    "ChaosFailure",
    "ChaosStats",
    "ChaosTest",
    "PointResult",
    "sample_plans",
    "single_crash_plans",
]

#: Crash points a test runs by default before chaos mode samples them.
DEFAULT_MAX_POINTS = 50
#: Resumes after a crash before a rerun counts as "never completes".
DEFAULT_MAX_RESUMES = 3


def single_crash_plans(hits: Mapping[str, int] | Iterable[str]) -> list[FaultPlan]:
    """Every fault plan with one crash at one point a crash-free run passed.

    ``hits`` is either the points in the order the run met them (a point once per time it
    was met: the plans then come in that order) or a count per point, as
    :attr:`~pytest_agentckpt.faults.FaultInjector.hits` holds it (the plans then come in
    the order of :data:`~pytest_agentckpt.faults.FAULT_POINTS`).

    >>> [p.describe() for p in single_crash_plans(["iteration_start", "before_model_call", "iteration_start"])]
    ['crash at iteration_start #1', 'crash at before_model_call #1', 'crash at iteration_start #2']
    >>> len(single_crash_plans({}))
    0
    """
    if isinstance(hits, Mapping):
        unknown = sorted(set(hits) - set(FAULT_POINTS))
        if unknown:
            raise ValueError(f"hits: unknown fault points {unknown}; the points are {', '.join(FAULT_POINTS)}")
        return [
            FaultPlan(crashes=(CrashAt(point, n),))
            for point in FAULT_POINTS
            for n in range(1, int(hits.get(point, 0)) + 1)
        ]
    seen: Counter[str] = Counter()
    plans = []
    for point in hits:
        if point not in FAULT_POINTS:
            raise ValueError(f"hits: unknown fault point {point!r}; the points are {', '.join(FAULT_POINTS)}")
        seen[point] += 1
        plans.append(FaultPlan(crashes=(CrashAt(point, seen[point]),)))
    return plans


def sample_plans(plans: Sequence[FaultPlan], max_points: int, seed: int) -> list[FaultPlan]:
    """All of ``plans`` when there are at most ``max_points``, else a sample of that many
    drawn with ``seed`` (the same seed draws the same sample), in their original order.

    >>> plans = single_crash_plans({"before_model_call": 10})
    >>> sample_plans(plans, 3, seed=1) == sample_plans(plans, 3, seed=1)
    True
    >>> len(sample_plans(plans, 3, seed=1)), len(sample_plans(plans, 20, seed=1))
    (3, 10)
    """
    if max_points < 1:
        raise ValueError(f"max_points must be >= 1, not {max_points}")
    if len(plans) <= max_points:
        return list(plans)
    chosen = sorted(random.Random(seed).sample(range(len(plans)), max_points))
    return [plans[i] for i in chosen]


@dataclass
class ChaosStats(Totals):
    """What chaos mode did: the terminal summary prints the session's total."""

    tests: int = 0
    tests_failed: int = 0
    points_found: int = 0
    points_run: int = 0
    resumes: int = 0
    passed: int = 0
    failed: int = 0
    #: Points whose rerun failed the test's own assertions only because an unsafe tool
    #: repeated an effect no agent can know the outcome of (see :class:`PointResult`).
    in_doubt: int = 0
    unsafe_tools: set[str] = field(default_factory=set)

    def summary_lines(self) -> list[str]:
        """The terminal summary's lines.

        >>> ChaosStats(tests=2, points_found=9, points_run=9, resumes=9, passed=8, failed=1).summary_lines()[1]
        'crash points: 9 run (8 passed, 1 failed)'
        """
        sampled = f" of {self.points_found} found" if self.points_found != self.points_run else ""
        doubt = f", {self.in_doubt} in doubt" if self.in_doubt else ""
        lines = [
            f"tests: {self.tests} ({self.tests_failed} failed)",
            f"crash points: {self.points_run} run{sampled} ({self.passed} passed{doubt}, {self.failed} failed)",
            f"resumes: {self.resumes}",
        ]
        if self.unsafe_tools:
            lines.append(f"unsafe tools: {', '.join(sorted(self.unsafe_tools))}")
        if self.in_doubt:
            lines.append(
                f"in doubt: {self.in_doubt} crash point(s) failed the test's assertions only because an "
                "unsafe tool repeated an effect whose outcome no agent can know (they pass with that "
                "repeat left out): make the tool honour idempotency keys"
            )
        return lines


@dataclass
class PointResult:
    """One crash point's rerun: what happened and what failed."""

    plan: FaultPlan
    timeline: Timeline
    violations: list[Violation] = field(default_factory=list)
    unsafe: list[UnsafeTool] = field(default_factory=list)
    resumes: int = 0
    completed: bool = False
    #: The test's assertions failed here, but only because of an unsafe tool's repeat:
    #: the point passed again with that repeat left out (the violations it had first).
    in_doubt: list[Violation] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.violations


class ChaosFailure(AssertionError):
    """A test failed under chaos mode: ``failures`` has every failing crash point."""

    def __init__(self, report: str, failures: Sequence[PointResult]) -> None:
        super().__init__(report)
        self.failures = list(failures)


def _test_failed(exc: BaseException) -> bool:
    """Whether ``exc`` is the test's own verdict (an assertion, ``pytest.fail``, a skip),
    not the agent raising."""
    import pytest

    return isinstance(exc, AssertionError | pytest.fail.Exception | pytest.skip.Exception)


def _describe_exception(exc: BaseException, *, lines: int | None = 1) -> str:
    """``exc`` as ``Type: message``, its first ``lines`` lines (an assertion's explanation
    follows its first line), or all of them with ``lines=None``."""
    text = str(exc).strip().splitlines()
    if lines is None:
        lines = len(text)
    cut = text[:lines] + ([f"... ({len(text) - lines} more lines)"] if len(text) > lines else [])
    return f"{type(exc).__name__}: {chr(10).join(cut)}".rstrip(": ")


#: The report's hint when only the test's own assertions failed.
FRAGILE_ASSERTIONS = (
    "  only the test's own assertions failed: the oracles found nothing wrong at these points. "
    "Either your assertion sees a bug no oracle judges (the value a repeat-safe tool left: a write "
    "re-run after a later write to the same place leaves the older one; read the timeline), or it "
    "checks what a resume may change: a resume legitimately asks the model again, repeats "
    "read-only tool calls, and gives a call the model is asked for again a new tool_use id "
    "(ending _g1), so an assertion on how many model calls or read-only calls were made, or on "
    "exact ids, breaks under chaos without a bug. Assert on outcomes (the effects your tools had, "
    "the answer), or keep the test out of chaos mode with @pytest.mark.agentckpt_chaos(False)."
)

#: A test whose assertions fail when it runs again on the store it left, though the agent
#: did no work then.
RERUN_ASSERTIONS = (
    "running the test again on the store it left failed in the test's own assertions, though "
    "the agent made no model or tool call: chaos mode resumes a crashed test by running it "
    "again, so its assertions must hold on a rerun. Assert on outcomes (the effects your tools "
    "had, the final answer), not on what only a first run returns, or keep the test out with "
    "@pytest.mark.agentckpt_chaos(False)"
)

#: Why an unfinished task's test is judged on fewer oracles.
UNFINISHED = (
    "the test leaves its task unfinished (the model's last reply asked for tools, or its "
    "last request got no reply, and no checkpoint was saved completed after it), so a resume takes the task further than the "
    "test's own run did: chaos mode does not judge effects against that run (a lost or an "
    "extra one), nor the task run again. It still judges the message sequence, an effect "
    "repeated beyond what the model asked for, recorded work and the iteration count. fuzz "
    "resumes a stopped task until it completes, and judges the rest"
)


class ChaosTest:
    """The chaos experiment of one test.

    The caller owns the test's fixtures: ``call_body()`` runs the test body once on the
    current fixture values, ``teardown()`` ends them and ``setup()`` makes fresh ones.
    While fixtures are set up, the caller hands the fixture values that are the agent's
    doors to :meth:`instrument_api`, :meth:`instrument_store` and
    :meth:`instrument_tools`, which bind them to the current run's injector.

    >>> test = ChaosTest("t", call_body=lambda: None, setup=lambda: None, teardown=lambda: None)
    >>> test.run().points_run   # a body that passes no fault point has nothing to crash
    0
    """

    def __init__(
        self,
        name: str,
        *,
        call_body: Callable[[], Any],
        setup: Callable[[], Any],
        teardown: Callable[[], Any],
        max_points: int = DEFAULT_MAX_POINTS,
        max_resumes: int = DEFAULT_MAX_RESUMES,
        seed: int = 0,
        reproduce: str = "",
        ignore_oracles: Iterable[str] = (),
        test_code: CodeType | None = None,
    ) -> None:
        if max_resumes < 0:
            raise ValueError(f"max_resumes must be >= 0, not {max_resumes}")
        if max_points < 1:
            raise ValueError(f"max_points must be >= 1, not {max_points}")
        self.name = name
        self.call_body = call_body
        self.setup = setup
        self.teardown = teardown
        self.max_points = max_points
        self.max_resumes = max_resumes
        self.seed = seed
        self.reproduce = reproduce
        #: Oracles not judged (a design known to break one, such as a delete on success).
        self.ignored = frozenset(ignore_oracles)
        #: The test function's code: an exception raised in its own frame (a ``KeyError``
        #: of its check) once the run's checkpoints are saved completed is its verdict.
        self.test_code = test_code
        self.flags: dict[str, ToolFlags] = {}
        self.stats = ChaosStats()
        self.doors: set[str] = set()
        self.results: list[PointResult] = []
        #: Oracles that could not judge this test, with why (warned of as fuzz does).
        self.not_checkable: dict[str, str] = {}
        #: The first run left its task unfinished (:func:`_left_unfinished`).
        self.unfinished = False
        #: Whether the store was given where the history lives (``agentckpt_history``).
        self.located = False
        self._worlds: list[World] = []
        self.begin(FaultPlan())

    # -- one run's instrumentation --------------------------------------------------------
    def begin(self, plan: FaultPlan, *, leave_out: Mapping[tuple[str, str], int] | None = None) -> None:
        """Start a run under ``plan``: fixtures set up from now on bind to its injector.

        ``leave_out``: (tool, canonical input) -> how many times that effect may happen;
        a repeat beyond is answered with the last result and its effect left out.
        """
        from reference_agent.world import World

        self.close()  # the previous run's fixtures are torn down: its World is done with
        self.injector = FaultInjector(plan, Timeline())
        self.world = _repeats_left_out(leave_out) if leave_out else World()
        self._worlds.append(self.world)
        self.doors = set()

    def instrument_api(self, api: Any) -> Any:
        """Observe the model calls of ``api`` (a :class:`~pytest_agentckpt.FakeMessagesAPI`)."""
        api.add_hook(self.injector.model_hook)
        api.add_delivery_hook(self.injector.model_delivered)
        self.injector.api_sink = lambda kind, mid_reply=False: api.fail_next(kind, mid_reply=mid_reply)
        self.doors.add("model")
        return api

    def instrument_store(self, store: Any, *, history: HistoryLocator | None = None) -> FaultyStore:
        """``store``, with its writes observed and crashing at the checkpoint-write points.

        ``history`` says where a checkpoint keeps the message history (default:
        ``checkpoint.messages``), as ``fuzz(history=...)`` does.
        """
        self.doors.add("store")
        self.located = history is not None
        return FaultyStore(store, self.injector, history=history)

    def instrument_tools(self, tools: Any) -> InstrumentedToolbox:
        """``tools``, with calls and effects observed and crashing at the tool points."""
        from ._scenario import _tool_flags

        self.flags.update(_tool_flags(tools))
        self.doors.add("tools")
        return InstrumentedToolbox(tools, self.world, self.injector)

    def close(self) -> None:
        """Release the private World of the tools' effects."""
        for world in self._worlds:
            world.close()
        self._worlds.clear()

    # -- the experiment -------------------------------------------------------------------
    def run_baseline(self) -> None:
        """Run the test body once as it is (or the caller runs it between
        :meth:`start_baseline` and :meth:`baseline_ran`)."""
        self.start_baseline()
        self.call_body()
        self.baseline_ran()

    def start_baseline(self) -> None:
        """The first run of the body starts now, on the fixtures already set up."""
        self.injector.timeline.start_attempt("the test as it is")
        self.injector.attempt_started()

    def baseline_ran(self) -> None:
        """The first run of the body passed."""
        timeline = self.injector.timeline
        timeline.add("attempt_end", outcome="answer", detail="the test body passed")
        self._order = list(self.injector.order)
        self._baseline_end = len(timeline)

    def run(self) -> ChaosStats:
        """The whole experiment after a passing first run: judge it, then every crash point.

        Raises :class:`ChaosFailure` listing every failing point; returns the counts
        otherwise. Tears down nothing of the last run's fixtures (the caller does).
        """
        if not hasattr(self, "_order"):
            self.run_baseline()
        baseline_timeline = self.injector.timeline
        self.stats.tests = 1
        clean = PointResult(FaultPlan(), baseline_timeline, completed=True)
        main = _prefix(baseline_timeline, self._baseline_end)
        self.unfinished = _left_unfinished(main)
        if not self.unfinished:
            self._run_completed_again(clean, self._baseline_end)
        self.baseline = Baseline(
            answer=None,
            effects=effect_counts(main),
            model_turns=model_turns(main),
            timeline=main,
        )
        clean.violations = self._judged(self._sequence_violations(main) + clean.violations)
        self.not_checkable = _not_checkable(main, located=self.located)
        if self.unfinished:
            self.not_checkable.setdefault("completed_idempotent", UNFINISHED)
        if clean.violations:
            self.stats.tests_failed = 1
            raise ChaosFailure(self._report([clean], crash_free=True), [clean])
        plans = single_crash_plans(self._order)
        chosen = sample_plans(plans, self.max_points, self.seed) if plans else []
        self.stats.points_found = len(plans)
        sampled = len(chosen) < len(plans)
        for plan in chosen:
            result = self._run_point(plan)
            if _only_the_test_failed(result) and result.unsafe:
                result = self._without_unsafe_repeats(plan, result)
            self.results.append(result)
            self.stats.points_run += 1
            self.stats.resumes += result.resumes
            self.stats.unsafe_tools |= {u.tool for u in result.unsafe}
            if result.in_doubt:
                self.stats.in_doubt += 1
            elif result.passed:
                self.stats.passed += 1
            else:
                self.stats.failed += 1
        failures = [r for r in self.results if not r.passed]
        if failures:
            self.stats.tests_failed = 1
            raise ChaosFailure(self._report(failures, sampled=sampled, found=len(plans)), failures)
        return self.stats

    def _run_point(self, plan: FaultPlan, *, leave_out: Mapping[tuple[str, str], int] | None = None) -> PointResult:
        self.teardown()
        self.begin(plan, leave_out=leave_out)
        self.setup()
        injector = self.injector
        timeline = injector.timeline
        result = PointResult(plan, timeline)
        failure: str | None = None
        last_error: str | None = None
        for attempt in range(self.max_resumes + 1):
            if attempt:
                result.resumes += 1
            timeline.start_attempt("resume" if attempt else "with a crash planned")
            injector.attempt_started()
            crashes_before = injector.crashes
            try:
                self.call_body()
            except Crash as crash:
                timeline.add("attempt_end", outcome="crash", detail=str(crash))
                continue
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:
                if injector.crashes > crashes_before:
                    # The crash surfaced as another exception (wrapped by the agent or a
                    # thread pool): the attempt died all the same.
                    timeline.add("attempt_end", outcome="crash", detail=_describe_exception(exc))
                    continue
                detail = _describe_exception(exc)
                if _test_failed(exc) or (self._raised_by_test(exc) and _saved_completed(timeline)):
                    # An assertion, or the test's own code after its agent finished (a
                    # check that raises KeyError on a lost effect): not the agent raising.
                    timeline.add("attempt_end", outcome="test failed", detail=detail)
                    # Whole: the report shows it "in full" below the points (pytest's own
                    # long diffs included), each point's line only its first line.
                    failure = f"the test failed after the crash: {_describe_exception(exc, lines=None)}"
                    break
                # The agent raised: a supervisor would start it again.
                timeline.add("attempt_end", outcome="error", detail=detail)
                last_error = detail
                continue
            if injector.crashes > crashes_before:
                timeline.add("attempt_end", outcome="crash", detail="the crash was swallowed; the attempt is dead")
                continue
            timeline.add("attempt_end", outcome="answer", detail="the test body passed")
            result.completed = True
            break
        main_end = len(timeline)
        if injector.crashes == 0:
            held = _held_before(timeline)
            why = (
                f"the store already held task {held.data.get('task_id')!r} (version "
                f"{held.data.get('version')}) when the rerun started: it keeps its checkpoints "
                "between runs (a file or a server the store fixture opens again), so the rerun "
                "resumed the task the first run left; chaos mode needs a fresh, empty store for "
                "each run"
                if held is not None
                else "the test does not repeat itself (a fixture of wider than function scope, "
                "randomness, or state the agent keeps outside the store that outlives a run: a "
                "cache file, a module-level dict, which the rerun finds and goes on from?)"
            )
            result.violations.append(
                Violation(
                    "crash_point_reached",
                    f"the run never reached {plan.describe()}, which the first run passed: {why}",
                )
            )
        if failure is not None:
            result.violations.append(Violation("test_assertions", failure))
        elif not result.completed:
            result.violations.append(
                Violation(
                    "resumes_to_completion",
                    f"the test did not pass after {self.max_resumes} resume(s)"
                    + (f"; last error: {last_error}" if last_error else ""),
                )
            )
        if result.completed and not self.unfinished:
            self._run_completed_again(result, main_end)
        main = _prefix(timeline, main_end)
        violations = self._sequence_violations(main)
        # A test whose own assertion failed may still have finished its task: a lost
        # action is then what the assertion saw, and the oracle names it.
        finished = result.completed or (failure is not None and _saved_completed(main))
        duplicates, result.unsafe = no_duplicate_effect(
            main, self.baseline, self.flags, completed=finished and not self.unfinished, bounded=not self.unfinished
        )
        violations += duplicates
        violations += iteration_monotone(main)
        violations += recorded_work_not_redone(main, self.flags)
        result.violations = self._judged(violations + result.violations)
        return result

    def _judged(self, violations: list[Violation]) -> list[Violation]:
        """``violations`` less those of the oracles the test asked to leave out."""
        return [v for v in violations if v.oracle not in self.ignored]

    def _without_unsafe_repeats(self, plan: FaultPlan, result: PointResult) -> PointResult:
        """The point again, with the unsafe tools' repeats left out.

        An unsafe tool (irreversible, no idempotency key) that took effect just before the
        crash leaves an outcome no agent can know: every agent either repeats it or may
        lose it, so a test asserting it happened once fails there whatever the agent does.
        The point runs once more with each repeat of those effects beyond the crash-free
        count answered with the last result and left out, as a tool that honours keys
        would do. If the test passes then, its failure came from the tool alone: the point
        is *in doubt*, not failed (the unsafe tool is reported). If it fails still, the
        failure is the agent's and stands as it was.
        """
        leave_out = {(u.tool, canonical(u.input)): u.expected for u in result.unsafe}
        again = self._run_point(plan, leave_out=leave_out)
        if not again.passed:
            return result
        again.unsafe = result.unsafe
        again.in_doubt = result.violations
        again.resumes = result.resumes
        return again

    def _run_completed_again(self, result: PointResult, start: int) -> None:
        injector = self.injector
        timeline = injector.timeline
        injector.disarm()
        timeline.start_attempt("the completed task, run again")
        injector.attempt_started()
        try:
            self.call_body()
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:
            detail = _describe_exception(exc)
            timeline.add("attempt_end", outcome="error", detail=detail)
            worked = any(e.kind in ("model_request", "tool_call") for e in timeline.events[start:])
            if (_test_failed(exc) or self._raised_by_test(exc)) and not worked:
                result.violations.append(Violation("test_assertions", f"{RERUN_ASSERTIONS} ({detail})"))
            else:
                result.violations.append(
                    Violation("completed_idempotent", f"running the test again on the completed task failed: {detail}")
                )
        else:
            timeline.add("attempt_end", outcome="answer", detail="the test body passed")
        result.violations += completed_idempotent(timeline.events[start:], None, None)

    def _raised_by_test(self, exc: BaseException) -> bool:
        """Whether ``exc`` was raised in the test function's own frame, not below it."""
        tb = exc.__traceback__
        if self.test_code is None or tb is None:
            return False
        while tb.tb_next is not None:
            tb = tb.tb_next
        return tb.tb_frame.f_code is self.test_code

    @staticmethod
    def _sequence_violations(main: Timeline) -> list[Violation]:
        from reference_agent.validation import InvalidHistoryError, validate_messages

        return valid_sequence(main, validate_messages, error_type=InvalidHistoryError)

    # -- the report -------------------------------------------------------------------------
    def _report(
        self,
        failures: Sequence[PointResult],
        *,
        crash_free: bool = False,
        sampled: bool = False,
        found: int = 0,
    ) -> str:
        if crash_free:
            lines = ["agentckpt chaos: the test passes as it is, but its crash-free run breaks an oracle:"]
        else:
            run = len(self.results)
            of = f" (a sample of {run} of {found} points, seed {self.seed})" if sampled else ""
            lines = [f"agentckpt chaos: {len(failures)} of {run} crash points failed{of}:"]
        for result in failures:
            where = "no crash" if crash_free else result.plan.describe()
            head, *others = result.violations
            named = dict.fromkeys(v.oracle for v in others if v.oracle != head.oracle)
            also = f" (also {', '.join(named)})" if named else ""
            lines.append(f"  {where}: {head.oracle}{also}: {_clip(head.message)}")
        doubtful = [r for r in self.results if r.in_doubt]
        if doubtful and not crash_free:
            tools = ", ".join(sorted({u.tool for r in doubtful for u in r.unsafe}))
            lines.append(
                f"  in doubt, not failed ({len(doubtful)}): the test failed only because the unsafe "
                f"tool {tools} repeated an effect whose outcome no agent can know:"
            )
            lines.extend(f"    {r.plan.describe()}" for r in doubtful)
        if not crash_free and all(_only_the_test_failed(r) for r in failures):
            lines.append(FRAGILE_ASSERTIONS)
        cut = next(
            (
                (r, v)
                for r in failures
                for v in r.violations[:1]
                if v.oracle != "test_assertions" and _clip(v.message) != v.message.strip()
            ),
            None,
        )
        if cut is not None:
            result, violation = cut
            where = "the crash-free run" if crash_free else result.plan.describe()
            lines.append(f"{violation.oracle} at {where}, in full:")
            lines.extend("    " + line for line in textwrap.wrap(" ".join(violation.message.split()), 100))
        asserted = next((v for r in failures for v in r.violations if v.oracle == "test_assertions"), None)
        if asserted is not None and "\n" in asserted.message:
            where = next(r for r in failures if asserted in r.violations).plan.describe()
            lines.append(f"the test's assertion at {where}, in full:")
            lines.extend("    " + line for line in asserted.message.splitlines())
        first = failures[0]
        marks: dict[int, str] = {}
        for violation in reversed(first.violations):
            marks.update(violation.marks)
        title = "the crash-free run" if crash_free else first.plan.describe()
        lines.append(f"timeline of {title}:")
        lines.append(first.timeline.format(marks=marks))
        if self.reproduce:
            lines.append(f"reproduce: {self.reproduce}")
        return "\n".join(lines)


def _not_checkable(main: Timeline, *, located: bool) -> dict[str, str]:
    """The oracles the first run of a test shows chaos mode cannot judge, with why.

    >>> from pytest_agentckpt.timeline import Timeline
    >>> t = Timeline(); _ = t.start_attempt()
    >>> _ = t.add("model_request", messages=[{"role": "user", "content": "go"}])
    >>> _ = t.add("model_response", status=200, tool_uses=[("toolu_1", "send", {})])
    >>> sorted(_not_checkable(t, located=False))
    ['no_duplicate_effect', 'recorded_work_not_redone']
    """
    found: dict[str, str] = {}
    asked = sorted({str(use[1]) for e in main.of("model_response") for use in e.data.get("tool_uses", ())})
    if asked and not main.of("tool_call"):
        reason = (
            f"the model asked for {', '.join(asked)}, but no tool call went through the toolbox of "
            "the agentckpt_tools fixture, so chaos mode saw no tool call or effect. If the agent "
            "ran them, it used a toolbox of its own, which is not observed: pass the "
            "agentckpt_tools fixture's value to the agent, and override agentckpt_tools in your "
            "conftest.py to return your toolbox. If this test stops the agent before its tools "
            "run (a pause, a lost lease), there is nothing here for these oracles to judge"
        )
        found.update(dict.fromkeys(TOOL_ORACLES, reason))
    if history_not_found(main) is not None:
        saves = main.of("store_save")
        if located:
            errors = [e.data["located"] for e in saves if isinstance(e.data.get("located"), str)]
            said = (
                f"it raised on {len(errors)} of them; the first time {errors[0]}"
                if errors
                else "it returned None or an empty list"
            )
            reason = (
                f"the function of the agentckpt_history fixture found no messages in any of the "
                f"{len(saves)} checkpoint(s) the agent wrote ({said}), though the agent asked the model "
                "with a history: check it against a checkpoint the agent saves"
            )
        else:
            reason = (
                f"the agent wrote {len(saves)} checkpoint(s) but none held the message history where "
                "chaos mode looks (checkpoint.messages): tell it where the history lives by overriding "
                "the agentckpt_history fixture in your conftest.py with a function of a checkpoint "
                "that returns its messages (for example lambda checkpoint: "
                "rebuild(checkpoint.artifacts['events']))"
            )
        for oracle in HISTORY_ORACLES:
            found.setdefault(oracle, reason)
    return found


def _left_unfinished(main: Timeline) -> bool:
    """Whether the first run of a test left its task visibly unfinished: the model's last
    reply asked for tools (or was cut short), or its last request got no reply, and no
    checkpoint was saved ``completed`` after it. Running such a test again goes on with the task (a resume does more than
    the first run did), so neither its effects nor a rerun doing work are judged against
    that run.

    >>> t = Timeline(); _ = t.start_attempt()
    >>> _ = t.add("model_response", status=200, tool_uses=[("toolu_1", "send", {})], stop_reason="tool_use")
    >>> _ = t.add("store_save", status="running")
    >>> _left_unfinished(t)
    True
    >>> _ = t.add("store_save", status="completed")
    >>> _left_unfinished(t)
    False

    So did a run whose last model request got no reply (an API down for good):

    >>> t = Timeline(); _ = t.start_attempt()
    >>> _ = t.add("store_save", status="running")
    >>> _ = t.add("model_request", index=0, messages=[])
    >>> _ = t.add("model_response", index=0, status=529)
    >>> _left_unfinished(t)
    True
    """
    answered = {e.data.get("index") for e in main.of("model_response") if e.data.get("status") == 200}
    asked = next((e for e in reversed(main.of("model_request")) if e.data.get("index") not in answered), None)
    last = next((e for e in reversed(main.of("model_response")) if e.data.get("status") == 200), None)
    if asked is not None and (last is None or asked.seq > last.seq):
        # The last question got no reply (the API was down for good, and the agent let
        # the error out): the task waits for the model, unfinished.
        last = asked
    elif last is None or not (
        last.data.get("tool_uses") or last.data.get("stop_reason") in ("tool_use", "pause_turn", "max_tokens")
    ):
        return False
    return not any(e.seq > last.seq and e.data.get("status") == "completed" for e in main.of("store_save"))


def _saved_completed(main: Timeline) -> bool:
    """Whether every checkpoint the run saved was last saved ``completed``.

    >>> t = Timeline(); _ = t.start_attempt()
    >>> _ = t.add("store_save", task_id="a", status="running")
    >>> _ = t.add("store_save", task_id="a", status="completed")
    >>> _saved_completed(t)
    True
    """
    last: dict[Any, Any] = {}
    for event in main.of("store_save"):
        last[event.data.get("task_id")] = event.data.get("status")
    return bool(last) and all(status == "completed" for status in last.values())


def _held_before(timeline: Timeline) -> Event | None:
    """The first load of a task the store held before this run saved anything, if any.

    >>> t = Timeline(); _ = t.start_attempt()
    >>> _ = t.add("store_load", found=True, version=4, iteration=2, task_id="t")
    >>> _held_before(t).data["version"]
    4
    """
    for event in timeline.events:
        if event.kind == "store_save":
            return None
        if event.kind == "store_load" and event.data.get("found"):
            return event
    return None


def _only_the_test_failed(result: PointResult) -> bool:
    return bool(result.violations) and all(v.oracle == "test_assertions" for v in result.violations)


def _repeats_left_out(limits: Mapping[tuple[str, str], int]) -> World:
    """A World in which some effects happen at most a given number of times: a repeat
    beyond is answered with the effect's last result, its effect left out (the World of
    the counterfactual run of :meth:`ChaosTest._without_unsafe_repeats`)."""
    from reference_agent.world import World

    class RepeatsLeftOut(World):
        def perform(
            self,
            tool: str,
            input: Mapping[str, Any],
            *,
            idempotency_key: str | None,
            honour_key: bool,
            effect: Callable[[], str],
        ) -> str:
            encoded = canonical(input)
            limit = limits.get((tool, encoded))
            if limit is not None and self.count(tool, input) >= max(limit, 1):
                return [e.result for e in self.effects(tool) if canonical(e.input) == encoded][-1]
            return super().perform(tool, input, idempotency_key=idempotency_key, honour_key=honour_key, effect=effect)

    return RepeatsLeftOut()


def _clip(message: str, limit: int = 200) -> str:
    line = message.strip().splitlines()[0] if message.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _prefix(timeline: Timeline, end: int) -> Timeline:
    part = Timeline()
    part.events = timeline.events[:end]
    part.attempt = part.events[-1].attempt if part.events else 0
    return part
