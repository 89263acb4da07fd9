"""The team's conftest of docs/chaos.md: which toolbox the agent uses.

The plugin wraps the value of ``agentckpt_tools`` in chaos mode; the tools act on
``reports``, the team's own stand-in for the systems they change.
"""

from __future__ import annotations

import pytest

from reference_agent.toolbox import Toolbox, tool


# --8<-- [start:tools]
def make_toolbox(reports: dict[str, str]) -> Toolbox:
    @tool()
    def lookup(quarter: str) -> str:
        """Read the sales figures of a quarter (read-only)."""
        return f"{quarter}: 1.2M"

    @tool(irreversible=True, idempotent=True)
    def file_report(quarter: str, idempotency_key: str | None = None) -> str:
        """File the quarter's report (irreversible; honours idempotency keys)."""
        reports[quarter] = f"report for {quarter}"
        return f"report for {quarter} filed"

    return Toolbox([lookup, file_report])


@pytest.fixture
def reports() -> dict[str, str]:
    return {}


@pytest.fixture
def agentckpt_tools(reports: dict[str, str]) -> Toolbox:
    return make_toolbox(reports)
# --8<-- [end:tools]
