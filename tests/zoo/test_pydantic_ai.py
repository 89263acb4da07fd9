"""A pydantic-ai agent, an agent we did not design, gets right verdicts: passes with keyed
tools; its resume re-runs the last turn's tools, caught on an unkeyed tool."""

from __future__ import annotations

import importlib.util
import os

import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt import NotCheckableWarning, OracleFailure, fuzz
from tests.harness.toolkit import safe_toolbox, toolbox

if importlib.util.find_spec("pydantic_ai") is None:
    if os.environ.get("CI"):
        raise ImportError("the test extra installs pydantic-ai-slim[anthropic]: pip install -e '.[test]'")
    pytest.skip("needs pydantic-ai-slim[anthropic]: pip install -e '.[test]'", allow_module_level=True)

from .pydantic_ai_agent import make_run

EXAMPLES = 100


@pytest.mark.parametrize("seed", [1, pytest.param(2, marks=pytest.mark.sweep)])
def test_a_pydantic_ai_agent_with_keyed_tools_passes(seed: int) -> None:
    # Its history is in pydantic-ai's own format: without history= the oracle that reads
    # it says so, and names the argument.
    with pytest.warns(NotCheckableWarning, match="history="):
        report = fuzz(make_run(), safe_toolbox(), seed=seed, max_examples=EXAMPLES, database=InMemoryExampleDatabase())
    assert report.examples == EXAMPLES and report.stats.crashes > 0
    assert set(report.not_checkable) == {"recorded_work_not_redone"}


def test_a_pydantic_ai_agent_runs_the_last_turns_tools_again_on_resume() -> None:
    with pytest.raises(OracleFailure) as caught:
        fuzz(make_run(), toolbox(), seed=1, max_examples=EXAMPLES, database=InMemoryExampleDatabase())
    assert "no_duplicate_effect" in caught.value.oracles, str(caught.value)[:3000]
    assert 'effect send_email({"to":' in str(caught.value)
