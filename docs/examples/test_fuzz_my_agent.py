"""Fuzzing an agent's resume: the example of docs/fuzzing.md.

Run it with ``pytest docs/examples/test_fuzz_my_agent.py``. The reference agent stands in
for yours: it keeps the same contract, ``run(task_id, goal, *, client, store, tools)``.
The test suite runs this file too.
"""

from __future__ import annotations

from typing import Literal

# --8<-- [start:tools]
from reference_agent import Toolbox, tool


@tool()
def find_flight(to: Literal["LIS", "OSL"]) -> str:
    """Find the cheapest flight to an airport (read only: safe to run again)."""
    return f"flight AB123 to {to}, 89 EUR"


@tool(irreversible=True, idempotent=True)
def book_flight(flight: Literal["AB123"], idempotency_key: str | None = None) -> str:
    """Book a flight. Irreversible, and honours idempotency keys: a retry with the same
    key books nothing new, so a resumed agent can always settle it."""
    return f"booked {flight}"


def make_toolbox() -> Toolbox:
    return Toolbox([find_flight, book_flight])


# --8<-- [end:tools]

# --8<-- [start:fuzz]
from pytest_agentckpt import fuzz  # noqa: E402
from reference_agent import run as my_agent  # noqa: E402  (your agent here)


def test_my_agent_survives_crashes() -> None:
    report = fuzz(my_agent, make_toolbox(), max_examples=25)
    assert report.stats.crashes > 0  # it was crashed, resumed, and every oracle held


# --8<-- [end:fuzz]

# --8<-- [start:strategies]
from hypothesis import given, settings  # noqa: E402

from pytest_agentckpt.strategies import message_histories, truncations  # noqa: E402
from reference_agent import repair_history, validate_messages  # noqa: E402


@settings(max_examples=25)
@given(message_histories())
def test_repair_makes_every_crash_state_sendable(messages: list[dict[str, object]]) -> None:
    for damaged in truncations(messages):
        validate_messages(repair_history(damaged), allow_prefill=True)


# --8<-- [end:strategies]
