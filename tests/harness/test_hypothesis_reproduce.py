"""The failure's replay line, pasted with the test's ``run`` and ``tools``, gives the same failure."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt.harness import OracleFailure, fuzz

from .toolkit import toolbox

PREFIX = "replay just this scenario: "


def _replay_lines(report: str) -> list[str]:
    return [line[len(PREFIX):] for line in report.splitlines() if line.startswith(PREFIX)]


def _run_pasted(line: str, run: Any, tools: Any) -> OracleFailure:
    namespace = {"run": run, "tools": tools}
    with pytest.raises(OracleFailure) as caught:
        exec(line, namespace)  # what a user pastes into a test
    return caught.value


@pytest.mark.parametrize(
    ("name", "extra"),
    [("checkpoint_after_result", {}), ("budget_resets", {"budget": 6})],
)
def test_the_printed_replay_line_run_as_pasted_gives_the_same_failure(name: str, extra: dict[str, Any]) -> None:
    run = importlib.import_module(f"tests.buggy_agents.{name}").run
    with pytest.raises(OracleFailure) as caught:
        fuzz(run, toolbox(), seed=11, database=InMemoryExampleDatabase(), **extra)
    failure = caught.value
    lines = _replay_lines(str(failure))
    assert lines, str(failure)
    if extra:
        assert "budget=6" in lines[0]
    again = _run_pasted(lines[0], run, toolbox())
    assert again.oracle == failure.oracle
    assert again.fault_plan == failure.fault_plan and again.plan == failure.plan


def test_ignored_oracles_are_part_of_the_replay_line() -> None:
    run = importlib.import_module("tests.buggy_agents.common_design").run
    with pytest.raises(OracleFailure) as caught:
        fuzz(run, toolbox(), seed=3, database=InMemoryExampleDatabase(), ignore_oracles=["completed_idempotent"])
    line = _replay_lines(str(caught.value))[0]
    assert "ignore_oracles=['completed_idempotent']" in line
    again = _run_pasted(line, run, toolbox())
    assert again.oracle == caught.value.oracle != "completed_idempotent"


def test_the_seeded_reproduce_line_names_the_seed_and_the_search_mode() -> None:
    run = importlib.import_module("tests.buggy_agents.delete_on_success").run
    with pytest.raises(OracleFailure) as caught:
        fuzz(run, toolbox(), seed=42, max_examples=10, database=InMemoryExampleDatabase())
    report = str(caught.value)
    assert "reproduce: fuzz(..., seed=42)" in report
    assert "search: seeded by fuzz(seed=42): reproducible, no example database" in report
    assert "@reproduce_failure" not in report + "\n".join(getattr(caught.value, "__notes__", []))


def test_a_derandomized_profile_is_reported_as_reproducible_not_random(monkeypatch: pytest.MonkeyPatch) -> None:
    # derandomize=True in the loaded profile seeds Hypothesis from the test itself: the
    # search line must not call that search random, and two runs find the same failure.
    from hypothesis import settings

    from pytest_agentckpt import _search

    monkeypatch.setattr(_search._session, "seed", None)
    monkeypatch.setattr(_search._session, "database", None)
    run = importlib.import_module("tests.buggy_agents.delete_on_success").run
    previous = settings.get_current_profile_name()
    settings.register_profile("agentckpt-derandomized", settings(derandomize=True))
    settings.load_profile("agentckpt-derandomized")
    try:
        failures = []
        for _ in range(2):
            with pytest.raises(OracleFailure) as caught:
                fuzz(run, toolbox(), max_examples=20)
            failures.append(caught.value)
    finally:
        settings.load_profile(previous)
    search = [line for line in str(failures[0]).splitlines() if line.startswith("search: ")]
    assert search == ["search: derandomized (settings.derandomize=True): reproducible, no example database"]
    assert failures[0].plan == failures[1].plan and failures[0].fault_plan == failures[1].fault_plan


def test_the_search_for_other_oracles_is_reproducible_and_adds_no_explain_notes() -> None:
    # The search goes on after the first failure for oracles not yet failed, from a seed
    # derived from the call's: the same seed gives the same examples for every oracle.
    run = importlib.import_module("tests.buggy_agents.common_design").run
    failures = []
    for _ in range(2):
        with pytest.raises(OracleFailure) as caught:
            fuzz(run, toolbox(), seed=5, database=InMemoryExampleDatabase())
        failures.append(caught.value)
    assert {"completed_idempotent", "no_duplicate_effect"} <= set(failures[0].oracles)
    first, second = ([(e.oracle, e.plan, e.fault_plan) for e in f.examples] for f in failures)
    assert first == second
    # Hypothesis's explain phase does not run: its notes name lines of the harness itself.
    notes = "\n".join(getattr(failures[0], "__notes__", []))
    assert "Explanation:" not in notes and "run by failing test cases" not in notes


def test_a_report_shrunk_further_than_hypothesis_does_not_show_hypothesiss_larger_example() -> None:
    run = importlib.import_module("tests.buggy_agents.checkpoint_after_result").run
    with pytest.raises(OracleFailure) as caught:
        fuzz(run, toolbox(), seed=1, max_examples=50, database=InMemoryExampleDatabase())
    assert "agentckpt shrank this example further than Hypothesis did" in str(caught.value)
    notes = "\n".join(getattr(caught.value, "__notes__", []))
    assert "Failing test case" not in notes and "Falsifying example" not in notes


def test_the_replay_line_names_the_history_function_as_it_names_run_and_tools() -> None:
    from types import SimpleNamespace

    from pytest_agentckpt._judge import _replay_args
    from tests.zoo.designs import fold_history

    named = SimpleNamespace(goal="Carry out the task.", ignore_oracles=frozenset(), history=fold_history)
    assert _replay_args(named, None) == ", history=fold_history"  # type: ignore[arg-type]
    # A lambda or a nested function has no name to paste: the placeholder says what goes there.
    unnamed = SimpleNamespace(goal="Carry out the task.", ignore_oracles=frozenset(), history=lambda cp: None)
    assert _replay_args(unnamed, 3) == ", budget=3, history=<the history= function given to fuzz>"  # type: ignore[arg-type]
