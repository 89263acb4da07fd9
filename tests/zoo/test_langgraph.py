"""A LangGraph agent, an agent we did not design, gets right verdicts: passes with keyed
tools, and LangGraph's re-run of a crashed tools step is caught on an unkeyed tool."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt import NotCheckableWarning, OracleFailure, fuzz
from tests.harness.toolkit import safe_toolbox, toolbox

if importlib.util.find_spec("langchain_anthropic") is None or importlib.util.find_spec("langgraph") is None:
    if os.environ.get("CI"):
        raise ImportError("the test extra installs langgraph and langchain-anthropic: pip install -e '.[test]'")
    pytest.skip("needs langgraph and langchain-anthropic: pip install -e '.[test]'", allow_module_level=True)

# The agent is the one docs/fuzz-your-agent.md shows, in docs/examples.
_EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
if str(_EXAMPLES) not in sys.path:
    sys.path.insert(0, str(_EXAMPLES))

from langgraph_agent import make_run  # noqa: E402

EXAMPLES = 100
#: create_react_agent moved to langchain.agents.create_agent (the langchain package); the
#: prebuilt one is what this design uses, and it warns on every call.
pytestmark = pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecationWarning")


@pytest.mark.parametrize("seed", [1, pytest.param(2, marks=pytest.mark.sweep)])
def test_a_langgraph_agent_with_keyed_tools_passes_and_is_told_what_was_not_checked(tmp_path: Path, seed: int) -> None:
    # Its state is in LangGraph's checkpointer, not in the store fuzz hands it: the oracles
    # that read saves say they had nothing to read, and the rest judge it.
    with pytest.warns(NotCheckableWarning, match="saved no checkpoint"):
        report = fuzz(
            make_run(tmp_path / "graph.db"), safe_toolbox(), seed=seed, max_examples=EXAMPLES,
            database=InMemoryExampleDatabase(),
        )
    assert report.examples == EXAMPLES and report.stats.crashes > 0
    assert set(report.not_checkable) == {"recorded_work_not_redone", "iteration_monotone"}


def test_langgraph_running_a_crashed_tools_step_again_repeats_an_unkeyed_send(tmp_path: Path) -> None:
    with pytest.raises(OracleFailure) as caught:
        fuzz(
            make_run(tmp_path / "graph.db"), toolbox(), seed=1, max_examples=EXAMPLES, database=InMemoryExampleDatabase(),
            max_parallel=1,  # one call per tools step: no thread race in LangGraph's tool node, the same search each run
        )
    failure = caught.value
    assert "no_duplicate_effect" in failure.oracles, str(failure)[:3000]
    assert 'effect send_email({"to":' in str(failure)
    assert "not checkable: recorded_work_not_redone: the agent saved no checkpoint" in str(failure)


def test_a_langgraph_agent_that_passes_no_key_repeats_a_keyed_write(tmp_path: Path) -> None:
    with pytest.raises(OracleFailure) as caught:
        fuzz(
            make_run(tmp_path / "graph.db", keyed=False), safe_toolbox(), seed=1, max_examples=EXAMPLES,
            database=InMemoryExampleDatabase(),
            max_parallel=1,  # one call per tools step: no thread race in LangGraph's tool node, the same search each run
        )
    assert "no_duplicate_effect" in caught.value.oracles, str(caught.value)[:3000]
    assert "write_record" in str(caught.value)
