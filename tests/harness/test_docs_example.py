"""The example of docs/fuzzing.md runs and passes, as a user would run it."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "test_fuzz_my_agent.py"


def test_the_documented_fuzzing_example_passes_and_reports_what_it_did(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_fuzz_my_agent=EXAMPLE.read_text())
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "--agentckpt-seed=5")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*agentckpt fuzzing*", "scenarios run: 25", "violations found: 0 distinct failure(s) (none)"])
