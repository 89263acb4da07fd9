"""Process mode: the agent runs in a child process and dies by SIGKILL at fault points.

In-process crashes are exceptions; a real crash gives the agent no ``finally``, no buffered
write, no connection close. Here each attempt is a child process:

- the fake Messages API is served over loopback by the parent (``FakeMessagesAPI.serve``);
  crashes at the model points are the parent SIGKILLing the child from the server's hook;
- tools and store are wrapped in the child (the World is an SQLite file both sides see);
  crashes at the tool and store points are the child SIGKILLing itself;
- every observation is appended to an events file, one JSON line written with a single
  ``os.write`` (in the kernel before the kill can land), and the parent merges the child's
  events with its own by ``time.monotonic_ns()``.

The store must be one both processes can open: a URL (``sqlite:///...``,
``postgresql://...``, ``redis://...``, ``s3://...``); the default is an SQLite file in a
temporary directory. Children are forked from a fork server that has ``anthropic``
already imported, so an attempt costs milliseconds, not the SDK's import time.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import os
import shutil
import signal
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ._children import process_context, with_environment
from .faults import (
    Crash,
    FaultInjector,
    FaultPlan,
    FaultPoint,
    FaultyStore,
    HistoryLocator,
    InstrumentedToolbox,
    PlanInfeasible,
    RunCounts,
    is_generation,
)
from .timeline import Event, Timeline

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

    from reference_agent.scripted import Plan
    from stores import Checkpoint

    from ._scenario import _Outcome
    from ._search import FuzzReport
    from .oracles import Baseline

__all__ = ["ProcessExecutor", "fuzz_process"]

MODEL_POINTS = frozenset({"iteration_start", "before_model_call", "after_model_call"})
#: Seconds an attempt may take before the parent kills it as hung.
ATTEMPT_TIMEOUT = 120.0
_NOT_STARTED = (
    "mode='process': a child process exited (code {code}) before the agent could start, "
    "so no verdict is given. Its traceback is on standard error. The usual cause: a script "
    "that calls fuzz(..., mode='process') at its top level. Each child imports the main "
    "module again, so put the call under `if __name__ == \"__main__\":` (or run it from "
    "pytest)."
)
#: The key under which the child sends a saved checkpoint whole, for ``fuzz(history=...)``.
_RAW_CHECKPOINT = "__agentckpt_checkpoint__"


# -- the child ----------------------------------------------------------------------------
class _EventFile(Timeline):
    """A timeline whose every event is also appended to a file, one line per write."""

    def __init__(self, path: str, attempt: int) -> None:
        super().__init__()
        self.attempt = attempt
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def line(self, record: dict[str, Any]) -> None:
        os.write(self._fd, (json.dumps(record, default=str) + "\n").encode())

    def add(self, kind: Any, **data: Any) -> Event:
        event = super().add(kind, **data)
        self.line({"t": event.t, "kind": kind, "data": data})
        return event


class _ChildInjector(FaultInjector):
    """Counts are written out as they happen: a SIGKILL must not lose them."""

    def __init__(self, plan: FaultPlan, timeline: _EventFile) -> None:
        super().__init__(plan, timeline)
        self._file = timeline

    def hit(self, point: Any) -> None:
        # When: the parent merges these points with those it meets itself, in time order
        # (CLOCK_MONOTONIC is one clock for every process of the machine).
        self._file.line({"hit": point, "t": time.monotonic_ns()})
        super().hit(point)

    def store_operation(self, operation: str) -> None:
        self._file.line({"op": operation})
        super().store_operation(operation)


class _WholeCheckpointStore(FaultyStore):
    """Sends every saved checkpoint whole in its ``store_save`` event: the parent finds the
    message history in it with ``fuzz(history=...)``, where the oracles run (the function
    need not be importable in the child)."""

    def _history(self, saved: Checkpoint) -> list[Any] | None:
        return [{_RAW_CHECKPOINT: saved.model_dump(mode="json")}]


def _die(crash: Crash) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _stream_message_id(head: bytes) -> str | None:
    """The message id in a stream's first event (``message_start``), once it is whole."""
    end = head.find(b"\n\n")
    if end < 0:
        return None
    for line in head[:end].splitlines():
        if line.startswith(b"data:"):
            try:
                event = json.loads(line[5:])
                return str(event["message"]["id"]) if event.get("type") == "message_start" else ""
            except (ValueError, KeyError, TypeError, AttributeError):
                return ""
    return ""


class _MessageId:
    """The message id of a stream, read from its first chunks as they pass."""

    def __init__(self) -> None:
        self.head = b""
        #: ``None`` until known; ``""`` for a stream that is not the API's.
        self.message_id: str | None = None

    def feed(self, chunk: bytes) -> None:
        if self.message_id is None:
            self.head += chunk
            self.message_id = _stream_message_id(self.head)
            if self.message_id is None and len(self.head) > 1 << 16:
                self.message_id = ""  # no event boundary: not a stream of the API


def _delivery_receipts(
    timeline: _EventFile,
    *,
    asynchronous: bool = False,
    replied: Callable[[], None] = lambda: None,
    before_request: Callable[[], None] = lambda: None,
) -> Any:
    """The child client's transport: it notes when a streamed reply was read to its end.

    Over the served HTTP API only the client knows that (the server's last chunk written
    is not the last one read). The note is a ``model_delivered`` event with the message
    id, written to the events file before the SDK sees the end of the stream; the parent
    turns the id into the request's index. A stream cut short, or left before its end,
    notes nothing.
    """
    import httpx2

    class Receipt(httpx2.SyncByteStream):
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def __iter__(self) -> Any:
            reader = _MessageId()
            for chunk in self._inner:
                reader.feed(chunk)
                yield chunk
            if reader.message_id:
                timeline.add("model_delivered", message_id=reader.message_id)

        def close(self) -> None:
            self._inner.close()

    class AsyncReceipt(httpx2.AsyncByteStream):
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        async def __aiter__(self) -> Any:
            reader = _MessageId()
            async for chunk in self._inner:
                reader.feed(chunk)
                yield chunk
            if reader.message_id:
                timeline.add("model_delivered", message_id=reader.message_id)

        async def aclose(self) -> None:
            await self._inner.aclose()

    def sending(request: Any) -> None:
        # A generation request: in the crash-free run, one that carries a tool's error the
        # agent did not get past to the model ends the plan (PlanInfeasible), as in memory mode.
        if request.method == "POST" and request.url.path.rstrip("/").endswith("/v1/messages"):
            before_request()

    def answered(request: Any, response: Any) -> None:
        # A model reply: the tool calls after it are a new batch (the parent's injector,
        # which serves the model, resets its own count; this child's counts the calls).
        if response.status_code == 200 and request.method == "POST" and request.url.path.rstrip("/").endswith("/v1/messages"):
            replied()

    class Transport(httpx2.HTTPTransport):
        def handle_request(self, request: Any) -> Any:
            sending(request)
            response = super().handle_request(request)
            answered(request, response)
            if response.headers.get("content-type", "").startswith("text/event-stream"):
                response.stream = Receipt(response.stream)
            return response

    class AsyncTransport(httpx2.AsyncHTTPTransport):
        async def handle_async_request(self, request: Any) -> Any:
            sending(request)
            response = await super().handle_async_request(request)
            answered(request, response)
            if response.headers.get("content-type", "").startswith("text/event-stream"):
                response.stream = AsyncReceipt(response.stream)
            return response

    return AsyncTransport() if asynchronous else Transport()


def _child_main(spec: dict[str, Any]) -> None:
    """One attempt, in the child process (the target of the fork server)."""
    import anthropic

    from reference_agent.offline import FAKE_API_KEY
    from reference_agent.world import World
    from stores import open_store

    from ._scenario import _import_object, _is_async, _load_tools, _not_awaitable
    from .fake_api import instant_retries

    timeline = _EventFile(spec["events"], spec["attempt"])
    timeline.line({"started": spec["attempt"]})
    injector = _ChildInjector(FaultPlan.from_dict(spec["faults"]), timeline)
    injector.hits.update(spec["hits"])
    injector.store_ops.update(spec["store_ops"])
    injector.strict_tools = spec["strict"]
    injector.on_crash = _die
    run = _import_object(spec["run"], "run")
    tools = InstrumentedToolbox(_load_tools(spec["tools"]), World(spec["world"]), injector)
    store_class = _WholeCheckpointStore if spec["whole_checkpoints"] else FaultyStore
    with warnings.catch_warnings():
        # The parent opened this store first and gave its warnings (a Redis without
        # persistence, say) once; a child per attempt would repeat them every time.
        warnings.simplefilter("ignore")
        opened = open_store(spec["store"])
    store = store_class(opened, injector)
    asynchronous = _is_async(run)
    client: Any
    if asynchronous:
        # An ``async def run`` gets the async client and is awaited, as in memory mode.
        client = anthropic.AsyncAnthropic(
            api_key=FAKE_API_KEY,
            base_url=spec["base_url"],
            http_client=anthropic.DefaultAsyncHttpxClient(
                transport=_delivery_receipts(
                    timeline, asynchronous=True, replied=injector.model_replied, before_request=injector.model_request_sent
                )
            ),
        )
    else:
        client = anthropic.Anthropic(
            api_key=FAKE_API_KEY,
            base_url=spec["base_url"],
            http_client=anthropic.DefaultHttpxClient(
                transport=_delivery_receipts(
                    timeline, replied=injector.model_replied, before_request=injector.model_request_sent
                )
            ),
        )
    try:
        with instant_retries(0.0):
            if asynchronous:
                answer = asyncio.run(run(spec["task_id"], spec["goal"], client=client, store=store, tools=tools))
            else:
                answer = _not_awaitable(run(spec["task_id"], spec["goal"], client=client, store=store, tools=tools))
    except PlanInfeasible as exc:
        timeline.line({"result": "infeasible", "detail": str(exc)})
        os._exit(3)
    except BaseException as exc:
        gave_up = injector.gave_up(exc)
        if gave_up is not None:
            # The crash-free run: the agent gave up on a tool's error (its retries ran out).
            timeline.line({"result": "infeasible", "detail": gave_up})
            os._exit(3)
        timeline.line({"result": "error", "detail": f"{type(exc).__name__}: {exc}"})
        os._exit(1)
    timeline.line({"result": "answer", "answer": answer})
    os._exit(0)


# -- the parent ---------------------------------------------------------------------------
class _ChildRecord:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.hits: Counter[str] = Counter()
        self.ops: Counter[str] = Counter()
        #: Each point the child met, with when (``time.monotonic_ns``).
        self.order: list[tuple[int, FaultPoint]] = []
        self.result: dict[str, Any] | None = None
        self.started = False
        self.offset = 0


def _read_child(path: Path, record: _ChildRecord, attempt: int) -> None:
    if not path.exists():
        return
    with path.open("rb") as handle:
        handle.seek(record.offset)
        data = handle.read()
    # A line cut by the kill has no newline: leave it (it cannot be, os.write is atomic
    # for these sizes, but do not trust that blindly).
    complete = data[: data.rfind(b"\n") + 1]
    record.offset += len(complete)
    for raw in complete.splitlines():
        line = json.loads(raw)
        if "hit" in line:
            record.hits[line["hit"]] += 1
            record.order.append((int(line.get("t", 0)), cast("FaultPoint", line["hit"])))
        elif "op" in line:
            record.ops[line["op"]] += 1
        elif "result" in line:
            record.result = line
        elif "started" in line:
            record.started = True
        else:
            record.events.append(Event(0, attempt, line["kind"], line["data"], line["t"]))


def _ordered(counts: RunCounts, injector: FaultInjector, child: _ChildRecord, timeline: Timeline) -> RunCounts:
    """``counts`` with the order the run met its points in, across both processes, and the
    durable changes before each (what crash fractions are resolved against): the points
    the parent met (the model's) and the child's, merged by when they were met, and the
    changes (saves, deletes, effects) of the merged timeline counted the same way. A run
    is sequential across the two (the child waits for each model reply), so this is the
    order memory mode would record; points of parallel threads are ordered as they came.
    """
    import bisect
    import dataclasses

    from .timeline import _CHANGES

    points = sorted([*zip(injector.order_t, injector.order, strict=True), *child.order])
    change_times: list[int] = []
    unsaved: set[int] = set()
    for event in timeline.events:
        if event.kind in _CHANGES:
            change_times.append(event.t)
            if event.kind != "store_save":
                unsaved.add(len(change_times))
    return dataclasses.replace(
        counts,
        order=tuple(point for _, point in points),
        changes=tuple(bisect.bisect_left(change_times, t) for t, _ in points),
        unsaved=frozenset(unsaved),
    )


def _effects_the_child_did_not_report(world: Path, new: list[Event], timeline: Timeline, seen: list[int]) -> None:
    """Effects the World recorded in this attempt that no event of the child reports.

    The World commits an effect before the child writes its event: a SIGKILL between the
    two (another of the child's threads met its crash point) leaves the effect done and
    unreported, and a keyed repeat on resume is then dropped by the World, unreported too:
    the oracles would count an effect lost that happened. The World is the record; what
    it holds beyond the child's events is added at the attempt's end, marked.
    """
    from reference_agent.world import World

    from .oracles import canonical

    if not world.exists():
        return
    recorded = World(world)
    try:
        effects = [e for e in recorded.effects() if e.seq > seen[0]]
    finally:
        recorded.close()
    if not effects:
        return
    seen[0] = effects[-1].seq
    reported = Counter(
        (e.data.get("tool"), canonical(e.data.get("input") or {}), e.data.get("key")) for e in new if e.kind == "effect"
    )
    for effect in effects:
        key = (effect.tool, canonical(effect.input), effect.idempotency_key)
        if reported[key] > 0:
            reported[key] -= 1
            continue
        timeline.add(
            "effect",
            tool=effect.tool,
            input=dict(effect.input),
            key=effect.idempotency_key,
            unreported="recorded by the World; the killed process had not reported it yet",
        )


class ProcessExecutor:
    """Runs an importable agent in child processes; the same interface as the in-process one."""

    #: The points are met in two processes, and merged in the order they were met (crash
    #: fractions are resolved against it, as in memory mode).
    orders_points = True
    #: A crash is a SIGKILL: nothing of the agent runs after it.
    crashes_unwind = False

    def __init__(
        self,
        run: str,
        tools: str,
        *,
        store: str | None,
        budget: int | None,
        max_resumes: int | None,
        goal: str,
        ignore_oracles: frozenset[str] = frozenset(),
        history: HistoryLocator | None = None,
    ) -> None:
        from stores import open_store

        from ._scenario import _import_object, _load_tools, _tool_flags

        if not isinstance(run, str) or not isinstance(tools, str):
            raise TypeError(
                "mode='process' needs run and tools as importable 'module:attr' strings, so that "
                "a child process can import them"
            )
        _import_object(run, "run")  # fail now, not in the child
        self.run_spec, self.tools_spec = run, tools
        self.tools = _load_tools(tools)
        self.flags = _tool_flags(self.tools)
        self.budget, self.max_resumes, self.goal = budget, max_resumes, goal
        # Read by _evaluate (ignore_oracles) and by the report's replay line (both).
        self.ignore_oracles = ignore_oracles
        self.history = history
        if store is not None and (not isinstance(store, str) or store.startswith("memory:")):
            raise ValueError(
                "store: mode='process' needs a store URL both processes can open "
                "(sqlite:///path, postgresql://..., redis://..., s3://...), not "
                f"{store!r}"
            )
        self._dir = Path(tempfile.mkdtemp(prefix="agentckpt-process-"))
        self.store_url = store or f"sqlite:///{self._dir / 'checkpoints.db'}"
        try:
            self.store = open_store(self.store_url)
        except BaseException:
            shutil.rmtree(self._dir, ignore_errors=True)  # nothing of this run is left
            raise
        self._ids = itertools.count(1)
        self._prefix = hashlib.sha1(os.urandom(8)).hexdigest()[:8]
        # The agent's own modules too: each child is a fork with everything imported.
        self._context = process_context(run.partition(":")[0], tools.partition(":")[0])
        self._baselines: dict[str, tuple[Baseline, _Outcome]] = {}
        #: As the in-process executor's: the agent was seen to mark completion.
        self.uses_status = False
        # The history= function applied as the in-process harness applies it (errors and
        # None: "not found in this checkpoint"), to the checkpoints the child sent back.
        self._locator = None if history is None else FaultyStore(self.store, FaultInjector(), history=history)

    def close(self) -> None:
        self.store.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    def baseline(self, plan: Plan) -> tuple[Baseline, _Outcome]:
        from ._scenario import _Executor

        return _Executor.baseline(self, plan)  # type: ignore[arg-type]

    def execute(self, plan: Plan, faults: FaultPlan, *, rerun: bool = True) -> _Outcome:
        from reference_agent.offline import FakeMessagesAPI
        from reference_agent.scripted import PlanModel

        from ._scenario import (
            _Outcome,
            advanced,
            attempt_numbers,
            delete_scenario_checkpoints,
            marks_completion,
            request_budget,
            request_rules_hook,
            resumed_idle,
            run_counts,
            runaway_detail,
            stopped_detail,
        )
        from .oracles import canonical

        number = next(self._ids)
        task_id = f"fuzz-{self._prefix}-{number}"
        world = self._dir / f"world-{number}.db"
        events = self._dir / f"events-{number}.jsonl"
        parent_plan = FaultPlan(
            tuple(c for c in faults.crashes if c.point in MODEL_POINTS), faults.api_faults, ()
        )
        child_plan = FaultPlan(
            tuple(c for c in faults.crashes if c.point not in MODEL_POINTS), (), faults.store_faults
        )
        timeline = Timeline()
        injector = FaultInjector(parent_plan, timeline)
        api = FakeMessagesAPI(PlanModel(plan, strict_tools=True), validate=True)
        current: dict[str, Any] = {}

        def kill(crash: Crash | None = None) -> None:
            process = current.get("process")
            if process is not None and process.pid:
                os.kill(process.pid, signal.SIGKILL)

        injector.on_crash = kill
        # The runaway budget of the in-process harness: counted here, where the fake API
        # serves the child; past it the child is killed and the attempt ends as a runaway.
        cached = self._baselines.get(canonical(plan.to_dict()))
        requests = [0, request_budget(plan, faults, None if cached is None else cached[0].requests)]
        runaway: list[str] = []

        def guard(event: str, index: int, body: Any) -> None:
            if event == "request" and is_generation(body):
                requests[0] += 1
                if requests[0] > requests[1]:
                    detail = runaway_detail(requests[0], requests[1])
                    runaway[:] = runaway or [detail]
                    kill()
                    raise _Stopped(detail)  # the connection is dropped; the child is dead

        api.add_hook(guard)
        api.add_hook(injector.model_hook)
        api.add_hook(request_rules_hook(timeline))
        api.add_delivery_hook(injector.model_delivered)
        injector.api_sink = lambda kind, mid_reply=False: api.fail_next(kind, mid_reply=mid_reply)
        child = _ChildRecord()
        seen = [0]  # the World's effects already in the timeline (by seq)
        outcome = _Outcome(timeline, completed=False, answer=None, error=None)
        limit = self.max_resumes if self.max_resumes is not None else faults.attempts_needed
        quiet_errors = 0
        try:
            with api.serve() as base_url:

                def attempt(child_faults: FaultPlan, strict: bool, note: str = "") -> tuple[str, Any]:
                    timeline.start_attempt(note)
                    injector.attempt_started()
                    api.clear_faults()
                    spec = {
                        "run": self.run_spec,
                        "tools": self.tools_spec,
                        "task_id": task_id,
                        "goal": self.goal,
                        "store": self.store_url,
                        "world": str(world),
                        "events": str(events),
                        "base_url": base_url,
                        "attempt": timeline.attempt,
                        "faults": child_faults.to_dict(),
                        "hits": dict(child.hits),
                        "store_ops": dict(child.ops),
                        "strict": strict,
                        "whole_checkpoints": self.history is not None,
                    }
                    child.result, child.started = None, False
                    process = self._context.Process(target=with_environment(_child_main), args=(spec,), daemon=True)
                    current["process"] = process
                    process.start()
                    process.join(ATTEMPT_TIMEOUT)
                    hung = process.exitcode is None
                    if hung:
                        process.kill()
                        process.join()
                    current.pop("process", None)
                    _read_child(events, child, timeline.attempt)
                    new, child.events = injector.receipts(child.events), []
                    self._locate_history(new)
                    timeline.merge(new)
                    _effects_the_child_did_not_report(world, new, timeline, seen)
                    code = process.exitcode
                    if runaway:
                        return "runaway", runaway[0]
                    if hung:
                        # Killed by the harness, not by a fault: not a crash to resume from.
                        detail = (
                            f"the attempt did not finish within {ATTEMPT_TIMEOUT:g} s and was killed: the "
                            "agent or one of its tools hangs (waiting on input, a lock or a "
                            "server that does not answer, or a retry loop without a bound)"
                        )
                        timeline.add("attempt_end", outcome="hung", detail=detail)
                        return "hung", detail
                    if code == -signal.SIGKILL:
                        crash_seen = injector.crashes + sum(1 for e in new if e.kind == "crash")
                        timeline.add("attempt_end", outcome="crash", detail="SIGKILL")
                        return "crash", crash_seen
                    if not child.started:
                        raise RuntimeError(_NOT_STARTED.format(code=code))
                    result = child.result or {"result": "error", "detail": f"exit code {code}"}
                    if result["result"] == "answer":
                        return "answer", result["answer"]
                    timeline.add("attempt_end", outcome=result["result"], detail=result.get("detail"))
                    return result["result"], result.get("detail")

                stopped: tuple[Any] | None = None  # what the last clean stop returned
                idle = False  # whether the run was taken for done by resumed_idle
                for _ in attempt_numbers(limit, timeline):
                    before = len(timeline.of("crash", "api_fault", "store_outage"))
                    kind, value = attempt(child_plan, faults.size == 0)
                    if kind == "crash":
                        quiet_errors = 0
                        continue
                    if kind == "runaway":
                        timeline.add("attempt_end", outcome="runaway", detail=value)
                        outcome.error = outcome.runaway = value
                        break
                    if kind == "infeasible":
                        outcome.infeasible = outcome.error = str(value)
                        break
                    if kind == "hung":
                        # Resuming would wait as long again, and find the same hang.
                        outcome.error = str(value)
                        break
                    if kind == "error":
                        outcome.error = str(value)
                        faulted = len(timeline.of("crash", "api_fault", "store_outage")) > before
                        quiet_errors = 0 if faulted or advanced(timeline) else quiet_errors + 1
                        if quiet_errors >= 2:
                            break
                        continue
                    if self._still_running(task_id) and not (
                        idle := not self.uses_status and resumed_idle(timeline, value, stopped)
                    ):
                        timeline.add("attempt_end", outcome="stopped", detail=str(value))
                        outcome.error = stopped_detail(value)
                        stopped = (value,)
                        continue
                    timeline.add("attempt_end", outcome="answer", detail=str(value))
                    outcome.completed, outcome.answer, outcome.error = True, value, None
                    break
                outcome.counts = _ordered(run_counts(injector, child.hits, child.ops), injector, child, timeline)
                if outcome.completed and rerun:
                    injector.disarm()
                    outcome.rerun_from = len(timeline)
                    # Its own budget: an agent that forgot the completion may do it all again.
                    requests[:] = [0, requests[0] + 8]
                    runaway.clear()
                    kind, value = attempt(FaultPlan(), False, "the completed task, run again")
                    outcome.rerun_answer = value if kind == "answer" else None
                    if kind == "answer":
                        timeline.add("attempt_end", outcome="answer", detail=str(value))
                    elif kind == "runaway":
                        timeline.add("attempt_end", outcome="error", detail=f"_Runaway: {value}")
        finally:
            delete_scenario_checkpoints(self.store, task_id, timeline)
        if not self.uses_status and marks_completion(timeline, task_id):
            self.uses_status = True
            if idle and outcome.completed:
                # Its idle return was a stop (see the in-process executor): run again.
                return self.execute(plan, faults, rerun=rerun)
        hits = Counter(injector.hits)
        hits.update(child.hits)
        outcome.hits = hits
        outcome.crashes = len(timeline.of("crash"))
        return outcome

    def _locate_history(self, events: list[Event]) -> None:
        """The history of each checkpoint the child sent whole, found by ``history=``."""
        if self._locator is None:
            return
        from stores import Checkpoint

        for event in events:
            sent = event.data.get("messages") if event.kind == "store_save" else None
            if not (isinstance(sent, list) and len(sent) == 1 and isinstance(sent[0], dict)):
                continue
            raw = sent[0].get(_RAW_CHECKPOINT)
            if raw is not None:
                event.data["messages"] = self._locator._history(Checkpoint.model_validate(raw))
                event.data["located"] = self._locator.last_history_error or True

    def _still_running(self, task_id: str) -> bool:
        try:
            checkpoint = self.store.load(task_id)
        except Exception:
            return False
        return checkpoint is not None and checkpoint.status == "running"


class _Stopped(Exception):
    """Raised by the runaway guard in the fake API's server thread (which drops the
    connection of the request): the child is already dead."""


def fuzz_process(
    run: Any,
    tools: Any,
    *,
    max_examples: int,
    max_crashes: int,
    fault_kinds: frozenset[str],
    store: Any,
    plans: SearchStrategy[Plan] | Any,
    seed: int | None,
    budget: int | None,
    max_steps: int,
    max_parallel: int,
    goal: str,
    deadline: Any = None,
    unsafe_tools: str = "warn",
    database: Any = None,
    ignore_oracles: frozenset[str] = frozenset(),
    history: HistoryLocator | None = None,
    systematic: bool = False,
) -> FuzzReport:
    """``fuzz(mode="process")``: the same search and oracles, one child process per attempt.

    Hypothesis's own shrinking would re-run hundreds of multi-process scenarios; here only
    the harness's bounded minimizer shrinks.
    """
    from ._scenario import _import_object
    from ._search import _fuzz_with

    executor = ProcessExecutor(
        run, tools, store=store, budget=budget, max_resumes=None, goal=goal,
        ignore_oracles=ignore_oracles, history=history,
    )
    try:
        return _fuzz_with(
            executor,  # type: ignore[arg-type]
            _import_object(run, "run"),
            executor.tools,
            examples=max_examples,
            crashes_max=max_crashes,
            kinds=fault_kinds,
            deadline=deadline,
            plans=plans,
            seed=seed,
            budget=budget,
            max_steps=max_steps,
            max_parallel=max_parallel,
            unsafe_tools=unsafe_tools,
            database=database,
            shrink=False,
            systematic=systematic,
        )
    finally:
        executor.close()
