"""The store fixtures behind chaos mode, and the options: a store URL's password never
reaches the output; a store that keeps its tasks between runs is refused or named; a
warning of opening a store is given once; an option without effect says so."""

from __future__ import annotations

import re

import pytest

pytest_plugins = ["pytester"]

ARGS = ("-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:xdist")


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:hunter2@127.0.0.1:1/test",
        "redis://:hunter2@127.0.0.1:1/0",
        "postgresql://u:hunter2@127.0.0.1:1/test?no_such_parameter=1",
    ],
)
def test_a_store_that_cannot_be_opened_fails_without_printing_its_password(pytester: pytest.Pytester, url: str) -> None:
    pytester.makepyfile(
        test_uses_the_store='''
def test_plain(checkpoint_store):
    pass


def test_through_the_url(checkpoint_store_url, checkpoint_store):
    pass
'''
    )
    # The long traceback with locals: everything pytest would print of a frame's arguments.
    result = pytester.runpytest(*ARGS, "--tb=long", "-l", "-rA", "--agentckpt-store", url)
    result.assert_outcomes(errors=2)
    output = result.stdout.str() + result.stderr.str()
    assert "hunter2" not in output
    assert "agentckpt: cannot open the checkpoint store:" in output
    assert ":***@127.0.0.1:1" in output  # the message names the store, its password hidden


SIMPLE_TEST = '''
import functools
import re

import pytest
import reference_agent
from reference_agent.scripted import Plan, Step, ToolCall

PLAN = Plan(steps=(Step((ToolCall("search", {"query": "keys"}),)),), final_answer="ok")
run = functools.partial(reference_agent.run, retry_backoff=0.0)


@pytest.mark.agentckpt_model(plan=PLAN)
def test_searches_once(anthropic_client, STORE, agentckpt_tools, anthropic_fake):
    assert run("t", "g", client=anthropic_client, store=STORE, tools=agentckpt_tools) == "ok"
'''


def _simple(pytester: pytest.Pytester, store: str = "checkpoint_store", conftest: str = "") -> None:
    from tests.chaos.test_chaos_mode import SUITE

    pytester.makeconftest((SUITE / "conftest.py").read_text() + conftest)
    pytester.makepyfile(test_simple=SIMPLE_TEST.replace("STORE", store))


def test_chaos_mode_refuses_a_store_url_that_keeps_its_tasks_between_runs(pytester: pytest.Pytester) -> None:
    _simple(pytester)
    url = f"sqlite:///{pytester.path / 'chaos.db'}"
    result = pytester.runpytest(*ARGS, "--agentckpt-chaos", "--agentckpt-store", url)
    result.assert_outcomes(errors=1)
    output = result.stdout.str()
    assert "is a store that keeps its checkpoints between runs, so every crash point would start on the task" in output
    assert "leave --agentckpt-store out" in output
    assert "never reached" not in output


def test_a_store_fixture_that_keeps_its_tasks_is_named_as_why_a_point_is_never_reached(pytester: pytest.Pytester) -> None:
    # A store fixture of the team's own, function-scoped, that opens the same file each time.
    conftest = """

from stores import open_store


@pytest.fixture
def checkpoint_store(tmp_path_factory):
    store = open_store(f"sqlite:///{tmp_path_factory.getbasetemp() / 'shared.db'}")
    yield store
    store.close()
"""
    _simple(pytester, conftest=conftest)
    result = pytester.runpytest(*ARGS, "--agentckpt-chaos")
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert re.search(
        r"crash_point_reached: the run never reached crash at \S+ #\d+, which the first run passed: the store "
        r"already held task 't' \(version \d+\) when the rerun started: it keeps its checkpoints between runs",
        output,
    ), output


def test_a_rerun_on_a_store_holding_the_last_runs_tasks_says_so(pytester: pytest.Pytester) -> None:
    _simple(pytester)
    url = f"sqlite:///{pytester.path / 'kept.db'}"
    pytester.runpytest(*ARGS, "--agentckpt-store", url).assert_outcomes(passed=1)
    again = pytester.runpytest(*ARGS, "--agentckpt-store", url)
    output = again.stdout.str()
    assert "StoreNotEmptyWarning: agentckpt: the store of --agentckpt-store (or AGENTCKPT_STORE_URL)" in output
    assert "already holds 1 checkpoint(s) before any test ran ('t'): an earlier run's tasks" in output


def test_a_redis_without_persistence_is_warned_of_once_not_once_per_crash_point(pytester: pytest.Pytester) -> None:
    from pytest_agentckpt.services import redis as redis_service

    if redis_service.find_url() is None:
        pytest.skip("no Redis server")
    _simple(pytester, "any_checkpoint_store")
    # The project's own configuration ignores this warning: shown here again.
    show = ("-W", "default::stores.redis.RedisNotDurableWarning")
    result = pytester.runpytest(*ARGS, *show, "--agentckpt-chaos", "--agentckpt-backends=redis")
    output = result.stdout.str()
    if "RedisNotDurableWarning" not in output:
        pytest.skip("this Redis persists its data: nothing to warn of")
    result.assert_outcomes(passed=1, warnings=1)


def test_chaos_max_points_without_chaos_mode_is_warned_of(pytester: pytest.Pytester) -> None:
    _simple(pytester)
    result = pytester.runpytest(*ARGS, "--agentckpt-chaos-max-points=5")
    result.assert_outcomes(passed=1, warnings=1)
    assert "PytestConfigWarning: --agentckpt-chaos-max-points has no effect here: no test runs in chaos mode" in result.stdout.str()
    # With the option it limits the points, and says nothing.
    result = pytester.runpytest(*ARGS, "--agentckpt-chaos-max-points=5", "--agentckpt-chaos")
    result.assert_outcomes(passed=1)
    assert "has no effect" not in result.stdout.str()


@pytest.mark.parametrize(
    ("variable", "url"),
    [
        ("AGENTCKPT_TEST_POSTGRES_URL", "postgresql://u:hunter2@127.0.0.1:1/test"),
        ("AGENTCKPT_TEST_REDIS_URL", "redis://:hunter2@127.0.0.1:1/0"),
    ],
)
def test_a_backend_url_that_cannot_be_opened_fails_once_without_printing_its_password(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, variable: str, url: str
) -> None:
    # The teardown purged the namespace of a store that never opened: a second error,
    # with a traceback whose frames showed the URL, password and all.
    monkeypatch.setenv(variable, url)
    backend = "postgresql" if "postgres" in url else "redis"
    pytester.makepyfile(test_backend="def test_on_the_backend(any_checkpoint_store):\n    pass\n")
    # In a process of its own: the session this test runs in may have found its server.
    result = pytester.runpytest_subprocess(*ARGS, "--tb=long", "-l", "-rA", f"--agentckpt-backends={backend}")
    output = result.stdout.str() + result.stderr.str()
    assert "hunter2" not in output
    result.assert_outcomes(errors=1)
    assert "ERROR at teardown" not in output
    assert "During handling of the above exception" not in output
