"""Running a scenario: the agent under test, its client, store and toolbox, one plan under
one fault plan, attempt after attempt until it completes (then once more).

What the harness saw becomes a :class:`~pytest_agentckpt.timeline.Timeline` in an
:class:`_Outcome`; judging it is :mod:`pytest_agentckpt._judge`'s job.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import itertools
import json
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .faults import (
    STREAM_FAULT_KINDS,
    Crash,
    FaultInjector,
    FaultPlan,
    FaultyStore,
    HistoryLocator,
    InstrumentedToolbox,
    PlanInfeasible,
    RunCounts,
    crash_within,
    is_generation,
)
from .oracles import (
    Baseline,
    ToolFlags,
    canonical,
    effect_counts,
    model_turns,
)
from .timeline import Timeline

if TYPE_CHECKING:
    import anthropic

    from reference_agent.offline import FakeMessagesAPI
    from reference_agent.scripted import Plan
    from stores import CheckpointStore

Mode = Literal["memory", "process"]
ClientPath = Literal["sdk", "direct"]
StoreSource = "CheckpointStore | str | Callable[[], CheckpointStore] | None"

#: Model requests one scenario may make before the harness calls the agent runaway, at most;
#: the budget of a scenario is relative to its plan's crash-free run (:func:`request_budget`).
MAX_REQUESTS_PER_SCENARIO = 400


def runaway_detail(made: int, budget: int) -> str:
    """How a runaway attempt is reported (in memory and process mode alike)."""
    return f"{made} model requests, more than the {budget} this scenario may make (a multiple of its crash-free run's)"


def request_budget(plan: Plan, faults: FaultPlan, crash_free_requests: int | None) -> int:
    """Model requests (generations) a scenario may make before it is stopped as a runaway.

    The crash-free run of a plan needs one request per step and one for the answer; a run
    with faults may need the crash-free run's requests again after each fault, and the
    SDK's retries of each API fault.

    >>> from reference_agent.scripted import Plan
    >>> request_budget(Plan((), "done"), FaultPlan(), None)
    12
    """
    if crash_free_requests is None:
        budget = 4 * _turns(plan) + 8
    else:
        budget = 2 * max(crash_free_requests, 1) * (faults.size + 1) + 3 * len(faults.api_faults) + 8
    return min(budget, MAX_REQUESTS_PER_SCENARIO)

def _turns(plan: Plan) -> int:
    """Model turns of a crash-free run of ``plan``: one per step and one for the answer, in
    the lead's conversation and in each sub-agent's (a call's plan of its own).

    >>> from reference_agent.scripted import Plan, Step, ToolCall
    >>> sub = Plan((Step((ToolCall("look", {}),)),), "found")
    >>> _turns(Plan((Step((ToolCall("delegate", {"task": "look it up"}, plan=sub),)),), "done"))
    4
    """
    return len(plan.steps) + 1 + sum(_turns(c.plan) for step in plan.steps for c in step.calls if c.plan is not None)


# -- the agent under test -----------------------------------------------------------------------
def request_rules_hook(timeline: Timeline) -> Callable[[str, int, Any], None]:
    """A fake-API hook, added after the fault injector's, that records on each generation's
    ``model_request`` event what the API would reject in the request beyond its messages
    (``request_error``, read by the ``valid_sequence`` oracle): the fake checks only the
    messages of a request, the real API the whole of it."""

    from reference_agent.validation import request_rule_error

    def hook(event: str, index: int, body: Any) -> None:
        if event != "request" or not is_generation(body):
            return
        error = request_rule_error(body)
        if error is None:
            return
        messages = body.get("messages")
        # The injector's event for this request holds the request's own messages list.
        for recorded in reversed(timeline.events):
            if recorded.kind == "model_request" and recorded.data.get("messages") is messages:
                recorded.data["request_error"] = error
                return

    return hook


def _is_async(run: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(run):
        return True
    call = getattr(run, "__call__", None)  # noqa: B004 - objects with an async __call__
    return call is not None and inspect.iscoroutinefunction(call)


def _not_awaitable(answer: Any) -> Any:
    """``answer``, unless ``run`` was a plain function that returned an awaitable."""
    if inspect.isawaitable(answer):
        close = getattr(answer, "close", None)
        if callable(close):
            close()  # a coroutine never awaited: no "never awaited" warning on top
        raise TypeError(
            f"run returned {type(answer).__name__} {answer!r} instead of an answer: it is not declared "
            "`async def`, so fuzz called it with the sync client and did not await it. Declare it "
            "`async def` (or give an object whose __call__ is), and fuzz awaits it with an AsyncAnthropic client"
        )
    return answer


def _resolve_run(run: Any) -> Callable[..., Any]:
    if isinstance(run, str):
        resolved: Callable[..., Any] = _import_object(run, "run")
        return _check_signature(resolved)
    if not callable(run):
        raise TypeError(f"run must be a callable run(task_id, goal, *, client, store, tools), not {type(run).__name__}")
    return _check_signature(run)


def _check_signature(run: Callable[..., Any]) -> Callable[..., Any]:
    """``run``, if it can be called as the harness calls it (checked before anything runs;
    a callable whose signature Python cannot read is taken as it is)."""
    target = getattr(run, "func", run)  # a functools.partial's function
    if inspect.isgeneratorfunction(target) or inspect.isasyncgenfunction(target):
        # Calling it runs nothing: the harness saw a generator object for the answer, and
        # blamed completed_idempotent (an outside round).
        name = getattr(target, "__name__", type(target).__name__)
        raise TypeError(
            f"run must be a function that runs the task and returns its answer; {name} is a "
            "generator function (it yields), so calling it runs none of its body. Return the "
            "answer instead of yielding, or wrap it: run = lambda *a, **k: list(my_gen(*a, **k))[-1]"
        )
    try:
        signature = inspect.signature(run)
    except (TypeError, ValueError):
        return run
    try:
        signature.bind("task-id", "goal", client=None, store=None, tools=None)
    except TypeError as exc:
        name = getattr(run, "__name__", type(run).__name__)
        raise TypeError(
            f"run must accept run(task_id, goal, *, client, store, tools), as fuzz calls it; "
            f"{name}{signature} does not ({exc}). Take the arguments it does not use as **kwargs"
        ) from None
    return run


def _import_object(path: str, argument: str) -> Any:
    import importlib

    module_name, sep, attribute = path.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"{argument}: expected 'module:attribute', got {path!r}")
    try:
        module = importlib.import_module(module_name)
        target: Any = module
        for part in attribute.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise ValueError(
            f"{argument}: cannot import {path!r} ({type(exc).__name__}: {exc}); check the module "
            "is importable (on sys.path) and the names are spelled right"
        ) from None
    return target


def _load_tools(path: str) -> Any:
    """The toolbox ``"module:attr"`` names: the object, or what it returns if it is a factory."""
    target = _import_object(path, "tools")
    if not callable(getattr(target, "definitions", None)) and callable(target):
        target = target()
    _check_tools(target)
    return target


def _check_goal(goal: object) -> str:
    """The ``goal`` argument: the agent's first user message, so a non-blank string."""
    from reference_agent.agent import check_goal

    try:
        return check_goal(goal)
    except ValueError as exc:
        raise ValueError(f"goal: {exc}") from None


def _check_count(name: str, value: object, minimum: int, *, optional: bool = False) -> None:
    """An int argument (not a bool) of at least ``minimum``; ``None`` too if ``optional``."""
    if optional and value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, not {value!r}")


def _check_client(client: object) -> None:
    if client not in ("sdk", "direct"):
        raise ValueError(f"client must be 'sdk' or 'direct', not {client!r}")


def _check_tools(tools: Any) -> None:
    for method in ("definitions", "spec", "call"):
        if not callable(getattr(tools, method, None)):
            raise TypeError(
                f"tools must be a toolbox with definitions(), spec(name) and call(name, input, "
                f"*, idempotency_key=None); {type(tools).__name__} has no {method}()"
            )
    if not tools.definitions():
        raise ValueError("tools: the toolbox has no tools; fuzz needs at least one to plan over")


def _tool_flags(tools: Any) -> dict[str, ToolFlags]:
    from reference_agent.toolbox import TOOL_KINDS

    flags = {}
    for definition in tools.definitions():
        spec = tools.spec(definition["name"])
        commands = tuple(
            (command, ToolFlags(*TOOL_KINDS[kind]))
            for command, kind in (getattr(spec, "command_kinds", None) or {}).items()
        )
        flags[definition["name"]] = ToolFlags(
            bool(spec.irreversible), bool(spec.idempotent), bool(getattr(spec, "repeat_safe", False)), commands
        )
    return flags


# The SDK's OpenTelemetry spans in the clients the harness makes, on CPython 3.11 and
# earlier: none. An attempt that a ``Crash`` (a ``BaseException``) ends leaves the SDK's
# generators, a ``tool_runner`` among them, suspended in reference cycles; the collector
# finalizes them later, and their ``finally`` enters and leaves the runner's span, which
# sets and resets a ``ContextVar``. Before 3.12 the collector runs inside whichever
# allocation crosses its threshold, so that can happen midway through another
# ``ContextVar.set`` or ``reset`` of the same context, which then reads the HAMT the
# finalizer freed (CPython gh-148891): the interpreter crashes. Without spans those
# finalizers set no ``ContextVar``; no verdict reads a span. 3.12 and later keep them.
SDK_SPANS: Literal[False] | None = None if sys.version_info >= (3, 12) else False


class _Router:
    """One SDK client for the whole fuzz call, routed to the current scenario's fake API.

    Building an ``anthropic.Anthropic`` costs as much as a model call; the agent object is
    what a crash discards, not the HTTP client.
    """

    def __init__(self) -> None:
        import httpx2

        router = self

        class Sync(httpx2.BaseTransport):
            def handle_request(self, request: httpx2.Request) -> httpx2.Response:
                return router.sync.handle_request(request)

        class Async(httpx2.AsyncBaseTransport):
            async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
                return await router.async_.handle_async_request(request)

        self.sync: httpx2.BaseTransport
        self.async_: httpx2.AsyncBaseTransport
        self._sync_transport = Sync()
        self._async_transport = Async()
        self._client: anthropic.Anthropic | None = None
        self.api: FakeMessagesAPI

    def use(self, api: FakeMessagesAPI) -> None:
        self.api = api
        self.sync = api.transport()
        self.async_ = api.async_transport()

    def client(self) -> anthropic.Anthropic:
        if self._client is None:
            import anthropic
            import httpx2

            from reference_agent.offline import FAKE_API_KEY

            self._client = anthropic.Anthropic(
                api_key=FAKE_API_KEY,
                base_url="http://agentckpt.fake",
                http_client=httpx2.Client(transport=self._sync_transport),
                open_telemetry=SDK_SPANS,
            )
        return self._client

    def async_client(self) -> anthropic.AsyncAnthropic:
        # An async client is bound to the event loop that used it: one per attempt.
        import anthropic
        import httpx2

        from reference_agent.offline import FAKE_API_KEY

        return anthropic.AsyncAnthropic(
            api_key=FAKE_API_KEY,
            base_url="http://agentckpt.fake",
            http_client=httpx2.AsyncClient(transport=self._async_transport),
            open_telemetry=SDK_SPANS,
        )


class _DirectMessages:
    """``client.messages.create`` straight into the fake API: no HTTP stack, no SDK parsing
    of a request. The fake still validates, runs the hooks and injects the faults; status
    errors become the SDK's exception classes after the SDK's two retries."""

    _ERRORS = {400: "BadRequestError", 429: "RateLimitError", 500: "InternalServerError", 529: "OverloadedError"}

    def __init__(self, router: _Router) -> None:
        self._router = router

    def create(self, **params: Any) -> Any:
        import anthropic
        import httpx2
        from pydantic_core import to_json

        from reference_agent.offline import FAKE_API_KEY

        body = to_json(params, exclude_none=True)
        request = httpx2.Request("POST", "http://agentckpt.direct/v1/messages")
        for _ in range(3):  # the SDK's default: one try and two retries
            status, _headers, raw, drop = self._router.api.handle(
                "POST", "/v1/messages", {"x-api-key": FAKE_API_KEY}, body
            )
            if drop is None and status == 200:
                return anthropic.types.Message.model_validate_json(raw)
            if drop is None and status not in (429, 500, 529):
                break
        if drop == "timeout":
            raise anthropic.APITimeoutError(request=request)
        if drop is not None:
            raise anthropic.APIConnectionError(request=request)
        payload = json.loads(raw)
        error = getattr(anthropic, self._ERRORS.get(status, "APIStatusError"))
        message = f"Error code: {status} - {payload}"
        raise error(message, response=httpx2.Response(status, content=raw, request=request), body=payload)


    def count_tokens(self, **params: Any) -> Any:
        """The fake's token count (not a model call: no fault point, no budget)."""
        import anthropic
        from pydantic_core import to_json

        from reference_agent.offline import FAKE_API_KEY

        status, _headers, raw, _drop = self._router.api.handle(
            "POST", "/v1/messages/count_tokens", {"x-api-key": FAKE_API_KEY}, to_json(params, exclude_none=True)
        )
        if status != 200:
            raise RuntimeError(f"count_tokens answered {status}: {raw.decode(errors='replace')}")
        return anthropic.types.MessageTokensCount.model_validate_json(raw)


class _DirectClient:
    """A stand-in for ``anthropic.Anthropic`` offering only ``messages.create`` and
    ``messages.count_tokens``: the fast path of ``fuzz(client="direct")`` for agents that use
    nothing else of the SDK."""

    def __init__(self, router: _Router) -> None:
        self.messages = _DirectMessages(router)

    def with_options(self, **_: Any) -> _DirectClient:
        return self


def _caught(crash: Crash, raised: BaseException | None) -> str:
    """The end of an attempt whose agent caught the harness's crash and went on."""
    then = f"raised {type(raised).__name__}: {raised}" if raised is not None else "returned"
    return (
        f"{crash}, caught by the agent, which then {then}; a killed process does neither, so "
        "the attempt ended at the crash (do not catch BaseException, or re-raise it)"
    )


class _Runaway(SystemExit):
    """The agent made more model requests than any plan needs: stop it.

    A ``SystemExit``, as :class:`~pytest_agentckpt.faults.Crash`: raised in the model call
    of a framework's worker task, it stops the event loop rather than staying on the task
    (where a framework that never reads it would wait for ever)."""


def _open_store_source(store: Any) -> Callable[[], tuple[CheckpointStore, bool]]:
    """A function giving (store, close_after) for one fuzz call."""
    from stores import CheckpointStore, open_store

    if store is None:
        return lambda: (open_store("memory://agentckpt-fuzz"), True)
    if isinstance(store, str):
        url = store
        return lambda: (open_store(url), True)
    # A store class satisfies the runtime Protocol check too (it has the methods), but it
    # is a factory: test for classes first.
    if isinstance(store, CheckpointStore) and not isinstance(store, type):
        instance = store
        return lambda: (instance, False)
    if callable(store):
        factory = store
        return lambda: (factory(), True)
    raise TypeError(
        "store must be a CheckpointStore, a store URL, a factory returning a store, or None "
        f"(in-memory), not {type(store).__name__}"
    )


#: What a resumed attempt does when it has work left.
_WORK = ("model_request", "tool_call", "effect", "store_save", "store_save_failed")


#: Clean stops that did work before they stopped, resumed beyond the resume limit (an agent
#: that pauses by design, say for a human's approval before each irreversible call, stops
#: once per pause even with no fault at all). Each did work, so the request budget bounds
#: them too; this bounds an agent that keeps stopping after a tool call alone.
MAX_WORKING_STOPS = 50
#: Clean stops in a row that did nothing at all (an agent waiting for an approval that
#: has not come yet), each given a resume of its own: more, and the task is stuck.
MAX_WAITS = 8


def advanced(timeline: Timeline, attempt: int | None = None) -> bool:
    """Whether ``attempt`` (the current one by default) saved progress: its last checkpoint
    write holds another conversation state (task, iteration, message count, status) than
    the last write before it. An agent that fails the same way at each resume saves none."""
    attempt = timeline.attempt if attempt is None else attempt
    saves = timeline.of("store_save")
    mine = [e for e in saves if e.attempt == attempt]
    if not mine:
        return False
    before = [e for e in saves if e.attempt < attempt]
    if not before:
        return True

    def state(event: Any) -> tuple[Any, ...]:
        messages = event.data.get("messages")
        count = len(messages) if isinstance(messages, list) else None
        return (event.data.get("task_id"), event.data.get("iteration"), count, event.data.get("status"))

    return state(mine[-1]) != state(before[-1])


def attempt_numbers(limit: int, timeline: Timeline) -> Iterator[int]:
    """The attempts of a scenario: ``limit`` resumes after the first attempt, and one more
    after each pause of the agent's own, at most :data:`MAX_WORKING_STOPS` of them. A pause
    is a clean stop (an attempt that returned, its checkpoint still ``running``) that made
    a model request or a tool call first, or an error (the agent raised) after it saved
    progress (:func:`advanced`). A clean stop that did nothing (waiting for something) gets
    one more too, at most :data:`MAX_WAITS` in a row.

    A resume limit counts the faults' damage: a pause that the agent's own design makes is
    no damage, and a sound agent that pauses more often than its faults allow resumes must
    not be reported as one that never finishes.
    """
    allowed, working, waits, number = limit + 1, 0, 0, 0
    while number < allowed:
        yield number
        number += 1
        ends = timeline.of("attempt_end")
        last = ends[-1] if ends else None
        if last is None or working >= MAX_WORKING_STOPS:
            continue
        outcome = last.data.get("outcome")
        worked = any(e.attempt == last.attempt and e.kind in _WORK for e in timeline.events)
        if (
            outcome == "stopped"
            and any(e.attempt == last.attempt and e.kind in ("model_request", "tool_call") for e in timeline.events)
        ) or (outcome == "error" and advanced(timeline, last.attempt)):
            working += 1
            allowed += 1
        elif outcome == "stopped" and not worked and waits < MAX_WAITS:
            # A stop that did nothing: the agent waits for something (an approval).
            waits += 1
            allowed += 1
        if worked:
            waits = 0


def resumed_idle(timeline: Timeline, answer: Any, stopped: tuple[Any] | None) -> bool:
    """Whether the attempt just ended, a resume after a clean stop, did nothing at all
    (no model request, tool call, effect or save) and returned what the stop returned.

    The harness tells a clean stop from a completion by the status of the task's
    checkpoint; an agent that keeps its own state format and never sets it looks stopped
    after every return. One whose resume finds nothing to do and answers the same again
    is done, once :data:`MAX_WAITS` resumes in a row did nothing: until then, it may be
    waiting for something, such as an approval that has not come yet. (Never an agent
    seen to set status ``completed``: its idle return is a stop.)
    """
    if stopped is None or answer != stopped[0]:
        return False
    if any(e.kind in _WORK for e in timeline.events if e.attempt == timeline.attempt):
        return False
    # An agent waiting for something (an approval not given yet) stops so too: it is done
    # only once MAX_WAITS resumes in a row found nothing to do.
    waited = 0
    for attempt in range(timeline.attempt - 1, 0, -1):
        events = [e for e in timeline.events if e.attempt == attempt]
        ends = [e for e in events if e.kind == "attempt_end"]
        if not ends or ends[-1].data.get("outcome") != "stopped" or any(e.kind in _WORK for e in events):
            break
        waited += 1
    return waited >= MAX_WAITS - 1


def marks_completion(timeline: Timeline, task_id: str) -> bool:
    """Whether the agent saved the task's checkpoint (under ``task_id``; a sub-agent's or a
    snapshot's say nothing of it) with status ``completed`` in ``timeline``."""
    return any(
        e.data.get("status") == "completed" and e.data.get("task_id") == task_id for e in timeline.of("store_save")
    )


def stopped_detail(answer: Any) -> str:
    """Why a run that only ever stopped cleanly did not complete."""
    return (
        f"it returned {str(answer)[:80]!r} while the task's checkpoint said status 'running' "
        "(a clean stop, resumed), and the resumes never completed it: the task is stuck. If "
        "it is done, set status='completed' on completion, or keep a checkpoint under the "
        "task id; if it waits for something (an approval, a reply), what it waits for was "
        "lost or is given only once: record it in the checkpoint before you consume or act "
        "on it"
    )


@dataclass
class _Outcome:
    timeline: Timeline
    completed: bool
    answer: str | None
    error: str | None
    rerun_from: int | None = None
    rerun_answer: str | None = None
    infeasible: str | None = None
    hits: Counter[str] = field(default_factory=Counter)
    #: Loads and saves, and model requests, counted as the fault plan counts them; set
    #: (``counted``) only where every one of them is seen, the in-process run.
    store_ops: Counter[str] = field(default_factory=Counter)
    requests: int = 0
    #: The indices of the requests that asked for a streamed reply (where ``counted``).
    streamed: frozenset[int] = frozenset()
    counted: bool = False
    crashes: int = 0
    #: Why the scenario was stopped as a runaway, if it was.
    runaway: str | None = None
    #: What the run met up to its completion (not the re-run of the completed task): what
    #: occurrences counted from the end of a crash-free run are resolved against.
    counts: RunCounts | None = None

    def reaches(self, faults: FaultPlan) -> bool:
        """Whether a run that goes as this one did would meet a fault of ``faults``.

        A run under ``faults`` is this run until its first fault fires; when no fault's
        occurrence is met here, none fires there. (Counts include the re-run of the
        completed task, where nothing is injected: they can only say yes too often.) A
        stream fault is met only on a request that streamed. Unknown counts (``counted``
        false) say yes.
        """
        if not self.counted:
            return True
        hits, ops = self.hits, self.store_ops
        return (
            any(crash.occurrence <= hits[crash.point] for crash in faults.crashes)
            or any(
                fault.request in self.streamed if fault.kind in STREAM_FAULT_KINDS else fault.request <= self.requests
                for fault in faults.api_faults
            )
            or any(fault.occurrence <= ops[fault.operation] for fault in faults.store_faults)
        )

    def main(self) -> Timeline:
        """The timeline up to the completion (without the re-run of the completed task)."""
        if self.rerun_from is None:
            return self.timeline
        main = Timeline()
        main.attempt = self.timeline.attempt
        main.events = self.timeline.events[: self.rerun_from]
        return main


def delete_scenario_checkpoints(store: Any, task_id: str, timeline: Timeline) -> None:
    """Delete what a scenario saved: its task's checkpoint and every one the agent saved
    under a key made from the task id (a sub-agent's ``f"{task_id}/sub/..."``, snapshots
    ``f"{task_id}@{n}"``). Keys that do not start with the task id may hold state the agent
    shares across tasks, or a user's data: they are left alone."""
    store.delete(task_id)
    derived = {e.data.get("task_id") for e in timeline.of("store_save")}
    for key in sorted(k for k in derived if isinstance(k, str) and k != task_id and k.startswith(task_id)):
        store.delete(key)


def run_counts(injector: FaultInjector, hits: Counter[str] | None = None, store_ops: Counter[str] | None = None) -> RunCounts:
    """A copy of what ``injector`` counted so far (``hits`` and ``store_ops``, where another
    process counted them: added to its own)."""
    return RunCounts(
        hits=dict(injector.hits + (hits or Counter())),
        store_ops=dict(injector.store_ops + (store_ops or Counter())),
        requests=injector.requests,
        streamed=frozenset(injector.streamed),
        # Another process met points too: their order among the injector's is not known.
        order=() if hits is not None else tuple(injector.order),
        changes=() if hits is not None else tuple(injector.changes),
        unsaved=frozenset(injector.timeline.unsaved),
    )


def _quiet_crashes(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """An attempt's event loop's exception handler: a crash leaves the task it was raised
    in with its exception unread (it stopped the loop, as a process's death stops every
    task), and asyncio would log each such task, traceback and all, when it is freed. So
    does the end of a runaway attempt, in a task the agent left running."""
    if isinstance(context.get("exception"), Crash | _Runaway):
        return
    loop.default_exception_handler(context)


#: Seconds an attempt in memory mode may do nothing (no model call, tool call or store
#: operation) before the watch says where it waits: as long as process mode lets an
#: attempt run before it kills it.
HANG_NOTICE = 120.0
#: How often the watch looks.
HANG_POLL = 5.0


@dataclass
class _Watched:
    """An attempt the hang watch looks at: its timeline, its thread, how many events it had
    when the watch last saw them change, and whether the watch has told of it."""

    timeline: Timeline
    thread: threading.Thread
    seen: int = -1
    since: float = field(default_factory=time.monotonic)
    told: bool = False


class _HangWatch:
    """Says where an attempt in memory mode waits once it has done nothing for
    :data:`HANG_NOTICE` seconds. It cannot stop it (only process mode kills an attempt):
    without it, a hung agent (a tool task that died and a queue no one fills, as in an
    outside round's AutoGen fit) hung the test run without a word. One thread watches
    every executor's current attempt; it starts at the first attempt."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watched: dict[int, _Watched] = {}  # by the executor's id
        self._thread: threading.Thread | None = None

    def watch(self, executor: object, timeline: Timeline) -> None:
        with self._lock:
            self._watched[id(executor)] = _Watched(timeline, threading.current_thread())
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="agentckpt-hang-watch", daemon=True)
                self._thread.start()

    def forget(self, executor: object) -> None:
        with self._lock:
            self._watched.pop(id(executor), None)

    def _run(self) -> None:
        while True:
            time.sleep(HANG_POLL)
            now = time.monotonic()
            with self._lock:
                due = []
                for watched in self._watched.values():
                    count = len(watched.timeline.events)
                    if count != watched.seen:
                        watched.seen, watched.since, watched.told = count, now, False
                    elif not watched.told and now - watched.since >= HANG_NOTICE:
                        watched.told = True
                        due.append((watched, now - watched.since))
            for watched, idle in due:
                _say_hung(watched.timeline, watched.thread, idle)


def _say_hung(timeline: Timeline, thread: threading.Thread, idle: float) -> None:
    from . import _progress
    from ._process import ATTEMPT_TIMEOUT

    where = _where(thread)
    text = (
        f"agentckpt: attempt {timeline.attempt} of the agent has made no model call, tool call or "
        f"store operation for {idle:.0f} s"
        + (f"; it waits at {where}" if where else "")
        + ". In memory mode a hang cannot be stopped: interrupt the run, or fuzz with "
        f"mode='process', where an attempt is killed after {ATTEMPT_TIMEOUT:g} s and reported. Look "
        "for what it waits on: a task or thread that died (a tool that raised a BaseException), a "
        "lock, a queue no one fills\n"
    )
    sink = _progress.sink
    try:
        if sink is not None:
            sink.write("\n" + text)
        elif sys.__stderr__ is not None:
            sys.__stderr__.write(text)
    except Exception:  # a closed terminal: nothing else to do from this thread
        pass


def _where(thread: threading.Thread) -> str:
    """Where ``thread`` is waiting: its innermost frame outside the standard library and
    this package (the agent's line), or "" when there is none (an event loop's wait)."""
    import sysconfig
    import traceback

    frame = sys._current_frames().get(thread.ident or -1)
    if frame is None:
        return ""
    skip = (sysconfig.get_paths()["stdlib"], os.path.dirname(__file__))
    for entry in reversed(traceback.extract_stack(frame)):
        if not entry.filename.startswith(skip):
            return f"{entry.filename}:{entry.lineno} ({(entry.line or '').strip()})"
    return ""


_HANG_WATCH = _HangWatch()


class _Executor:
    """Runs one agent through plans and fault plans, in process."""

    #: Whether a run's counts hold the order its fault points were met in (crash fractions).
    orders_points = True
    #: Whether a crash is an exception that unwinds the agent's stack (its ``finally:``
    #: blocks run), not a killed process.
    crashes_unwind = True

    def __init__(
        self,
        run: Callable[..., Any],
        tools: Any,
        *,
        store: Any,
        budget: int | None,
        max_resumes: int | None,
        goal: str,
        client: ClientPath = "sdk",
        ignore_oracles: frozenset[str] = frozenset(),
        history: HistoryLocator | None = None,
    ) -> None:
        from reference_agent.world import World

        self.ignore_oracles = ignore_oracles
        self.history = history
        self.client_path = client
        self.run = run
        self.is_async = _is_async(run)
        self.tools = tools
        self.flags = _tool_flags(tools)
        self.budget = budget
        self.max_resumes = max_resumes
        self.goal = goal
        self.router = _Router()
        self.world = World()
        self.store, self._close_store = _open_store_source(store)()
        self._ids = itertools.count(1)
        self._prefix = hashlib.sha1(os.urandom(8)).hexdigest()[:8]
        self._baselines: dict[str, tuple[Baseline, _Outcome]] = {}
        #: Whether the agent marks completion in its checkpoint (a save with status
        #: 'completed' was seen): then a return while the checkpoint is running is a stop,
        #: even one that did nothing (see :func:`resumed_idle`).
        self.uses_status = False

    def close(self) -> None:
        _HANG_WATCH.forget(self)
        self.world.close()
        if self._close_store:
            self.store.close()

    # -- one run of a plan under a fault plan ------------------------------------------------
    def execute(self, plan: Plan, faults: FaultPlan, *, rerun: bool = True) -> _Outcome:
        from reference_agent.offline import FakeMessagesAPI
        from reference_agent.scripted import PlanModel

        timeline = Timeline()
        injector = FaultInjector(faults, timeline)
        injector.strict_tools = faults.size == 0
        api = FakeMessagesAPI(PlanModel(plan, strict_tools=True), validate=True)
        cached = self._baselines.get(canonical(plan.to_dict()))
        limit_requests = request_budget(plan, faults, None if cached is None else cached[0].requests)
        requests = [0, limit_requests]

        def guard(event: str, index: int, body: Any) -> None:
            if event == "request" and is_generation(body):
                requests[0] += 1
                if requests[0] > requests[1]:
                    raise _Runaway(runaway_detail(requests[0], requests[1]))

        rules = request_rules_hook(timeline)
        api.add_hook(guard)
        api.add_hook(injector.model_hook)
        api.add_hook(rules)
        api.add_delivery_hook(injector.model_delivered)
        injector.api_sink = lambda kind, mid_reply=False: api.fail_next(kind, mid_reply=mid_reply)
        self.router.use(api)
        self.world.clear()
        task_id = f"fuzz-{self._prefix}-{next(self._ids)}"
        store = FaultyStore(self.store, injector, history=self.history)
        tools = InstrumentedToolbox(self.tools, self.world, injector)
        outcome = _Outcome(timeline, completed=False, answer=None, error=None)
        limit = self.max_resumes if self.max_resumes is not None else faults.attempts_needed
        quiet_errors = 0
        stopped: tuple[Any] | None = None  # what the last clean stop returned
        idle = False  # whether the run was taken for done by resumed_idle
        try:
            for _ in attempt_numbers(limit, timeline):
                faults_before = injector.crashes + len(timeline.of("api_fault", "store_outage"))
                timeline.start_attempt()
                injector.attempt_started()
                api.clear_faults()
                try:
                    answer = self._call(task_id, store, tools)
                except Crash as crash:
                    timeline.add("attempt_end", outcome="crash", detail=str(crash))
                    quiet_errors = 0
                    continue
                except _Runaway as exc:
                    timeline.add("attempt_end", outcome="runaway", detail=str(exc))
                    outcome.error = outcome.runaway = str(exc)
                    break
                except PlanInfeasible as exc:
                    timeline.add("attempt_end", outcome="infeasible", detail=str(exc))
                    outcome.infeasible = outcome.error = str(exc)
                    break
                except Exception as exc:
                    if injector.dead is not None:
                        # The agent caught the crash and raised something else: a killed
                        # process raises nothing, so the attempt died all the same.
                        timeline.add("attempt_end", outcome="crash", detail=_caught(injector.dead, exc))
                        quiet_errors = 0
                        continue
                    gave_up = injector.gave_up(exc)
                    if gave_up is not None:
                        # The crash-free run: the agent gave up on a tool's error (its retries
                        # ran out), as the scripted model would never stop asking.
                        timeline.add("attempt_end", outcome="infeasible", detail=gave_up)
                        outcome.infeasible = outcome.error = gave_up
                        break
                    detail = f"{type(exc).__name__}: {exc}"
                    timeline.add("attempt_end", outcome="error", detail=detail)
                    outcome.error = detail
                    faulted = injector.crashes + len(timeline.of("api_fault", "store_outage")) > faults_before
                    # An error after saved progress (an agent that raises to pause) is no
                    # repeat of the last one.
                    quiet_errors = 0 if faulted or advanced(timeline) else quiet_errors + 1
                    # Twice the same failure with no fault in between: resuming again
                    # would not change anything.
                    if quiet_errors >= 2:
                        break
                    continue
                if injector.dead is not None:
                    # The agent caught the crash and returned: a killed process returns
                    # nothing; what it did after the crash through the harness did nothing.
                    timeline.add("attempt_end", outcome="crash", detail=_caught(injector.dead, None))
                    quiet_errors = 0
                    continue
                if self._still_running(task_id, timeline) and not (
                    idle := not self.uses_status and resumed_idle(timeline, answer, stopped)
                ):
                    timeline.add("attempt_end", outcome="stopped", detail=str(answer))
                    outcome.error = stopped_detail(answer)
                    stopped = (answer,)
                    continue
                timeline.add("attempt_end", outcome="answer", detail=str(answer))
                outcome.completed, outcome.answer, outcome.error = True, answer, None
                break
            outcome.counts = run_counts(injector)
            if outcome.completed and rerun:
                injector.plan = FaultPlan()
                injector.disarm()
                outcome.rerun_from = len(timeline)
                # Its own budget: an agent that forgot the completion may do it all again.
                requests[:] = [0, requests[0] + 8]
                timeline.start_attempt("the completed task, run again")
                try:
                    outcome.rerun_answer = self._call(task_id, store, tools)
                    timeline.add("attempt_end", outcome="answer", detail=str(outcome.rerun_answer))
                except (Exception, _Runaway) as exc:
                    outcome.rerun_answer = None
                    timeline.add("attempt_end", outcome="error", detail=f"{type(exc).__name__}: {exc}")
        finally:
            delete_scenario_checkpoints(self.store, task_id, timeline)
            # The scenario's objects point at each other (the fake's hooks at the injector,
            # the injector's sink at the fake): unhook them, so that they are freed now
            # rather than by the garbage collector's passes.
            api.remove_hook(guard)
            api.remove_hook(injector.model_hook)
            api.remove_hook(rules)
            api.remove_delivery_hook(injector.model_delivered)
            injector.api_sink = None
        if not self.uses_status and marks_completion(timeline, task_id):
            self.uses_status = True
            if idle and outcome.completed:
                # A resume that did nothing was taken for the end of an agent that never
                # marks completion; this one does (a later run saved 'completed'): its
                # idle return was a stop, waiting for something (an approval), so the
                # scenario is run again, judged by the status.
                return self.execute(plan, faults, rerun=rerun)
        outcome.hits = injector.hits
        outcome.store_ops = injector.store_ops
        outcome.requests = injector.requests
        outcome.streamed = frozenset(injector.streamed)
        outcome.counted = True
        outcome.crashes = injector.crashes
        return outcome

    def _call(self, task_id: str, store: FaultyStore, tools: InstrumentedToolbox) -> Any:
        _HANG_WATCH.watch(self, store.injector.timeline)
        try:
            return self._call_agent(task_id, store, tools)
        except Crash:
            raise
        except BaseException as exc:
            # A crash inside a task group comes out in an exception group: the attempt died.
            crash = crash_within(exc)
            if crash is None:
                raise
            raise crash from exc
        finally:
            _HANG_WATCH.forget(self)

    def _call_agent(self, task_id: str, store: FaultyStore, tools: InstrumentedToolbox) -> Any:
        if self.is_async:
            async_client = self.router.async_client()

            async def main() -> Any:
                asyncio.get_running_loop().set_exception_handler(_quiet_crashes)
                try:
                    return await self.run(task_id, self.goal, client=async_client, store=store, tools=tools)
                finally:
                    await async_client.close()

            return asyncio.run(main())
        client: Any = _DirectClient(self.router) if self.client_path == "direct" else self.router.client()
        return _not_awaitable(self.run(task_id, self.goal, client=client, store=store, tools=tools))

    def _still_running(self, task_id: str, timeline: Timeline) -> bool:
        # An agent that returns while its checkpoint says "running" stopped cleanly
        # (a store outage, a budget) rather than finished: resume it.
        saves = timeline.of("store_save")
        if saves and saves[-1].data.get("status") == "completed" and saves[-1].attempt == timeline.attempt:
            return False
        try:
            checkpoint = self.store.load(task_id)
        except Exception:
            return False
        if checkpoint is None:
            # Nothing stored: a task that deleted its checkpoint on success, or one whose
            # every save failed (the store down to its end) and that answered all the
            # same. That one's completion is nowhere: a supervisor runs it again.
            writes = [e for e in timeline.of("store_save", "store_save_failed", "store_delete") if e.attempt == timeline.attempt]
            return bool(writes) and writes[-1].kind == "store_save_failed"
        return checkpoint.status == "running"

    # -- the crash-free run of a plan --------------------------------------------------------
    def baseline(self, plan: Plan) -> tuple[Baseline, _Outcome]:
        key = canonical(plan.to_dict())
        cached = self._baselines.get(key)
        if cached is None:
            outcome = self.execute(plan, FaultPlan())
            # The crash-free run up to its completion: the re-run of the completed task is
            # judged by completed_idempotent alone.
            main = outcome.main()
            baseline = Baseline(
                answer=outcome.answer,
                effects=effect_counts(main),
                model_turns=model_turns(main),
                timeline=outcome.timeline,
                requests=len(main.of("model_request")),
            )
            cached = (baseline, outcome)
            if len(self._baselines) > 512:
                self._baselines.clear()
            self._baselines[key] = cached
        return cached


