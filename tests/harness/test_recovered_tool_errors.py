"""A tool error the agent's own retry gets past keeps the plan; one it does not, discards it.

An outside round's queue worker retried a flaky send (a timeout on the first call) with
``tenacity``: the crash-free run ended at the first error result, before the retry, so
every plan that sent was dropped without a word, ``takeover`` refused its plans, and the
worker was never fuzzed where it mattered. A plan is now discarded only when the error
reaches the model (which would ask again for ever) or the agent gives up on it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt import fuzz, takeover
from reference_agent.scripted import Plan, Step, ToolCall
from reference_agent.toolbox import Toolbox, tool
from tests.buggy_agents._loop import make_agent

#: The keys the flaky tool has already failed once for (each scenario's task ids, and so
#: its keys, are new: its first call of each key fails, the retry goes through).
_FAILED_ONCE: set[str] = set()


@tool()
def search(query: Literal["crash", "resume"]) -> str:
    """Search the notes."""
    return f"3 notes about {query}"


@tool(irreversible=True, idempotent=True)
def flaky_write(key: Literal["a", "b"], idempotency_key: str | None = None) -> str:
    """Write a record (honours idempotency keys); the first call of each key times out
    before it writes anything."""
    if idempotency_key not in _FAILED_ONCE:
        _FAILED_ONCE.add(str(idempotency_key))
        raise TimeoutError("records API: read timed out")
    return f"record {key} written"


@tool(irreversible=True, idempotent=True)
def broken_write(key: Literal["a", "b"], idempotency_key: str | None = None) -> str:
    """Write a record: always times out."""
    raise TimeoutError("records API: read timed out")


class _Retrying:
    """The agent's own retry around the toolbox (as ``tenacity`` around ``tools.call``):
    a call that answered an error is made again, with the same key, up to three times;
    then the agent gives up and raises."""

    def __init__(self, tools: Any, *, give_up: bool) -> None:
        self._tools = tools
        self._give_up = give_up

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tools, name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def call(self, name: str, input: Any, *, idempotency_key: str | None = None) -> Any:
        for _ in range(3):
            result = self._tools.call(name, input, idempotency_key=idempotency_key)
            if not result.is_error:
                return result
        if self._give_up:
            raise RuntimeError(f"{name} kept failing: {result.content}")
        return result


def _agent(*, give_up: bool = False, retry: bool = True) -> Callable[..., str]:
    loop = make_agent()

    def run(task_id: str, goal: str, *, client: Any, store: Any, tools: Any) -> str:
        return loop(task_id, goal, client=client, store=store, tools=_Retrying(tools, give_up=give_up) if retry else tools)

    return run


def _fuzz(agent: Callable[..., str], tools: Toolbox, **options: Any) -> Any:
    return fuzz(agent, tools, max_examples=40, seed=7, database=InMemoryExampleDatabase(), **options)


def test_a_plan_whose_tool_error_the_agents_retry_gets_past_is_fuzzed() -> None:
    report = _fuzz(_agent(), Toolbox([search, flaky_write]))
    # Every write is made: before, each plan that wrote was discarded, and none was checked.
    assert report.stats.effects_checked > 0, report.describe()
    assert report.stats.crashes > 0
    assert report.stats.plans_discarded == 0


def test_a_plan_whose_tool_error_reaches_the_model_is_still_discarded() -> None:
    # The same flaky tool, and an agent that hands its error to the model: the scripted
    # model asks again, and the plan says nothing about resume. Only the plans that
    # search are left.
    report = _fuzz(_agent(retry=False), Toolbox([search, flaky_write]))
    assert report.stats.effects_checked == 0
    assert report.stats.scenarios > 0
    # ... and the report says so, rather than passing as though every plan had run.
    assert report.stats.plans_discarded > 0
    assert f"{report.stats.plans_discarded} drawn scenario(s) discarded" in report.describe()


def test_a_plan_whose_tool_error_the_agent_gives_up_on_is_discarded_not_failed() -> None:
    # Retries run out and the agent raises: the plan cannot be carried out, which is no
    # failure of the agent's resume.
    report = _fuzz(_agent(give_up=True), Toolbox([search, broken_write]))
    assert report.stats.effects_checked == 0
    assert report.stats.scenarios > 0


def test_takeover_runs_plans_whose_tool_error_the_agents_retry_gets_past() -> None:
    stats = takeover(_agent(), Toolbox([search, flaky_write]), examples=2, seed=3)
    assert stats.plans == 2 and stats.points > 0, stats.summary()


@pytest.mark.parametrize(("run", "written"), [("retrying_run", True), ("plain_run", False)])
def test_process_mode_keeps_and_discards_the_same_plans(run: str, written: bool, tmp_path: Path) -> None:
    # Each attempt is a process of its own: the flaky tool fails the first call of each
    # key there too, and the child decides as memory mode does.
    report = fuzz(
        f"tests.harness.test_recovered_tool_errors:{run}", "tests.harness.test_recovered_tool_errors:flaky_tools",
        mode="process", max_examples=4, seed=7, plans=[_WRITE, _SEARCH], fault_kinds=["after_tool_effect"],
        store=f"sqlite:///{tmp_path / 'store.db'}", database=InMemoryExampleDatabase(),
    )
    assert (report.stats.effects_checked > 0) is written, report.describe()


#: A plan that writes, and one that only searches (left when the writing one is discarded).
_WRITE = Plan((Step((ToolCall("flaky_write", {"key": "a"}),)),), "done")
_SEARCH = Plan((Step((ToolCall("search", {"query": "crash"}),)),), "done")

#: The agents and the toolbox by name, for process mode.
retrying_run = _agent()
plain_run = _agent(retry=False)


def flaky_tools() -> Toolbox:
    return Toolbox([search, flaky_write])


def test_takeover_leaves_out_drawn_plans_that_fail_without_a_fault_and_says_so() -> None:
    # The writing plans fail crash-free (the agent hands the error to the model); the
    # searching ones are taken over. Before, the first failing plan raised ValueError.
    stats = takeover(_agent(retry=False), Toolbox([search, flaky_write]), examples=6, seed=3)
    assert stats.discarded > 0 and stats.plans == 6 - stats.discarded and stats.plans > 0, stats.summary()
    assert f"{stats.discarded} drawn plan(s) left out" in stats.summary()
    with pytest.raises(ValueError, match="every one of the 2 plans drawn over these tools failed"):
        takeover(_agent(retry=False), Toolbox([broken_write]), examples=2, seed=3)
    with pytest.raises(ValueError, match="the plan cannot run without faults"):
        takeover(_agent(retry=False), Toolbox([search, broken_write]), plans=[_BROKEN])


_BROKEN = Plan((Step((ToolCall("broken_write", {"key": "a"}),)),), "done")
