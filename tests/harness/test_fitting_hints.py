"""A crash-free failure that comes from the glue, not the agent, says what to change."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt import NotCheckableWarning, OracleFailure, fuzz
from reference_agent.scripted import Plan

from .toolkit import toolbox


def _long_request_agent(timeout_none: bool) -> Any:
    """A one-turn agent asking for max_tokens=64000 without streaming, as agents whose own
    client sets ``timeout=None`` (LangChain's ChatAnthropic) do."""

    def run(task_id: str, goal: str, *, client: Any, store: Any, tools: Any) -> str:
        if timeout_none:
            client = client.with_options(timeout=None)
        reply = client.messages.create(
            model="claude-sonnet-4-5", max_tokens=64000, messages=[{"role": "user", "content": goal}]
        )
        return str(reply.content[0].text)

    return run


def test_the_sdks_long_request_refusal_names_the_client_option_to_give() -> None:
    kwargs: Any = dict(
        plans=[Plan((), "done")], max_examples=1, seed=1, database=InMemoryExampleDatabase(), unsafe_tools="ignore"
    )
    with pytest.raises(OracleFailure) as caught:
        fuzz(_long_request_agent(timeout_none=False), toolbox(), **kwargs)
    assert caught.value.oracles == ["crash_free_run"]
    assert "client.with_options(timeout=None" in str(caught.value)
    # (A stateless one-turn agent: running its completed task again asks the model again,
    # and it saves nothing for the oracles that read saves.)
    with pytest.warns(NotCheckableWarning, match="saved no checkpoint"):
        report = fuzz(_long_request_agent(timeout_none=True), toolbox(), ignore_oracles=["completed_idempotent"], **kwargs)
    assert report.examples == 1
    assert set(report.not_checkable) == {"recorded_work_not_redone", "iteration_monotone"}


def test_an_agent_that_saves_through_the_store_is_not_told_it_saved_nothing() -> None:
    import functools

    import reference_agent

    with warnings.catch_warnings():
        warnings.simplefilter("error", NotCheckableWarning)
        report = fuzz(
            functools.partial(reference_agent.run, retry_backoff=0.0), toolbox(), max_examples=5, seed=1,
            database=InMemoryExampleDatabase(), unsafe_tools="ignore",
        )
    assert report.not_checkable == {}


def test_a_plan_that_does_not_fit_a_forced_tool_choice_is_not_blamed_on_the_agent() -> None:
    from reference_agent.scripted import Step, ToolCall

    def forces_send_email(task_id: str, goal: str, *, client: Any, store: Any, tools: Any) -> str:
        reply = client.messages.create(
            model="m", max_tokens=256, messages=[{"role": "user", "content": goal}],
            tools=tools.definitions(), tool_choice={"type": "tool", "name": "send_email"},
        )
        return str(reply.content[0])

    plan = Plan((Step((ToolCall("search", {"query": "crash"}),)),), "done")
    with pytest.raises(OracleFailure) as caught:
        fuzz(
            forces_send_email, toolbox(), plans=[plan], max_examples=1, seed=1, database=InMemoryExampleDatabase(),
            unsafe_tools="ignore", ignore_oracles=["completed_idempotent"],
        )
    assert caught.value.oracles == ["crash_free_run"]
    assert "the plan not fitting the agent, not a bug of the agent" in str(caught.value)
