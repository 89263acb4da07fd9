"""Shrinking further than Hypothesis can: smaller plans with the crashes re-aimed."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ._judge import OracleFailure, _evaluate, _Verdict
from ._scenario import _Executor
from .faults import (
    CrashAt,
    FaultPlan,
    StoreFault,
)

if TYPE_CHECKING:

    from reference_agent.scripted import Plan

def _smaller_plans(plan: Plan) -> Iterator[Plan]:
    """``plan`` with one step, or one call of a step, left out; then with a sub-agent's
    plan (``ToolCall.plan``) made smaller the same way. The final call is kept."""
    from reference_agent.scripted import Step, ToolCall

    for index in range(len(plan.steps)):
        yield dataclasses.replace(plan, steps=plan.steps[:index] + plan.steps[index + 1 :])
    for index, step in enumerate(plan.steps):
        if len(step.calls) > 1:
            for drop in range(len(step.calls)):
                calls = step.calls[:drop] + step.calls[drop + 1 :]
                yield dataclasses.replace(plan, steps=(*plan.steps[:index], Step(calls, step.text), *plan.steps[index + 1:]))
    for index, step in enumerate(plan.steps):
        for position, call in enumerate(step.calls):
            if call.plan is None:
                continue
            for smaller in _smaller_plans(call.plan):
                calls = (*step.calls[:position], ToolCall(call.name, call.input, plan=smaller), *step.calls[position + 1 :])
                yield dataclasses.replace(plan, steps=(*plan.steps[:index], Step(calls, step.text), *plan.steps[index + 1:]))


#: Occurrences counted from the end that a single fault is re-aimed at, after 1..12: a
#: bug late in a run stays late in a smaller plan (resolved against its crash-free run).
_FROM_END = (-1, -2, -3)


def _retargeted(faults: FaultPlan) -> Iterator[FaultPlan]:
    """``faults``, then the same crash points aimed at other occurrences (a lone store
    fault on save too)."""
    yield faults
    crashes = faults.crashes
    if not crashes and len(faults.store_faults) == 1 and faults.store_faults[0].operation == "save":
        lone = faults.store_faults[0]
        for n in (*range(1, 13), *_FROM_END):
            if n != lone.occurrence:
                aimed = StoreFault(lone.kind, lone.operation, n, lone.length, lone.delay)
                yield FaultPlan(crashes, faults.api_faults, (aimed,))
        return
    if len(crashes) == 1:
        options: list[tuple[int, ...]] = [(n,) for n in (*range(1, 13), *_FROM_END)]
    elif len(crashes) == 2:
        options = list(itertools.product(range(1, 7), repeat=2))
    else:
        return
    for occurrences in options:
        moved = tuple(sorted({CrashAt(c.point, n) for c, n in zip(crashes, occurrences, strict=True)}))
        if moved != crashes and len(moved) == len(crashes):
            yield FaultPlan(moved, faults.api_faults, faults.store_faults)


def _fewer_faults(faults: FaultPlan) -> Iterator[FaultPlan]:
    for index in range(len(faults.crashes)):
        yield FaultPlan(faults.crashes[:index] + faults.crashes[index + 1 :], faults.api_faults, faults.store_faults)
    for index in range(len(faults.api_faults)):
        yield FaultPlan(faults.crashes, faults.api_faults[:index] + faults.api_faults[index + 1 :], faults.store_faults)
    for index in range(len(faults.store_faults)):
        yield FaultPlan(faults.crashes, faults.api_faults, faults.store_faults[:index] + faults.store_faults[index + 1 :])


def _minimize(
    executor: _Executor,
    budget: int | None,
    failure: OracleFailure | _Verdict,
    *,
    max_runs: int = 300,
    oracle: str | None = None,
) -> _Verdict | None:
    """Shrink a failure further than Hypothesis can: a smaller plan moves the occurrence
    at which the same crash must happen, so re-aim the crashes for each smaller plan.

    Keeps ``oracle`` failing (default: the failure's first); bounded by ``max_runs``
    scenario runs. The verdict returned leads with ``oracle``.
    """
    if isinstance(failure, OracleFailure):
        if failure.plan is None or failure.fault_plan is None:
            return None
        plan, faults, target = failure.plan, failure.fault_plan, oracle or failure.oracle
    else:
        plan, faults, target = failure.plan, failure.faults, oracle or failure.oracles[0]
    best: _Verdict | None = None
    runs = 0
    improved = True
    while improved and runs < max_runs:
        improved = False
        candidates: list[tuple[Plan, Iterator[FaultPlan]]] = [(plan, iter(_fewer_faults(faults)))]
        candidates += [(smaller, _retargeted(faults)) for smaller in _smaller_plans(plan)]
        for candidate_plan, fault_options in candidates:
            for candidate_faults in fault_options:
                if runs >= max_runs:
                    break
                runs += 1
                verdict = _evaluate(executor, candidate_plan, candidate_faults, budget)
                if target in verdict.oracles:
                    plan, faults, best, improved = candidate_plan, verdict.faults, verdict, True
                    break
            if improved:
                break
    return best


