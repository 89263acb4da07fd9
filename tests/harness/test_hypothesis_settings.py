"""Settings precedence: fuzz arguments, then --agentckpt-* options, then the loaded Hypothesis
profile and --hypothesis-seed, then our profiles; st.from_type for the public types.

Each test runs pytest in a subprocess so that the session settings cannot leak.
"""

from __future__ import annotations

import re

import pytest

pytest_plugins = ["pytester"]

ARGS = ("-p", "no:randomly", "-p", "no:cacheprovider", "-W", "ignore::pytest_agentckpt.UnsafeToolWarning")

CONFTEST = '''
from hypothesis import settings

settings.register_profile("tiny", max_examples=3)
'''

COUNTS = '''
import functools
import reference_agent
from pytest_agentckpt import fuzz
from tests.harness.toolkit import toolbox

REFERENCE = functools.partial(reference_agent.run, retry_backoff=0.0)


def test_default():
    print(f"EXAMPLES={fuzz(REFERENCE, toolbox()).examples}")


def test_explicit():
    print(f"EXPLICIT={fuzz(REFERENCE, toolbox(), max_examples=2).examples}")
'''


def _value(output: str, name: str) -> int:
    match = re.search(rf"{name}=(\d+)", output)
    assert match, output
    return int(match.group(1))


def test_a_loaded_hypothesis_profile_sets_the_examples_and_fuzz_arguments_win(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_counts=COUNTS)
    result = pytester.runpytest_subprocess(*ARGS, "-s", "--hypothesis-profile=tiny")
    result.assert_outcomes(passed=2)
    assert _value(result.stdout.str(), "EXAMPLES") == 3
    assert _value(result.stdout.str(), "EXPLICIT") == 2


def test_agentckpt_options_win_over_the_hypothesis_profile(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_counts=COUNTS)
    result = pytester.runpytest_subprocess(*ARGS, "-s", "--hypothesis-profile=tiny", "--agentckpt-examples=5")
    assert _value(result.stdout.str(), "EXAMPLES") == 5
    assert _value(result.stdout.str(), "EXPLICIT") == 2


def test_settings_load_profile_in_a_conftest_is_honoured(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST + 'settings.load_profile("tiny")\n')
    pytester.makepyfile(test_counts=COUNTS)
    result = pytester.runpytest_subprocess(*ARGS, "-s")
    assert _value(result.stdout.str(), "EXAMPLES") == 3


def test_hypothesis_seed_makes_the_search_reproducible_without_the_database(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_buggy='''
from pytest_agentckpt import OracleFailure, fuzz
from tests.buggy_agents.checkpoint_after_result import run
from tests.harness.toolkit import toolbox


def test_buggy_agent():
    try:
        fuzz(run, toolbox(), shrink=False)  # what is compared is where the search found it
    except OracleFailure as failure:
        print(f"FOUND_AFTER={failure.found_after}")
        raise
'''
    )
    runs = [pytester.runpytest_subprocess(*ARGS, "--hypothesis-seed=1234") for _ in range(2)]
    for result in runs:
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(["agentckpt: seeded by --hypothesis-seed=1234*"])
        assert "reproduce: pytest 'test_buggy.py::test_buggy_agent' --hypothesis-seed=1234" in result.stdout.str()
    assert _value(runs[0].stdout.str(), "FOUND_AFTER") == _value(runs[1].stdout.str(), "FOUND_AFTER")
    assert not (pytester.path / ".hypothesis" / "examples").exists()


def test_from_type_works_for_plan_and_the_fault_types_when_the_plugin_loads(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_types='''
from hypothesis import given, settings, strategies as st
from pytest_agentckpt import CrashAt, FaultPlan, Plan


@settings(max_examples=5)
@given(st.from_type(Plan), st.from_type(FaultPlan), st.from_type(CrashAt))
def test_types(plan, faults, crash):
    assert isinstance(plan, Plan) and isinstance(faults, FaultPlan) and isinstance(crash, CrashAt)
'''
    )
    pytester.runpytest_subprocess(*ARGS).assert_outcomes(passed=1)


def test_an_agent_thread_that_uses_random_between_examples_is_no_strategy_warning() -> None:
    # A runtime the agent starts (a queue poller with jitter) draws from the global random
    # in its own thread while Hypothesis draws the next scenario. Hypothesis took that for
    # the harness's strategy using random (a HypothesisDeprecationWarning at every run,
    # an error under -W error). The harness's strategies never use it.
    import functools
    import random
    import threading
    import warnings

    from hypothesis.database import InMemoryExampleDatabase
    from hypothesis.errors import HypothesisDeprecationWarning

    import reference_agent
    from pytest_agentckpt import fuzz

    from .toolkit import toolbox

    stop = threading.Event()

    def poller() -> None:
        while not stop.wait(0.0001):
            random.random()

    thread = threading.Thread(target=poller, daemon=True)
    thread.start()
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            fuzz(
                functools.partial(reference_agent.run, retry_backoff=0.0), toolbox(), max_examples=40, seed=1,
                database=InMemoryExampleDatabase(), unsafe_tools="ignore",
            )
    finally:
        stop.set()
        thread.join(5)
    assert not [str(w.message) for w in seen if issubclass(w.category, HypothesisDeprecationWarning)]


@pytest.mark.parametrize("before", [(700, 10, 10), (0, 10, 10), (20_000, 5, 5)], ids=["default", "off", "higher"])
def test_a_search_collects_young_garbage_less_often_and_leaves_the_collector_as_it_was(
    before: tuple[int, int, int],
) -> None:
    import functools
    import gc

    from hypothesis.database import InMemoryExampleDatabase

    import reference_agent
    from pytest_agentckpt import fuzz
    from pytest_agentckpt._search import SEARCH_GC_THRESHOLD

    from .toolkit import toolbox

    seen: list[tuple[tuple[int, int, int], int]] = []

    def agent(*args: object, **kwargs: object) -> object:
        seen.append((gc.get_threshold(), gc.get_freeze_count()))
        return reference_agent.run(*args, retry_backoff=0.0, **kwargs)  # type: ignore[arg-type]

    functools.update_wrapper(agent, reference_agent.run)
    saved = gc.get_threshold()
    gc.set_threshold(*before)
    try:
        fuzz(agent, toolbox(), max_examples=3, seed=1, database=InMemoryExampleDatabase(), unsafe_tools="ignore")
        after = gc.get_threshold()
    finally:
        gc.set_threshold(*saved)
    assert after == before
    assert gc.get_freeze_count() == 0
    expected = (SEARCH_GC_THRESHOLD, *before[1:]) if 0 < before[0] < SEARCH_GC_THRESHOLD else before
    # The examples' runs (the last ones: a run to see whether the agent streams comes first).
    threshold, frozen = seen[-1]
    assert threshold == expected
    assert frozen > 0  # the heap alive before the search is left out of the collector's passes
