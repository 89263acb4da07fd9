"""Process mode: the agent runs in a child process and is SIGKILLed at fault points."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt import FaultPlan, OracleFailure, _process, fuzz
from pytest_agentckpt._process import ProcessExecutor
from pytest_agentckpt.faults import CrashAt, StoreFault
from reference_agent.scripted import Plan, Step, ToolCall

REFERENCE = "tests.harness.process_agents:reference"
BUGGY = "tests.harness.process_agents:buggy"
RUNAWAY = "tests.harness.process_agents:runaway"
TOOLS = "tests.harness.toolkit:toolbox"
PLAN = Plan(
    (Step((ToolCall("search", {"query": "crash"}), ToolCall("send_email", {"to": "ann"}))), Step((ToolCall("write_record", {"key": "a"}),))),
    "all done",
)


@pytest.fixture(autouse=True)
def _quiet_agent_logs() -> Iterator[None]:
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


@pytest.fixture
def executor(tmp_path: Path) -> Iterator[ProcessExecutor]:
    ex = ProcessExecutor(REFERENCE, TOOLS, store=f"sqlite:///{tmp_path / 'store.db'}", budget=None, max_resumes=None, goal="g")
    try:
        yield ex
    finally:
        ex.close()


@pytest.mark.parametrize("point", ["after_model_call", "after_tool_effect", "after_checkpoint_write", "between_parallel_tools"])
def test_a_sigkill_at_a_fault_point_is_resumed_from_the_store_in_a_new_process(executor: ProcessExecutor, point: str) -> None:
    outcome = executor.execute(PLAN, FaultPlan((CrashAt(point, 1),)))  # type: ignore[arg-type]
    ends = [e.data["outcome"] for e in outcome.timeline.of("attempt_end")]
    assert ends[0] == "crash"  # the child died by SIGKILL
    assert [c.data["point"] for c in outcome.timeline.of("crash")] == [point]
    assert outcome.completed and outcome.answer == "all done"
    # Events of both processes are merged in time order: the crash closes attempt 1.
    crash = outcome.timeline.of("crash")[0]
    assert outcome.timeline.events[crash.seq + 1].kind == "attempt_end"


def test_a_store_outage_in_the_child_is_survived(executor: ProcessExecutor) -> None:
    outcome = executor.execute(PLAN, FaultPlan(store_faults=(StoreFault("store_outage", "save", 3),)))
    assert outcome.timeline.of("store_outage") and outcome.completed


def test_process_mode_passes_the_reference_agent_for_a_few_examples(tmp_path: Path) -> None:
    report = fuzz(
        REFERENCE, TOOLS, mode="process", max_examples=3, seed=11,
        store=f"sqlite:///{tmp_path / 'store.db'}", database=InMemoryExampleDatabase(), unsafe_tools="ignore",
    )
    assert report.examples == 3


def test_process_mode_catches_a_duplicate_effect_after_a_real_kill() -> None:
    with pytest.raises(OracleFailure) as caught:
        fuzz(
            BUGGY, TOOLS, mode="process", max_examples=10, seed=1, plans=[PLAN],
            fault_kinds=["after_tool_effect"], database=InMemoryExampleDatabase(), unsafe_tools="ignore",
        )
    assert caught.value.oracle == "no_duplicate_effect"
    assert "SIGKILL" in str(caught.value)


def test_process_mode_needs_importable_names_and_a_shared_store() -> None:
    with pytest.raises(TypeError, match="module:attr"):
        fuzz(lambda *a, **k: "x", TOOLS, mode="process")
    with pytest.raises(ValueError, match="both processes can open"):
        fuzz(REFERENCE, TOOLS, mode="process", store="memory://")


def test_process_mode_resumes_the_reference_agent_from_every_backend(any_checkpoint_store_url: str) -> None:
    # The child is SIGKILLed right after an effect or a checkpoint write and a new process
    # resumes from the shared store; finding the buggy agent is shown on SQLite above.
    if any_checkpoint_store_url.startswith("memory://"):
        # The child process could not see the parent's in-process store: refused up front.
        with pytest.raises(ValueError, match="both processes can open"):
            fuzz(REFERENCE, TOOLS, mode="process", store=any_checkpoint_store_url)
        return
    report = fuzz(
        REFERENCE, TOOLS, mode="process", seed=1, plans=[PLAN], max_examples=2,
        fault_kinds=["after_tool_effect", "after_checkpoint_write"], store=any_checkpoint_store_url,
        unsafe_tools="ignore", database=InMemoryExampleDatabase(),
    )
    assert report.stats.crashes > 0 and report.stats.resumes > 0 and report.stats.violations == {}


# -- what memory mode does, process mode does ----------------------------------------------
ONE_STEP = Plan((Step((ToolCall("write_record", {"key": "a"}),)),), "all done")


def test_a_runaway_after_a_resume_is_stopped_by_the_request_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Without the budget the looping child would run until the attempt timeout, be taken
    # for a crash and resumed into the same loop, again and again.
    monkeypatch.setattr(_process, "ATTEMPT_TIMEOUT", 30.0)
    crash = FaultPlan((CrashAt("after_tool_effect", 1),))
    outcomes = {}
    for name in ("runaway_after_resume", "reference"):
        ex = ProcessExecutor(
            f"tests.harness.process_agents:{name}", TOOLS, store=f"sqlite:///{tmp_path / (name + '.db')}",
            budget=None, max_resumes=None, goal="g",
        )
        try:
            ex.baseline(ONE_STEP)  # the budget is relative to the crash-free run's requests
            start = time.monotonic()
            outcomes[name] = ex.execute(ONE_STEP, crash), time.monotonic() - start
        finally:
            ex.close()
    runaway, elapsed = outcomes["runaway_after_resume"]
    assert [e.data["outcome"] for e in runaway.timeline.of("attempt_end")] == ["crash", "runaway"]
    # 2 requests crash-free, one crash: 2 * 2 * (1 + 1) + 8 = 16, as in memory mode.
    assert runaway.runaway is not None and "17 model requests, more than the 16 this scenario may make" in runaway.runaway
    assert not runaway.completed and elapsed < 30.0  # ended by the budget, not the timeout
    sound, _ = outcomes["reference"]
    assert sound.runaway is None and sound.completed


def test_a_runaway_agent_is_reported_once_with_its_plan_as_in_memory_mode() -> None:
    heads = {}
    for mode in ("memory", "process"):
        with pytest.raises(OracleFailure) as caught:
            fuzz(
                RUNAWAY, TOOLS, mode=mode, plans=[Plan((), "done")], max_examples=1, seed=1,  # type: ignore[arg-type]
                database=InMemoryExampleDatabase(), unsafe_tools="ignore",
            )
        failure = caught.value
        assert failure.oracle == "runaway" and failure.oracles == ["runaway"]
        report = str(failure)
        assert report.count("harness check runaway failed") == 1 and "plan:" in report
        heads[mode] = report.splitlines()[:2]
    assert heads["process"] == heads["memory"]
    assert "more than the 12 this scenario may make" in heads["process"][1]
