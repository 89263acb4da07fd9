"""``--agentckpt-backends``: what it selects, and a selection that names nothing refused
(the store tests would otherwise run against no backend and pass)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

TEST = """
def test_uses_a_store(any_checkpoint_store):
    assert any_checkpoint_store.load("t") is None
"""


@pytest.mark.parametrize("value", [",", " , ", ""])
def test_a_selection_that_names_no_backend_is_a_usage_error(pytester: pytest.Pytester, value: str) -> None:
    pytester.makepyfile(TEST)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", f"--agentckpt-backends={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    assert "names no backend; choose from" in result.stderr.str()


def test_an_unknown_backend_is_a_usage_error_and_a_known_one_runs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(TEST)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--agentckpt-backends=memory,nosuch")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "unknown ['nosuch']" in result.stderr.str()
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--agentckpt-backends=memory")
    result.assert_outcomes(passed=1)
