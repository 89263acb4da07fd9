"""The example of docs/testing-your-agent.md runs and passes, as a user would run it."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "test_my_agent.py"


def test_the_documented_example_passes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_my_agent=EXAMPLE.read_text())
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=5)
