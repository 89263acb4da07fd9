"""Progress of long fuzz calls: live on a terminal, a line every few seconds in logs, none when short."""

from __future__ import annotations

import pytest

from pytest_agentckpt import _progress

pytest_plugins = ["pytester"]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _run(live: bool, seconds: float, examples: int) -> list[str]:
    written: list[str] = []
    clock = Clock()
    progress = _progress.Progress("t::test", examples, clock=clock, out=_progress.Sink(written.append, live))
    for done in range(1, examples + 1):
        clock.now += seconds / examples
        progress.tick(done, crashes=done // 2, violations=0)
    progress.close()
    return written


def test_a_short_call_shows_nothing() -> None:
    assert _run(live=True, seconds=4.0, examples=40) == []
    assert _run(live=False, seconds=4.0, examples=40) == []


def test_a_long_call_in_a_log_prints_a_line_every_few_seconds() -> None:
    lines = _run(live=False, seconds=60.0, examples=600)
    # From 5 s on, one every 10 s: at about 5, 15, 25, 35, 45, 55 s.
    assert 5 <= len(lines) <= 7
    assert all(line.endswith("\n") and "\r" not in line for line in lines)
    assert lines[-1].startswith("agentckpt: t::test: ")
    assert "/600 examples, " in lines[-1] and "crashes injected, 0 violations so far, 10.0 examples/s" in lines[-1]


def test_after_the_first_failure_the_line_says_what_the_scenarios_are_for() -> None:
    # Shrinking and the search for other oracles run scenarios past the examples' total.
    written: list[str] = []
    clock = Clock()
    progress = _progress.Progress("t::test", 50, clock=clock, out=_progress.Sink(written.append, False))
    progress.found_after = 12
    clock.now += 30.0
    progress.tick(118, crashes=40, violations=9)
    assert written == [
        "agentckpt: t::test: failure found after 12 examples; shrinking it and searching for other "
        "oracles: 118 scenarios run, 3.9/s\n"
    ]


def test_a_systematic_call_counts_plans_against_its_total_and_scenarios_apart() -> None:
    # max_examples counts plans there; each plan runs a scenario per fault point (before,
    # the line read "251/20 examples").
    written: list[str] = []
    clock = Clock()
    progress = _progress.Progress("t::test", 20, clock=clock, out=_progress.Sink(written.append, False), systematic=True)
    progress.plans = 3
    clock.now += 30.0
    progress.tick(251, crashes=251, violations=0)
    assert written == ["agentckpt: t::test: 3/20 plans, 251 single-crash scenarios, 0 violations so far, 8.4 scenarios/s\n"]


def test_a_long_call_on_a_terminal_redraws_one_live_line_and_ends_it() -> None:
    written = _run(live=True, seconds=20.0, examples=200)
    assert len(written) > 10
    assert all(text.startswith("\r") for text in written[:-1])
    assert written[-1] == "\n"


def test_a_pytest_run_of_a_short_fuzz_call_prints_no_progress_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_short='''
from pytest_agentckpt import _progress, fuzz
from tests.buggy_agents.delete_on_success import run
from tests.harness.toolkit import safe_toolbox


def test_the_plugin_sends_progress_to_the_terminal():
    assert _progress.sink is not None
'''
    )
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    result.assert_outcomes(passed=1)
    assert "examples/s" not in result.stdout.str()


def test_in_a_pytest_log_the_progress_line_gets_past_the_output_capture(pytester: pytest.Pytester) -> None:
    # The thresholds lowered, so that a short run shows what a long one would.
    pytester.makeconftest("from pytest_agentckpt import _progress\n_progress.QUIET_FOR = 0.0\n_progress.LOG_EVERY = 0.0\n")
    pytester.makepyfile(
        test_long='''
import functools
import reference_agent
from pytest_agentckpt import fuzz
from tests.harness.toolkit import safe_toolbox


def test_long():
    fuzz(functools.partial(reference_agent.run, retry_backoff=0.0), safe_toolbox(), max_examples=5, seed=1)
'''
    )
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-W", "ignore")
    result.assert_outcomes(passed=1)
    # Each line on a line of its own: the first one not glued to pytest's "test_long.py ".
    result.stdout.fnmatch_lines(["agentckpt: test_long.py::test_long: 5/5 examples, * crashes injected, 0 violations so far, * examples/s"])
    lines = result.stdout.lines
    assert not [line for line in lines if "agentckpt: test_long.py" in line and not line.startswith("agentckpt: ")], lines
    first = next(i for i, line in enumerate(lines) if line.startswith("agentckpt: test_long.py"))
    assert lines[first - 1].rstrip() == "test_long.py", lines  # the file's line was ended first


def test_a_session_inside_the_session_gives_the_outer_sink_back(pytester: pytest.Pytester) -> None:
    # pytester's inline runs start a whole session in this process: its terminal writer is
    # closed when it ends, so the outer session's fuzz calls must not write to it.
    before = _progress.sink
    pytester.makepyfile("def test_nothing():\n    pass\n")
    pytester.runpytest_inprocess("-p", "no:randomly").assert_outcomes(passed=1)
    assert _progress.sink is before


def test_a_writer_that_went_away_silences_progress_instead_of_failing_the_run() -> None:
    def closed(text: str) -> None:
        raise ValueError("I/O operation on closed file.")

    clock = Clock()
    progress = _progress.Progress("t::test", 10, clock=clock, out=_progress.Sink(closed, live=True))
    clock.now += 60
    progress.tick(5, crashes=1, violations=0)  # would raise without the guard
    progress.close()
    assert progress.out is None
