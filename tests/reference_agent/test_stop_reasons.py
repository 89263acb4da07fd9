"""The opt-in ``max_tokens`` fault and forced ``tool_choice``, judged end to end.

Sound ways to meet a reply cut by ``max_tokens`` (ask again with a larger limit, continue
a cut text as a prefill, keep the text and ask the model to go on, raise and be resumed)
pass; a twin that reads the cut reply as if it were whole (runs the cut tool call, or
returns the cut text as its answer) is caught. Agents that force ``tool_choice`` (a
structured answer through ``submit``, ``any`` on every request, one call per reply) pass
without a false alarm.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt import fuzz
from pytest_agentckpt._judge import _evaluate
from pytest_agentckpt._scenario import _Executor
from pytest_agentckpt.faults import ApiFault, CrashAt, FaultPlan
from reference_agent import run as reference_run
from reference_agent.scripted import Plan, Step, ToolCall
from reference_agent.toolbox import Toolbox, tool

from .stop_agents import stop_agent


@tool()
def lookup(q: str) -> str:
    """Look a word up."""
    return f"{q}: found"


@tool(irreversible=True, idempotent=True)
def transfer(to: str, amount: int = 100, idempotency_key: str | None = None) -> str:
    """Transfer money (honours idempotency keys); the amount defaults to 100."""
    return f"sent {amount} to {to}"


def tools() -> Toolbox:
    return Toolbox([lookup, transfer])


# A text before parallel calls, a single call with two arguments, then the answer.
PLAN = Plan(
    steps=(
        Step((ToolCall("lookup", {"q": "ann"}), ToolCall("lookup", {"q": "bob"})), text="Looking both up."),
        Step((ToolCall("transfer", {"to": "ann", "amount": 5}),)),
    ),
    final_answer="Sent 5 to ann after looking both up.",
)
SUBMIT_PLAN = Plan(PLAN.steps, PLAN.final_answer, final_call=ToolCall("submit", {"answer": "5 to ann"}))


def _verdict(run: Callable[..., str], plan: Plan, faults: FaultPlan) -> list[str]:
    executor = _Executor(run, tools(), store=None, budget=None, max_resumes=None, goal="pay ann")
    try:
        verdict = _evaluate(executor, plan, faults, None)
    finally:
        executor.close()
    return [f"{v.oracle}: {v.message}" for v in verdict.violations]


def _cut(request: int) -> FaultPlan:
    return FaultPlan(api_faults=(ApiFault("max_tokens", request),))


SOUND = ["retry", "continue", "note", "raise"]


@pytest.fixture(params=[1, 2, 3])
def cut_request(request: pytest.FixtureRequest) -> int:
    # 1: the parallel lookups; 2: the transfer; 3: the final answer.
    return int(request.param)


@pytest.mark.parametrize("cut", SOUND)
def test_a_sound_agent_passes_a_cut_reply_wherever_it_falls(cut: str, cut_request: int) -> None:
    violations = _verdict(stop_agent(cut=cut), PLAN, _cut(cut_request))
    assert violations == []


def test_the_reference_agent_passes_a_cut_reply_wherever_it_falls(cut_request: int) -> None:
    assert _verdict(reference_run, PLAN, _cut(cut_request)) == []


def test_the_twin_that_runs_a_cut_tool_call_is_caught() -> None:
    # The transfer's reply is cut: its input lost ``amount``, and the twin sends 100.
    violations = _verdict(stop_agent(cut="ignore"), PLAN, _cut(2))
    assert any(v.startswith("no_duplicate_effect") and "transfer" in v for v in violations), violations


def test_the_twin_that_returns_a_cut_answer_is_caught() -> None:
    violations = _verdict(stop_agent(cut="ignore"), PLAN, _cut(3))
    assert any(v.startswith("same_answer") for v in violations), violations


def test_a_cut_reply_and_a_crash_together_pass_a_sound_agent() -> None:
    faults = FaultPlan(crashes=(CrashAt("after_tool_effect", 1),), api_faults=(ApiFault("max_tokens", 3),))
    assert _verdict(stop_agent(cut="retry"), PLAN, faults) == []
    assert _verdict(stop_agent(cut="note"), PLAN, faults) == []


@pytest.mark.parametrize(
    ("finish", "parallel", "plan"),
    [("submit", True, PLAN), ("any", True, SUBMIT_PLAN), ("text", False, PLAN), ("any", False, SUBMIT_PLAN)],
)
def test_agents_that_force_tool_choice_pass_with_crashes_and_cut_replies(finish: str, parallel: bool, plan: Plan) -> None:
    run = stop_agent(cut="retry", finish=finish, parallel=parallel)
    assert _verdict(run, plan, FaultPlan()) == []
    assert _verdict(run, plan, FaultPlan(crashes=(CrashAt("after_tool_effect", 1),))) == []
    assert _verdict(run, plan, FaultPlan(crashes=(CrashAt("before_model_call", 3),))) == []
    assert _verdict(run, plan, _cut(2)) == []


def _fuzz(run: Callable[..., Any], **kwargs: Any) -> Any:
    return fuzz(
        run, tools(), plans=[PLAN], max_examples=12, seed=3, database=InMemoryExampleDatabase(),
        unsafe_tools="ignore", **kwargs,
    )


def test_fuzz_with_the_opt_in_kind_passes_the_sound_agent_and_catches_the_twin() -> None:
    report = _fuzz(stop_agent(cut="retry"), fault_kinds=["max_tokens", "after_tool_effect"])
    assert report.examples > 0 and report.stats.api_faults > 0
    with pytest.raises(AssertionError, match=r"no_duplicate_effect|same_answer"):
        _fuzz(stop_agent(cut="ignore"), fault_kinds=["max_tokens"], max_crashes=0)


def test_the_default_fault_kinds_leave_the_twin_alone() -> None:
    # Opt-in: an agent that never meant to handle max_tokens keeps its verdict.
    report = _fuzz(stop_agent(cut="ignore"))
    assert report.examples > 0


def _with_submit(plan: Plan) -> Plan:
    return Plan(plan.steps, plan.final_answer, final_call=ToolCall("submit", {"answer": plan.final_answer}))


def test_forcing_agents_pass_over_drawn_plans() -> None:
    # A forced submit(answer: str) needs nothing of the plans; tool_choice "any" on every
    # request needs a final call, which a map over the drawn plans gives them.
    from pytest_agentckpt.strategies import plans

    box = tools()
    kinds = ["max_tokens", "after_tool_effect", "between_parallel_tools", "before_model_call"]
    for run, drawn in [
        (stop_agent(finish="submit"), None),
        (stop_agent(finish="any", parallel=False), plans(box).map(_with_submit)),
    ]:
        report = fuzz(
            run, box, plans=drawn, fault_kinds=kinds, max_examples=15, seed=2,
            database=InMemoryExampleDatabase(), unsafe_tools="ignore",
        )
        assert report.examples == 15


def test_a_budget_that_does_not_count_the_cut_turn_passes() -> None:
    # The agent's budget counts the replies it could use (a cut one it asks again for is
    # not one): 3 for PLAN. iteration_monotone allows the budget plus the turns lost to
    # crashes, to lost or cut-off streams and to replies cut by max_tokens.
    executor = _Executor(stop_agent(cut="retry"), tools(), store=None, budget=3, max_resumes=None, goal="pay ann")
    try:
        violations = _evaluate(executor, PLAN, _cut(2), 3).violations
    finally:
        executor.close()
    assert violations == []


def test_in_process_mode_the_cut_reply_reaches_the_child_and_the_twin_is_caught(tmp_path: Path) -> None:
    # The fake serves a child process over HTTP: the cut reply crosses the wire as JSON.
    from pytest_agentckpt._process import ProcessExecutor

    box = "tests.reference_agent.test_stop_reasons:tools"
    found = {}
    for name in ("retry_agent", "ignoring_twin"):
        executor = ProcessExecutor(
            f"tests.reference_agent.stop_agents:{name}", box, store=f"sqlite:///{tmp_path / name}.db",
            budget=None, max_resumes=None, goal="pay ann",
        )
        try:
            found[name] = [v.oracle for v in _evaluate(executor, PLAN, _cut(2), None).violations]  # type: ignore[arg-type]
        finally:
            executor.close()
    assert found == {"retry_agent": [], "ignoring_twin": ["no_duplicate_effect"]}


def test_only_a_reply_cut_by_max_tokens_may_come_back_as_the_last_message() -> None:
    from pytest_agentckpt.oracles import valid_sequence
    from pytest_agentckpt.timeline import Timeline
    from reference_agent.validation import InvalidHistoryError, validate_messages

    def verdict(cut_text: str, sent_back: str, stop_reason: str = "max_tokens") -> list[str]:
        timeline = Timeline()
        timeline.start_attempt()
        user = {"role": "user", "content": "pay ann"}
        timeline.add("model_request", index=1, messages=[user], thinking=False)
        timeline.add("model_response", index=1, status=200, tool_uses=[], text=cut_text, stop_reason=stop_reason)
        again = [user, {"role": "assistant", "content": [{"type": "text", "text": sent_back}]}]
        timeline.add("model_request", index=2, messages=again, thinking=False)
        return [v.oracle for v in valid_sequence(timeline, validate_messages, error_type=InvalidHistoryError)]

    assert verdict("Paid ann 10", "Paid ann 10") == []
    assert verdict("Paid ann 10", "Paid ann 10", stop_reason="end_turn") == ["valid_sequence"]
    assert verdict("Paid ann 10", "Paid bob 10") == ["valid_sequence"]
