"""An agent that runs each tool call in a detached asyncio task and keeps its session in
its own storage (``tests/zoo/detached_agents.py``): the sound agent passes, its twin is
caught, and a crash in a task is the death of the process, not an exception the task
keeps to itself."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt import Crash, Plan
from pytest_agentckpt.harness import NotCheckableWarning, OracleFailure, fuzz

from .detached_agents import detached_agent
from .history_agents import shop_tools
from .test_false_alarms import SEEDS, twin_caught

EXAMPLES = 100


@pytest.mark.parametrize("seed", SEEDS)
def test_an_agent_that_runs_tools_in_detached_tasks_passes(seed: int) -> None:
    # Before the crash was a SystemExit, a crash at after_tool_effect stayed on the tool's
    # task; the loop went on, wrote a user turn without that result to its own session,
    # and the resume's "interrupted" answer made the model retry under a new key: a second
    # refund, no_duplicate_effect (seeds 1-3), on a sound agent.
    # It keeps its session outside the store: the oracles that read saved checkpoints say
    # so, and every other one judges it.
    with pytest.warns(NotCheckableWarning, match="saved no checkpoint through the store"):
        report = fuzz(detached_agent(), shop_tools(), seed=seed, database=InMemoryExampleDatabase(), max_examples=EXAMPLES)
    assert report.examples >= 50
    assert set(report.not_checkable) == {"recorded_work_not_redone", "iteration_monotone"}


def test_its_twin_with_a_fresh_key_per_run_is_caught() -> None:
    twin_caught(
        lambda: fuzz(
            detached_agent(fresh_keys=True), shop_tools(), seed=20261206,
            database=InMemoryExampleDatabase(), max_examples=EXAMPLES,
        ),
        "no_duplicate_effect",
        needs_fault=True,
    )


def test_its_twin_that_answers_the_cut_off_calls_interrupted_is_caught_and_told_why() -> None:
    with pytest.raises(OracleFailure) as caught:
        fuzz(
            detached_agent(interrupts=True), shop_tools(), seed=20261206,
            database=InMemoryExampleDatabase(), max_examples=EXAMPLES,
        )
    assert caught.value.oracle == "no_duplicate_effect"
    # The error came from the resume's repair, not from a tool that raised after its effect.
    assert "before the crash: the resume answered the call that stop cut off with an error" in str(caught.value)


def test_its_twin_that_loses_its_session_is_caught_without_a_claim_about_saves() -> None:
    with pytest.raises(OracleFailure) as caught:
        fuzz(
            detached_agent(new_session=True), shop_tools(), seed=20261206,
            database=InMemoryExampleDatabase(), max_examples=EXAMPLES,
        )
    assert "no_duplicate_effect" in caught.value.oracles
    example = next(e for e in caught.value.examples if e.oracle == "no_duplicate_effect")
    # It saves nothing through the store: the report does not say the reply was unsaved.
    assert "did not find the reply that asked first" in example.message
    assert "had not saved" not in example.message


def test_a_crash_in_a_task_whose_exception_nobody_reads_stops_the_event_loop() -> None:
    written: list[str] = []

    async def main() -> None:
        done: asyncio.Queue[None] = asyncio.Queue()

        async def tool() -> None:
            try:
                raise Crash("after_tool_effect", 1)
            finally:
                done.put_nowait(None)

        asyncio.get_running_loop().create_task(tool())
        await done.get()
        written.append("a turn the dead process never wrote")

    with pytest.raises(Crash):
        asyncio.run(main())
    assert written == []


async def _asks_in_a_worker_task_for_ever(task_id: str, goal: str, *, client: Any, store: Any, tools: Any) -> str:
    """Each model call in a worker task whose exception nobody reads; asks again and again
    (a runaway): the harness's stop, raised in the model call, must end it."""
    messages = [{"role": "user", "content": goal}]
    for _ in range(2_000):  # bounded: a stop that stays on the task would spin here
        done = asyncio.Event()

        async def ask(done: asyncio.Event) -> None:
            try:
                await client.messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=messages)
            except Exception:
                pass
            finally:
                done.set()

        asyncio.get_running_loop().create_task(ask(done))
        await done.wait()
    return "gave up"


@pytest.mark.timeout(300)
def test_a_runaway_stopped_inside_a_worker_task_is_reported_not_spun_on() -> None:
    # LlamaIndex runs the model call in a worker task and waits for its events; the
    # runaway stop (then a plain BaseException) stayed on the task, and the agent waited
    # for ever. It is a SystemExit now, as the crash is: the event loop stops.
    with pytest.raises(OracleFailure) as caught:
        fuzz(
            _asks_in_a_worker_task_for_ever, shop_tools(), seed=1, max_examples=1,
            database=InMemoryExampleDatabase(), plans=[Plan((), "done")],
        )
    assert "runaway" in caught.value.oracles
