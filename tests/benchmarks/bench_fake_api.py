"""Benchmarks for the fake Messages API and the validator.

Run: ``python -m tests.benchmarks.bench_fake_api [--iterations N] [--memory-only]
[--flat-only] [--cpu]`` (not collected by the test run; ``--cpu``: time with this
process's CPU time instead of the wall clock, for a busy machine).

1. ``messages.create`` through ``FakeMessagesAPI`` (parsing, plan model, validation,
   record) along a tool loop around 40 messages (21 to 59, each request the last one plus
   a turn), against the floor measured in the same run: the same SDK calls on an
   ``httpx2.MockTransport`` returning a fixed body (the fake's own reply). Target: at most
   1.25x.
2. ``validate_messages`` on a 1,000-message history with parallel tool calls.
   Target: under 5 ms.
2b. Validation per request along a 1,000-iteration run (each request extends the last by
   an assistant ``tool_use`` and a 2 KB ``tool_result``, sent to the fake as JSON bytes):
   how many messages the fake's check scans at about 10, 100 and 1,000 messages (the new
   ones only: the same count at every length), its median time there, and a full
   ``validate_messages`` of the same messages. Target: the same count everywhere, and the
   check at 1,000 messages at most 0.1x a full check of them.
3. The record's memory: the peak RSS of a reference-agent run of ``--iterations`` (1,000
   by default) model calls on the fake, against the same run on a fake that records
   nothing (the agent, the SDK and the fake's work, holding the same messages), each in
   a fresh process. Target: at most 1.5x. Run it alone with ``--memory-only``.
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2

from reference_agent.offline import FakeMessagesAPI
from reference_agent.scripted import Plan, PlanModel, Step, ToolCall
from reference_agent.validation import validate_messages

CREATE_TARGET = 1.25
#: The clock every figure is read from: wall time, or with ``--cpu`` this process's CPU
#: time (on a machine other processes keep busy, their time is not counted against us).
clock = time.perf_counter
VALIDATE_TARGET_MS = 5.0
FLAT_TARGET = 0.1  # the check at 1,000 messages, against a full check of them
MEMORY_TARGET = 1.5


def plan_of(steps: int, calls_per_step: int) -> Plan:
    return Plan(
        steps=tuple(
            Step(
                calls=tuple(
                    ToolCall("lookup", {"step": s, "call": c, "query": f"item {s}-{c}"})
                    for c in range(calls_per_step)
                ),
                text=f"Step {s}.",
            )
            for s in range(steps)
        ),
        final_answer="All done.",
    )


def history_for(plan: Plan, length: int) -> list[dict[str, Any]]:
    """A valid history of exactly ``length`` messages following ``plan``, ending on a user turn.

    Turns alternate; for an even length a short user note follows the last results (the
    API merges consecutive user messages).
    """
    model = PlanModel(plan)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Run the plan."}]
    while len(messages) + 2 <= length:
        reply = model.respond({"model": "m", "messages": messages})
        messages.append({"role": "assistant", "content": reply["content"]})
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": b["id"], "content": "result text"}
                    for b in reply["content"]
                    if b["type"] == "tool_use"
                ],
            }
        )
    if len(messages) < length:
        messages.append({"role": "user", "content": "Continue."})
    return messages


def timed(fn: Callable[[], object], *, repeat: int, warmup: int = 20) -> list[float]:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        start = clock()
        fn()
        samples.append(clock() - start)
    return samples


def bench_create(repeat: int = 400) -> float:
    plan = plan_of(steps=40, calls_per_step=2)
    # An agent's tool loop around 40 messages: 21, 23, ..., 59 messages, each request
    # the last one plus an assistant turn and its tool results (what the fake's
    # incremental paths see in a real run; a round starts over with a shorter history,
    # which the fake checks in full).
    series = [history_for(plan, n) for n in range(21, 60, 2)]
    for history in series:
        validate_messages(history)
    api = FakeMessagesAPI(plan)
    fake_client = api.client()
    # The floor returns, fixed, the very reply the fake sends for the 40-message history
    # (its body and headers), so both sides pay the same SDK parsing and only the fake's
    # own work differs.
    served = api.respond(
        "POST", "/v1/messages", {"x-api-key": "k"},
        json.dumps({"max_tokens": 1024, "messages": history_for(plan, 41), "model": "m"}).encode(),
    )
    fixed, fixed_headers = served.body, served.headers
    api.exchanges.clear()

    def floor_handler(request: httpx2.Request) -> httpx2.Response:
        request.read()
        return httpx2.Response(200, headers=fixed_headers, content=fixed)

    floor_client = anthropic.Anthropic(
        api_key="k", http_client=httpx2.Client(transport=httpx2.MockTransport(floor_handler))
    )

    def rounds(client: anthropic.Anthropic, count: int) -> list[float]:
        samples = []
        for _ in range(count):
            for history in series:
                start = clock()
                client.messages.create(model="m", max_tokens=1024, messages=history)
                samples.append(clock() - start)
        return samples

    # Interleave rounds so that machine noise hits both sides alike.
    rounds(floor_client, 1)
    rounds(fake_client, 1)
    floor: list[float] = []
    fake: list[float] = []
    per_round = max(1, repeat // (4 * len(series)))
    for _ in range(4):
        floor += rounds(floor_client, per_round)
        fake += rounds(fake_client, per_round)
        api.exchanges.clear()  # keep the record from growing across rounds
    floor_ms = statistics.median(floor) * 1e3
    fake_ms = statistics.median(fake) * 1e3
    ratio = fake_ms / floor_ms
    print(
        f"messages.create, 21-59 messages (each request extending the last): fake "
        f"{fake_ms:.3f} ms, floor (httpx2.MockTransport) {floor_ms:.3f} ms, ratio {ratio:.2f}x "
        f"(target <= {CREATE_TARGET}x)"
    )
    return ratio


def bench_validate(repeat: int = 200) -> float:
    plan = plan_of(steps=600, calls_per_step=3)
    history = history_for(plan, 1000)
    tool_uses = sum(
        1
        for m in history
        if m["role"] == "assistant"
        for b in m["content"]
        if b["type"] == "tool_use"
    )
    samples = timed(lambda: validate_messages(history), repeat=repeat, warmup=5)
    median_ms = statistics.median(samples) * 1e3
    print(
        f"validate_messages, {len(history)} messages ({tool_uses} parallel tool calls): "
        f"median {median_ms:.3f} ms, best {min(samples) * 1e3:.3f} ms "
        f"(target < {VALIDATE_TARGET_MS} ms)"
    )
    return median_ms


checked: dict[int, int] = {}  # messages the fake's validator scanned, by request length


def _run_checks(iterations: int, stop_after: int) -> tuple[dict[int, float], dict[int, list[Any]]]:
    """One run on the fake, each request its JSON bytes as the SDK sends them: the time of
    the fake's check of each request, by message count, and the messages of some."""
    plan = Plan(
        steps=tuple(Step(calls=(ToolCall("lookup", {"n": i}),)) for i in range(iterations)),
        final_answer="done",
    )
    api = FakeMessagesAPI(plan)
    check = api._check_generation
    validate = api._validator.validate
    spent: dict[int, float] = {}

    def timed_check(request: Any, path: str, **kwargs: Any) -> str | None:
        start = clock()
        problem = check(request, path, **kwargs)
        spent[len(request["messages"])] = clock() - start
        return problem

    def counted_validate(messages: Any, **kwargs: Any) -> int:
        known = validate(messages, **kwargs)
        checked[len(messages)] = len(messages) - known
        return known

    api._check_generation = timed_check  # type: ignore[method-assign]
    api._validator.validate = counted_validate  # type: ignore[method-assign]
    result = "r" * 2048
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Look everything up."}]
    kept: dict[int, list[Any]] = {}
    while len(messages) <= stop_after:
        body = json.dumps({"max_tokens": 1024, "messages": messages, "model": "m"}).encode()
        reply = api.respond("POST", "/v1/messages", {"x-api-key": "k"}, body)
        assert reply.status == 200, reply.body
        content = json.loads(reply.body)["content"]
        if len(messages) in (11, 101, 1001):
            kept[len(messages)] = json.loads(body)["messages"]
        messages.append({"role": "assistant", "content": content})
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": b["id"], "content": result}
                    for b in content
                    if b["type"] == "tool_use"
                ],
            }
        )
    return spent, kept


def bench_validation_flat(iterations: int = 1000) -> float:
    """The fake's validation of each request along one run; returns its cost at 1,000
    messages over a full check's (infinite if it scanned more than the new messages)."""
    wanted = (11, 101, 1001)
    _run_checks(100, 60)  # warm up: the first requests of a process pay for cold code
    checked.clear()
    spent, kept = _run_checks(iterations, max(wanted) + 20)
    lengths = sorted(spent)

    def around(n: int) -> float:
        # The median of the 9 requests nearest n messages (one request is noise).
        near = sorted(lengths, key=lambda length: abs(length - n))[:9]
        return statistics.median(spent[length] for length in near) * 1e6

    ours = [around(n) for n in wanted]
    full = [
        statistics.median(timed(lambda m=kept[n]: validate_messages(m), repeat=30, warmup=3)) * 1e6
        for n in wanted
    ]
    ratio = ours[-1] / ours[0]
    scanned = [checked[n] for n in wanted]
    print(
        "validation per request along a run, at "
        + " / ".join(f"{n}" for n in wanted)
        + " messages: messages scanned "
        + " / ".join(f"{n}" for n in scanned)
        + "; fake "
        + " / ".join(f"{t:.1f}" for t in ours)
        + f" us (1,000 / 10: {ratio:.2f}x); a full check "
        + " / ".join(f"{t:.1f}" for t in full)
        + f" us ({full[-1] / full[0]:.0f}x); fake / full check at 1,000 messages "
        + f"{ours[-1] / full[-1]:.3f}x (target <= {FLAT_TARGET}x)"
    )
    flat = len(set(scanned)) == 1
    return ours[-1] / full[-1] if flat else float("inf")


class _NoRecord(FakeMessagesAPI):
    # The baseline: the same fake, minus its record of exchanges.
    def _record(self, exchange: object) -> None:
        pass


def agent_run(iterations: int, *, record: bool) -> None:
    """One reference-agent run of ``iterations`` tool calls; prints the peak RSS in MB."""
    from reference_agent import Toolbox, run, tool
    from stores import open_store

    @tool()
    def lookup(n: int) -> str:
        "Look up item n."
        return f"item {n} is fine"

    plan = Plan(
        steps=tuple(Step(calls=(ToolCall("lookup", {"n": i}),)) for i in range(iterations)),
        final_answer="done",
    )
    api = (FakeMessagesAPI if record else _NoRecord)(plan)
    run(
        "memory",
        "look everything up",
        client=api.client(max_retries=0),
        store=open_store("memory://"),
        tools=Toolbox([lookup]),
        max_iterations=iterations + 5,
    )
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def bench_memory(iterations: int) -> float:
    peaks = {}
    for record in (True, False):
        command = [sys.executable, "-m", "tests.benchmarks.bench_fake_api", "--agent-run"]
        command += [str(iterations)] + ([] if record else ["--no-record"])
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        peaks[record] = float(out.split()[-1])
    ratio = peaks[True] / peaks[False]
    print(
        f"record memory, reference agent, {iterations} iterations: peak RSS "
        f"{peaks[True]:.0f} MB with the record, {peaks[False]:.0f} MB without, "
        f"ratio {ratio:.2f}x (target <= {MEMORY_TARGET}x)"
    )
    return ratio


def main(argv: list[str]) -> int:
    global clock
    iterations = 1000
    if "--cpu" in argv:
        clock = time.process_time
    if "--iterations" in argv:
        iterations = int(argv[argv.index("--iterations") + 1])
    if "--flat-only" in argv:
        return 0 if bench_validation_flat(iterations) <= FLAT_TARGET else 1
    if "--agent-run" in argv:
        agent_run(int(argv[argv.index("--agent-run") + 1]), record="--no-record" not in argv)
        return 0
    ok = True
    if "--memory-only" not in argv:
        ratio = bench_create()
        validate_ms = bench_validate()
        flat = bench_validation_flat(iterations)
        ok = ratio <= CREATE_TARGET and validate_ms < VALIDATE_TARGET_MS and flat <= FLAT_TARGET
    ok = bench_memory(iterations) <= MEMORY_TARGET and ok
    print("targets met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
