"""An ``async def`` tool without a key is in doubt at the same points as a plain one.

Before, an awaited effect ran before the World was asked whether it was to happen: the
run without the unsafe repeats could not leave its repeat out, and the points where no
agent can know the outcome failed instead of being in doubt (a false alarm).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

AGENT = Path(__file__).parents[2] / "docs" / "examples" / "gather_agent.py"

CONFTEST = '''
import pytest
from pytest_agentckpt import Toolbox


@pytest.fixture
def log():
    return []


@pytest.fixture
def agentckpt_tools(log):
    async def append_line(line: str) -> str:
        """Append a line to a log (no key)."""
        log.append(line)
        return "ok"

    return Toolbox.from_functions(append_line, kinds={"append_line": "unkeyed"})
'''

TEST = '''
import asyncio

import pytest

import gather_agent
from pytest_agentckpt import Plan, Step, ToolCall

PLAN = Plan(steps=(Step(calls=(ToolCall("append_line", {"line": "x"}),)),), final_answer="done")


@pytest.mark.agentckpt_model(plan=PLAN)
def test_appends_once(async_anthropic_client, checkpoint_store, agentckpt_tools, log):
    answer = asyncio.run(
        gather_agent.run("t", "go", client=async_anthropic_client, store=checkpoint_store, tools=agentckpt_tools)
    )
    assert answer == "done"
    assert log == ["x"]
'''


def test_an_async_unkeyed_tools_repeat_puts_its_points_in_doubt_not_failed(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(gather_agent=AGENT.read_text(), test_appends=TEST)
    result = pytester.runpytest(
        "-p", "no:randomly", "-p", "no:cacheprovider", "-W", "ignore::pytest_agentckpt.UnsafeToolWarning",
        "--agentckpt-chaos",
    )
    output = result.stdout.str()
    result.assert_outcomes(passed=1)
    found = re.search(r"^crash points: (\d+) run \((\d+) passed, (\d+) in doubt, (\d+) failed\)", output, re.M)
    assert found, output
    run, passed, in_doubt, failed = map(int, found.groups())
    # Between the line's append and the save of its result, no agent can know it happened.
    assert (in_doubt, failed) == (2, 0), output
    assert passed + in_doubt == run
