"""Without a seed, Hypothesis keeps its example database: a failure is saved and replayed first.

Each test runs pytest in a subprocess in its own project directory (pytester), so the
project's ``.hypothesis/examples`` is the default directory Hypothesis uses there.
"""

from __future__ import annotations

import re

import pytest

pytest_plugins = ["pytester"]

ARGS = ("-p", "no:randomly", "-p", "no:cacheprovider", "-W", "ignore::pytest_agentckpt.UnsafeToolWarning")

# A bug found after tens of examples (median 38 with a fresh database): a replay that finds it
# within three examples is the database at work, not luck. shrink=False: Hypothesis saves a
# failure when it finds it, so what these tests check is the same without the shrinking and
# the search for other oracles that would follow (most of a failing call's time).
BUGGY = '''
from pytest_agentckpt import OracleFailure, fuzz
from tests.buggy_agents.load_error_is_none import run
from tests.harness.toolkit import toolbox


def test_buggy_agent():
    try:
        fuzz(run, toolbox(), max_examples=400, shrink=False)
    except OracleFailure as failure:
        print(f"FOUND_AFTER={failure.found_after}")
        raise
'''


def found_after(output: str) -> int:
    match = re.search(r"FOUND_AFTER=(\d+)", output)
    assert match, output
    return int(match.group(1))


def test_without_a_seed_a_failure_is_saved_and_the_next_run_replays_it_first(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With CI set, Hypothesis loads its own "ci" profile, which has no example database;
    # this test is about the default profile.
    monkeypatch.delenv("CI", raising=False)
    pytester.makepyfile(test_buggy=BUGGY)
    first = pytester.runpytest_subprocess(*ARGS)
    first.assert_outcomes(failed=1)
    first.stdout.fnmatch_lines(["agentckpt: no seed: failures are saved to the example database*"])
    output = first.stdout.str()
    assert "search: random, with the example database" in output
    assert "@reproduce_failure" not in output
    examples = pytester.path / ".hypothesis" / "examples"
    assert examples.is_dir() and any(examples.rglob("*")), "nothing saved in .hypothesis/examples"

    second = pytester.runpytest_subprocess(*ARGS)
    second.assert_outcomes(failed=1)
    assert found_after(second.stdout.str()) <= 3


def test_with_a_seed_the_run_is_reproducible_and_saves_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_buggy=BUGGY)
    first = pytester.runpytest_subprocess(*ARGS, "--agentckpt-seed=5")
    first.stdout.fnmatch_lines(["agentckpt: seed 5 (reproduce with --agentckpt-seed=5)*seeded: the example database is not used"])
    assert "search: seeded by --agentckpt-seed=5" in first.stdout.str()
    second = pytester.runpytest_subprocess(*ARGS, "--agentckpt-seed=5")
    assert found_after(first.stdout.str()) == found_after(second.stdout.str())
    assert not (pytester.path / ".hypothesis" / "examples").exists()


def test_fuzz_database_argument_is_the_database_used(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not Hypothesis's own "ci" profile (derandomized): this is about the default profile.
    monkeypatch.delenv("CI", raising=False)
    pytester.makepyfile(
        test_db='''
from hypothesis.database import InMemoryExampleDatabase
from pytest_agentckpt import OracleFailure, fuzz
from tests.buggy_agents.delete_on_success import run
from tests.harness.toolkit import toolbox

DB = InMemoryExampleDatabase()


def test_saved_in_the_given_database():
    try:
        fuzz(run, toolbox(), max_examples=20, database=DB)
    except OracleFailure as failure:
        assert "search: random, with the example database InMemoryExampleDatabase" in str(failure)
    else:
        raise AssertionError("not caught")
    assert any(DB.data.values())
'''
    )
    pytester.runpytest_subprocess(*ARGS).assert_outcomes(passed=1)
    assert not (pytester.path / ".hypothesis" / "examples").exists()
