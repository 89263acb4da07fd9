"""What chaos mode cannot see, it says: a history outside ``checkpoint.messages`` (until
``agentckpt_history`` says where it is), and tool calls that bypass ``agentckpt_tools``."""

from __future__ import annotations

import re

import pytest

from tests.chaos.test_chaos_mode import SUITE, _failing_points, _report_of, _summary

pytest_plugins = ["pytester"]

ARGS = ("-p", "no:randomly", "-p", "no:cacheprovider", "-W", "ignore::pytest_agentckpt.UnsafeToolWarning")
HISTORY_HOOK = '''

from tests.chaos.suite.event_sourced import history_of


@pytest.fixture
def agentckpt_history():
    return history_of
'''


def _event_sourced_suite(pytester: pytest.Pytester, conftest: str = "") -> None:
    pytester.makeconftest((SUITE / "conftest.py").read_text() + conftest)
    pytester.makepyfile(test_event_sourced=(SUITE / "test_event_sourced.py").read_text())


def test_a_history_outside_the_messages_is_warned_of_not_passed_silently(pytester: pytest.Pytester) -> None:
    _event_sourced_suite(pytester)
    result = pytester.runpytest(*ARGS, "--agentckpt-chaos")
    # The planted bug (a saved reply dropped on load, the model asked again) is invisible
    # without the history: both pass, but not silently.
    result.assert_outcomes(passed=2, warnings=2)
    output = result.stdout.str()
    assert "NotCheckableWarning: agentckpt: recorded_work_not_redone was not checkable" in output
    assert "none held the message history where chaos mode looks (checkpoint.messages)" in output
    assert "overriding the agentckpt_history fixture" in output
    strict = pytester.runpytest(*ARGS, "--agentckpt-chaos", "-W", "error::pytest_agentckpt.NotCheckableWarning")
    strict.assert_outcomes(failed=2)
    # The warning's text alone, not a traceback through the plugin's hook (an outside round).
    assert "NotCheckableWarning: agentckpt: recorded_work_not_redone was not checkable" in strict.stdout.str()
    assert "fixtures/chaos.py" not in strict.stdout.str()


def test_with_agentckpt_history_the_event_sourced_agents_bug_is_caught(pytester: pytest.Pytester) -> None:
    _event_sourced_suite(pytester, HISTORY_HOOK)
    result = pytester.runpytest(*ARGS, "--agentckpt-chaos", "-W", "error::pytest_agentckpt.NotCheckableWarning")
    result.assert_outcomes(passed=1, failed=1)
    output = result.stdout.str()
    assert "NotCheckableWarning" not in output
    failing = _failing_points(_report_of(output, "test_event_sourced_agent_files_the_record[redoes_a_turn]"))
    assert "recorded_work_not_redone" in failing.values(), failing
    assert _summary(output)["tests_failed"] == 1


def test_an_agentckpt_history_that_finds_nothing_is_warned_of(pytester: pytest.Pytester) -> None:
    _event_sourced_suite(pytester, "\n\n@pytest.fixture\ndef agentckpt_history():\n    return lambda checkpoint: checkpoint.artifacts['nope']\n")
    result = pytester.runpytest(*ARGS, "--agentckpt-chaos", "-k", "sound")
    result.assert_outcomes(passed=1, warnings=1)
    assert re.search(
        r"the function of the agentckpt_history fixture found no messages in any of the \d+ checkpoint\(s\) "
        r"the agent wrote \(it raised on \d+ of them; the first time KeyError: 'nope'\)",
        result.stdout.str(),
    ), result.stdout.str()


def test_a_test_that_builds_its_own_toolbox_is_warned_of(pytester: pytest.Pytester) -> None:
    # The tools the agent gets are not agentckpt_tools: no effect is seen, so the e-mail
    # this agent sends twice after a crash passes every point; not silently.
    pytester.makeconftest((SUITE / "conftest.py").read_text())
    pytester.makepyfile(
        test_own_tools='''
import pytest
from reference_agent.scripted import Plan, Step, ToolCall
from tests.buggy_agents import checkpoint_after_result
from tests.harness.toolkit import toolbox

PLAN = Plan(steps=(Step((ToolCall("send_email", {"to": "ann"}),)),), final_answer="sent")


@pytest.mark.agentckpt_model(plan=PLAN)
def test_own_toolbox(anthropic_client, checkpoint_store):
    answer = checkpoint_after_result.run("t", "g", client=anthropic_client, store=checkpoint_store, tools=toolbox())
    assert answer == "sent"


@pytest.mark.agentckpt_model(plan=PLAN)
def test_fixture_toolbox(anthropic_client, checkpoint_store, agentckpt_tools):
    answer = checkpoint_after_result.run("t", "g", client=anthropic_client, store=checkpoint_store, tools=agentckpt_tools)
    assert answer == "sent"
'''
    )
    result = pytester.runpytest(*ARGS, "--agentckpt-chaos")
    result.assert_outcomes(passed=1, failed=1)  # through agentckpt_tools, the duplicate is caught
    output = result.stdout.str()
    assert "no_duplicate_effect" in _report_of(output, "test_fixture_toolbox")
    # Once for the test, for both oracles it leaves unjudged.
    warned = re.findall(r"NotCheckableWarning: agentckpt: (.*?) not checkable: the model asked for send_email, but no tool call went through the toolbox of the agentckpt_tools fixture", output)
    assert warned == ["no_duplicate_effect and recorded_work_not_redone were"], output
    assert "pass the agentckpt_tools fixture's value to the agent" in output
    assert re.search(r"test_own_tools.py::test_own_toolbox\n", output) and "test_own_tools.py::test_fixture_toolbox\n" not in output
