"""The pytest wiring: options, the seed in the header, the terminal summary, pytest-xdist.

Each test runs pytest in a subprocess, so that the plugin's session settings (profile,
examples, seed) of the inner run cannot leak into this one.
"""

from __future__ import annotations

import re

import pytest

pytest_plugins = ["pytester"]

AGENTS = '''
import functools
import reference_agent
from reference_agent.toolbox import Toolbox, tool
from pytest_agentckpt import fuzz, OracleFailure


@tool(irreversible=True, idempotent=True)
def put(key: str, idempotency_key: str | None = None) -> str:
    "Store a key."
    return "stored " + key


TOOLS = Toolbox([put])
REFERENCE = functools.partial(reference_agent.run, retry_backoff=0.0)


def forgetful(task_id, goal, *, client, store, tools):
    answer = REFERENCE(task_id, goal, client=client, store=store, tools=tools)
    store.delete(task_id)  # the bug: a completed task is forgotten
    return answer
'''

ARGS = ("-p", "no:randomly", "-p", "no:cacheprovider", "-W", "ignore::pytest_agentckpt.UnsafeToolWarning")


def _numbers(output: str, label: str) -> int:
    match = re.search(rf"^{label}: (\d+)", output, re.MULTILINE)
    assert match, f"no {label!r} line in:\n{output}"
    return int(match.group(1))


def test_the_seed_and_profile_are_in_the_report_header(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess(*ARGS, "--agentckpt-seed=4242", "--agentckpt-profile=ci")
    result.stdout.fnmatch_lines(["agentckpt: seed 4242 (reproduce with --agentckpt-seed=4242), profile ci*"])
    # No fuzz call ran: no summary section.
    assert "agentckpt fuzzing" not in result.stdout.str()


def test_without_a_seed_the_header_says_the_example_database_is_kept(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With CI set, Hypothesis loads its own "ci" profile, which has no example database;
    # this test is about the default profile.
    monkeypatch.delenv("CI", raising=False)
    pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess(*ARGS)
    result.stdout.fnmatch_lines(["agentckpt: no seed: failures are saved to the example database * profile quick"])


def test_examples_option_sets_the_examples_of_every_fuzz_call_and_the_summary_counts_them(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest("")
    pytester.makepyfile(
        test_fuzz=AGENTS
        + '''
def test_reference_passes():
    report = fuzz(REFERENCE, TOOLS)
    assert report.examples == 7
'''
    )
    result = pytester.runpytest_subprocess(*ARGS, "--agentckpt-examples=7", "--agentckpt-seed=1")
    result.assert_outcomes(passed=1)
    output = result.stdout.str()
    assert "agentckpt fuzzing" in output
    assert _numbers(output, "scenarios run") == 7
    for label in ("fault points hit", "crashes injected", "resumes", "requests validated", "effects checked", "violations found"):
        assert re.search(rf"^{label}: \d+", output, re.MULTILINE), label
    assert _numbers(output, "violations found") == 0


def test_a_failure_names_the_oracle_and_how_to_reproduce_it_with_the_session_seed(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_fuzz=AGENTS
        + '''
def test_forgetful_agent():
    fuzz(forgetful, TOOLS)
'''
    )
    result = pytester.runpytest_subprocess(*ARGS, "--agentckpt-seed=99", "--agentckpt-examples=20")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*OracleFailure: agentckpt: oracle completed_idempotent failed*",
            "*reproduce: pytest 'test_fuzz.py::test_forgetful_agent' --agentckpt-seed=99*",
        ]
    )
    assert _numbers(result.stdout.str(), "violations found") >= 1


def test_under_xdist_the_summary_is_the_total_of_the_workers(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makepyfile(
        test_fuzz=AGENTS
        + '''
import pytest

@pytest.mark.parametrize("n", range(4))
def test_reference_passes(n):
    assert fuzz(REFERENCE, TOOLS).examples == 5
'''
    )
    result = pytester.runpytest_subprocess(*ARGS, "-n", "2", "--agentckpt-examples=5", "--agentckpt-seed=3")
    result.assert_outcomes(passed=4)
    output = result.stdout.str()
    assert "agentckpt fuzzing (total of 2 workers)" in output
    assert _numbers(output, "scenarios run") == 20


def test_redis_option_builds_a_redis_database_with_the_key_prefix_of_the_url() -> None:
    from hypothesis.extra.redis import RedisExampleDatabase

    from pytest_agentckpt.fixtures.harness import _redis_database

    try:
        database = _redis_database("redis://127.0.0.1:6379/0?key_prefix=team-a:")
    except pytest.UsageError as exc:
        pytest.skip(f"no Redis on 127.0.0.1:6379 (start one, as .ci/run does, to run this test): {exc}")
    # Wrapped: an outage during the run is a warning, not a failed test (test_hypothesis_redis).
    assert isinstance(database._inner, RedisExampleDatabase)
    assert database._inner._prefix == b"team-a:"


@pytest.mark.parametrize(("query", "says"), [
    ("key_prefix=a:&key_prefix=b:", "gives the parameter 'key_prefix' 2 times"),
    ("key_prefix=", "the parameter 'key_prefix' has no value"),
])
def test_a_redis_database_url_with_a_doubled_or_empty_parameter_is_a_usage_error(query: str, says: str) -> None:
    from pytest_agentckpt.fixtures.harness import _redis_database

    with pytest.raises(pytest.UsageError, match=says) as refused:
        _redis_database(f"redis://:secret@127.0.0.1:1/0?{query}")
    assert "secret" not in str(refused.value)


def test_a_bad_examples_value_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess(*ARGS, "--agentckpt-examples=0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--agentckpt-examples must be a positive integer*"])


def test_the_world_fixture_is_a_fresh_world(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_world='''
def test_world(world):
    world.perform("send", {"to": "a"}, idempotency_key=None, honour_key=False, effect=lambda: "ok")
    assert world.count("send", {"to": "a"}) == 1
'''
    )
    pytester.runpytest_subprocess(*ARGS).assert_outcomes(passed=1)


def test_a_failure_s_traceback_ends_at_the_test_s_call_and_other_errors_keep_theirs(pytester: pytest.Pytester) -> None:
    # The report says what failed; the harness's frames (its whole search function, shown
    # in source by pytest) only buried it. An error of another kind keeps every frame.
    pytester.makepyfile(
        AGENTS
        + '''

def test_forgetful():
    fuzz(forgetful, TOOLS, max_examples=20, seed=1)


def test_bad_tools():
    fuzz(forgetful, object(), max_examples=2, seed=1)
'''
    )
    result = pytester.runpytest_subprocess(*ARGS)
    result.assert_outcomes(failed=2)
    output = result.stdout.str()
    forgetful, bad = output.split("_ test_bad_tools _", 1)
    assert "agentckpt: oracle completed_idempotent failed" in forgetful
    assert "def _fuzz_with(" not in forgetful and "_search.py" not in forgetful
    assert "pytest_agentckpt/harness.py" in bad  # the frame that refused the argument
