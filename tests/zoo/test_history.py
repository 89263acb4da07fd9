"""Agents that shape their saved history in ways of their own (``tests/zoo/history_agents.py``):
each sound agent passes three seeds, each naive twin is caught by the oracle its bug breaks."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt import FaultPlan, OracleFailure, Plan, replay
from pytest_agentckpt.harness import fuzz

from .history_agents import (
    async_shop_tools,
    drafting_agent,
    shop_tools,
    summarising_agent,
    taskgroup_agent,
)
from .test_false_alarms import SEEDS, sound_passes, twin_caught

EXAMPLES = 150
#: The sound agents in CI: enough to meet every fault kind on every seed, in seconds.
SOUND_EXAMPLES = 60

SOUND = {
    "summarises": summarising_agent(),
    "summarises_as_is": summarising_agent(summary_request="as_is"),
    "drafts": drafting_agent(),
    "taskgroup": taskgroup_agent(),
}
TWINS = {
    "drafts": (drafting_agent(keeps_draft=True), "valid_sequence"),
    "taskgroup": (taskgroup_agent(count_pending=True), "valid_sequence"),
}


def _fuzz(design: str, run: Any, seed: int, examples: int = EXAMPLES) -> Any:
    tools = async_shop_tools() if design == "taskgroup" else shop_tools()
    return fuzz(run, tools, seed=seed, database=InMemoryExampleDatabase(), max_examples=examples)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("design", sorted(SOUND))
def test_a_sound_agent_that_shapes_its_history_passes(design: str, seed: int) -> None:
    sound_passes(lambda: _fuzz(design, SOUND[design], seed, SOUND_EXAMPLES))


@pytest.mark.parametrize("seed", SEEDS)
def test_a_sound_agent_that_saves_drafts_mid_stream_passes_a_longer_search(seed: int) -> None:
    # Before, recorded_work_not_redone took a draft saved while its reply was still
    # streaming for the recorded reply, and failed the agent that dropped it and asked
    # again (seed 1 at 150 examples). A reply is recorded once it was read to its end.
    sound_passes(lambda: _fuzz("drafts", SOUND["drafts"], seed))


@pytest.mark.parametrize("design", sorted(TWINS))
def test_its_naive_twin_is_caught(design: str) -> None:
    run, oracle = TWINS[design]
    twin_caught(lambda: _fuzz(design, run, 20261201), oracle, needs_fault=True)


def test_the_summarising_twin_that_compacts_before_answering_the_loaded_reply_is_caught() -> None:
    # Its bug needs a resume whose loaded reply is unanswered while the history is past the
    # compaction limit: found on each of seeds 1-8 within 300 examples, after 5 to 117 (21
    # to 236 before crashes were also placed by fractions of the run):
    # `python -m tests.benchmarks.bench_search --only history`. Seed 4 finds it after 21.
    twin_caught(lambda: _fuzz("summarises", summarising_agent(late_compaction=True), 4), "valid_sequence", needs_fault=True)


def test_a_summary_request_that_sends_the_history_as_it_is_is_no_redone_work() -> None:
    # An outside round's false alarm: the summary request sends the saved history up to the
    # kept turn's reply (under the summariser's prompt, tool_choice none), which
    # recorded_work_not_redone took for asking that reply again when it came first after
    # a load. The crash-free run made the same request unblamed.
    step = {"calls": [{"name": "lookup", "input": {"order": "A1"}}], "text": None}
    plan = Plan.from_dict({"steps": [step, step, step], "final_answer": "answer 0"})
    run = summarising_agent(summary_request="as_is")
    replay(run, shop_tools(), plan, FaultPlan())
    replay(run, shop_tools(), plan, FaultPlan.from_dict({"crashes": [["before_model_call", 4]]}))


def test_a_crash_in_an_async_agent_leaves_no_unread_task_exception_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    # A crash stops the attempt's event loop from the task it was raised in, which keeps
    # the exception unread: asyncio logged "Task exception was never retrieved" with a
    # traceback for each such task (hundreds in one run of an agent with a task group).
    import gc
    import logging

    gc.collect()  # what earlier tests left is not this run's
    caplog.set_level(logging.ERROR, logger="asyncio")
    with pytest.raises(OracleFailure):
        _fuzz("taskgroup", taskgroup_agent(count_pending=True), 20261201, examples=40)
    gc.collect()
    unread = [r for r in caplog.records if r.name == "asyncio" and "never retrieved" in r.getMessage()]
    assert unread == []
