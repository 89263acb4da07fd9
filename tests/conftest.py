"""Test-suite wide settings."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=50, deadline=None)
settings.register_profile(
    "ci", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

#: What this session's own pytest (its options, its xdist worker) puts in the environment.
#: The suite starts pytest in child processes (pytester, ``python -m pytest``), and a child
#: must run as the test wrote it, not as a worker of this session: ``PYTEST_ADDOPTS=-n 2``
#: would turn every child run into an xdist run.
_SESSION_ENV = ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")
#: The entry-point name of LangSmith's pytest plugin.
_LANGSMITH_PLUGIN = "langsmith_plugin"


@pytest.fixture(autouse=True)
def _child_pytest_runs_do_not_inherit_this_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """Child processes started by a test do not inherit this session's pytest environment.

    They do skip LangSmith's pytest plugin (installed with the LangGraph agents of the
    zoo, used by no test): importing it took over a second of each child pytest's start.
    """
    for name in _SESSION_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PYTEST_ADDOPTS", f"-p no:{_LANGSMITH_PLUGIN}")
