"""The report of a test whose own assertions alone fail after a crash."""

from __future__ import annotations

import re

import pytest

from tests.chaos.test_chaos_mode import SUITE, _report_of

pytest_plugins = ["pytester"]

ARGS = ("-p", "no:randomly", "-p", "no:cacheprovider", "-W", "ignore::pytest_agentckpt.UnsafeToolWarning")


def test_fragile_assertions_get_a_hint_and_their_whole_difference(pytester: pytest.Pytester) -> None:
    pytester.makeconftest((SUITE / "conftest.py").read_text())
    pytester.makepyfile(
        test_fragile='''
import functools
import pytest
import reference_agent
from reference_agent.scripted import Plan, Step, ToolCall

PLAN = Plan(
    steps=(Step((ToolCall("search", {"query": "keys"}),)), Step((ToolCall("write_record", {"key": "a"}),))),
    final_answer="ok",
)
run = functools.partial(reference_agent.run, retry_backoff=0.0)


@pytest.mark.agentckpt_model(plan=PLAN)
def test_counts_the_tools_called(anthropic_client, checkpoint_store, agentckpt_tools, anthropic_requests):
    assert run("t", "g", client=anthropic_client, store=checkpoint_store, tools=agentckpt_tools) == "ok"
    # Fragile: a resume repeats the search (read-only) and asks the model again.
    called = [b["name"] for r in anthropic_requests for m in r.request["messages"] if m["role"] == "assistant"
              for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
    assert called == ["search", "search", "write_record"]
'''
    )
    result = pytester.runpytest(*ARGS, "--agentckpt-chaos")
    result.assert_outcomes(failed=1)
    report = _report_of(result.stdout.str(), "test_counts_the_tools_called")
    assert set(re.findall(r"^  crash at \S+ #\d+: (\w+)", report, re.M)) == {"test_assertions"}, report
    assert "only the test's own assertions failed: the oracles found nothing wrong at these points" in report
    assert "new tool_use id (ending _g1)" in report and "@pytest.mark.agentckpt_chaos(False)" in report
    # The whole assertion, its values uncut, below the list.
    full = report.split("in full:", 1)[1]
    assert re.search(r"AssertionError: assert \[('search', ){2,}.*'write_record'.*\] == \['search', 'search', 'write_record'\]", full), report



def test_a_long_assertion_is_shown_whole_below_the_points(pytester: pytest.Pytester) -> None:
    # "in full" used to stop at 40 lines with "... (N more lines)": pytest's diff of two long
    # lists, the part that says what differs, came after the cut.
    pytester.makeconftest((SUITE / "conftest.py").read_text())
    pytester.makepyfile(
        test_long='''
import functools
import pytest
import reference_agent
from reference_agent.scripted import Plan, Step, ToolCall

PLAN = Plan(steps=(Step((ToolCall("search", {"query": "keys"}),)),), final_answer="ok")
run = functools.partial(reference_agent.run, retry_backoff=0.0)


@pytest.mark.agentckpt_model(plan=PLAN)
def test_one_model_call_per_turn(anthropic_client, checkpoint_store, agentckpt_tools, anthropic_requests):
    assert run("t", "g", client=anthropic_client, store=checkpoint_store, tools=agentckpt_tools) == "ok"
    assert len(anthropic_requests) == 2, "\\n".join(f"detail line {i}" for i in range(60))
'''
    )
    result = pytester.runpytest(*ARGS, "--agentckpt-chaos")
    result.assert_outcomes(failed=1)
    report = _report_of(result.stdout.str(), "test_one_model_call_per_turn")
    full = report.split("the test's assertion at", 1)[1].split("timeline of", 1)[0]
    assert "detail line 59" in full and "more lines" not in full, report
    # Each point's own line stays one line.
    assert "detail line 1\n" not in report.split("the test's assertion at", 1)[0], report


def test_a_failing_point_names_each_other_oracle_once_and_never_its_first_again() -> None:
    # "no_duplicate_effect (also no_duplicate_effect, test_assertions)", an outside round saw.
    from types import SimpleNamespace

    from pytest_agentckpt.chaos import ChaosTest, PointResult
    from pytest_agentckpt.faults import FaultPlan
    from pytest_agentckpt.oracles import Violation
    from pytest_agentckpt.timeline import Timeline

    point = PointResult(FaultPlan(), Timeline())
    point.violations = [
        Violation("no_duplicate_effect", "charge_card twice"),
        Violation("no_duplicate_effect", "again"),
        Violation("test_assertions", "assert failed"),
    ]
    fake = SimpleNamespace(results=[point], seed=0, reproduce="")
    report = ChaosTest._report(fake, [point])  # type: ignore[arg-type]
    assert "no_duplicate_effect (also test_assertions): charge_card twice" in report, report


def test_caplog_and_capsys_see_each_rerun_of_the_body_and_only_its_own(pytester: pytest.Pytester) -> None:
    # The reruns ran outside pytest's capture of the call phase: caplog kept the first
    # run's records and capsys saw nothing, so a sound agent's test that logs or prints its
    # answer failed (an outside round). Each run of the body now sees only its own.
    pytester.makeconftest((SUITE / "conftest.py").read_text())
    pytester.makepyfile(
        test_captures='''
import functools
import logging
import pytest
import reference_agent
from reference_agent.scripted import Plan, Step, ToolCall

PLAN = Plan(steps=(Step((ToolCall("write_record", {"key": "a"}),)),), final_answer="ok")
run = functools.partial(reference_agent.run, retry_backoff=0.0)
log = logging.getLogger("team.agent")


@pytest.mark.agentckpt_model(plan=PLAN)
def test_logs_its_answer(anthropic_client, checkpoint_store, agentckpt_tools, caplog):
    caplog.set_level(logging.INFO, logger="team.agent")
    log.info("answer: %s", run("t", "g", client=anthropic_client, store=checkpoint_store, tools=agentckpt_tools))
    assert caplog.messages == ["answer: ok"]  # this run's record alone, never a crashed one's


@pytest.mark.agentckpt_model(plan=PLAN)
def test_prints_its_answer(anthropic_client, checkpoint_store, agentckpt_tools, capsys):
    print(run("t", "g", client=anthropic_client, store=checkpoint_store, tools=agentckpt_tools))
    assert capsys.readouterr().out == "ok\\n"
'''
    )
    result = pytester.runpytest(*ARGS, "--agentckpt-chaos")
    result.assert_outcomes(passed=2)
    assert re.search(r"crash points: (\d+) run \(\1 passed, 0 failed\)", result.stdout.str()), result.stdout.str()


def test_a_test_left_out_because_it_has_no_store_fixture_is_named_in_the_summary(pytester: pytest.Pytester) -> None:
    # It passed under --agentckpt-chaos as if chaos mode had judged it (an outside round).
    pytester.makeconftest((SUITE / "conftest.py").read_text())
    pytester.makepyfile(
        test_own_store='''
import functools
import pytest
import reference_agent
from reference_agent.scripted import Plan, Step, ToolCall
from stores import open_store

PLAN = Plan(steps=(Step((ToolCall("search", {"query": "q"}),)),), final_answer="ok")
run = functools.partial(reference_agent.run, retry_backoff=0.0)


@pytest.mark.agentckpt_model(plan=PLAN)
def test_with_its_own_store(anthropic_client, agentckpt_tools):
    assert run("t", "g", client=anthropic_client, store=open_store("memory://"), tools=agentckpt_tools) == "ok"


@pytest.mark.agentckpt_model(plan=PLAN)
@pytest.mark.agentckpt_chaos(False)
def test_left_out_on_purpose(anthropic_client, agentckpt_tools):
    assert run("t", "g", client=anthropic_client, store=open_store("memory://"), tools=agentckpt_tools) == "ok"
'''
    )
    result = pytester.runpytest(*ARGS, "--agentckpt-chaos")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert "not in chaos mode: 1 test(s) use the fake API's client but none of the store fixtures" in out, out
    assert "test_with_its_own_store" in out and "test_left_out_on_purpose" not in out.split("not in chaos mode")[1]
