"""Each known-buggy agent is caught by fuzz with default settings, by the oracle its bug breaks.

A fixed seed keeps CI deterministic; everything else is the default (the ``quick``
profile: 200 examples). ``found_after`` is how many scenarios ran before the first failing
one, before shrinking.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt import Toolbox
from pytest_agentckpt.harness import OracleFailure, fuzz

from .toolkit import safe_toolbox, search, toolbox

CASES = [
    ("no_repair", {"valid_sequence"}),
    ("repair_last_assistant_only", {"valid_sequence"}),
    ("budget_resets", {"iteration_monotone"}),
    ("load_error_is_none", {"recorded_work_not_redone", "no_duplicate_effect"}),
    ("checkpoint_after_result", {"no_duplicate_effect"}),
    ("delete_on_success", {"completed_idempotent"}),
    ("answer_changes_on_resume", {"same_answer"}),
    ("key_per_attempt", {"no_duplicate_effect"}),
]

#: What the report of a case says of its cause, where the oracle alone does not.
SAYS = {"key_per_attempt": "the calls came with different keys"}
#: And what it advises (an outside round's outbox agent, whose random keys were saved
#: before each call and sound, was told only "never a random key").
ADVISES = {"key_per_attempt": "or save a key made once (a uuid) durably before the call that uses it"}


def test_an_agent_that_saves_the_reply_only_with_its_results_repeats_a_keyed_action() -> None:
    # Only tools a correct agent can always settle (read-only, keyed): the repeat shows
    # only because the API (and the scripted model) gives a reply asked for again new ids,
    # and the agent's keys are made from them.
    with pytest.raises(OracleFailure) as caught:
        fuzz(_agent("save_after_tools"), safe_toolbox(), seed=20261129, database=InMemoryExampleDatabase())
    failure = caught.value
    assert failure.oracle == "no_duplicate_effect", str(failure)
    assert failure.found_after is not None and failure.found_after <= 200
    assert "Save the model's reply durably before running its tools" in str(failure)
    # And what an agent that saves every few turns by design does instead (an outside
    # round's was told only to save each reply, which its design rules out).
    assert "reuse the key recorded there" in " ".join(str(failure).split())
    assert "_g1" in str(failure)


def test_an_agent_that_drops_unanswered_calls_on_resume_asks_for_a_recorded_reply_again() -> None:
    # Read-only tools only: no effect is repeated, the history sent is valid; what is
    # wrong is the reply the checkpoint holds, thrown away and asked for again.
    tools = Toolbox.from_functions(search)
    with pytest.raises(OracleFailure) as caught:
        fuzz(_agent("drop_unanswered_calls"), tools, seed=20261129, database=InMemoryExampleDatabase())
    failure = caught.value
    assert failure.oracle == "recorded_work_not_redone", str(failure)
    assert "the agent loaded that checkpoint and dropped the reply from the history it sent" in str(failure)
    assert "Keep the reply and answer its tool calls" in str(failure)


def _agent(name: str) -> Callable[..., Any]:
    return importlib.import_module(f"tests.buggy_agents.{name}").run  # type: ignore[no-any-return]


@pytest.mark.parametrize(("name", "oracles"), CASES, ids=[name for name, _ in CASES])
def test_known_buggy_agent_is_caught_by_the_oracle_its_bug_breaks(name: str, oracles: set[str]) -> None:
    with pytest.raises(OracleFailure) as caught:
        # A fresh database: a failure saved by an earlier run must not do the finding.
        fuzz(_agent(name), toolbox(), seed=20261129, database=InMemoryExampleDatabase())
    failure = caught.value
    assert failure.oracle in oracles, str(failure)
    assert failure.found_after is not None and failure.found_after <= 200
    report = str(failure)
    assert "failed" in report.splitlines()[0] and failure.oracle in report.splitlines()[0]
    assert "fault plan:" in report and "timeline:" in report and "reproduce: fuzz(..., seed=" in report
    assert SAYS.get(name, "") in report
    assert ADVISES.get(name, "") in " ".join(report.split())


def test_the_failure_shrinks_to_one_crash_and_a_one_step_plan() -> None:
    with pytest.raises(OracleFailure) as caught:
        fuzz(_agent("checkpoint_after_result"), toolbox(), seed=7, database=InMemoryExampleDatabase())
    failure = caught.value
    assert failure.fault_plan is not None and failure.plan is not None
    assert failure.fault_plan.size == 1
    assert len(failure.plan.steps) == 1
    assert "DUPLICATE" in str(failure)



def test_shrink_false_reports_the_first_failure_after_far_fewer_runs() -> None:
    # For a slow agent (a framework's, seconds a scenario), the default's shrinking, search
    # for other oracles and 150-run minimizer took a quarter of an hour before the report.
    def counted(calls: list[int]) -> Callable[..., Any]:
        agent = _agent("checkpoint_after_result")

        def run(*args: Any, **kwargs: Any) -> Any:
            calls.append(1)
            return agent(*args, **kwargs)

        return run

    runs: dict[bool, int] = {}
    for shrink in (True, False):
        calls: list[int] = []
        with pytest.raises(OracleFailure) as caught:
            fuzz(counted(calls), toolbox(), seed=7, database=InMemoryExampleDatabase(), shrink=shrink)
        assert caught.value.oracle == "no_duplicate_effect"
        runs[shrink] = len(calls)
    assert runs[False] * 3 < runs[True], runs
    with pytest.raises(ValueError, match="shrink must be True or False"):
        fuzz(_agent("checkpoint_after_result"), toolbox(), shrink="no")  # type: ignore[arg-type]


def test_a_bug_that_shows_only_late_in_a_long_run_is_caught() -> None:
    # The ledger-cap agent is the correct loop until its sixth irreversible call (after
    # its twelfth save, at its sixth tool effect or later): a fault counted from the start,
    # #1 to #6, almost never reaches it (3 of seeds 1-10 with these plans); one counted
    # from the end of the run, or placed by a fraction of it, does (9 of seeds 1-10 at
    # 200 examples, the quick profile: `python -m tests.benchmarks.bench_search --seeds 10
    # --examples 200 --only ledger`). See test_late_faults.py for the early crashes it
    # survives.
    from pytest_agentckpt.strategies import plans

    with pytest.raises(OracleFailure) as caught:
        fuzz(
            _agent("ledger_cap"), toolbox(), plans=plans(toolbox(), min_steps=4), seed=2,
            database=InMemoryExampleDatabase(), max_examples=200,
        )
    assert caught.value.oracle == "no_duplicate_effect", str(caught.value)[:2000]
    # The failure replays from the plan it holds, counted from the start.
    assert caught.value.fault_plan is not None and not caught.value.fault_plan.from_end
