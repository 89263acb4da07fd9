"""``fuzz``: crash an agent at every point Hypothesis can find, resume it, check the oracles.

>>> from pytest_agentckpt import fuzz
>>> def test_my_agent_survives_crashes():                       # doctest: +SKIP
...     fuzz(my_agent.run, tools=my_toolbox)

For each example Hypothesis draws a plan over the tools (what the scripted model will ask
for) and a fault plan (which occurrence of which fault point crashes, API faults, store
outages). The harness runs the plan once crash-free, then again with the faults: after a
:class:`~pytest_agentckpt.faults.Crash` it drops the agent and calls ``run`` again with the
same task id, a bounded number of times. It then runs the completed task once more and
checks the oracles (:mod:`pytest_agentckpt.oracles`). A failure raises
:class:`OracleFailure` (an ``AssertionError``) naming the oracle, with the shrunk fault
plan, the plan, how to reproduce it and the timeline.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import hashlib
import inspect
import itertools
import json
import os
import threading
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .faults import (
    Crash,
    CrashAt,
    FaultInjector,
    FaultPlan,
    FaultyStore,
    InstrumentedToolbox,
    PlanInfeasible,
    parse_fault_kinds,
)
from .oracles import (
    ORACLES,
    Baseline,
    ToolFlags,
    UnsafeTool,
    Violation,
    canonical,
    completed_idempotent,
    effect_counts,
    iteration_monotone,
    model_turns,
    no_duplicate_effect,
    recorded_work_not_redone,
    same_answer,
    valid_sequence,
)
from .timeline import Timeline

if TYPE_CHECKING:
    import anthropic
    from hypothesis.database import ExampleDatabase
    from hypothesis.strategies import SearchStrategy

    from reference_agent.offline import FakeMessagesAPI
    from reference_agent.scripted import Plan
    from stores import CheckpointStore

__all__ = [
    "PROFILES",
    "FuzzReport",
    "FuzzStats",
    "OracleFailure",
    "Profile",
    "UnsafeToolWarning",
    "configure",
    "fuzz",
    "replay",
    "stats",
]

Mode = Literal["memory", "process"]
ClientPath = Literal["sdk", "direct"]
StoreSource = "CheckpointStore | str | Callable[[], CheckpointStore] | None"

#: Model requests one scenario may make before the harness calls the agent runaway.
MAX_REQUESTS_PER_SCENARIO = 400


# -- profiles and session configuration -----------------------------------------------------
@dataclass(frozen=True)
class Profile:
    """How hard ``fuzz`` tries by default: examples per call and faults per run."""

    name: str
    max_examples: int
    max_crashes: int = 3


#: ``quick`` (default: finds the known bugs in seconds), ``ci``, ``nightly``.
PROFILES: dict[str, Profile] = {
    "quick": Profile("quick", max_examples=200),
    "ci": Profile("ci", max_examples=500),
    "nightly": Profile("nightly", max_examples=100_000, max_crashes=4),
}


@dataclass
class _Session:
    profile: Profile = PROFILES["quick"]
    examples: int | None = None
    seed: int | None = None
    database: ExampleDatabase | None = None


_session = _Session()


def configure(
    *,
    profile: str | None = None,
    examples: int | None = None,
    seed: int | None = None,
    database: ExampleDatabase | None = None,
) -> None:
    """Session-wide defaults for ``fuzz`` (the pytest options call this).

    >>> configure(profile="ci"); configure(profile="quick")
    """
    if profile is not None:
        if profile not in PROFILES:
            raise ValueError(f"profile: unknown {profile!r}; choose from {', '.join(PROFILES)}")
        _session.profile = PROFILES[profile]
    if examples is not None:
        if examples < 1:
            raise ValueError(f"examples must be >= 1, not {examples}")
        _session.examples = examples
    if seed is not None:
        _session.seed = seed
    if database is not None:
        _session.database = database


def _env_profile() -> None:
    name = os.environ.get("AGENTCKPT_PROFILE")
    if name and name in PROFILES:
        _session.profile = PROFILES[name]


_env_profile()


# -- statistics -----------------------------------------------------------------------------
@dataclass
class FuzzStats:
    """What the harness did: the terminal summary prints the session's total."""

    scenarios: int = 0
    fault_points_hit: Counter[str] = field(default_factory=Counter)
    crashes: int = 0
    api_faults: int = 0
    store_faults: int = 0
    resumes: int = 0
    requests_validated: int = 0
    effects_checked: int = 0
    violations: Counter[str] = field(default_factory=Counter)
    unsafe_tools: set[str] = field(default_factory=set)

    def merge(self, other: FuzzStats) -> None:
        """Add ``other``'s counts to these."""
        self.scenarios += other.scenarios
        self.fault_points_hit.update(other.fault_points_hit)
        self.crashes += other.crashes
        self.api_faults += other.api_faults
        self.store_faults += other.store_faults
        self.resumes += other.resumes
        self.requests_validated += other.requests_validated
        self.effects_checked += other.effects_checked
        self.violations.update(other.violations)
        self.unsafe_tools |= other.unsafe_tools

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (pytest-xdist sends it from workers)."""
        return {
            "scenarios": self.scenarios,
            "fault_points_hit": dict(self.fault_points_hit),
            "crashes": self.crashes,
            "api_faults": self.api_faults,
            "store_faults": self.store_faults,
            "resumes": self.resumes,
            "requests_validated": self.requests_validated,
            "effects_checked": self.effects_checked,
            "violations": dict(self.violations),
            "unsafe_tools": sorted(self.unsafe_tools),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FuzzStats:
        """The inverse of :meth:`to_dict`."""
        return cls(
            scenarios=int(data.get("scenarios", 0)),
            fault_points_hit=Counter(data.get("fault_points_hit", {})),
            crashes=int(data.get("crashes", 0)),
            api_faults=int(data.get("api_faults", 0)),
            store_faults=int(data.get("store_faults", 0)),
            resumes=int(data.get("resumes", 0)),
            requests_validated=int(data.get("requests_validated", 0)),
            effects_checked=int(data.get("effects_checked", 0)),
            violations=Counter(data.get("violations", {})),
            unsafe_tools=set(data.get("unsafe_tools", ())),
        )


_stats = FuzzStats()
_stats_lock = threading.Lock()


def stats() -> FuzzStats:
    """The running total of every ``fuzz`` call in this process."""
    return _stats


# -- results and failures ----------------------------------------------------------------------
class UnsafeToolWarning(UserWarning):
    """A tool's effect was repeated because it gives no agent a way to know its outcome."""


@dataclass
class FuzzReport:
    """What a passing ``fuzz`` call did."""

    examples: int
    stats: FuzzStats
    unsafe_tools: list[UnsafeTool]


class OracleFailure(AssertionError):
    """An oracle failed: ``oracle`` names it, ``violations`` has every one that failed.

    >>> OracleFailure([Violation("same_answer", "answers differ")], report="...").oracle
    'same_answer'
    """

    def __init__(
        self,
        violations: Sequence[Violation],
        *,
        report: str,
        fault_plan: FaultPlan | None = None,
        plan: Plan | None = None,
        found_after: int | None = None,
    ) -> None:
        super().__init__(report)
        #: How many scenarios ran before the first failing one was found (before shrinking).
        self.found_after = found_after
        self.violations = list(violations)
        self.oracle = self.violations[0].oracle
        self.oracles = [v.oracle for v in self.violations]
        self.fault_plan = fault_plan
        self.plan = plan


# -- the agent under test -----------------------------------------------------------------------
def _is_async(run: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(run):
        return True
    call = getattr(run, "__call__", None)  # noqa: B004 - objects with an async __call__
    return call is not None and inspect.iscoroutinefunction(call)


def _resolve_run(run: Any) -> Callable[..., Any]:
    if isinstance(run, str):
        return _import_object(run, "run")  # type: ignore[no-any-return]
    if not callable(run):
        raise TypeError(f"run must be a callable run(task_id, goal, *, client, store, tools), not {type(run).__name__}")
    return run  # type: ignore[no-any-return]


def _import_object(path: str, argument: str) -> Any:
    import importlib

    module_name, sep, attribute = path.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"{argument}: expected 'module:attribute', got {path!r}")
    module = importlib.import_module(module_name)
    target: Any = module
    for part in attribute.split("."):
        target = getattr(target, part)
    return target


def _load_tools(path: str) -> Any:
    """The toolbox ``"module:attr"`` names: the object, or what it returns if it is a factory."""
    target = _import_object(path, "tools")
    if not callable(getattr(target, "definitions", None)) and callable(target):
        target = target()
    _check_tools(target)
    return target


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
    flags = {}
    for definition in tools.definitions():
        spec = tools.spec(definition["name"])
        flags[definition["name"]] = ToolFlags(bool(spec.irreversible), bool(spec.idempotent))
    return flags


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


class _DirectClient:
    """A stand-in for ``anthropic.Anthropic`` offering only ``messages.create``: the fast
    path of ``fuzz(client="direct")`` for agents that use nothing else of the SDK."""

    def __init__(self, router: _Router) -> None:
        self.messages = _DirectMessages(router)

    def with_options(self, **_: Any) -> _DirectClient:
        return self


class _Runaway(BaseException):
    """The agent made more model requests than any plan needs: stop it."""


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
    crashes: int = 0


class _Executor:
    """Runs one agent through plans and fault plans, in process."""

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
    ) -> None:
        from reference_agent.world import World

        self.ignore_oracles = ignore_oracles
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

    def close(self) -> None:
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
        api = FakeMessagesAPI(PlanModel(plan), validate=True)
        requests = itertools.count(1)

        def guard(event: str, index: int, body: Any) -> None:
            if event == "request" and next(requests) > MAX_REQUESTS_PER_SCENARIO:
                raise _Runaway(f"more than {MAX_REQUESTS_PER_SCENARIO} model requests")

        api.add_hook(guard)
        api.add_hook(injector.model_hook)
        injector.api_sink = lambda kind: api.fail_next(kind)  # type: ignore[arg-type]
        self.router.use(api)
        self.world.clear()
        task_id = f"fuzz-{self._prefix}-{next(self._ids)}"
        store = FaultyStore(self.store, injector)
        tools = InstrumentedToolbox(self.tools, self.world, injector)
        outcome = _Outcome(timeline, completed=False, answer=None, error=None)
        limit = self.max_resumes if self.max_resumes is not None else faults.size + 3
        quiet_errors = 0
        try:
            for _ in range(limit + 1):
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
                    outcome.error = str(exc)
                    break
                except PlanInfeasible as exc:
                    timeline.add("attempt_end", outcome="infeasible", detail=str(exc))
                    outcome.infeasible = outcome.error = str(exc)
                    break
                except Exception as exc:
                    detail = f"{type(exc).__name__}: {exc}"
                    timeline.add("attempt_end", outcome="error", detail=detail)
                    outcome.error = detail
                    faulted = injector.crashes + len(timeline.of("api_fault", "store_outage")) > faults_before
                    quiet_errors = 0 if faulted else quiet_errors + 1
                    # Twice the same failure with no fault in between: resuming again
                    # would not change anything.
                    if quiet_errors >= 2:
                        break
                    continue
                if self._still_running(task_id, timeline):
                    timeline.add("attempt_end", outcome="stopped", detail=str(answer))
                    continue
                timeline.add("attempt_end", outcome="answer", detail=str(answer))
                outcome.completed, outcome.answer, outcome.error = True, answer, None
                break
            if outcome.completed and rerun:
                injector.plan = FaultPlan()
                injector.disarm()
                outcome.rerun_from = len(timeline)
                timeline.start_attempt("the completed task, run again")
                try:
                    outcome.rerun_answer = self._call(task_id, store, tools)
                    timeline.add("attempt_end", outcome="answer", detail=str(outcome.rerun_answer))
                except (Exception, _Runaway) as exc:
                    outcome.rerun_answer = None
                    timeline.add("attempt_end", outcome="error", detail=f"{type(exc).__name__}: {exc}")
        finally:
            self.store.delete(task_id)
        outcome.hits = injector.hits
        outcome.crashes = injector.crashes
        return outcome

    def _call(self, task_id: str, store: FaultyStore, tools: InstrumentedToolbox) -> Any:
        if self.is_async:
            async_client = self.router.async_client()

            async def main() -> Any:
                try:
                    return await self.run(task_id, self.goal, client=async_client, store=store, tools=tools)
                finally:
                    await async_client.close()

            return asyncio.run(main())
        client: Any = _DirectClient(self.router) if self.client_path == "direct" else self.router.client()
        return self.run(task_id, self.goal, client=client, store=store, tools=tools)

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
        return checkpoint is not None and checkpoint.status == "running"

    # -- the crash-free run of a plan --------------------------------------------------------
    def baseline(self, plan: Plan) -> tuple[Baseline, _Outcome]:
        key = canonical(plan.to_dict())
        cached = self._baselines.get(key)
        if cached is None:
            outcome = self.execute(plan, FaultPlan())
            baseline = Baseline(
                answer=outcome.answer,
                effects=effect_counts(outcome.timeline),
                model_turns=model_turns(outcome.timeline),
                timeline=outcome.timeline,
            )
            cached = (baseline, outcome)
            if len(self._baselines) > 512:
                self._baselines.clear()
            self._baselines[key] = cached
        return cached


# -- judging ----------------------------------------------------------------------------------
def _judge(
    outcome: _Outcome, baseline: Baseline, flags: Mapping[str, ToolFlags], budget: int | None
) -> tuple[list[Violation], list[UnsafeTool]]:
    from reference_agent.validation import InvalidHistoryError, validate_messages

    timeline = outcome.timeline
    main = Timeline()
    main.events = timeline.events[: outcome.rerun_from] if outcome.rerun_from is not None else timeline.events
    violations = valid_sequence(main, validate_messages, error_type=InvalidHistoryError)
    duplicates, unsafe = no_duplicate_effect(main, baseline, flags, completed=outcome.completed)
    violations += duplicates
    violations += same_answer(outcome.answer, baseline, completed=outcome.completed)
    violations += iteration_monotone(main, budget=budget)
    violations += recorded_work_not_redone(main)
    if outcome.rerun_from is not None:
        violations += completed_idempotent(
            timeline.events[outcome.rerun_from :], outcome.rerun_answer, outcome.answer
        )
    if not outcome.completed:
        violations.append(
            Violation(
                "resumes_to_completion",
                f"the agent did not finish: after the last fault it kept failing "
                f"({outcome.error}); a resumed agent must be able to complete the task",
            )
        )
    return violations, unsafe


def _crash_free_failure(outcome: _Outcome) -> list[Violation]:
    from reference_agent.validation import InvalidHistoryError, validate_messages

    found = valid_sequence(outcome.timeline, validate_messages, error_type=InvalidHistoryError)
    if not outcome.completed:
        found.insert(
            0,
            Violation(
                "crash_free_run",
                f"the agent fails with no fault injected at all: {outcome.error}",
            ),
        )
    elif outcome.rerun_from is not None:
        found += completed_idempotent(
            outcome.timeline.events[outcome.rerun_from :], outcome.rerun_answer, outcome.answer
        )
    return found


def _describe_plan(plan: Plan) -> str:
    steps = []
    for step in plan.steps:
        calls = ", ".join(f"{c.name}({json.dumps(dict(c.input), sort_keys=True)})" for c in step.calls)
        steps.append(f"[{calls}]")
    return f"{len(plan.steps)} step(s): {' -> '.join(steps) or '(none)'} -> answer {plan.final_answer!r}"


def _report(
    violations: Sequence[Violation],
    outcome: _Outcome,
    plan: Plan,
    faults: FaultPlan,
    reproduce: str,
    *,
    crash_free: bool = False,
) -> str:
    first = violations[0]
    marks: dict[int, str] = {}
    for violation in reversed(violations):
        marks.update(violation.marks)
    kind = "harness check" if first.oracle in ("crash_free_run", "resumes_to_completion") else "oracle"
    lines = [
        f"agentckpt: {kind} {first.oracle} failed" + (" (in the crash-free run)" if crash_free else ""),
        f"  {first.message}",
    ]
    others = [v for v in violations[1:] if v.oracle != first.oracle]
    if others:
        lines.append("also failed: " + ", ".join(dict.fromkeys(v.oracle for v in others)))
        lines += [f"  {v.oracle}: {v.message}" for v in others[:3]]
    lines += [
        f"fault plan: {faults.describe()}",
        f"plan: {_describe_plan(plan)}",
        f"reproduce: {reproduce}",
        "replay just this scenario: pytest_agentckpt.replay(run, tools, "
        f"Plan.from_dict({json.dumps(plan.to_dict(), sort_keys=True)}), "
        f"FaultPlan.from_dict({json.dumps(faults.to_dict())}))",
        "timeline:",
        outcome.timeline.format(marks=marks),
    ]
    return "\n".join(lines)


@dataclass
class _Verdict:
    plan: Plan
    faults: FaultPlan
    outcome: _Outcome
    violations: list[Violation]
    unsafe: list[UnsafeTool]
    crash_free: bool

    def failure(self, reproduce: str, *, found_after: int | None, minimized: bool = False) -> OracleFailure:
        report = _report(
            self.violations, self.outcome, self.plan, self.faults, reproduce, crash_free=self.crash_free
        )
        if minimized:
            report += (
                "\n(agentckpt shrank this example further than Hypothesis did, re-aiming the crash "
                "occurrences at the smaller plan; the @reproduce_failure line reproduces the larger one, "
                "replay() with the plan and fault plan above reproduces this one)"
            )
        return OracleFailure(
            self.violations, report=report, fault_plan=self.faults, plan=self.plan, found_after=found_after
        )


def _evaluate(executor: _Executor, plan: Plan, faults: FaultPlan, budget: int | None) -> _Verdict:
    """Run ``plan`` crash-free (cached) and under ``faults``; judge the result.

    A plan whose tool calls fail in the crash-free run is infeasible: no violations, and
    ``outcome.infeasible`` says why.
    """
    baseline, clean = executor.baseline(plan)
    if clean.infeasible is not None:
        return _Verdict(plan, FaultPlan(), clean, [], [], crash_free=True)
    ignored = executor.ignore_oracles
    problems = [v for v in _crash_free_failure(clean) if v.oracle not in ignored]
    if problems:
        return _Verdict(plan, FaultPlan(), clean, problems, [], crash_free=True)
    outcome = executor.execute(plan, faults)
    violations, unsafe = _judge(outcome, baseline, executor.flags, budget)
    violations = [v for v in violations if v.oracle not in ignored]
    return _Verdict(plan, faults, outcome, violations, unsafe, crash_free=False)


def _ignored_oracles(ignore_oracles: Sequence[str]) -> frozenset[str]:
    if isinstance(ignore_oracles, str):
        raise ValueError(f"ignore_oracles must be a sequence of oracle names, not {ignore_oracles!r}")
    unknown = sorted(set(ignore_oracles) - set(ORACLES))
    if unknown:
        raise ValueError(f"ignore_oracles: unknown {unknown}; the oracles are {', '.join(ORACLES)}")
    return frozenset(ignore_oracles)


def _smaller_plans(plan: Plan) -> Iterator[Plan]:
    from reference_agent.scripted import Plan, Step

    for index in range(len(plan.steps)):
        yield Plan(plan.steps[:index] + plan.steps[index + 1 :], plan.final_answer)
    for index, step in enumerate(plan.steps):
        if len(step.calls) > 1:
            for drop in range(len(step.calls)):
                calls = step.calls[:drop] + step.calls[drop + 1 :]
                yield Plan((*plan.steps[:index], Step(calls, step.text), *plan.steps[index + 1:]), plan.final_answer)


def _retargeted(faults: FaultPlan) -> Iterator[FaultPlan]:
    """``faults``, then the same crash points aimed at other occurrences."""
    yield faults
    crashes = faults.crashes
    if len(crashes) == 1:
        options: list[tuple[int, ...]] = [(n,) for n in range(1, 13)]
    elif len(crashes) == 2:
        options = list(itertools.product(range(1, 7), repeat=2))
    else:
        return
    for occurrences in options:
        moved = tuple(sorted({CrashAt(c.point, n) for c, n in zip(crashes, occurrences, strict=True)}))
        if moved != crashes and len(moved) == len(crashes):
            yield FaultPlan(moved, faults.api_faults, faults.store_faults)


def _fewer_faults(faults: FaultPlan) -> Iterator[FaultPlan]:
    for index in range(len(faults.crashes)):
        yield FaultPlan(faults.crashes[:index] + faults.crashes[index + 1 :], faults.api_faults, faults.store_faults)
    for index in range(len(faults.api_faults)):
        yield FaultPlan(faults.crashes, faults.api_faults[:index] + faults.api_faults[index + 1 :], faults.store_faults)
    for index in range(len(faults.store_faults)):
        yield FaultPlan(faults.crashes, faults.api_faults, faults.store_faults[:index] + faults.store_faults[index + 1 :])


def _minimize(
    executor: _Executor, budget: int | None, failure: OracleFailure, *, max_runs: int = 300
) -> _Verdict | None:
    """Shrink a failure further than Hypothesis can: a smaller plan moves the occurrence
    at which the same crash must happen, so re-aim the crashes for each smaller plan.

    Keeps the failure's first oracle; bounded by ``max_runs`` scenario runs.
    """
    if failure.plan is None or failure.fault_plan is None:
        return None
    plan, faults, target = failure.plan, failure.fault_plan, failure.oracle
    best: _Verdict | None = None
    runs = 0
    improved = True
    while improved and runs < max_runs:
        improved = False
        candidates: list[tuple[Plan, Iterator[FaultPlan]]] = [(plan, iter(_fewer_faults(faults)))]
        candidates += [(smaller, _retargeted(faults)) for smaller in _smaller_plans(plan)]
        for candidate_plan, fault_options in candidates:
            for candidate_faults in fault_options:
                if runs >= max_runs:
                    break
                runs += 1
                verdict = _evaluate(executor, candidate_plan, candidate_faults, budget)
                if verdict.violations and verdict.violations[0].oracle == target:
                    plan, faults, best, improved = candidate_plan, verdict.faults, verdict, True
                    break
            if improved:
                break
    return best


# -- fuzz ---------------------------------------------------------------------------------------
def fuzz(
    run: Callable[..., Any] | str,
    tools: Any,
    *,
    max_examples: int | None = None,
    max_crashes: int | None = None,
    fault_kinds: Sequence[str] | None = None,
    store: Any = None,
    deadline: float | _dt.timedelta | None = None,
    plans: SearchStrategy[Plan] | Sequence[Plan] | None = None,
    seed: int | None = None,
    budget: int | None = None,
    max_steps: int = 4,
    max_parallel: int = 3,
    max_resumes: int | None = None,
    goal: str = "Carry out the task.",
    unsafe_tools: Literal["warn", "error", "ignore"] = "warn",
    mode: Mode = "memory",
    client: ClientPath = "sdk",
    database: ExampleDatabase | None = None,
    ignore_oracles: Sequence[str] = (),
) -> FuzzReport:
    """Fuzz ``run`` with crashes and resumes; raise :class:`OracleFailure` on a violation.

    ``run``: the agent, ``run(task_id, goal, *, client, store, tools) -> str`` (sync or
    async), or ``"module:function"``. ``tools``: the team's toolbox. ``max_examples``:
    Hypothesis examples (default from the profile: 200 ``quick``, 500 ``ci``).
    ``max_crashes``: crashes per run (default 3). ``fault_kinds``: which fault points, API
    faults and store faults to inject (default all; see
    :data:`~pytest_agentckpt.faults.FAULT_KINDS`). ``store``: a ``CheckpointStore``, a store
    URL or a factory (default in-memory). ``deadline``: Hypothesis's per-example deadline.
    ``plans``: a strategy or a list of plans (default: drawn over ``tools``). ``seed``:
    reproduce a run. ``budget``: the agent's iteration limit, if it has one, so the
    harness can check that it spans restarts. ``mode="process"``: run the agent in a child
    process and SIGKILL it (``run`` and ``tools`` as ``"module:attr"``; ``store`` a URL).
    ``client="direct"``: a faster stand-in for the SDK client offering only
    ``messages.create`` (for agents that use nothing else of it; default ``"sdk"``).
    ``ignore_oracles``: oracles not to judge (names from
    :data:`~pytest_agentckpt.oracles.ORACLES`), for an agent that breaks one on purpose —
    say, one that deletes its checkpoint on success — so the others can still be tested.

    >>> from pytest_agentckpt import fuzz
    >>> from reference_agent import run, demo_toolbox
    >>> report = fuzz(run, demo_toolbox(), max_examples=5)    # doctest: +SKIP
    """
    if mode not in ("memory", "process"):
        raise ValueError(f"mode must be 'memory' or 'process', not {mode!r}")
    if client not in ("sdk", "direct"):
        raise ValueError(f"client must be 'sdk' or 'direct', not {client!r}")
    if unsafe_tools not in ("warn", "error", "ignore"):
        raise ValueError(f"unsafe_tools must be 'warn', 'error' or 'ignore', not {unsafe_tools!r}")
    if max_examples is not None and (not isinstance(max_examples, int) or max_examples < 1):
        raise ValueError(f"max_examples must be a positive int, not {max_examples!r}")
    profile = _session.profile
    crashes_max = profile.max_crashes if max_crashes is None else max_crashes
    if not isinstance(crashes_max, int) or crashes_max < 0:
        raise ValueError(f"max_crashes must be an int >= 0, not {max_crashes!r}")
    if budget is not None and (not isinstance(budget, int) or budget < 1):
        raise ValueError(f"budget must be a positive int, not {budget!r}")
    if max_resumes is not None and (not isinstance(max_resumes, int) or max_resumes < 0):
        raise ValueError(f"max_resumes must be an int >= 0, not {max_resumes!r}")
    if seed is not None and not isinstance(seed, int):
        raise ValueError(f"seed must be an int, not {seed!r}")
    if deadline is not None and not isinstance(deadline, int | float | _dt.timedelta):
        raise ValueError(f"deadline must be seconds or a timedelta, not {deadline!r}")
    if max_steps < 0 or max_parallel < 1:
        raise ValueError(f"max_steps must be >= 0 and max_parallel >= 1, got {max_steps}, {max_parallel}")
    kinds = parse_fault_kinds(fault_kinds)
    ignored = _ignored_oracles(ignore_oracles)
    if mode == "process" and ignored:
        raise ValueError("ignore_oracles is not supported with mode='process'")
    if mode == "process":
        from ._process import fuzz_process

        return fuzz_process(
            run,
            tools,
            max_examples=max_examples or _session.examples or min(profile.max_examples, 10),
            max_crashes=crashes_max,
            fault_kinds=kinds,
            store=store,
            plans=plans,
            seed=seed,
            budget=budget,
            max_steps=max_steps,
            max_parallel=max_parallel,
            goal=goal,
            deadline=deadline,
            unsafe_tools=unsafe_tools,
            database=database,
        )
    agent = _resolve_run(run)
    if isinstance(tools, str):
        tools = _load_tools(tools)
    _check_tools(tools)
    _open_store_source(store)  # validates the argument before any example runs
    examples = max_examples or _session.examples or profile.max_examples
    if client == "direct" and _is_async(agent):
        raise ValueError("client='direct' is for sync agents; an async agent gets the SDK's async client")
    executor = _Executor(
        agent, tools, store=store, budget=budget, max_resumes=max_resumes, goal=goal, client=client,
        ignore_oracles=ignored,
    )
    try:
        return _fuzz_with(
            executor, agent, tools, examples=examples, crashes_max=crashes_max, kinds=kinds,
            deadline=deadline, plans=plans, seed=seed, budget=budget, max_steps=max_steps,
            max_parallel=max_parallel, unsafe_tools=unsafe_tools, database=database,
        )
    finally:
        executor.close()


def replay(
    run: Callable[..., Any] | str,
    tools: Any,
    plan: Plan,
    fault_plan: FaultPlan,
    *,
    store: Any = None,
    budget: int | None = None,
    goal: str = "Carry out the task.",
    ignore_oracles: Sequence[str] = (),
) -> None:
    """Run one scenario (a plan and a fault plan) and check the oracles, as ``fuzz`` does.

    What a failure report's "replay" line calls; raises :class:`OracleFailure`.

    >>> from pytest_agentckpt import replay, FaultPlan, CrashAt, Plan
    >>> replay(my_agent, my_tools, Plan((), "done"), FaultPlan((CrashAt("after_model_call"),)))  # doctest: +SKIP
    """
    agent = _resolve_run(run)
    _check_tools(tools)
    executor = _Executor(
        agent, tools, store=store, budget=budget, max_resumes=None, goal=goal,
        ignore_oracles=_ignored_oracles(ignore_oracles),
    )
    try:
        from .fake_api import instant_retries

        with instant_retries(0.0):
            verdict = _evaluate(executor, plan, fault_plan, budget)
    finally:
        executor.close()
    if verdict.violations:
        raise verdict.failure("replay(...)", found_after=None)


def _plan_strategy(tools: Any, plans: Any, max_steps: int, max_parallel: int) -> SearchStrategy[Plan]:
    from hypothesis import strategies as st
    from hypothesis.strategies import SearchStrategy

    from reference_agent.scripted import Plan

    from .strategies import plans as plans_over

    if plans is None:
        return plans_over(tools, max_steps=max_steps, max_parallel=max_parallel)
    if isinstance(plans, SearchStrategy):
        return plans
    if isinstance(plans, Plan):
        return st.just(plans)
    chosen = list(plans)
    if not chosen or not all(isinstance(p, Plan) for p in chosen):
        raise ValueError("plans must be a strategy of Plan, or a non-empty list of Plan")
    return st.sampled_from(chosen)


def _fuzz_with(
    executor: _Executor,
    agent: Callable[..., Any],
    tools: Any,
    *,
    examples: int,
    crashes_max: int,
    kinds: frozenset[str],
    deadline: float | _dt.timedelta | None,
    plans: Any,
    seed: int | None,
    budget: int | None,
    max_steps: int,
    max_parallel: int,
    unsafe_tools: str,
    database: ExampleDatabase | None,
    shrink: bool = True,
) -> FuzzReport:
    from hypothesis import HealthCheck, Phase, given, reject, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis import strategies as st
    from hypothesis.errors import Unsatisfiable

    from .fake_api import instant_retries
    from .strategies import fault_plans

    plan_strategy = _plan_strategy(tools, plans, max_steps, max_parallel)
    fault_strategy = fault_plans(max_crashes=crashes_max, kinds=kinds)
    local = FuzzStats()
    first_failure: list[int] = []
    infeasible: list[str] = []
    unsafe_found: dict[tuple[str, str], UnsafeTool] = {}
    test_id = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
    effective_seed = seed
    if effective_seed is None and _session.seed is not None:
        # The session seed (printed in the report header) reproduces every fuzz call.
        digest = hashlib.sha256(f"{_session.seed}:{test_id}".encode()).digest()
        effective_seed = int.from_bytes(digest[:4], "big")
    reproduce = (
        f"fuzz(..., seed={effective_seed})" if effective_seed is not None else "see the @reproduce_failure line below"
    )
    if test_id and _session.seed is not None and seed is None:
        reproduce = f"pytest '{test_id}' --agentckpt-seed={_session.seed}  (or {reproduce})"

    def check(scenario: tuple[Plan, FaultPlan]) -> None:
        plan, faults = scenario
        verdict = _evaluate(executor, plan, faults, budget)
        if verdict.outcome.infeasible is not None:
            infeasible[:] = [verdict.outcome.infeasible]
            reject()
        _count(local, verdict.outcome, verdict.violations)
        for tool in verdict.unsafe:
            local.unsafe_tools.add(tool.tool)
            unsafe_found.setdefault((tool.tool, canonical(tool.input)), tool)
        if verdict.violations:
            first_failure[:] = first_failure or [local.scenarios]
            raise verdict.failure(reproduce, found_after=first_failure[0])

    check._hypothesis_internal_add_digest = hashlib.sha256(  # type: ignore[attr-defined]
        f"{getattr(agent, '__module__', '')}.{getattr(agent, '__qualname__', repr(agent))}:"
        f"{sorted(executor.flags)}:{test_id}".encode()
    ).digest()
    chosen_settings: dict[str, Any] = {
        "max_examples": examples,
        "deadline": deadline,
        "print_blob": True,
        "report_multiple_bugs": False,
        "suppress_health_check": list(HealthCheck),
    }
    if not shrink:
        chosen_settings["phases"] = [Phase.explicit, Phase.reuse, Phase.generate]
    db = database or _session.database
    if db is not None:
        chosen_settings["database"] = db
    test = settings(**chosen_settings)(given(st.tuples(plan_strategy, fault_strategy))(check))
    if effective_seed is not None:
        test = hypothesis_seed(effective_seed)(test)
    try:
        with instant_retries(0.0):
            try:
                test()
            except Unsatisfiable:
                raise ValueError(
                    "fuzz: almost every plan drawn over these tools failed without any fault, so "
                    f"there is nothing to crash: {infeasible[0] if infeasible else 'tool errors'}. "
                    "Give the tools inputs they accept (tighter input_schema: enum, pattern) or "
                    "pass plans= that work"
                ) from None
            except OracleFailure as failure:
                smaller = _minimize(executor, budget, failure, max_runs=300 if shrink else 16)
                if smaller is None:
                    raise
                better = smaller.failure(reproduce, found_after=failure.found_after, minimized=True)
                for note in getattr(failure, "__notes__", ()):
                    better.add_note(note)
                raise better from None
    finally:
        with _stats_lock:
            _stats.merge(local)
    found = list(unsafe_found.values())
    if found and unsafe_tools == "error":
        raise AssertionError("agentckpt: unsafe tools\n" + "\n".join(t.describe() for t in found))
    if found and unsafe_tools == "warn":
        for tool in found[:3]:
            warnings.warn(tool.describe(), UnsafeToolWarning, stacklevel=2)
    return FuzzReport(examples=local.scenarios, stats=local, unsafe_tools=found)


def _count(local: FuzzStats, outcome: _Outcome, violations: Sequence[Violation]) -> None:
    timeline = outcome.timeline
    local.scenarios += 1
    local.fault_points_hit.update(outcome.hits)
    local.crashes += outcome.crashes
    local.api_faults += len(timeline.of("api_fault"))
    local.store_faults += len(timeline.of("store_outage", "store_delay"))
    local.resumes += max(0, timeline.attempt - 1 - (1 if outcome.rerun_from is not None else 0))
    local.requests_validated += len(timeline.of("model_request"))
    local.effects_checked += len(timeline.of("effect"))
    for violation in violations[:1]:
        local.violations[violation.oracle] += 1

