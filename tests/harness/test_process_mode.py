"""Process mode: the agent runs in a child process and is SIGKILLed at fault points."""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt import FaultPlan, NotCheckableWarning, OracleFailure, _process, fuzz
from pytest_agentckpt._judge import _evaluate
from pytest_agentckpt._process import ProcessExecutor
from pytest_agentckpt.faults import CrashAt, StoreFault
from reference_agent.scripted import Plan, Step, ToolCall
from tests.zoo.agents import unwrap

REFERENCE = "tests.harness.process_agents:reference"
BUGGY = "tests.harness.process_agents:buggy"
RUNAWAY = "tests.harness.process_agents:runaway"
OWN_STATE = "tests.harness.process_agents:own_state"
OWN_STATE_TWIN = "tests.harness.process_agents:own_state_twin"
FORGETS_COMPLETION = "tests.harness.process_agents:forgets_completion"
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


def test_process_mode_resumes_the_reference_agent_from_every_backend(
    any_checkpoint_store_url: str, capfd: pytest.CaptureFixture[str]
) -> None:
    # The child is SIGKILLed right after an effect or a checkpoint write and a new process
    # resumes from the shared store; finding the buggy agent is shown on SQLite above.
    # A warning of opening the store (a Redis without persistence) is the parent's to
    # give, once: the children, one per attempt, print none of it.
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
    assert "Warning" not in capfd.readouterr().err


def test_a_process_mode_store_that_cannot_be_opened_leaves_no_directory_behind() -> None:
    import tempfile

    def ours() -> set[Path]:
        return set(Path(tempfile.gettempdir()).glob("agentckpt-process-*"))

    before = ours()
    with pytest.raises(Exception, match=r"unavailable|unreachable"):
        fuzz(REFERENCE, TOOLS, mode="process", store="postgresql://postgres@127.0.0.1:1/test", max_examples=1)
    assert ours() - before == set()


# -- what memory mode does, process mode does: runaway budget, history=, ignore_oracles=,
# -- systematic= --------------------------------------------------------------------------
ONE_STEP = Plan((Step((ToolCall("write_record", {"key": "a"}),)),), "all done")
SEARCH = Plan((Step((ToolCall("search", {"query": "crash"}),)),), "found")


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


def test_an_attempt_that_hangs_is_reported_as_a_hang_not_resumed_as_a_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Killed by the attempt timeout, the child dies by SIGKILL as at an injected crash: it
    # was taken for one and resumed into the same hang, a timeout each time.
    monkeypatch.setattr(_process, "ATTEMPT_TIMEOUT", 3.0)
    ex = ProcessExecutor(
        "tests.harness.process_agents:hangs_on_resume", TOOLS, store=f"sqlite:///{tmp_path / 'hang.db'}",
        budget=None, max_resumes=None, goal="g",
    )
    try:
        start = time.monotonic()
        verdict = _evaluate(ex, ONE_STEP, FaultPlan((CrashAt("after_tool_effect", 1),)), None)
        elapsed = time.monotonic() - start
    finally:
        ex.close()
    outcome = verdict.outcome
    assert [e.data["outcome"] for e in outcome.timeline.of("attempt_end")] == ["crash", "hung"]
    assert outcome.crashes == 1 and not outcome.completed
    assert elapsed < 2 * 3.0 + 20  # one timeout, not one per resume
    found = {v.oracle: v.message for v in verdict.violations}
    assert "did not finish within 3 s" in found["resumes_to_completion"], found
    assert "hangs" in found["resumes_to_completion"]


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


def test_history_finds_an_own_state_agents_history_in_process_mode() -> None:
    # The function runs in the parent, on the checkpoints the child saved: a lambda will do.
    with warnings.catch_warnings():
        warnings.simplefilter("error", NotCheckableWarning)
        report = fuzz(
            OWN_STATE, TOOLS, mode="process", plans=[SEARCH], fault_kinds=["before_tool_effect", "after_checkpoint_write"],
            max_examples=3, seed=1, history=lambda cp: unwrap(cp), database=InMemoryExampleDatabase(),
            unsafe_tools="ignore",
        )
    assert report.examples == 3 and report.not_checkable == {}


def test_an_agent_that_never_sets_the_checkpoint_status_completes_in_process_mode() -> None:
    # Each return looks like a clean stop; the resume that finds nothing to do is the end.
    report = fuzz(
        "tests.harness.process_agents:own_status", TOOLS, mode="process", plans=[SEARCH],
        fault_kinds=["before_tool_effect"], max_examples=2, seed=1, history=lambda cp: unwrap(cp),
        database=InMemoryExampleDatabase(), unsafe_tools="ignore",
    )
    assert report.examples == 2


def test_without_history_an_own_state_agent_is_not_checkable_in_process_mode(tmp_path: Path) -> None:
    ex = ProcessExecutor(OWN_STATE, TOOLS, store=f"sqlite:///{tmp_path / 's.db'}", budget=None, max_resumes=None, goal="g")
    try:
        verdict = _evaluate(ex, SEARCH, FaultPlan((CrashAt("before_tool_effect", 1),)), None)
    finally:
        ex.close()
    assert verdict.violations == [] and "recorded_work_not_redone" in verdict.not_checkable


def test_the_own_state_twin_is_caught_by_the_oracle_memory_mode_catches_it_with() -> None:
    # history= as "module:attr" works in both modes.
    caught_by = {}
    for mode in ("memory", "process"):
        with pytest.raises(OracleFailure) as caught:
            fuzz(
                OWN_STATE_TWIN, TOOLS, mode=mode, plans=[SEARCH], fault_kinds=["before_tool_effect"],  # type: ignore[arg-type]
                max_examples=5, seed=1, history="tests.zoo.agents:unwrap", database=InMemoryExampleDatabase(),
                unsafe_tools="ignore",
            )
        caught_by[mode] = caught.value.oracles
    assert caught_by["process"] == caught_by["memory"] == ["recorded_work_not_redone"]


def test_ignore_oracles_in_process_mode() -> None:
    # Deletes its checkpoint on success: only completed_idempotent fails, and ignored, passes.
    settings: dict[str, Any] = {
        "mode": "process", "plans": [SEARCH], "fault_kinds": ["after_tool_effect"], "max_examples": 2, "seed": 1,
        "database": InMemoryExampleDatabase(), "unsafe_tools": "ignore",
    }
    with pytest.raises(OracleFailure) as caught:
        fuzz(FORGETS_COMPLETION, TOOLS, **settings)
    assert caught.value.oracles == ["completed_idempotent"]
    report = fuzz(FORGETS_COMPLETION, TOOLS, ignore_oracles=["completed_idempotent"], **settings)
    assert report.examples == 2


def test_systematic_in_process_mode_checks_the_points_memory_mode_does() -> None:
    plan = Plan((), "done")
    points = {}
    for mode in ("memory", "process"):
        report = fuzz(
            REFERENCE, TOOLS, mode=mode, plans=[plan], systematic=True, max_examples=1, seed=1,  # type: ignore[arg-type]
            database=InMemoryExampleDatabase(), unsafe_tools="ignore",
        )
        assert report.examples == report.single_crash_points == report.stats.crashes
        points[mode] = report.single_crash_points
    assert points["process"] == points["memory"] and points["process"] is not None and points["process"] >= 4


@pytest.mark.parametrize(("kwargs", "says"), [
    ({"goal": ""}, "goal: the goal is empty"),        # was an oracle failure of the agent
    ({"goal": 5}, "goal: the goal must be a string"),
    ({"fault_kinds": []}, "fault_kinds is empty"),    # was a run with no fault, passing
    ({"max_steps": "3"}, "max_steps must be an int >= 0"),  # was a TypeError from '<'
    ({"max_parallel": None}, "max_parallel must be an int >= 1"),
    ({"max_examples": True}, "max_examples must be an int >= 1"),
])
def test_bad_fuzz_arguments_are_refused_before_any_example_runs(kwargs: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        fuzz(REFERENCE, TOOLS, **{"max_examples": 1, **kwargs})


def test_run_or_tools_that_cannot_be_imported_name_the_argument() -> None:
    with pytest.raises(ValueError, match=r"run: cannot import 'tests\.nowhere:agent' \(ModuleNotFoundError"):
        fuzz("tests.nowhere:agent", TOOLS, max_examples=1)
    with pytest.raises(ValueError, match=r"tools: cannot import 'tests\.harness\.toolkit:nothing' \(AttributeError"):
        fuzz(REFERENCE, "tests.harness.toolkit:nothing", max_examples=1)


def test_bad_history_and_ignore_oracles_are_refused_naming_the_argument() -> None:
    for mode in ("memory", "process"):
        with pytest.raises(ValueError, match="history must be a function checkpoint -> messages"):
            fuzz(REFERENCE, TOOLS, mode=mode, history=42)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="history: expected 'module:attribute'"):
            fuzz(REFERENCE, TOOLS, mode=mode, history="unwrap")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"history: cannot import 'tests\.zoo\.agents:nowhere'"):
            fuzz(REFERENCE, TOOLS, mode=mode, history="tests.zoo.agents:nowhere")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"history: 'tests\.zoo\.agents:SOUND' is a dict"):
            fuzz(REFERENCE, TOOLS, mode=mode, history="tests.zoo.agents:SOUND")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="ignore_oracles: unknown"):
            fuzz(REFERENCE, TOOLS, mode=mode, ignore_oracles=["no_such_oracle"])  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="ignore_oracles must be a sequence of oracle names, not 3"):
            fuzz(REFERENCE, TOOLS, mode=mode, ignore_oracles=3)  # type: ignore[arg-type]
    # None reads as "ignore none", what the docs call the default.
    report = fuzz(REFERENCE, TOOLS, max_examples=2, seed=1, ignore_oracles=None, database=None)
    assert report.examples == 2


SHOP = "tests.zoo.history_agents:shop_tools"
LOOKUP = Plan((Step((ToolCall("lookup", {"order": "B-2"}),)),), "looked up")


def test_a_whole_streamed_reply_asked_again_after_a_kill_is_caught_in_process_mode() -> None:
    # The child's client notes when a stream was read to its end; before, process mode took
    # every streamed reply for a draft (the server cannot know what the client read), and
    # this twin passed.
    with pytest.raises(OracleFailure) as caught:
        fuzz(
            "tests.harness.process_agents:drafts_drop_whole", SHOP, mode="process", plans=[LOOKUP],
            fault_kinds=["before_tool_effect"], max_examples=5, seed=1, database=InMemoryExampleDatabase(),
        )
    assert caught.value.oracle == "recorded_work_not_redone"
    report = str(caught.value)
    assert "read to its end (the stream is whole)" in report and "SIGKILL" in report


def test_a_draft_saved_mid_stream_is_still_no_recorded_reply_in_process_mode() -> None:
    # The sound drafting agent, crashed after a save (a draft's or the whole reply's) and
    # around the model call: it drops a draft on resume and asks again, as it should.
    report = fuzz(
        "tests.harness.process_agents:drafts", SHOP, mode="process", plans=[LOOKUP],
        fault_kinds=["after_checkpoint_write", "after_model_call", "before_tool_effect"], max_examples=8, seed=1,
        database=InMemoryExampleDatabase(),
    )
    assert report.examples == 8


def test_the_message_id_of_a_stream_is_read_from_its_first_event() -> None:
    first = b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","content":[]}}\n\n'
    assert _process._stream_message_id(first[:20]) is None  # not whole yet
    assert _process._stream_message_id(first + b"event: ping\n") == "msg_1"
    assert _process._stream_message_id(b'data: {"type":"ping"}\n\n') == ""  # not the API's stream
    assert _process._stream_message_id(b"data: {not json\n\n") == ""


def test_a_script_without_a_main_guard_gets_an_error_that_says_so_not_a_verdict(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    script = tmp_path / "fuzz_it.py"
    script.write_text(
        "from hypothesis.database import InMemoryExampleDatabase\n"
        "from pytest_agentckpt import fuzz\n"
        f"fuzz({REFERENCE!r}, {TOOLS!r}, mode='process', max_examples=2, seed=1,\n"
        "     database=InMemoryExampleDatabase(), unsafe_tools='ignore')\n"
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()
    error = next(line for line in last if line.startswith("RuntimeError: mode='process'"))
    assert 'if __name__ == "__main__":' in error and "no verdict" in error
    assert "crash_free_run" not in done.stderr  # not reported as the agent's failure


def test_an_async_run_is_awaited_in_process_mode_with_the_async_client() -> None:
    # Before, the child called an `async def run` with the sync client and never awaited
    # it: the coroutine was taken for the answer, and every example passed with no model
    # request, no crash and no effect checked.
    report = fuzz(
        "tests.harness.process_agents:taskgroup", "tests.zoo.history_agents:async_shop_tools", mode="process",
        fault_kinds=["before_tool_effect", "after_tool_effect", "after_checkpoint_write"], max_examples=6, seed=1,
        database=InMemoryExampleDatabase(),
    )
    assert report.stats.requests_validated > 0 and report.stats.crashes > 0 and report.stats.effects_checked > 0


def test_a_plain_function_that_returns_a_coroutine_is_told_to_be_async_def() -> None:
    async def work(task_id: str, goal: str, **kwargs: Any) -> str:
        return "never awaited"

    def run(task_id: str, goal: str, **kwargs: Any) -> Any:
        return work(task_id, goal, **kwargs)

    with pytest.raises(OracleFailure, match=r"run returned coroutine .* Declare it `async def`"):
        fuzz(run, TOOLS, max_examples=2, seed=1, database=InMemoryExampleDatabase())


@pytest.mark.parametrize("seed", [1, pytest.param(6, marks=pytest.mark.sweep)])
def test_process_modes_random_search_brings_counts_from_the_end_into_a_short_run(seed: int) -> None:
    # Process mode places no crash by fraction. A count from the end further back than the
    # run went (-2 to -6 of a point met once) used to be left out, so most drawn crashes of
    # a one-call plan never fired: this twin (a new key per attempt) passed seeds 1 and 6
    # at 30 examples. Brought into the run, every drawn crash of a point the run met fires.
    write = Plan((Step((ToolCall("write_record", {"key": "a"}),)),), "written")
    with pytest.raises(OracleFailure) as caught:
        fuzz(
            "tests.buggy_agents.key_per_attempt:run", TOOLS, mode="process", plans=[write], max_examples=30,
            seed=seed, database=InMemoryExampleDatabase(), unsafe_tools="ignore",
        )
    assert caught.value.oracle == "no_duplicate_effect"


def test_an_effect_the_killed_child_did_not_report_is_taken_from_the_world(tmp_path: Path) -> None:
    # The World commits an effect before the child writes its event: a SIGKILL from another
    # of the child's threads in between leaves it unreported. Counted as never done, its
    # keyed repeat (dropped by the World, unreported too) made a sound agent fail with
    # "an action was lost" (no_duplicate_effect).
    from pytest_agentckpt._process import _effects_the_child_did_not_report
    from pytest_agentckpt.oracles import effects_in_doubt
    from pytest_agentckpt.timeline import Timeline
    from reference_agent.world import World

    path = tmp_path / "world.db"
    world = World(path)
    for to in ("ann", "bob"):
        world.perform("send_email", {"to": to}, idempotency_key=f"k-{to}", honour_key=True, effect=lambda: "sent")
    world.close()
    timeline = Timeline()
    timeline.start_attempt()
    reported = timeline.add("effect", tool="send_email", input={"to": "ann"}, key="k-ann")
    timeline.add("crash", point="after_tool_effect", occurrence=2)
    seen = [0]
    _effects_the_child_did_not_report(path, [reported], timeline, seen)
    effects = timeline.of("effect")
    assert [(e.data["input"], e.data["key"]) for e in effects] == [({"to": "ann"}, "k-ann"), ({"to": "bob"}, "k-bob")]
    assert "the killed process had not reported it" in timeline.describe(effects[1])
    timeline.add("attempt_end", outcome="crash", detail="SIGKILL")
    # It happened before the kill and nothing recorded its outcome: it is in doubt.
    assert effects[1].seq in effects_in_doubt(timeline)
    # The next attempt adds only what is new.
    _effects_the_child_did_not_report(path, [], timeline, seen)
    assert len(timeline.of("effect")) == 2


def test_the_points_met_in_both_processes_are_ordered_as_in_memory_mode(executor: ProcessExecutor) -> None:
    # Crash fractions are resolved against the order the crash-free run met its points in,
    # and the durable changes before each: merged from the two processes by when each was
    # met, they are those memory mode records for the same agent and plan.
    import functools

    import reference_agent
    from pytest_agentckpt._scenario import _Executor
    from tests.harness.toolkit import toolbox

    process = executor.baseline(PLAN)[1].counts
    memory_executor = _Executor(
        functools.partial(reference_agent.run, retry_backoff=0.0), toolbox(), store=None, budget=None,
        max_resumes=None, goal="g",
    )
    try:
        memory = memory_executor.baseline(PLAN)[1].counts
    finally:
        memory_executor.close()
    assert process is not None and memory is not None
    assert process.order and process.order == memory.order
    assert process.changes == memory.changes
    assert process.unsaved == memory.unsaved
    assert executor.orders_points
