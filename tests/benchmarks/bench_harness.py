"""Benchmark of the chaos harness on one core: crash-resume scenarios and model turns per second.

Run: ``python -m tests.benchmarks.bench_harness [--scenarios N] [--cpu] [--rounds R]`` (not
collected by the test run; ``--cpu`` times with this process's CPU time, for a machine others
keep busy). Every figure is the median of ``R`` interleaved rounds (3 by default), each ratio
the median of the ratios within a round.

The reference agent, the in-memory store, the real ``anthropic`` SDK path (the fake
Messages API behind an ``httpx2`` transport). Measured in the same run:

1. **harness**: a fixed set of scenarios (plans and fault plans drawn once, with a fixed
   seed, from the same strategies ``fuzz`` uses), each run crash-free (baselines cached per
   plan, as in ``fuzz``) and with its faults, resumed after every crash, re-run after
   completion and judged by every oracle;
2. **fuzz**: the same number of examples through ``fuzz`` itself (Hypothesis included);
   and the harness again on the faster path, ``client="direct"`` (no HTTP stack);
3. **floor**: the same model turns made with the bare SDK: every request body the harness
   sent, answered on an ``httpx2.MockTransport`` with the very reply the fake gave it (a
   stream's events, an error's status and body), the SDK's retries off (each retry the
   harness made is a request of its own here; a request a crash cut off is answered with a
   connection error). The earlier floor, every request answered with one fixed ``tool_use``
   reply, is printed beside it.

Targets: the harness (1) at most 1.5x the floor; ``fuzz`` (2) at most 2.5x the floor of its
own requests (the ones it made, with the replies it got: its plans are Hypothesis's, not
the fixed scenarios, so it makes another number of requests).
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import statistics
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


def bench_harness(scenarios: list[tuple[Any, Any]], client: str = "sdk", *, count: bool = True) -> dict[str, Any]:
    import reference_agent
    from pytest_agentckpt.fake_api import instant_retries
    from pytest_agentckpt.harness import _evaluate, _Executor
    from tests.harness.toolkit import toolbox

    agent = functools.partial(reference_agent.run, retry_backoff=0.0)
    executor = _Executor(
        agent, toolbox(), store=None, budget=None, max_resumes=None, goal="Carry out the task.", client=client  # type: ignore[arg-type]
    )
    turns = crashes = resumes = 0
    with instant_retries(0.0):
        started = clock()
        for plan, faults in scenarios:
            verdict = _evaluate(executor, plan, faults, None)
            assert not verdict.violations, verdict.violations
        elapsed = clock() - started
    if not count:
        executor.close()
        return {"elapsed": elapsed}
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
    from reference_agent.offline import FakeMessagesAPI

    respond = FakeMessagesAPI.respond
    turns_made: list[tuple[bytes, Any]] = []

    def recording(self: Any, method: str, path: str, headers: Any, body: bytes, **kwargs: Any) -> Any:
        generation = method == "POST" and path.rstrip("/").endswith("/v1/messages")
        try:
            reply = respond(self, method, path, headers, body, **kwargs)
        except BaseException:  # a crash injected at the request: sent, never answered
            if generation:
                turns_made.append((body, None))
            raise
        if generation:
            turns_made.append((body, reply))
        return reply

    FakeMessagesAPI.respond = recording  # type: ignore[method-assign]
    try:
        with instant_retries(0.0):
            for plan, faults in scenarios:
                verdict = _evaluate(executor, plan, faults, None)
                if not verdict.crash_free:
                    crashes += verdict.outcome.crashes
                    resumes += max(0, verdict.outcome.timeline.attempt - 2)
    finally:
        FakeMessagesAPI.respond = respond  # type: ignore[method-assign]
    for outcome in executed:
        turns += sum(1 for e in outcome.timeline.of("model_response") if e.data.get("status") == 200)
    executor.close()
    return {"elapsed": elapsed, "bodies": turns_made, "turns": turns, "crashes": crashes, "resumes": resumes}


def bench_fuzz(count: int, seed: int) -> float:
    from hypothesis.database import InMemoryExampleDatabase

    import reference_agent
    from pytest_agentckpt import fuzz
    from tests.harness.toolkit import toolbox

    agent = functools.partial(reference_agent.run, retry_backoff=0.0)
    started = clock()
    fuzz(agent, toolbox(), max_examples=count, seed=seed, database=InMemoryExampleDatabase(), unsafe_tools="ignore")
    return clock() - started


def bench_fuzz_split(count: int, seed: int) -> dict[str, Any]:
    """One ``fuzz`` run with its SDK calls timed: where its time goes against the floor.

    ``sdk`` is the time inside ``client.messages.create`` less the fake's own work (its
    ``respond``), ``bodies`` every request fuzz sent with the reply it got, for a floor of
    fuzz's own requests. The timers cost a little: this run is not one of the rounds.
    """
    from anthropic.resources.messages import Messages

    from reference_agent.offline import FakeMessagesAPI

    spent = {"create": 0.0, "respond": 0.0}
    made: list[tuple[bytes, Any]] = []
    create, respond = Messages.create, FakeMessagesAPI.respond

    def timed_create(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = clock()
        try:
            return create(self, *args, **kwargs)
        finally:
            spent["create"] += clock() - started

    def timed_respond(self: Any, method: str, path: str, headers: Any, body: bytes, **kwargs: Any) -> Any:
        generation = method == "POST" and path.rstrip("/").endswith("/v1/messages")
        started = clock()
        try:
            reply = respond(self, method, path, headers, body, **kwargs)
        except BaseException:
            if generation:
                made.append((body, None))
            raise
        finally:
            spent["respond"] += clock() - started
        if generation:
            made.append((body, reply))
        return reply

    Messages.create = timed_create  # type: ignore[method-assign]
    FakeMessagesAPI.respond = timed_respond  # type: ignore[method-assign]
    try:
        elapsed = bench_fuzz(count, seed)
    finally:
        Messages.create = create  # type: ignore[method-assign]
        FakeMessagesAPI.respond = respond  # type: ignore[method-assign]
    return {"elapsed": elapsed, "sdk": spent["create"] - spent["respond"], "bodies": made}


def bench_floor(turns_made: list[tuple[bytes, Any]], *, fixed: bool = False) -> float:
    """The bare SDK making the harness's model turns again: each request body it sent,
    answered with the reply the fake gave it; with ``fixed``, the earlier floor, for
    comparison: every request answered with one fixed ``tool_use`` reply (no error, no
    stream, no text to parse)."""
    import anthropic
    import httpx2

    from reference_agent.offline import Reply, network_error
    from reference_agent.scripted import message_json

    if fixed:
        one = {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"query": "crash"}}
        answer = Reply(200, json.dumps(message_json([one])).encode(), [("content-type", "application/json")])
        answers: list[Any] = [answer] * len(turns_made)
    else:
        answers = [reply for _, reply in turns_made]
    replies = iter(())

    def handler(request: httpx2.Request) -> httpx2.Response:
        request.read()
        reply = next(replies)
        if reply is None:
            raise httpx2.ConnectError("the harness crashed the agent here", request=request)
        if reply.drop is not None:
            raise network_error(reply.drop, request)
        if reply.events is not None:
            return httpx2.Response(reply.status, headers=reply.headers, content=b"".join(reply.events))
        return httpx2.Response(reply.status, headers=reply.headers, content=reply.body)

    client = anthropic.Anthropic(
        api_key="k",
        base_url="http://floor.test",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )
    calls = [json.loads(body) for body, _ in turns_made]
    if fixed:
        for kwargs in calls:
            kwargs.pop("stream", None)

    def make(kwargs: dict[str, Any]) -> None:
        try:
            if kwargs.pop("stream", False):
                with client.messages.stream(**kwargs) as stream:
                    for _ in stream:
                        pass
            else:
                client.messages.create(**kwargs)
        except anthropic.APIError:
            pass  # the harness's agent met the same error, and retried with a request of its own

    replies = iter(answers[:20])
    for kwargs in calls[:20]:  # warm up
        make(dict(kwargs))
    replies = iter(answers)
    started = clock()
    for kwargs in calls:
        make(dict(kwargs))
    return clock() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=400)
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--cpu", action="store_true", help="time with this process's CPU time, not the wall clock")
    parser.add_argument(
        "--rounds", type=int, default=3, help="interleaved repetitions of every measurement; medians are printed"
    )
    args = parser.parse_args(argv)
    if args.cpu:
        global clock
        clock = time.process_time
    logging.disable(logging.WARNING)  # the agent reports every injected store outage

    scenarios = _scenarios(args.scenarios, args.seed)
    bench_harness(scenarios[:30], count=False)  # warm up imports and caches
    bench_harness(scenarios[:30], "direct", count=False)
    result = bench_harness(scenarios)  # timed, and what it did counted
    made = result["bodies"]
    # fuzz's own requests (its plans are drawn by Hypothesis, not the fixed scenarios above):
    # its target is against the bare SDK making these.
    split = bench_fuzz_split(len(scenarios), args.seed)
    own = split["bodies"]
    times: dict[str, list[float]] = {"harness": [], "direct": [], "fuzz": [], "floor": [], "fixed": [], "own": []}
    for round_ in range(max(1, args.rounds)):
        # Each round measures everything once, in a rotated order: the machine's drift
        # falls on every side alike, and each ratio divides two figures of one round.
        steps = [
            ("harness", lambda: bench_harness(scenarios, count=False)["elapsed"]),
            ("floor", lambda: bench_floor(made)),
            ("fuzz", lambda: bench_fuzz(len(scenarios), args.seed)),
            ("fixed", lambda: bench_floor(made, fixed=True)),
            ("direct", lambda: bench_harness(scenarios, "direct", count=False)["elapsed"]),
            ("own", lambda: bench_floor(own)),
        ]
        shift = round_ % len(steps)
        for name, measure in steps[shift:] + steps[:shift]:
            times[name].append(measure())

    def median(name: str) -> float:
        return statistics.median(times[name])

    def ratio(name: str, floor: str = "floor") -> float:
        return statistics.median(a / b for a, b in zip(times[name], times[floor], strict=True))

    n, calls = len(scenarios), len(made)
    rounds = len(times["floor"])
    print(
        f"scenarios: {n} (crashes {result['crashes']}, resumes {result['resumes']}), SDK requests {calls}, "
        f"model turns {result['turns']}; medians of {rounds} interleaved rounds"
    )
    elapsed, d, fuzz_elapsed = median("harness"), median("direct"), median("fuzz")
    print(
        f"harness (SDK path):  {n / elapsed:8.1f} crash-resume scenarios/s  "
        f"{result['turns'] / elapsed:8.1f} model turns/s  ({elapsed:.2f} s)"
    )
    print(
        f"harness (direct):    {n / d:8.1f} crash-resume scenarios/s  {result['turns'] / d:8.1f} model turns/s  "
        f"({d:.2f} s, {ratio('direct'):.2f}x the SDK floor)"
    )
    print(f"fuzz (+Hypothesis):  {n / fuzz_elapsed:8.1f} scenarios/s  ({fuzz_elapsed:.2f} s)")
    floor, fixed = median("floor"), median("fixed")
    print(f"floor (bare SDK):    {calls / floor:8.1f} calls/s  ({floor:.2f} s for {calls} calls, each with its own reply)")
    print(
        f"  one fixed reply:   {calls / fixed:8.1f} calls/s  ({fixed:.2f} s: the earlier floor;"
        f" fuzz / it {ratio('fuzz', 'fixed'):.2f}x)"
    )
    harness_ratio, fuzz_ratio = ratio("harness"), ratio("fuzz", "own")
    print(f"harness / floor:     {harness_ratio:8.2f}x  (target <= {TARGET}x: {'met' if harness_ratio <= TARGET else 'NOT met'})")
    own_floor = median("own")
    print(
        f"fuzz's own floor:    {len(own) / own_floor:8.1f} calls/s  ({own_floor:.2f} s for the {len(own)} requests "
        "fuzz made, each with the reply it got)"
    )
    print(
        f"fuzz / its floor:    {fuzz_ratio:8.2f}x  (target <= {FUZZ_TARGET}x: {'met' if fuzz_ratio <= FUZZ_TARGET else 'NOT met'};"
        f" against the harness's {calls} requests {ratio('fuzz'):.2f}x)"
    )
    spread = sorted(a / b for a, b in zip(times["fuzz"], times["own"], strict=True))
    print(f"  fuzz / its floor by round: {', '.join(f'{r:.2f}x' for r in spread)}")
    # Where fuzz's time goes: the SDK's own share of it, measured in place (timers on, in
    # a run of its own), against the bare SDK making the same requests in a loop of nothing else.
    in_place, alone = split["sdk"] / len(own) * 1000, own_floor / len(own) * 1000
    print(
        f"  the SDK's part: {in_place:.3f} ms a request inside fuzz, {alone:.3f} ms in the floor's loop "
        f"({in_place / alone:.2f}x: the same SDK code, run between other work); the rest of fuzz "
        f"(agent, fake, store, oracles, Hypothesis) {(split['elapsed'] - split['sdk']) / own_floor:.2f}x that floor; "
        f"all of it {split['elapsed'] / own_floor:.2f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
