"""Stream faults for agents that stream: drawn often enough to find a cut reply's bugs,
without running the agent inside a draw."""

from __future__ import annotations

import functools
import random
import warnings
from typing import Any

from hypothesis.database import InMemoryExampleDatabase

import reference_agent
from pytest_agentckpt import fuzz
from pytest_agentckpt._scenario import _Executor
from pytest_agentckpt._search import _streams
from tests.zoo.agents import SOUND

from .toolkit import toolbox


def _streams_of(run: Any) -> bool:
    executor = _Executor(run, toolbox(), store=None, budget=None, max_resumes=None, goal="g")
    try:
        return _streams(executor)
    finally:
        executor.close()


def test_one_crash_free_run_tells_an_agent_that_streams_from_one_that_does_not() -> None:
    assert _streams_of(SOUND["streams"]) is True
    assert _streams_of(functools.partial(reference_agent.run, retry_backoff=0.0)) is False


def test_an_agent_that_fails_tells_nothing_and_the_search_goes_on() -> None:
    def broken(task_id: str, goal: str, **_: Any) -> str:
        raise RuntimeError("no")

    assert _streams_of(broken) is False


def test_an_agent_that_uses_random_is_never_run_inside_a_draw() -> None:
    # Hypothesis warns (HypothesisDeprecationWarning) when a strategy uses the random
    # module: an agent run inside a draw did, in the user's test output.
    streams = SOUND["streams"]

    def noisy(task_id: str, goal: str, **kwargs: Any) -> str:
        random.random()
        return str(streams(task_id, goal, **kwargs))

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = fuzz(noisy, toolbox(), seed=3, max_examples=30, database=InMemoryExampleDatabase(), unsafe_tools="ignore")
    assert report.examples == 30
