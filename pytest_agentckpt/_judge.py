"""Judging a scenario: the oracles over its timeline, the verdict, the failure report.

A :class:`_Verdict` is what one scenario (a plan under a fault plan) shows: the violations,
the unsafe tools, the oracles it could not check and the advice. :class:`OracleFailure`
is the form a failing verdict takes for the user: one section per distinct oracle that
failed, each with its own smallest example.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ._scenario import _Executor, _Outcome
from .faults import FaultPlan
from .oracles import (
    CHECKS,
    HISTORY_ORACLES,
    ORACLES,
    SAVED_STATE_ORACLES,
    TOOL_ORACLES,
    Advice,
    Baseline,
    ToolFlags,
    UnsafeTool,
    Violation,
    answer_in_doubt,
    completed_idempotent,
    ended_on_pause,
    give_up_advice,
    history_not_found,
    iteration_monotone,
    model_turns,
    no_duplicate_effect,
    nothing_saved,
    recorded_work_not_redone,
    resume_drift_advice,
    same_answer,
    stale_load_advice,
    tools_not_called,
    turns_lost,
    unwinding_advice,
    valid_sequence,
)

if TYPE_CHECKING:
    from reference_agent.scripted import Plan

    from .timeline import Timeline

#: Checks of the harness itself rather than oracles of the design.
HARNESS_CHECKS = frozenset({"crash_free_run", "resumes_to_completion", "runaway"})


# -- results and failures ----------------------------------------------------------------------
@dataclass(frozen=True)
class Example:
    """The smallest scenario found for one oracle: what ``replay`` needs to show it again."""

    oracle: str
    plan: Plan
    fault_plan: FaultPlan
    message: str


class OracleFailure(AssertionError):
    """An oracle failed: ``oracle`` names the first, ``oracles`` every distinct one that
    failed, ``examples`` the smallest scenario found for each.

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
        examples: Sequence[Example] = (),
        not_checkable: Mapping[str, str] | None = None,
        advice: Sequence[Advice] = (),
    ) -> None:
        super().__init__(report)
        #: How many scenarios ran before the first failing one was found (before shrinking).
        self.found_after = found_after
        self.violations = list(violations)
        self.oracle = self.violations[0].oracle
        named = [v.oracle for v in self.violations] + [e.oracle for e in examples]
        #: Every distinct oracle (or harness check) that failed, first one first.
        self.oracles = list(dict.fromkeys(named))
        self.fault_plan = fault_plan
        self.plan = plan
        self.examples = list(examples)
        self.not_checkable = dict(not_checkable or {})
        self.advice = list(advice)


class NondeterministicFailure(OracleFailure):
    """A verdict that did not reproduce: the same scenario failed once and passed (or failed
    otherwise) when run again, as agents with threads or tasks can. The report shows the
    timelines of both runs; ``oracle`` names what the failing run broke.
    """


# -- judging ----------------------------------------------------------------------------------
def _judge(
    outcome: _Outcome,
    baseline: Baseline,
    flags: Mapping[str, ToolFlags],
    budget: int | None,
    ignored: frozenset[str] = frozenset(),
) -> tuple[list[Violation], list[UnsafeTool], dict[str, str]]:
    from reference_agent.validation import InvalidHistoryError, validate_messages

    main = outcome.main()
    not_checkable: dict[str, str] = {}
    violations = valid_sequence(main, validate_messages, error_type=InvalidHistoryError)
    # A run that completed at the agent's own budget, with what it answers then ("budget
    # exhausted"), because the faults took turns away: its answer, and the actions it had
    # no turn left for, are the budget's, as an unfinished run's are (an outside round's
    # durable-execution agent completes at its limit; raising there passed).
    cut_short = outcome.completed and outcome.runaway is None and _cut_short(main)
    at_budget = _budget_spent(main, baseline, budget) if cut_short else None
    duplicates, unsafe = no_duplicate_effect(main, baseline, flags, completed=outcome.completed)
    if cut_short:
        kept, _ = no_duplicate_effect(main, baseline, flags, completed=False)
        if len(kept) < len(duplicates):  # actions lost: the run ended before it did them
            if at_budget is not None:
                not_checkable["no_duplicate_effect"] = f"an action the crash-free run did was not done: {at_budget}"
                duplicates = kept
            else:
                hint = _budget_hint(main, baseline, budget, answered=True)
                duplicates = [v if v in kept else Violation(v.oracle, v.message + hint, v.marks) for v in duplicates]
    violations += duplicates
    answered = same_answer(outcome.answer, baseline, completed=outcome.completed, timeline=main)
    if answered:
        # Unless an unsafe tool's outcome was hidden from every agent: reported as such.
        excuses = answer_in_doubt(main, flags, baseline, outcome.answer)
        if excuses:
            unsafe += excuses
            answered = []
        elif at_budget is not None:
            not_checkable["same_answer"] = f"the run answered {outcome.answer!r:.80} at its budget: {at_budget}"
            answered = []
        elif cut_short:
            hint = _budget_hint(main, baseline, budget, answered=True)
            answered = [Violation(v.oracle, v.message + hint, v.marks) for v in answered]
    violations += answered
    violations += iteration_monotone(main, budget=budget)
    missing = history_not_found(main)
    if missing is None:
        violations += recorded_work_not_redone(main, flags)
    else:
        not_checkable.update({name: missing for name in HISTORY_ORACLES if name not in ignored})
    unsaved = nothing_saved(main)
    if unsaved is not None:
        not_checkable.update({name: unsaved for name in SAVED_STATE_ORACLES if name not in ignored})
    bypassed = tools_not_called(main, flags, baseline.timeline)
    if bypassed is not None:
        not_checkable.update({name: bypassed for name in TOOL_ORACLES if name not in ignored})
    if outcome.rerun_from is not None:
        violations += completed_idempotent(
            outcome.timeline.events[outcome.rerun_from :], outcome.rerun_answer, outcome.answer
        )
    if outcome.runaway is not None:
        violations.append(_runaway(outcome))
    elif not outcome.completed:
        spent = _budget_spent(main, baseline, budget)
        if spent is not None:
            not_checkable["resumes_to_completion"] = spent
        else:
            violations.append(
                Violation(
                    "resumes_to_completion",
                    f"the agent did not finish: after the last fault it kept failing "
                    f"({outcome.error}); a resumed agent must be able to complete the task"
                    f"{_stale_save(main, outcome.error)}{_budget_hint(main, baseline, budget)}",
                )
            )
    return violations, unsafe, not_checkable


def _budget_spent(timeline: Timeline, baseline: Baseline, budget: int | None) -> str | None:
    """Why an unfinished run (or one that completed with its budget's answer) is the
    budget's, not the agent's: it stopped once the model
    had answered its ``budget`` of turns, and the task needs more than that under these
    faults (the crash-free run's turns, plus those the faults took away: a reply a crash
    cut, a call re-asked after its outcome was unknown). An outside round's agent, whose
    budget spanned restarts as it must, was blamed for the turn an unkeyed call in doubt
    cost it."""
    if budget is None:
        return None
    turns, needed, lost = model_turns(timeline), model_turns(baseline.timeline), turns_lost(timeline)
    if turns < budget or needed + lost <= budget:
        return None
    return (
        f"the agent stopped at its budget of {budget} model turns: the crash-free run takes "
        f"{needed} and the faults took {lost} away, so no agent keeping that budget across "
        "restarts can finish under them"
    )


def _budget_hint(timeline: Timeline, baseline: Baseline, budget: int | None, *, answered: bool = False) -> str:
    """A word on ``budget=`` for a run that spent as many turns as the crash-free run and
    did not finish, or ``answered`` otherwise: a turn limit of the agent's own may be what
    stopped it."""
    if budget is not None or model_turns(timeline) < model_turns(baseline.timeline):
        return ""
    return (
        f". If it {'gave that answer' if answered else 'stopped'} at a turn limit of its own that "
        "spans restarts, pass that limit as budget= to fuzz: a run that stops at it because "
        "faults took turns away is then not reported"
    )


def _cut_short(timeline: Timeline) -> bool:
    """Whether the agent answered while the model's last reply still asked for tools (it
    ended the task itself, at a limit of its own, say)."""
    replies = [e for e in timeline.of("model_response") if e.data.get("status") == 200]
    return bool(replies and replies[-1].data.get("tool_uses"))


def _stale_save(timeline: Timeline, error: str | None) -> str:
    """Why a save conflicted, when no other writer did: the last attempt never loaded."""
    if not error or not error.startswith("ConflictError"):
        return ""
    last = timeline.attempt
    if any(e.attempt == last for e in timeline.of("store_load")):
        return ""
    return (
        ". The last attempt saved without loading the checkpoint first (no checkpoint load "
        "in it): unless another writer of the agent's own saved meanwhile, the version it "
        "saved with came from a copy kept from before the crash. Load the checkpoint at the "
        "start of each attempt and save with the version it has"
    )


def _runaway(outcome: _Outcome) -> Violation:
    stops = [e for e in outcome.timeline.of("attempt_end") if e.data.get("outcome") == "stopped"]
    if len(stops) >= 2:
        # Each clean stop that did work is resumed: one that never records its completion
        # runs until the request budget stops it.
        return Violation(
            "runaway",
            f"the agent was stopped as a runaway: {outcome.runaway}. It returned "
            f"{len(stops)} times while the task's checkpoint said status 'running' (a clean "
            f"stop, resumed each time; the last returned {str(stops[-1].data.get('detail'))[:80]!r}) "
            "and asked the model again after each: if it had finished, set status='completed' "
            "on completion (or keep a checkpoint under the task id); if it pauses, make each "
            "resume go on from where it stopped.",
        )
    return Violation(
        "runaway",
        f"the agent was stopped as a runaway: {outcome.runaway}. It keeps asking the model "
        "although the plan is done (or loops on a result it does not accept); the plan below "
        "shows what the model asked for.",
    )


def _crash_free_failure(outcome: _Outcome) -> list[Violation]:
    from reference_agent.validation import InvalidHistoryError, validate_messages

    found = valid_sequence(outcome.main(), validate_messages, error_type=InvalidHistoryError)
    if outcome.runaway is not None:
        found.insert(0, _runaway(outcome))
    elif not outcome.completed:
        found.insert(
            0,
            Violation(
                "crash_free_run",
                f"the agent fails with no fault injected at all: {outcome.error}{_fitting_hint(outcome.error)}",
            ),
        )
    else:
        paused = ended_on_pause(outcome.main())
        if paused is not None:
            found.insert(0, Violation("crash_free_run", f"the agent fails with no fault injected at all: {paused}"))
    if outcome.completed and outcome.runaway is None and outcome.rerun_from is not None:
        found += completed_idempotent(
            outcome.timeline.events[outcome.rerun_from :], outcome.rerun_answer, outcome.answer
        )
    return found


#: The SDK's refusal of a non-streaming request whose max_tokens may take over 10 minutes,
#: made only on a client left at the default timeout.
_LONG_REQUEST = "Streaming is required for operations that may take longer than 10 minutes"


def _fitting_hint(error: str | None) -> str:
    """What to change in the glue, for a crash-free failure that comes from the client
    fuzz hands the agent rather than from the agent."""
    if error is not None and "PlanMismatchError" in error:
        return (
            ". This is the plan not fitting the agent, not a bug of the agent: the scripted "
            "model cannot give the reply this request's tool_choice forces with the plan it "
            "follows. Write the plans as the message above says (pass plans=, or map the "
            "drawn ones to add a final_call)"
        )
    if error is not None and _LONG_REQUEST in error:
        return (
            ". The SDK refuses a non-streaming request with this max_tokens on a client left "
            "at its default timeout, which the client fuzz hands your agent is. If the client "
            "your agent makes in production sets a timeout (LangChain's ChatAnthropic sets "
            "timeout=None), give the fuzz client the same options: "
            "client.with_options(timeout=None, max_retries=...)"
        )
    return ""


def _order(name: str) -> int:
    return CHECKS.index(name) if name in CHECKS else len(CHECKS)


@dataclass
class _Verdict:
    plan: Plan
    faults: FaultPlan
    outcome: _Outcome
    violations: list[Violation]
    unsafe: list[UnsafeTool]
    crash_free: bool
    not_checkable: dict[str, str] = field(default_factory=dict)
    advice: list[Advice] = field(default_factory=list)
    #: The keyword arguments of ``replay`` that reproduce this verdict (``, budget=3``).
    replay_args: str = ""
    #: How the report names the fault plan, where it differs from ``faults.describe()``:
    #: for a plan drawn with occurrences counted from the end, which occurrence each is
    #: (``faults`` holds the plan resolved against the crash-free run, which replays exactly).
    fault_text: str = ""

    @property
    def oracles(self) -> list[str]:
        """The distinct oracles that failed, in report order."""
        return sorted(dict.fromkeys(v.oracle for v in self.violations), key=_order)

    def section(self, reproduce: str, *, oracle: str | None = None, limit: int = 200) -> str:
        """The report of this verdict, led by ``oracle`` (default: its first)."""
        return _report(self, reproduce, lead=oracle, limit=limit)

    def failure(
        self,
        reproduce: str,
        *,
        found_after: int | None,
        minimized: bool = False,
        others: Sequence[_Verdict] = (),
    ) -> OracleFailure:
        report = self.section(reproduce)
        if minimized:
            report += (
                "\n(agentckpt shrank this example further than Hypothesis did, re-aiming the crash "
                "occurrences at the smaller plan; the replay line above reproduces this one)"
            )
        lead = self.oracles[0]
        examples = [Example(lead, self.plan, self.faults, _first(self, lead).message)]
        for other in others:
            # Its section is for the oracle it leads with (``oracles`` is in report order).
            name = other.violations[0].oracle
            examples.append(Example(name, other.plan, other.faults, _first(other, name).message))
            report += (
                f"\n\n=== also failed: {name} (its own smallest example) ===\n"
                + other.section(reproduce, oracle=name, limit=80)
            )
        violations = sorted(self.violations, key=lambda v: _order(v.oracle))
        return OracleFailure(
            violations,
            report=report,
            fault_plan=self.faults,
            plan=self.plan,
            found_after=found_after,
            examples=examples,
            not_checkable=self.not_checkable,
            advice=self.advice,
        )


def _first(verdict: _Verdict, oracle: str) -> Violation:
    return next(v for v in verdict.violations if v.oracle == oracle)


def _describe_plan(plan: Plan) -> str:
    """One line; a call with a sub-agent's plan of its own shows it in braces."""
    steps = []
    for step in plan.steps:
        calls = ", ".join(
            f"{c.name}({json.dumps(dict(c.input), sort_keys=True)})"
            + ("" if c.plan is None else f" {{sub-agent: {_describe_plan(c.plan)}}}")
            for c in step.calls
        )
        steps.append(f"[{calls}]")
    return f"{len(plan.steps)} step(s): {' -> '.join(steps) or '(none)'} -> answer {plan.final_answer!r}"


def _report(verdict: _Verdict, reproduce: str, *, lead: str | None = None, limit: int = 200) -> str:
    ordered = sorted(verdict.violations, key=lambda v: _order(v.oracle))
    name = lead or ordered[0].oracle
    first = _first(verdict, name)
    marks: dict[int, str] = {}
    for violation in reversed(ordered):
        marks.update(violation.marks)
    marks.update(first.marks)
    kind = "harness check" if name in HARNESS_CHECKS else "oracle"
    lines = [
        f"agentckpt: {kind} {name} failed" + (" (in the crash-free run)" if verdict.crash_free else ""),
        f"  {first.message}",
    ]
    others = [v for v in ordered if v.oracle != name]
    if others:
        lines.append("in the same run also failed: " + ", ".join(dict.fromkeys(v.oracle for v in others)))
        lines += [f"  {v.oracle}: {v.message}" for v in others[:3]]
    for oracle, reason in verdict.not_checkable.items():
        lines.append(f"not checkable: {oracle}: {reason}")
    for advice in verdict.advice[:2]:
        lines.append(f"advice: {advice.describe()}")
    faults, plan = verdict.faults, verdict.plan
    lines += [
        f"fault plan: {verdict.fault_text or faults.describe()}",
        f"plan: {_describe_plan(plan)}",
        f"reproduce: {reproduce}",
        # Pasted with the test's own ``run`` and ``tools`` in scope, this gives the same failure.
        "replay just this scenario: from pytest_agentckpt import replay, Plan, FaultPlan; replay(run, tools, "
        f"Plan.from_dict({plan.to_dict()!r}), "
        f"FaultPlan.from_dict({faults.to_dict()!r}){verdict.replay_args})",
        "timeline:",
        verdict.outcome.timeline.format(marks=marks, limit=limit),
    ]
    return "\n".join(lines)


def _unreproducible(failed: _Verdict, other: _Verdict, reproduce: str, *, found_after: int | None) -> NondeterministicFailure:
    """The failure for a scenario whose verdict changed when it ran again."""
    lead = failed.oracles[0]
    if other.oracles:
        # Both failed, but not alike (another set of oracles, or the same oracle on other
        # effects): say what each run failed, not "failed ... and failed".
        said = (
            f"{', '.join(failed.oracles)} failed in some runs of this scenario and not in others "
            "(the run shown second failed it again)"
            if set(other.oracles) == set(failed.oracles)
            else f"one run of this scenario failed {', '.join(failed.oracles)}, and the same "
            f"scenario run again failed {', '.join(other.oracles)}"
        )
    else:
        said = f"{lead} failed in one run of this scenario and the same scenario run again passed"
    report = (
        f"agentckpt: nondeterministic verdict: {said}.\n"
        "  The agent is nondeterministic (threads or asyncio tasks race), so the same plan and "
        "fault plan do not always lead to the same timeline. The failing run may still show a "
        "real bug that only some interleavings reach: read its timeline below.\n"
        "=== the failing run ===\n"
        + failed.section(reproduce)
        + "\n=== the same scenario, run again ===\n"
        + (other.section(reproduce, limit=120) if other.violations else other.outcome.timeline.format(limit=120))
    )
    violations = sorted(failed.violations, key=lambda v: _order(v.oracle))
    return NondeterministicFailure(
        violations,
        report=report,
        fault_plan=failed.faults,
        plan=failed.plan,
        found_after=found_after,
        examples=[Example(lead, failed.plan, failed.faults, _first(failed, lead).message)],
        not_checkable=failed.not_checkable,
        advice=failed.advice,
    )


def _replay_args(executor: _Executor, budget: int | None) -> str:
    """The arguments ``replay`` needs besides the scenario to judge it as ``fuzz`` did."""
    args = ""
    if budget is not None:
        args += f", budget={budget}"
    # The process-mode executor has none of these: getattr, not attributes.
    goal = getattr(executor, "goal", "Carry out the task.")
    ignored: frozenset[str] = getattr(executor, "ignore_oracles", frozenset())
    if goal != "Carry out the task.":
        args += f", goal={goal!r}"
    if ignored:
        args += f", ignore_oracles={sorted(ignored)!r}"
    history = getattr(executor, "history", None)
    if history is not None:
        # Its name, as ``run`` and ``tools`` are named: in scope where the test calls fuzz.
        name = getattr(history, "__qualname__", "")
        usable = bool(name) and all(part.isidentifier() for part in name.split("."))
        args += f", history={name}" if usable else ", history=<the history= function given to fuzz>"
    return args


def _evaluate(executor: _Executor, plan: Plan, faults: FaultPlan, budget: int | None) -> _Verdict:
    verdict = _evaluate_once(executor, plan, faults, budget)
    verdict.replay_args = _replay_args(executor, budget)
    return verdict


def _evaluate_once(executor: _Executor, plan: Plan, faults: FaultPlan, budget: int | None) -> _Verdict:
    """Run ``plan`` crash-free (cached) and under ``faults``; judge the result.

    A plan whose tool calls fail in the crash-free run is infeasible: no violations, and
    ``outcome.infeasible`` says why. A crash-free run that does not complete has no
    baseline: its verdict is the crash-free failure. A crash-free run that completes but
    breaks an oracle (say, ``completed_idempotent``) does not hide the faulted run: when
    that breaks other oracles, they are judged too.
    """
    baseline, clean = executor.baseline(plan)
    if clean.infeasible is not None:
        return _Verdict(plan, FaultPlan(), clean, [], [], crash_free=True)
    ignored = executor.ignore_oracles
    problems = [v for v in _crash_free_failure(clean) if v.oracle not in ignored]
    if problems and not clean.completed:
        return _Verdict(plan, FaultPlan(), clean, problems, [], crash_free=True)
    fault_text = ""
    if faults.relative and clean.counts is not None:
        # Occurrences counted from the end of the crash-free run become counts from the
        # start, crash fractions the points met there; one counted from further back than
        # that run goes is left out (unreached).
        if not executor.orders_points:
            # An executor that cannot order the points places no crash by fraction: a count
            # from further back than the run goes is brought into it rather than left out,
            # or a short plan's run would meet most drawn crashes never (a one-call plan: 2
            # draws in 12 of a point).
            faults = faults.within(clean.counts)
        fault_text = faults.describe(clean.counts)
        faults = faults.resolve(clean.counts)
    # Faults that the crash-free run never reaches would not fire: the run under them is
    # the crash-free run again, so that run is judged instead of made twice.
    outcome = executor.execute(plan, faults) if clean.reaches(faults) else clean
    violations, unsafe, not_checkable = _judge(outcome, baseline, executor.flags, budget, ignored)
    violations = [v for v in violations if v.oracle not in ignored]
    advice = give_up_advice(outcome.main(), executor.flags) + resume_drift_advice(outcome.main(), baseline.timeline)
    if violations:
        # What explains them comes first: a resume that went on from a stale checkpoint, or
        # an agent's own storage written while an in-process crash unwound.
        advice = stale_load_advice(outcome.timeline) + advice
        if executor.crashes_unwind:
            advice = unwinding_advice(outcome.timeline) + advice
    if problems:
        known = {v.oracle for v in problems}
        if not {v.oracle for v in violations} - known:
            return _Verdict(plan, FaultPlan(), clean, problems, [], crash_free=True)
        # The same finding in both runs is said once, of the run under faults.
        said = {(v.oracle, v.message) for v in violations}
        violations += [
            Violation(v.oracle, f"{v.message} (in the crash-free run of this plan)")
            for v in problems
            if (v.oracle, v.message) not in said
        ]
    return _Verdict(plan, faults, outcome, violations, unsafe, False, not_checkable, advice, fault_text=fault_text)


def _ignored_oracles(ignore_oracles: Sequence[str] | None) -> frozenset[str]:
    if ignore_oracles is None:  # what "none ignored" reads like
        return frozenset()
    if isinstance(ignore_oracles, str) or not isinstance(ignore_oracles, Iterable):
        raise ValueError(f"ignore_oracles must be a sequence of oracle names, not {ignore_oracles!r}")
    unknown = sorted(set(ignore_oracles) - set(ORACLES))
    if unknown:
        raise ValueError(f"ignore_oracles: unknown {unknown}; the oracles are {', '.join(ORACLES)}")
    return frozenset(ignore_oracles)
