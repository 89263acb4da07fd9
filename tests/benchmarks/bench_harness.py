"""Benchmark of the chaos harness on one core: crash-resume scenarios and model turns per second.

Run: ``python -m tests.benchmarks.bench_harness [--scenarios N] [--cpu]`` (not collected by the
test run; ``--cpu`` times with this process's CPU time, for a machine others keep busy).

The reference agent, the in-memory store, the real ``anthropic`` SDK path (the fake
Messages API behind an ``httpx2`` transport). Measured in the same run:

1. **harness**: a fixed set of scenarios (plans and fault plans drawn once, with a fixed
   seed, from the same strategies ``fuzz`` uses), each run crash-free (baselines cached per
   plan, as in ``fuzz``) and with its faults, resumed after every crash, re-run after
   completion and judged by every oracle;
2. **fuzz**: the same number of examples through ``fuzz`` itself (Hypothesis included);
   and the harness again on the faster path, ``client="direct"`` (no HTTP stack);
3. **floor**: as many bare SDK calls as the harness made, replaying the very request bodies
   it sent, on an ``httpx2.MockTransport`` that returns one fixed response.

Targets: the harness (1) at most 1.5x the floor; ``fuzz`` (2) at most 2.5x the floor.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import time
from typing import Any

TARGET = 1.5
#: Wall time, or with ``--cpu`` this process's CPU time (for a machine others keep busy).
clock = time.perf_counter
FUZZ_TARGET = 2.5


def _scenarios(count: int, seed: int) -> list[tuple[Any, Any]]:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis import strategies as st
    from hypothesis.database import InMemoryExampleDatabase

    from pytest_agentckpt.strategies import fault_plans, plans
    from tests.harness.toolkit import toolbox

    drawn: list[tuple[Any, Any]] = []

    @hypothesis_seed(seed)
    @settings(max_examples=count, database=InMemoryExampleDatabase(), suppress_health_check=list(HealthCheck), deadline=None)
    @given(st.tuples(plans(toolbox()), fault_plans()))
    def collect(scenario: tuple[Any, Any]) -> None:
        drawn.append(scenario)

    collect()
    return drawn[:count]


def bench_harness(scenarios: list[tuple[Any, Any]], client: str = "sdk") -> dict[str, Any]:
    import reference_agent
    from pytest_agentckpt.fake_api import instant_retries
    from pytest_agentckpt.harness import _evaluate, _Executor
    from tests.harness.toolkit import toolbox

    agent = functools.partial(reference_agent.run, retry_backoff=0.0)
    executor = _Executor(
        agent, toolbox(), store=None, budget=None, max_resumes=None, goal="Carry out the task.", client=client  # type: ignore[arg-type]
    )
    bodies: list[dict[str, Any]] = []
    turns = crashes = resumes = 0
    with instant_retries(0.0):
        started = clock()
        for plan, faults in scenarios:
            verdict = _evaluate(executor, plan, faults, None)
            assert not verdict.violations, verdict.violations
        elapsed = clock() - started
    # Count what was done (outside the timed loop): the same loop again, recording every
    # run it makes. A plan drawn twice has its crash-free run made once (cached), as in
    # the timed loop, so it is counted once.
    executor._baselines.clear()
    executed: list[Any] = []
    execute = executor.execute

    def recorded(*args: Any, **kwargs: Any) -> Any:
        executed.append(execute(*args, **kwargs))
        return executed[-1]

    executor.execute = recorded  # type: ignore[method-assign]
    with instant_retries(0.0):
        for plan, faults in scenarios:
            verdict = _evaluate(executor, plan, faults, None)
            if not verdict.crash_free:
                crashes += verdict.outcome.crashes
                resumes += max(0, verdict.outcome.timeline.attempt - 2)
    for outcome in executed:
        timeline = outcome.timeline
        bodies += [{"messages": e.data["messages"]} for e in timeline.of("model_request")]
        turns += sum(1 for e in timeline.of("model_response") if e.data.get("status") == 200)
    executor.close()
    return {"elapsed": elapsed, "bodies": bodies, "turns": turns, "crashes": crashes, "resumes": resumes}


def bench_fuzz(count: int, seed: int) -> float:
    from hypothesis.database import InMemoryExampleDatabase

    import reference_agent
    from pytest_agentckpt import fuzz
    from tests.harness.toolkit import toolbox

    agent = functools.partial(reference_agent.run, retry_backoff=0.0)
    started = clock()
    fuzz(agent, toolbox(), max_examples=count, seed=seed, database=InMemoryExampleDatabase(), unsafe_tools="ignore")
    return clock() - started


def bench_floor(bodies: list[dict[str, Any]]) -> float:
    import anthropic
    import httpx2

    from reference_agent.scripted import message_json
    from tests.harness.toolkit import toolbox

    fixed = json.dumps(message_json([{"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"query": "crash"}}])).encode()

    def handler(request: httpx2.Request) -> httpx2.Response:
        request.read()
        return httpx2.Response(200, content=fixed, headers={"content-type": "application/json"})

    client = anthropic.Anthropic(
        api_key="k", base_url="http://floor.test", http_client=httpx2.Client(transport=httpx2.MockTransport(handler))
    )
    definitions: Any = toolbox().definitions()
    for body in bodies[:20]:  # warm up
        client.messages.create(model="m", max_tokens=4096, messages=body["messages"], tools=definitions)
    started = clock()
    for body in bodies:
        client.messages.create(
            model="claude-sonnet-5-5", max_tokens=4096, messages=body["messages"], tools=definitions, system="s"
        )
    return clock() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=400)
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--cpu", action="store_true", help="time with this process's CPU time, not the wall clock")
    args = parser.parse_args(argv)
    if args.cpu:
        global clock
        clock = time.process_time
    logging.disable(logging.WARNING)  # the agent reports every injected store outage

    scenarios = _scenarios(args.scenarios, args.seed)
    bench_harness(scenarios[:30])  # warm up imports and caches
    result = bench_harness(scenarios)
    floor = bench_floor(result["bodies"])
    fuzz_elapsed = bench_fuzz(len(scenarios), args.seed)
    bench_harness(scenarios[:30], "direct")
    direct = bench_harness(scenarios, "direct")

    n, elapsed, calls = len(scenarios), result["elapsed"], len(result["bodies"])
    ratio = elapsed / floor
    print(f"scenarios: {n} (crashes {result['crashes']}, resumes {result['resumes']}), SDK requests {calls}, model turns {result['turns']}")
    print(f"harness (SDK path):  {n / elapsed:8.1f} crash-resume scenarios/s  {result['turns'] / elapsed:8.1f} model turns/s  ({elapsed:.2f} s)")
    d = direct["elapsed"]
    print(f"harness (direct):    {n / d:8.1f} crash-resume scenarios/s  {direct['turns'] / d:8.1f} model turns/s  ({d:.2f} s, {d / floor:.2f}x the SDK floor)")
    print(f"fuzz (+Hypothesis):  {n / fuzz_elapsed:8.1f} scenarios/s  ({fuzz_elapsed:.2f} s)")
    print(f"floor (bare SDK):    {calls / floor:8.1f} calls/s  ({floor:.2f} s for {calls} calls)")
    print(f"harness / floor:     {ratio:8.2f}x  (target <= {TARGET}x: {'met' if ratio <= TARGET else 'NOT met'})")
    fuzz_ratio = fuzz_elapsed / floor
    print(f"fuzz / floor:        {fuzz_ratio:8.2f}x  (target <= {FUZZ_TARGET}x: {'met' if fuzz_ratio <= FUZZ_TARGET else 'NOT met'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
