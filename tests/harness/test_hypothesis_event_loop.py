"""``fuzz`` called from a running event loop (an ``async def`` test) runs in a worker thread."""

from __future__ import annotations

import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt.harness import OracleFailure, fuzz
from tests.buggy_agents.delete_on_success import run as forgets_completion

from .async_agent import run as async_run
from .toolkit import safe_toolbox, toolbox


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_fuzz_of_an_async_agent_inside_an_async_test_passes() -> None:
    report = fuzz(async_run, safe_toolbox(), max_examples=5, seed=1, database=InMemoryExampleDatabase())
    assert report.examples == 5


@pytest.mark.anyio
async def test_a_failure_inside_an_async_test_is_the_agents_oracle_not_a_loop_error() -> None:
    with pytest.raises(OracleFailure) as caught:
        fuzz(forgets_completion, toolbox(), max_examples=20, seed=1, database=InMemoryExampleDatabase())
    assert caught.value.oracle == "completed_idempotent"
    assert "running event loop" not in str(caught.value)
