"""The summary counts distinct failures, and shows apart those a passing test expected."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

ARGS = ("-p", "no:randomly", "-p", "no:cacheprovider", "-W", "ignore::pytest_agentckpt.UnsafeToolWarning")


def test_failures_expected_by_passing_tests_are_counted_apart_from_real_ones(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_totals='''
import pytest
from pytest_agentckpt import OracleFailure, fuzz
from tests.buggy_agents import answer_changes_on_resume, delete_on_success
from tests.harness.toolkit import toolbox


@pytest.mark.parametrize("n", range(3))
def test_buggy_agent_is_caught(n):
    with pytest.raises(OracleFailure):
        fuzz(delete_on_success.run, toolbox(), max_examples=30, seed=1)


def test_real_failure():
    fuzz(answer_changes_on_resume.run, toolbox(), max_examples=30, seed=1)
'''
    )
    result = pytester.runpytest_subprocess(*ARGS)
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            "violations found: 1 distinct failure(s) (same_answer 1)",
            "expected failures: 1 distinct, raised in tests that passed*(completed_idempotent 1)",
            "failing examples seen: *",
        ]
    )
