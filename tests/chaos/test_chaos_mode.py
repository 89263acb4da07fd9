"""Chaos mode on a team-style suite (``suite/``), run through pytester.

A sound agent's test passes with every crash point exercised; known-buggy agents' tests,
which pass as they are, fail at the points their bug breaks; async agents work; without
the option nothing changes.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import pytest

import reference_agent
from pytest_agentckpt.faults import FaultInjector, FaultyStore, InstrumentedToolbox
from reference_agent.offline import FakeMessagesAPI
from reference_agent.scripted import Plan, PlanModel, Step, ToolCall
from reference_agent.world import World
from stores import open_store
from tests.harness.toolkit import toolbox

pytest_plugins = ["pytester"]

SUITE = Path(__file__).parent / "suite"
ARGS = ("-p", "no:randomly", "-p", "no:cacheprovider", "-W", "ignore::pytest_agentckpt.UnsafeToolWarning")


def _suite(pytester: pytest.Pytester, *modules: str) -> None:
    pytester.makeconftest((SUITE / "conftest.py").read_text())
    for module in modules:
        pytester.makepyfile(**{module: (SUITE / f"{module}.py").read_text()})


def _summary(output: str) -> dict[str, int]:
    found = re.search(
        r"^crash points: (\d+) run(?: of (\d+) found)? \((\d+) passed(?:, (\d+) in doubt)?, (\d+) failed\)", output, re.M
    )
    tests = re.search(r"^tests: (\d+) \((\d+) failed\)", output, re.M)
    resumes = re.search(r"^resumes: (\d+)", output, re.M)
    assert found and tests and resumes, f"no chaos summary in:\n{output}"
    run, of, passed, in_doubt, failed = found.groups()
    return {
        "tests": int(tests.group(1)),
        "tests_failed": int(tests.group(2)),
        "run": int(run),
        "found": int(of or run),
        "passed": int(passed),
        "in_doubt": int(in_doubt or 0),
        "failed": int(failed),
        "resumes": int(resumes.group(1)),
    }


def _fault_points_of(agent: Any, plan: Any, tools: Any) -> int:
    """The fault points one crash-free run passes, counted with the harness's own pieces."""
    injector = FaultInjector()
    api = FakeMessagesAPI(PlanModel(plan))
    api.add_hook(injector.model_hook)
    world = World()
    try:
        answer = agent(
            "t", "g", client=api.client(), store=FaultyStore(open_store("memory://"), injector),
            tools=InstrumentedToolbox(tools, world, injector),
        )
    finally:
        world.close()
    assert answer == plan.final_answer
    return sum(injector.hits.values())


def _report_of(output: str, test: str) -> str:
    """The failure section of ``test`` in pytest's output."""
    match = re.search(rf"_{{3,}} {re.escape(test)} _{{3,}}\n(.*?)(?=\n_{{3,}} |\n={{3,}} )", output, re.S)
    assert match, f"no failure section for {test} in:\n{output}"
    return match.group(1)


def _failing_points(report: str) -> dict[str, str]:
    """``crash at POINT #N`` -> the first oracle it broke, from a report's list."""
    return dict(re.findall(r"^  (crash at \S+ #\d+): (\w+)", report, re.M))


def test_a_sound_agents_test_passes_with_every_crash_point_exercised(pytester: pytest.Pytester) -> None:
    from tests.chaos.suite.test_team_agents import PLAN

    _suite(pytester, "test_team_agents")
    result = pytester.runpytest(*ARGS, "--agentckpt-chaos", "-k", "reference")
    result.assert_outcomes(passed=1)
    counts = _summary(result.stdout.str())
    expected = _fault_points_of(functools.partial(reference_agent.run, retry_backoff=0.0), PLAN, toolbox())
    assert expected > 20
    assert counts == {
        "tests": 1, "tests_failed": 0, "run": expected, "found": expected,
        "passed": expected, "in_doubt": 0, "failed": 0, "resumes": counts["resumes"],
    }
    # Each crash point is one rerun with one crash: at least one resume each.
    assert counts["resumes"] >= expected
    # The body ran: as it is, on the completed task, and per point a crashed attempt,
    # at least one resume and the run of the completed task.
    runs = (pytester.path / "body_runs.txt").read_text().split()
    assert len(runs) >= 2 + 3 * expected


def test_without_the_option_nothing_changes(pytester: pytest.Pytester) -> None:
    _suite(pytester, "test_team_agents")
    pytester.makepyfile(
        conftest=(SUITE / "conftest.py").read_text()
        + """

def pytest_sessionfinish(session):
    Path("chaos_hooks.txt").write_text(str(session.config.pluginmanager.has_plugin("agentckpt-chaos")))
"""
    )
    result = pytester.runpytest(*ARGS)
    result.assert_outcomes(passed=5)  # every agent, the buggy ones too, passes as it is
    assert "agentckpt chaos" not in result.stdout.str()
    runs = (pytester.path / "body_runs.txt").read_text().split()
    assert sorted(runs) == sorted(["reference", "common_design", "checkpoint_after_result", "no_repair", "delete_on_success"])
    # Chaos mode's hooks were never registered: the tests cost nothing extra.
    assert (pytester.path / "chaos_hooks.txt").read_text() == "False"


def test_known_buggy_agents_fail_once_each_at_the_points_their_bug_breaks(pytester: pytest.Pytester) -> None:
    _suite(pytester, "test_team_agents")
    result = pytester.runpytest(*ARGS, "--agentckpt-chaos")
    result.assert_outcomes(passed=1, failed=4)
    output = result.stdout.str()

    # Deleting the checkpoint on success: caught with no crash at all.
    for name in ("common_design", "delete_on_success"):
        report = _report_of(output, f"test_agent_files_the_report[{name}]")
        assert report.startswith("agentckpt chaos: the test passes as it is, but its crash-free run breaks an oracle")
        assert "no crash: completed_idempotent" in report
        assert "timeline of the crash-free run:" in report and "AFTER COMPLETION" in report

    # No intent before an irreversible call: the unkeyed e-mail (the third tool effect)
    # goes out twice after a crash right after it. Crashes before any model reply are harmless.
    report = _report_of(output, "test_agent_files_the_report[checkpoint_after_result]")
    failing = _failing_points(report)
    assert failing.get("crash at after_tool_effect #3") == "no_duplicate_effect", report
    assert set(failing.values()) == {"no_duplicate_effect"}
    assert not any(point.startswith(("crash at iteration_start", "crash at before_model_call")) for point in failing)
    assert "DUPLICATE" in report

    # No repair: a crash between tool_use and tool_result leaves a history the API rejects.
    report = _report_of(output, "test_agent_files_the_report[no_repair]")
    failing = _failing_points(report)
    assert failing.get("crash at before_tool_effect #1") == "valid_sequence", report
    assert "crash at iteration_start #1" not in failing and "crash at before_model_call #1" not in failing
    # Every failing point is listed, and the first one's timeline follows.
    header = re.match(r"agentckpt chaos: (\d+) of (\d+) crash points failed:", report)
    assert header, report
    assert int(header.group(1)) == len(failing) > 1
    first = next(iter(failing))
    assert f"timeline of {first}:" in report
    timeline = report.split(f"timeline of {first}:", 1)[1]
    assert "[a1]" in timeline and "[a2]" in timeline and "CRASH at" in timeline and "INVALID" in timeline
    assert "reproduce: pytest 'test_team_agents.py::test_agent_files_the_report[no_repair]' --agentckpt-chaos --agentckpt-seed=" in report

    counts = _summary(output)
    assert counts["tests"] == 5 and counts["tests_failed"] == 4
    assert counts["failed"] > 0 and counts["passed"] + counts["failed"] == counts["run"]


def test_an_unsafe_tools_repeat_puts_a_point_in_doubt_but_an_agent_bug_still_fails(pytester: pytest.Pytester) -> None:
    # A bot of the team's own, sound but for its unkeyed e-mail: at the two points between
    # the e-mail and the save of its result, no agent can know whether it went out, and
    # the test asserting exactly one e-mail fails there whatever the bot does.
    _suite(pytester, "test_in_doubt")
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", "--agentckpt-chaos")
    result.assert_outcomes(passed=1, failed=2)
    output = result.stdout.str()
    counts = _summary(output)
    # 2 in-doubt points for the sound bot, and for the bot whose bug (the refund's key)
    # does not show there; the bot that gives up fails at those points as well.
    assert counts["in_doubt"] == 4, output
    assert counts["passed"] + counts["in_doubt"] + counts["failed"] == counts["run"]
    assert re.search(r"^in doubt: 4 crash point\(s\) failed the test's assertions only because an unsafe tool", output, re.M)
    assert re.search(r"^unsafe tools: email_customer$", output, re.M)
    assert "UnsafeToolWarning: tool 'email_customer' is unsafe" in output
    assert "test_refund_and_one_email[sound]" not in _failing_tests(output)

    # A refund key made from the attempt: refunded twice, the agent's own bug.
    report = _report_of(output, "test_refund_and_one_email[key_per_attempt]")
    failing = _failing_points(report)
    assert set(failing.values()) == {"no_duplicate_effect"}, failing
    # Its report names its in-doubt points too, apart from the failures.
    doubt = re.search(r"^  in doubt, not failed \(2\): .*unsafe tool email_customer .*\n((?:    crash at .*\n){2})", report, re.M)
    assert doubt, report
    assert not set(re.findall(r"crash at \S+ #\d+", doubt.group(1))) & set(failing), report

    # Giving up on an unknown outcome: wrong with the e-mail's repeat left out too, so the
    # in-doubt points fail with the rest (the e-mail's intent without its effect, and after).
    failing = _failing_points(_report_of(output, "test_refund_and_one_email[gives_up]"))
    assert {"crash at after_tool_effect #3", "crash at before_checkpoint_write #9"} <= set(failing), failing
    assert set(failing.values()) == {"test_assertions"}


def _failing_tests(output: str) -> set[str]:
    return set(re.findall(r"^FAILED \S+::(\S+)", output, re.M))


def test_async_agents_tests_pass_under_chaos_mode(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_async_team=(SUITE / "test_async_team.py").read_text())
    result = pytester.runpytest(*ARGS, "--agentckpt-chaos")
    result.assert_outcomes(passed=2)
    counts = _summary(result.stdout.str())
    assert counts["tests"] == 2 and counts["failed"] == 0
    # Each test: the model twice, two tools, saves around them: many points, all passed.
    assert counts["run"] == counts["passed"] >= 2 * 10
    assert "Task exception was never retrieved" not in result.stdout.str() + result.stderr.str()


def test_beyond_max_points_a_seeded_sample_runs_and_the_seed_is_printed(pytester: pytest.Pytester) -> None:
    _suite(pytester, "test_team_agents")
    args = (*ARGS, "--agentckpt-chaos", "--agentckpt-chaos-max-points=4", "--agentckpt-seed=11", "-k", "no_repair")
    first = pytester.runpytest(*args)
    first.assert_outcomes(failed=1)
    output = first.stdout.str()
    first.stdout.fnmatch_lines(["agentckpt chaos: a crash at every fault point of each test (at most 4 per test; beyond, a sample drawn with seed 11)"])
    counts = _summary(output)
    assert counts["run"] == 4 and counts["found"] > counts["run"]
    report = _report_of(output, "test_agent_files_the_report[no_repair]")
    assert re.search(r"crash points failed \(a sample of 4 of \d+ points, seed \d+\)", report), report
    again = pytester.runpytest(*args)
    assert _failing_points(_report_of(again.stdout.str(), "test_agent_files_the_report[no_repair]")) == _failing_points(report)


def test_the_marker_opts_a_test_in_or_out(pytester: pytest.Pytester) -> None:
    pytester.makeconftest((SUITE / "conftest.py").read_text())
    pytester.makepyfile(
        test_marked='''
import functools
import pytest
import reference_agent
from reference_agent.scripted import Plan, Step, ToolCall

PLAN = Plan(steps=(Step((ToolCall("search", {"query": "keys"}),)),), final_answer="ok")
run = functools.partial(reference_agent.run, retry_backoff=0.0)


@pytest.mark.agentckpt_chaos(max_points=3)
@pytest.mark.agentckpt_model(plan=PLAN)
def test_opted_in(anthropic_client, checkpoint_store, agentckpt_tools):
    assert run("t", "g", client=anthropic_client, store=checkpoint_store, tools=agentckpt_tools) == "ok"


@pytest.mark.agentckpt_chaos(False)
@pytest.mark.agentckpt_model(plan=PLAN)
def test_opted_out(anthropic_client, checkpoint_store, agentckpt_tools, anthropic_fake):
    run("t", "g", client=anthropic_client, store=checkpoint_store, tools=agentckpt_tools)
    assert anthropic_fake.model_calls == 2


@pytest.mark.agentckpt_chaos
def test_marked_without_the_fixtures():
    pass
'''
    )
    result = pytester.runpytest(*ARGS)  # no --agentckpt-chaos: the marker alone
    # A marked test that chaos mode cannot run is a setup error that says why.
    result.assert_outcomes(passed=2, errors=1)
    output = result.stdout.str()
    assert "must use a client of the fake API (anthropic_client or async_anthropic_client or anthropic_intercept) and a checkpoint store" in output
    counts = _summary(output)
    assert counts["tests"] == 1 and counts["run"] == 3
    result = pytester.runpytest(*ARGS, "--agentckpt-chaos", "-k", "opted_out")
    result.assert_outcomes(passed=1)
    assert not re.search(r"^=+ agentckpt chaos", result.stdout.str(), re.M)


def test_a_store_fixture_of_wider_scope_is_refused_with_what_to_do(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        (SUITE / "conftest.py").read_text()
        + '''

from stores import open_store


@pytest.fixture(scope="session")
def checkpoint_store():
    return open_store("memory://shared")
'''
    )
    pytester.makepyfile(
        test_wide='''
import pytest
import reference_agent
from reference_agent.scripted import Plan

@pytest.mark.agentckpt_model(plan=Plan((), "ok"))
def test_it(anthropic_client, checkpoint_store, agentckpt_tools):
    assert reference_agent.run("t", "g", client=anthropic_client, store=checkpoint_store, tools=agentckpt_tools) == "ok"
'''
    )
    result = pytester.runpytest(*ARGS, "--agentckpt-chaos")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*agentckpt chaos: the checkpoint store fixture of this test is not function-scoped*"])


def test_the_totals_of_xdist_workers_are_summed(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makeconftest((SUITE / "conftest.py").read_text())
    pytester.makepyfile(
        test_two='''
import functools
import pytest
import reference_agent
from reference_agent.scripted import Plan, Step, ToolCall

PLAN = Plan(steps=(Step((ToolCall("search", {"query": "keys"}),)),), final_answer="ok")
run = functools.partial(reference_agent.run, retry_backoff=0.0)


@pytest.mark.parametrize("task", ["a", "b"])
@pytest.mark.agentckpt_model(plan=PLAN)
def test_one_search(task, anthropic_client, checkpoint_store, agentckpt_tools):
    assert run(task, "g", client=anthropic_client, store=checkpoint_store, tools=agentckpt_tools) == "ok"
'''
    )
    result = pytester.runpytest_subprocess(*ARGS, "--agentckpt-chaos", "-n", "2")
    result.assert_outcomes(passed=2)
    output = result.stdout.str()
    assert "agentckpt chaos (total of 2 workers)" in output
    plan = Plan(steps=(Step((ToolCall("search", {"query": "keys"}),)),), final_answer="ok")
    points = _fault_points_of(functools.partial(reference_agent.run, retry_backoff=0.0), plan, toolbox())
    counts = _summary(output)
    assert (counts["tests"], counts["run"], counts["passed"], counts["failed"]) == (2, 2 * points, 2 * points, 0)


def test_fixtures_of_the_backends_and_tmp_path_are_set_up_fresh_for_each_point(pytester: pytest.Pytester) -> None:
    pytester.makeconftest((SUITE / "conftest.py").read_text())
    pytester.makepyfile(
        test_backends='''
import functools
import pytest
import reference_agent
from reference_agent.scripted import Plan, Step, ToolCall

PLAN = Plan(steps=(Step((ToolCall("write_record", {"key": "a"}),)),), final_answer="ok")
run = functools.partial(reference_agent.run, retry_backoff=0.0)
DIRS = set()


@pytest.mark.agentckpt_model(plan=PLAN)
def test_on_sqlite(anthropic_client, any_checkpoint_store, agentckpt_tools, tmp_path):
    DIRS.add(tmp_path)
    assert run("t", "g", client=anthropic_client, store=any_checkpoint_store, tools=agentckpt_tools) == "ok"


def test_each_point_had_its_own_tmp_path():
    assert len(DIRS) > 10
'''
    )
    result = pytester.runpytest(*ARGS, "--agentckpt-chaos", "--agentckpt-backends=sqlite")
    result.assert_outcomes(passed=2)
    counts = _summary(result.stdout.str())
    assert counts["tests"] == 1 and counts["run"] == counts["passed"] > 10


def test_bad_marker_arguments_are_setup_errors_that_say_what_is_expected(pytester: pytest.Pytester) -> None:
    pytester.makeconftest((SUITE / "conftest.py").read_text())
    pytester.makepyfile(
        test_bad='''
import pytest

@pytest.mark.agentckpt_chaos(max_points=0)
def test_zero(anthropic_client, checkpoint_store):
    pass

@pytest.mark.agentckpt_chaos(points=3)
def test_unknown(anthropic_client, checkpoint_store):
    pass
'''
    )
    result = pytester.runpytest(*ARGS)
    result.assert_outcomes(errors=2)
    output = result.stdout.str()
    assert "@pytest.mark.agentckpt_chaos: max_points must be an integer >= 1, not 0" in output
    assert "@pytest.mark.agentckpt_chaos: unknown argument(s) ['points']; expected enabled, max_points, max_resumes" in output


def test_the_marker_leaves_out_the_oracles_a_design_breaks_on_purpose(pytester: pytest.Pytester) -> None:
    # A design that deletes its checkpoint on success redoes a finished task when the same
    # id runs again: completed_idempotent fails, as documented. A team that chose it says
    # so on the marker, and every other oracle still judges each crash point.
    pytester.makeconftest((SUITE / "conftest.py").read_text())
    pytester.makepyfile(
        test_deleting='''
import pytest
from reference_agent.scripted import Plan, Step, ToolCall
from tests.buggy_agents import delete_on_success

PLAN = Plan(steps=(Step((ToolCall("search", {"query": "keys"}),)),), final_answer="ok")


@pytest.mark.agentckpt_chaos(max_points=4, ignore_oracles=["completed_idempotent"])
@pytest.mark.agentckpt_model(plan=PLAN)
def test_chosen(anthropic_client, checkpoint_store, agentckpt_tools):
    assert delete_on_success.run("t", "g", client=anthropic_client, store=checkpoint_store, tools=agentckpt_tools) == "ok"


@pytest.mark.agentckpt_chaos(max_points=4)
@pytest.mark.agentckpt_model(plan=PLAN)
def test_not_chosen(anthropic_client, checkpoint_store, agentckpt_tools):
    assert delete_on_success.run("t", "g", client=anthropic_client, store=checkpoint_store, tools=agentckpt_tools) == "ok"


@pytest.mark.agentckpt_chaos(ignore_oracles=["no_such_oracle"])
@pytest.mark.agentckpt_model(plan=PLAN)
def test_misspelt(anthropic_client, checkpoint_store, agentckpt_tools):
    pass
'''
    )
    result = pytester.runpytest(*ARGS)
    output = result.stdout.str()
    result.assert_outcomes(passed=1, failed=1, errors=1)
    assert "completed_idempotent" in _report_of(output, "test_not_chosen")
    assert "ignore_oracles: unknown ['no_such_oracle']" in output
