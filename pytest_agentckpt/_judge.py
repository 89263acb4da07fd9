"""Judging a scenario: the oracles over its timeline, the verdict, the failure report."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._scenario import _Executor, _Outcome
from .faults import (
    FaultPlan,
)
from .oracles import (
    ORACLES,
    Baseline,
    ToolFlags,
    UnsafeTool,
    Violation,
    completed_idempotent,
    iteration_monotone,
    no_duplicate_effect,
    recorded_work_not_redone,
    same_answer,
    valid_sequence,
)
from .timeline import Timeline

if TYPE_CHECKING:

    from reference_agent.scripted import Plan

# -- results and failures ----------------------------------------------------------------------
class OracleFailure(AssertionError):
    """An oracle failed: ``oracle`` names it, ``violations`` has every one that failed.

    >>> OracleFailure([Violation("same_answer", "answers differ")], report="...").oracle
    'same_answer'
    """

    def __init__(
        self,
        violations: Sequence[Violation],
        *,
        report: str,
        fault_plan: FaultPlan | None = None,
        plan: Plan | None = None,
        found_after: int | None = None,
    ) -> None:
        super().__init__(report)
        #: How many scenarios ran before the first failing one was found (before shrinking).
        self.found_after = found_after
        self.violations = list(violations)
        self.oracle = self.violations[0].oracle
        self.oracles = [v.oracle for v in self.violations]
        self.fault_plan = fault_plan
        self.plan = plan


# -- judging ----------------------------------------------------------------------------------
def _judge(
    outcome: _Outcome, baseline: Baseline, flags: Mapping[str, ToolFlags], budget: int | None
) -> tuple[list[Violation], list[UnsafeTool]]:
    from reference_agent.validation import InvalidHistoryError, validate_messages

    timeline = outcome.timeline
    main = Timeline()
    main.events = timeline.events[: outcome.rerun_from] if outcome.rerun_from is not None else timeline.events
    violations = valid_sequence(main, validate_messages, error_type=InvalidHistoryError)
    duplicates, unsafe = no_duplicate_effect(main, baseline, flags, completed=outcome.completed)
    violations += duplicates
    violations += same_answer(outcome.answer, baseline, completed=outcome.completed)
    violations += iteration_monotone(main, budget=budget)
    violations += recorded_work_not_redone(main)
    if outcome.rerun_from is not None:
        violations += completed_idempotent(
            timeline.events[outcome.rerun_from :], outcome.rerun_answer, outcome.answer
        )
    if not outcome.completed:
        violations.append(
            Violation(
                "resumes_to_completion",
                f"the agent did not finish: after the last fault it kept failing "
                f"({outcome.error}); a resumed agent must be able to complete the task",
            )
        )
    return violations, unsafe


def _crash_free_failure(outcome: _Outcome) -> list[Violation]:
    from reference_agent.validation import InvalidHistoryError, validate_messages

    found = valid_sequence(outcome.timeline, validate_messages, error_type=InvalidHistoryError)
    if not outcome.completed:
        found.insert(
            0,
            Violation(
                "crash_free_run",
                f"the agent fails with no fault injected at all: {outcome.error}",
            ),
        )
    elif outcome.rerun_from is not None:
        found += completed_idempotent(
            outcome.timeline.events[outcome.rerun_from :], outcome.rerun_answer, outcome.answer
        )
    return found


def _describe_plan(plan: Plan) -> str:
    steps = []
    for step in plan.steps:
        calls = ", ".join(f"{c.name}({json.dumps(dict(c.input), sort_keys=True)})" for c in step.calls)
        steps.append(f"[{calls}]")
    return f"{len(plan.steps)} step(s): {' -> '.join(steps) or '(none)'} -> answer {plan.final_answer!r}"


def _report(
    violations: Sequence[Violation],
    outcome: _Outcome,
    plan: Plan,
    faults: FaultPlan,
    reproduce: str,
    *,
    crash_free: bool = False,
) -> str:
    first = violations[0]
    marks: dict[int, str] = {}
    for violation in reversed(violations):
        marks.update(violation.marks)
    kind = "harness check" if first.oracle in ("crash_free_run", "resumes_to_completion") else "oracle"
    lines = [
        f"agentckpt: {kind} {first.oracle} failed" + (" (in the crash-free run)" if crash_free else ""),
        f"  {first.message}",
    ]
    others = [v for v in violations[1:] if v.oracle != first.oracle]
    if others:
        lines.append("also failed: " + ", ".join(dict.fromkeys(v.oracle for v in others)))
        lines += [f"  {v.oracle}: {v.message}" for v in others[:3]]
    lines += [
        f"fault plan: {faults.describe()}",
        f"plan: {_describe_plan(plan)}",
        f"reproduce: {reproduce}",
        "replay just this scenario: pytest_agentckpt.replay(run, tools, "
        f"Plan.from_dict({json.dumps(plan.to_dict(), sort_keys=True)}), "
        f"FaultPlan.from_dict({json.dumps(faults.to_dict())}))",
        "timeline:",
        outcome.timeline.format(marks=marks),
    ]
    return "\n".join(lines)


@dataclass
class _Verdict:
    plan: Plan
    faults: FaultPlan
    outcome: _Outcome
    violations: list[Violation]
    unsafe: list[UnsafeTool]
    crash_free: bool

    def failure(self, reproduce: str, *, found_after: int | None, minimized: bool = False) -> OracleFailure:
        report = _report(
            self.violations, self.outcome, self.plan, self.faults, reproduce, crash_free=self.crash_free
        )
        if minimized:
            report += (
                "\n(agentckpt shrank this example further than Hypothesis did, re-aiming the crash "
                "occurrences at the smaller plan; the @reproduce_failure line reproduces the larger one, "
                "replay() with the plan and fault plan above reproduces this one)"
            )
        return OracleFailure(
            self.violations, report=report, fault_plan=self.faults, plan=self.plan, found_after=found_after
        )


def _evaluate(executor: _Executor, plan: Plan, faults: FaultPlan, budget: int | None) -> _Verdict:
    """Run ``plan`` crash-free (cached) and under ``faults``; judge the result.

    A plan whose tool calls fail in the crash-free run is infeasible: no violations, and
    ``outcome.infeasible`` says why.
    """
    baseline, clean = executor.baseline(plan)
    if clean.infeasible is not None:
        return _Verdict(plan, FaultPlan(), clean, [], [], crash_free=True)
    ignored = executor.ignore_oracles
    problems = [v for v in _crash_free_failure(clean) if v.oracle not in ignored]
    if problems:
        return _Verdict(plan, FaultPlan(), clean, problems, [], crash_free=True)
    outcome = executor.execute(plan, faults)
    violations, unsafe = _judge(outcome, baseline, executor.flags, budget)
    violations = [v for v in violations if v.oracle not in ignored]
    return _Verdict(plan, faults, outcome, violations, unsafe, crash_free=False)


def _ignored_oracles(ignore_oracles: Sequence[str]) -> frozenset[str]:
    if isinstance(ignore_oracles, str):
        raise ValueError(f"ignore_oracles must be a sequence of oracle names, not {ignore_oracles!r}")
    unknown = sorted(set(ignore_oracles) - set(ORACLES))
    if unknown:
        raise ValueError(f"ignore_oracles: unknown {unknown}; the oracles are {', '.join(ORACLES)}")
    return frozenset(ignore_oracles)


