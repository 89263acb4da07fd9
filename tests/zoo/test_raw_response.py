"""Agents that read response headers and handle API errors themselves
(``tests/zoo/raw_response_agents.py``).

The fake sends the API's ``anthropic-ratelimit-*`` headers on every generation (before,
only ``request-id``: an agent reading them as the API always sends them failed its
crash-free run with a ``KeyError``). The opt-in ``api_outage`` fault fails a model call
for longer than the SDK retries; before it, at most one API fault per scenario came, so
an agent that closes the task with an apology once its retries are spent was never
caught."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest
from hypothesis.database import InMemoryExampleDatabase

from pytest_agentckpt import DEFAULT_FAULT_KINDS, ApiFault, FaultPlan, OracleFailure, Plan, replay
from pytest_agentckpt.faults import FaultInjector
from pytest_agentckpt.harness import fuzz
from tests.harness.toolkit import toolbox

from ._base import Loop, agent
from .raw_response_agents import SOUND, TWINS
from .test_false_alarms import sound_passes

OUTAGES = [*DEFAULT_FAULT_KINDS, "api_outage"]
EXAMPLES = 60


def _fuzz(run: Any, seed: int, **extra: Any) -> Any:
    return fuzz(run, toolbox(), seed=seed, database=InMemoryExampleDatabase(), unsafe_tools="ignore",
                max_examples=EXAMPLES, **extra)


def test_the_raw_response_agent_passes() -> None:
    sound_passes(lambda: _fuzz(SOUND["raw"], 1))


def test_the_raw_response_agent_passes_api_outages() -> None:
    sound_passes(lambda: _fuzz(SOUND["raw"], 2, fault_kinds=OUTAGES))


@pytest.mark.parametrize("twin", sorted(TWINS))
def test_a_twin_that_gives_up_on_the_model_is_caught_by_an_outage(twin: str) -> None:
    with pytest.raises(OracleFailure, match="same_answer") as caught:
        _fuzz(TWINS[twin], 20261201, fault_kinds=OUTAGES)
    report = str(caught.value)
    assert "An API outage came first" in report and "never complete the task with a fallback answer" in report
    assert "(API outage: longer than the SDK retries)" in report


def test_an_outage_fails_three_requests_and_a_sound_agent_resumes() -> None:
    injector = FaultInjector(FaultPlan(api_faults=(ApiFault("api_outage", 2),)))
    sunk: list[str] = []
    injector.api_sink = lambda kind, **_: sunk.append(kind)
    for n in range(6):
        injector.model_hook("request", n, {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]})
    assert sunk == ["overloaded"] * 3
    assert [(e.data["index"], e.data.get("outage")) for e in injector.timeline.of("api_fault")] == [
        (2, True), (3, True), (4, True)
    ]
    plan, outage = Plan((), "answer 0"), FaultPlan(api_faults=(ApiFault("api_outage", 1),))
    # The zoo's base loop lets the SDK's error out after its retries, and is resumed.
    replay(agent(Loop), toolbox(), plan, outage)
    with pytest.raises(OracleFailure, match="same_answer"):
        replay(TWINS["sdk_gives_up"], toolbox(), plan, outage)


def test_every_generation_reports_rate_limits(anthropic_client: anthropic.Anthropic, anthropic_fake: Any) -> None:
    request = {"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
    raw = anthropic_client.messages.with_raw_response.create(**request)
    for name in ("requests", "tokens", "input-tokens", "output-tokens"):
        assert int(raw.headers[f"anthropic-ratelimit-{name}-remaining"]) > 0
        assert raw.headers[f"anthropic-ratelimit-{name}-reset"].endswith("Z")
    anthropic_fake.fail_next("rate_limit")
    with pytest.raises(anthropic.RateLimitError) as limited:
        anthropic_client.with_options(max_retries=0).messages.create(**request)
    assert limited.value.response.headers["anthropic-ratelimit-requests-remaining"] == "0"
    assert limited.value.response.headers["retry-after"] == "1"


def test_a_named_outage_is_half_of_the_api_faults_drawn() -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from pytest_agentckpt.strategies import fault_plans

    kinds: list[str] = []

    @settings(max_examples=300, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(fault_plans(kinds=OUTAGES, max_crashes=0), st.just(None))
    def draw(plan: FaultPlan, _: None) -> None:
        kinds.extend(f.kind for f in plan.api_faults)

    draw()
    share = kinds.count("api_outage") / len(kinds)
    assert len(kinds) > 50 and 0.3 < share < 0.7, (len(kinds), share)
