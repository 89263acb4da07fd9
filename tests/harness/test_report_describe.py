"""A passing fuzz call's report says what it checked, in one line."""

from __future__ import annotations

import functools
import re

from hypothesis.database import InMemoryExampleDatabase

import reference_agent
from pytest_agentckpt import fuzz
from tests.harness.toolkit import safe_toolbox


def test_a_passing_report_names_the_faults_resumes_and_effects_it_checked() -> None:
    report = fuzz(functools.partial(reference_agent.run, retry_backoff=0.0), safe_toolbox(), max_examples=20, seed=3,
                  database=InMemoryExampleDatabase())
    line = report.describe()
    found = re.fullmatch(
        r"(\d+) scenario\(s\): (\d+) crash\(es\), (\d+) API and (\d+) store fault\(s\) injected, "
        r"(\d+) resume\(s\), (\d+) effect\(s\) checked",
        line,
    )
    assert found, line
    assert int(found.group(1)) == report.examples == report.stats.scenarios
    assert int(found.group(2)) == report.stats.crashes > 0
    assert int(found.group(5)) == report.stats.resumes > 0
    assert str(report) == line
