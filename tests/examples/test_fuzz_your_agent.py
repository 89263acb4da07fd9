"""The agents of docs/fuzz-your-agent.md pass ``fuzz``, and their naive twins are caught.

Each example is an agent module and its test file under ``docs/examples/``, run here as a
user runs them: copied into a fresh directory, ``pytest`` in a child process. Their glue
(the toolbox and the ``fuzz`` call, between the ``glue`` markers) stays within 15 lines.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
AGENTS = {
    "gather_agent": "test_gather_agent.py",
    "session_agent": "test_session_agent.py",
    "token_agent": "test_token_agent.py",
    "runner_agent": "test_runner_agent.py",
}
MAX_GLUE_LINES = 15


def glue_lines(test_file: str) -> list[str]:
    """The lines between the ``glue`` markers of an example's test file, blank ones included."""
    text = (EXAMPLES / test_file).read_text(encoding="utf-8")
    match = re.search(r"# --8<-- \[start:glue\]\n(.*?)# --8<-- \[end:glue\]", text, re.S)
    assert match, f"{test_file} has no glue section"
    return match.group(1).splitlines()


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_the_glue_of_each_example_is_fifteen_lines_or_fewer(agent: str) -> None:
    lines = glue_lines(AGENTS[agent])
    assert any("Toolbox.from_functions(" in line for line in lines) and any("fuzz(" in line for line in lines)
    assert len(lines) <= MAX_GLUE_LINES, "\n".join(lines)


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_the_example_agent_passes_fuzz_and_its_naive_twin_is_caught(pytester: pytest.Pytester, agent: str) -> None:
    test_file = AGENTS[agent]
    pytester.makepyfile(
        **{
            agent: (EXAMPLES / f"{agent}.py").read_text(encoding="utf-8"),
            test_file[:-3]: (EXAMPLES / test_file).read_text(encoding="utf-8"),
        }
    )
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "--agentckpt-seed=5")
    # One test fuzzes the sound agent (it must pass), one its naive twin (it must be caught).
    result.assert_outcomes(passed=2)
