"""The example of docs/chaos.md passes, as a team would run it: as it is and in chaos mode."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "chaos"
ARGS = ("-p", "no:randomly", "-p", "no:cacheprovider")


def _example(pytester: pytest.Pytester) -> None:
    pytester.makeconftest((EXAMPLE / "conftest.py").read_text())
    pytester.makepyfile(test_my_agent_under_chaos=(EXAMPLE / "test_my_agent_under_chaos.py").read_text())


def test_the_documented_chaos_example_passes_as_it_is(pytester: pytest.Pytester) -> None:
    _example(pytester)
    result = pytester.runpytest_subprocess(*ARGS)
    result.assert_outcomes(passed=2)
    assert not re.search(r"^=+ agentckpt chaos", result.stdout.str(), re.M)


def test_the_documented_chaos_example_passes_every_crash_point(pytester: pytest.Pytester) -> None:
    _example(pytester)
    result = pytester.runpytest_subprocess(*ARGS, "--agentckpt-chaos", "--agentckpt-seed=7")
    result.assert_outcomes(passed=2)
    # One test in chaos mode (the other opts out); the count the page shows.
    result.stdout.fnmatch_lines(["*agentckpt chaos*", "tests: 1 (0 failed)", "crash points: 29 run (29 passed, 0 failed)", "seed: 7"])
