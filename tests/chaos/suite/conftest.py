"""A team's conftest: the toolbox its agents use, and a log of every run of a test body."""

from __future__ import annotations

from pathlib import Path

import pytest

from reference_agent.toolbox import Toolbox
from tests.harness.toolkit import toolbox


@pytest.fixture
def agentckpt_tools() -> Toolbox:
    return toolbox()


@pytest.fixture
def body_runs(request: pytest.FixtureRequest) -> Path:
    """A file each test body appends a line to (how often chaos mode called it)."""
    return Path(str(request.config.rootpath)) / "body_runs.txt"
