"""Occurrences counted from the end of the crash-free run: drawn, resolved, reported, replayed.

A fault drawn only from #1 to #6 never reaches late in a long run; ``-1`` (the last time a
point was met in the plan's crash-free run) does. The harness resolves such a plan against
that run before running it, reports which occurrence each fault was, and the replay line
holds the resolved plan, which replays exactly.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import find, given, seed, settings
from hypothesis import strategies as st

from pytest_agentckpt import FaultPlan, OracleFailure, replay
from pytest_agentckpt._judge import _evaluate
from pytest_agentckpt._process import ProcessExecutor
from pytest_agentckpt._scenario import _Executor
from pytest_agentckpt.faults import ApiFault, CrashAt, FaultInjector, RunCounts, StoreFault
from pytest_agentckpt.strategies import fault_plans
from reference_agent.scripted import Plan, Step, ToolCall

from ..buggy_agents import ledger_cap
from ..buggy_agents._loop import make_agent
from .toolkit import toolbox

#: Four steps of a search, a keyed write and an unkeyed send: twelve tool effects, eight
#: irreversible calls. The ledger-cap agent leaves the sixth and eighth (the sends of steps
#: 3 and 4, effects #9 and #12) unrecorded.
LONG = Plan(
    tuple(
        Step((ToolCall("search", {"query": "crash"}), ToolCall("write_record", {"key": "a"}), ToolCall("send_email", {"to": "ann"})))
        for _ in range(4)
    ),
    "all done",
)


# -- the plan and its resolution ---------------------------------------------------------
@pytest.mark.parametrize("make", [lambda: CrashAt("after_tool_effect", 0), lambda: ApiFault("rate_limit", 0),
                                  lambda: StoreFault("store_outage", "save", 0)])
def test_an_occurrence_of_zero_is_refused_saying_what_counts_from_where(make: object) -> None:
    with pytest.raises(ValueError, match=r">= 1 .* or <= -1 .*-1 is the last time"):
        make()  # type: ignore[operator]


def test_a_plan_counted_from_the_end_round_trips_through_json() -> None:
    plan = FaultPlan(
        (CrashAt("after_checkpoint_write", -1),), (ApiFault("overloaded", -2),), (StoreFault("store_outage", "save", -3, 2),)
    )
    assert FaultPlan.from_dict(plan.to_dict()) == plan and plan.from_end
    assert not FaultPlan((CrashAt("after_checkpoint_write", 4),)).from_end


def test_resolving_counts_back_from_the_crash_free_run_and_leaves_out_what_it_never_reaches() -> None:
    counts = RunCounts({"after_tool_effect": 12, "before_tool_effect": 12}, {"save": 30, "load": 2}, 5, frozenset({5}))
    plan = FaultPlan(
        crashes=(CrashAt("after_tool_effect", -1), CrashAt("after_tool_effect", 12), CrashAt("before_tool_effect", -13)),
        api_faults=(ApiFault("rate_limit", -5), ApiFault("stream_error", -2), ApiFault("stream_disconnect", -1)),
        store_faults=(StoreFault("store_outage", "save", -2, 2), StoreFault("slow_store", "load", 1)),
    )
    resolved = plan.resolve(counts)
    # -1 of 12 is #12 (the same crash as #12, once); -13 of 12 is before the run began.
    assert resolved.crashes == (CrashAt("after_tool_effect", 12),)
    # -5 of 5 requests is #1; a stream fault lands only on a request that streamed (#5, not #4).
    assert resolved.api_faults == (ApiFault("rate_limit", 1), ApiFault("stream_disconnect", 5))
    assert resolved.store_faults == (StoreFault("store_outage", "save", 29, 2), StoreFault("slow_store", "load", 1))
    assert not resolved.from_end
    untouched = FaultPlan((CrashAt("after_tool_effect", 3),))
    assert untouched.resolve(counts) is untouched


def test_the_description_says_which_occurrence_a_count_from_the_end_is() -> None:
    counts = RunCounts({"after_checkpoint_write": 14}, {"save": 14}, 5)
    plan = FaultPlan(
        (CrashAt("after_checkpoint_write", -1), CrashAt("before_model_call", -2)),
        (ApiFault("overloaded", -3),),
        (StoreFault("store_outage", "save", -2, 2),),
    )
    assert plan.describe() == (
        "crash at after_checkpoint_write, the last; crash at before_model_call, the 2nd from last; "
        "API overloaded on request, the 3rd from last; store outage on save, the 2nd from last and the 1 after it"
    )
    assert plan.describe(counts) == (
        "crash at after_checkpoint_write #14 (the last of 14); "
        "crash at before_model_call, the 2nd from last (never reached: the crash-free run has 0); "
        "API overloaded on request #3 (the 3rd from last of 5); "
        "store outage on save #13 (the 2nd from last of 14) and the 1 after it"
    )
    # Counts from the start read as they always did.
    assert FaultPlan((CrashAt("after_tool_effect", 1),), (ApiFault("rate_limit", 2),)).describe(counts) == (
        "crash at after_tool_effect #1; API rate_limit on request #2"
    )


def test_an_injector_refuses_a_plan_it_cannot_count_from_the_end_of() -> None:
    with pytest.raises(ValueError, match=r"resolve it first"):
        FaultInjector(FaultPlan((CrashAt("after_tool_effect", -1),)))


# -- the strategy --------------------------------------------------------------------------
def test_fault_plans_draw_late_occurrences_and_shrink_to_early_ones() -> None:
    seen: list[int] = []

    # Seeded: Hypothesis's draws are not uniform (it favours small and boundary values), and
    # unseeded runs put the share of late occurrences anywhere from 0.31 to 0.6.
    @seed(20261206)
    @settings(max_examples=1000, database=None)
    @given(fault_plans(kinds=["after_tool_effect", "store_outage", "rate_limit"]))
    def draw(plan: FaultPlan) -> None:
        seen.extend(c.occurrence for c in plan.crashes)
        seen.extend(f.request for f in plan.api_faults)
        seen.extend(s.occurrence for s in plan.store_faults if s.operation == "save")

    draw()
    assert set(seen) == {*range(1, 7), *range(-6, 0)}
    late = sum(n < 0 for n in seen) / len(seen)
    assert 0.3 < late < 0.7, late
    # A plan that needs a crash shrinks to the first occurrence, not the last.
    assert find(fault_plans(kinds=["after_tool_effect"]), lambda p: bool(p.crashes)).crashes == (CrashAt("after_tool_effect", 1),)
    # One that needs a late one shrinks to the last.
    late_one = find(fault_plans(kinds=["after_tool_effect"]), lambda p: any(c.occurrence < 0 for c in p.crashes))
    assert late_one.crashes == (CrashAt("after_tool_effect", -1),)


@given(fault_plans(from_end=False, kinds=["after_tool_effect", "store_outage", "rate_limit"]))
def test_fault_plans_from_end_false_count_only_from_the_start(plan: FaultPlan) -> None:
    assert not plan.from_end
    FaultInjector(plan)


@given(st.from_type(FaultPlan))
def test_from_type_fault_plans_resolve_to_plans_an_injector_takes(plan: FaultPlan) -> None:
    FaultInjector(plan.resolve(RunCounts({p: 3 for p in ("after_tool_effect", "before_model_call")}, {"save": 3}, 3)))


# -- a bug that only a late fault shows ------------------------------------------------------
@pytest.fixture
def capped() -> Iterator[_Executor]:
    ex = _Executor(ledger_cap.run, toolbox(), store=None, budget=None, max_resumes=None, goal="g")
    try:
        yield ex
    finally:
        ex.close()


def test_the_ledger_cap_agent_survives_every_early_crash_and_not_the_last(capped: _Executor) -> None:
    for n in range(1, 7):
        verdict = _evaluate(capped, LONG, FaultPlan((CrashAt("after_tool_effect", n),)), None)
        assert verdict.outcome.crashes == 1 and not verdict.violations, (n, verdict.violations)
    verdict = _evaluate(capped, LONG, FaultPlan((CrashAt("after_tool_effect", -1),)), None)
    assert verdict.outcome.crashes == 1 and "no_duplicate_effect" in verdict.oracles
    assert verdict.faults == FaultPlan((CrashAt("after_tool_effect", 12),))


def test_a_failure_from_the_end_is_reported_with_its_occurrence_and_replays_exactly() -> None:
    with pytest.raises(OracleFailure) as caught:
        replay(ledger_cap.run, toolbox(), LONG, FaultPlan((CrashAt("after_tool_effect", -4),)))
    report = str(caught.value)
    assert "fault plan: crash at after_tool_effect #9 (the 4th from last of 12)" in report
    # The failure holds the plan as it ran, counted from the start; the replay line too.
    assert caught.value.fault_plan == FaultPlan((CrashAt("after_tool_effect", 9),))
    line = next(line for line in report.splitlines() if line.startswith("replay just this scenario"))
    assert re.search(r"FaultPlan\.from_dict\(\{'crashes': \[\['after_tool_effect', 9\]\]", line), line
    with pytest.raises(OracleFailure) as again:
        replay(ledger_cap.run, toolbox(), LONG, caught.value.fault_plan)
    assert again.value.oracles == caught.value.oracles == ["no_duplicate_effect"]
    assert again.value.violations[0].message == caught.value.violations[0].message


def test_a_fault_counted_from_further_back_than_the_run_is_unreached_not_fired() -> None:
    ex = _Executor(make_agent(), toolbox(), store=None, budget=None, max_resumes=None, goal="g")
    try:
        _, clean = ex.baseline(LONG)
        verdict = _evaluate(ex, LONG, FaultPlan((CrashAt("after_tool_effect", -13),)), None)
    finally:
        ex.close()
    # Not run again, not clamped to #1: the crash-free run is judged in its place.
    assert verdict.outcome is clean and verdict.faults == FaultPlan() and not verdict.violations
    assert "never reached: the crash-free run has 12" in verdict.fault_text


def test_process_mode_resolves_against_its_own_crash_free_run(tmp_path: Path) -> None:
    ex = ProcessExecutor(
        "tests.buggy_agents.ledger_cap:run", "tests.harness.toolkit:toolbox",
        store=f"sqlite:///{tmp_path / 'store.db'}", budget=None, max_resumes=None, goal="g",
    )
    try:
        verdict = _evaluate(ex, LONG, FaultPlan((CrashAt("after_tool_effect", -1),)), None)  # type: ignore[arg-type]
    finally:
        ex.close()
    assert verdict.faults == FaultPlan((CrashAt("after_tool_effect", 12),))
    assert verdict.outcome.timeline.of("crash") and "no_duplicate_effect" in verdict.oracles
    assert verdict.fault_text == "crash at after_tool_effect #12 (the last of 12)"


# -- crashes placed by a fraction of the crash-free run ------------------------------------
#: A run's points: a save, an unkeyed effect, a save, a model call, then the next save.
ORDER = ("before_checkpoint_write", "after_checkpoint_write", "before_tool_effect", "after_tool_effect",
         "before_checkpoint_write", "after_checkpoint_write", "iteration_start", "before_model_call")
#: The durable changes before each point: save 1, the effect (2), save 3.
CHANGES = (0, 1, 1, 2, 2, 3, 3, 3)


def test_a_crash_fraction_picks_a_state_of_the_run_and_a_point_within_it() -> None:
    counts = RunCounts({}, {}, 0, order=ORDER, changes=CHANGES, unsaved=frozenset({2}))
    assert [list(span) for span in counts.states] == [[0], [1, 2], [3, 4], [5, 6, 7]]
    # Weights 1, 1, 4 (after the effect, unsaved), 1: seven parts of the run.
    placed = [counts.at_fraction(k / 700) for k in range(1, 701)]
    states = [p[1] for p in placed if p is not None]
    assert [states.count(n) for n in (1, 2, 3, 4)] == [100, 100, 400, 100]
    assert counts.at_fraction(0.001) == (CrashAt("before_checkpoint_write", 1), 1, 4)
    assert counts.at_fraction(0.5) == (CrashAt("after_tool_effect", 1), 3, 4)
    assert counts.at_fraction(0.6) == (CrashAt("before_checkpoint_write", 2), 3, 4)
    assert counts.at_fraction(1.0) == (CrashAt("before_model_call", 1), 4, 4)
    # Every point of the run is reached by some fraction.
    assert {p[0] for p in placed if p is not None} == set(single_crash_points(ORDER))


def single_crash_points(order: tuple[str, ...]) -> list[CrashAt]:
    from pytest_agentckpt.chaos import single_crash_plans

    return [plan.crashes[0] for plan in single_crash_plans(order)]


def test_a_crash_fraction_resolves_describes_and_round_trips() -> None:
    counts = RunCounts({}, {}, 0, order=ORDER, changes=CHANGES, unsaved=frozenset({2}))
    plan = FaultPlan(crash_fractions=(0.5,))
    assert plan.relative and not plan.from_end and plan.size == 1
    assert plan.describe() == "crash halfway through the crash-free run"
    assert plan.describe(counts) == "crash at after_tool_effect #1 (in state 3 of 4 of the crash-free run)"
    assert plan.resolve(counts) == FaultPlan((CrashAt("after_tool_effect", 1),))
    assert FaultPlan.from_dict(plan.to_dict()) == plan
    assert "crash_fractions" not in FaultPlan((CrashAt("after_tool_effect", 1),)).to_dict()
    # Where the order of the points is not known (process mode), it is never reached.
    assert plan.resolve(RunCounts({"before_checkpoint_write": 2}, {}, 0)) == FaultPlan()
    with pytest.raises(ValueError, match=r"resolve it first"):
        FaultInjector(plan)


def test_run_counts_without_changes_make_every_point_a_state_and_refuse_a_mismatch() -> None:
    counts = RunCounts({}, {}, 0, order=ORDER)
    assert len(counts.states) == len(ORDER)
    assert counts.at_fraction(0.5) == (CrashAt("after_tool_effect", 1), 4, 8)
    with pytest.raises(ValueError, match=r"changes: one count per point of order \(8\), not 2"):
        RunCounts({}, {}, 0, order=ORDER, changes=(0, 1))


@pytest.mark.parametrize("fraction", [0, -0.5, 1.5, float("nan"), "1", True])
def test_a_crash_fraction_outside_the_run_is_refused(fraction: object) -> None:
    with pytest.raises(ValueError, match=r"crash_fractions: each must be a number in \(0, 1\]"):
        FaultPlan(crash_fractions=(fraction,))  # type: ignore[arg-type]


def test_fault_plans_reach_the_middle_of_a_long_run_only_by_fractions() -> None:
    # Thirty saves, nothing between them: save 15 is further than six from either end.
    order = ("before_checkpoint_write", "after_checkpoint_write") * 30
    counts = RunCounts({"before_checkpoint_write": 30, "after_checkpoint_write": 30}, {"save": 30}, 0,
                       order=order, changes=tuple(n // 2 + n % 2 for n in range(60)))
    middle = (CrashAt("after_checkpoint_write", 15),)
    kinds = ["before_checkpoint_write", "after_checkpoint_write"]
    found = find(fault_plans(kinds=kinds), lambda p: p.resolve(counts).crashes == middle,
                 settings=settings(max_examples=2000, database=None))
    assert found.crash_fractions and not found.crashes
    from hypothesis.errors import NoSuchExample

    with pytest.raises(NoSuchExample):
        find(fault_plans(kinds=kinds, fractions=False), lambda p: p.resolve(counts).crashes == middle,
             settings=settings(max_examples=2000, database=None))


def test_a_crash_fraction_runs_through_replay_and_reports_where_it_fell() -> None:
    # Effect #9 is the send of step 3, which the ledger-cap agent leaves unrecorded.
    ex = _Executor(ledger_cap.run, toolbox(), store=None, budget=None, max_resumes=None, goal="g")
    try:
        _, clean = ex.baseline(LONG)
        counts = clean.counts
        assert counts is not None and len(counts.order) == sum(counts.hits.values())
        fraction = next(
            k / 1000 for k in range(1, 1001)
            if (placed := counts.at_fraction(k / 1000)) and placed[0] == CrashAt("after_tool_effect", 9)
        )
        verdict = _evaluate(ex, LONG, FaultPlan(crash_fractions=(fraction,)), None)
    finally:
        ex.close()
    assert verdict.faults == FaultPlan((CrashAt("after_tool_effect", 9),))
    assert "no_duplicate_effect" in verdict.oracles
    assert re.fullmatch(r"crash at after_tool_effect #9 \(in state \d+ of \d+ of the crash-free run\)", verdict.fault_text)
