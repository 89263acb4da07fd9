"""The Hypothesis search over plans and fault plans, session settings and statistics."""

from __future__ import annotations

import contextlib
import datetime as _dt
import gc
import hashlib
import os
import threading
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import _progress
from ._judge import OracleFailure, _evaluate, _order, _unreproducible, _Verdict
from ._scenario import _Executor, _Outcome
from ._shrink import _minimize
from ._totals import Totals
from .faults import (
    API_FAULT_KINDS,
    STREAM_FAULT_KINDS,
    FaultPlan,
)
from .oracles import (
    Advice,
    UnsafeTool,
    Violation,
    canonical,
)

if TYPE_CHECKING:
    from hypothesis.database import ExampleDatabase
    from hypothesis.strategies import SearchStrategy

    from reference_agent.scripted import Plan

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
    #: The profile was chosen (option or env), so it wins over a loaded Hypothesis profile.
    profile_chosen: bool = False
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
        _session.profile_chosen = True
    if examples is not None:
        if examples < 1:
            raise ValueError(f"examples must be >= 1, not {examples}")
        _session.examples = examples
    if seed is not None:
        _session.seed = seed
    if database is not None:
        _session.database = database


#: Hypothesis's own default ``max_examples``: a loaded profile that keeps it says nothing.
_HYPOTHESIS_DEFAULT_EXAMPLES = 100


def _examples(given: int | None) -> int:
    """Examples for one ``fuzz`` call: its argument, then ``--agentckpt-examples`` and
    ``--agentckpt-profile``, then the loaded Hypothesis profile, then our profile.
    """
    if given is not None:
        return given
    if _session.examples is not None:
        return _session.examples
    if not _session.profile_chosen:
        from hypothesis import settings

        loaded = settings().max_examples
        if loaded != _HYPOTHESIS_DEFAULT_EXAMPLES:
            return loaded
    return _session.profile.max_examples


def _env_profile() -> None:
    name = os.environ.get("AGENTCKPT_PROFILE")
    if name and name in PROFILES:
        _session.profile = PROFILES[name]
        _session.profile_chosen = True


_env_profile()


class NotCheckableWarning(UserWarning):
    """An oracle could not judge the agent (it did not pass): the report says why."""


class UnsafeToolWarning(UserWarning):
    """A tool's effect was repeated because it gives no agent a way to know its outcome."""


class ResumeDriftWarning(UserWarning):
    """Not a failure: after a resume the agent sent a history the crash-free run sent, with
    another system prompt or other tools (state it may not have restored)."""


@dataclass
class FuzzReport:
    """What a passing ``fuzz`` call did.

    ``unsafe_tools``: tools whose effect was repeated because no agent could know its
    outcome. ``not_checkable``: oracles that could not judge this agent, with why (say,
    the checkpoints hold no message history where the harness looks). ``advice``: what
    the agent could do better that is not a violation. ``single_crash_points`` and
    ``plans``: with ``fuzz(systematic=True)``, how many single-crash points were checked,
    over how many plans (``None`` otherwise).
    """

    examples: int
    stats: FuzzStats
    unsafe_tools: list[UnsafeTool]
    not_checkable: dict[str, str] = field(default_factory=dict)
    advice: list[Advice] = field(default_factory=list)
    single_crash_points: int | None = None
    plans: int | None = None

    def describe(self) -> str:
        """One line saying what was checked: the scenarios, the faults injected, the
        resumes and the effects checked.

        >>> FuzzReport(40, FuzzStats(), [], single_crash_points=40, plans=2).describe()
        '40 scenario(s); every single-crash point of each plan was checked (40 points over 2 plan(s))'
        >>> FuzzReport(2, FuzzStats(crashes=3, resumes=4, effects_checked=5), []).describe()
        '2 scenario(s): 3 crash(es), 0 API and 0 store fault(s) injected, 4 resume(s), 5 effect(s) checked'
        """
        text = f"{self.examples} scenario(s)"
        stats = self.stats
        if stats.crashes or stats.api_faults or stats.store_faults or stats.resumes:
            text += (
                f": {stats.crashes} crash(es), {stats.api_faults} API and {stats.store_faults} store "
                f"fault(s) injected, {stats.resumes} resume(s), {stats.effects_checked} effect(s) checked"
            )
        if self.single_crash_points is not None:
            text += (
                "; every single-crash point of each plan was checked "
                f"({self.single_crash_points} points over {self.plans} plan(s))"
            )
        if stats.plans_discarded:
            text += (
                f"; {stats.plans_discarded} drawn scenario(s) discarded: their plan failed without a "
                "fault (a tool's error the agent sent on to the model, or gave up on)"
            )
        return text

    def __str__(self) -> str:
        return self.describe()

    #: How the search ran: seeded (reproducible) or with the example database.
    search: str = ""


# -- statistics -----------------------------------------------------------------------------
@dataclass
class FuzzStats(Totals):
    """What the harness did: the terminal summary prints the session's total."""

    scenarios: int = 0
    fault_points_hit: Counter[str] = field(default_factory=Counter)
    crashes: int = 0
    api_faults: int = 0
    store_faults: int = 0
    resumes: int = 0
    requests_validated: int = 0
    effects_checked: int = 0
    #: Scenarios not run because their plan failed crash-free: a tool's error the agent
    #: sent on to the model, or gave up on (an outside round's worker lost every plan
    #: that sent, and the report did not say).
    plans_discarded: int = 0
    violations: Counter[str] = field(default_factory=Counter)
    unsafe_tools: set[str] = field(default_factory=set)
    #: Distinct failures raised by ``fuzz`` ("oracle: shrunk scenario"), and those of them
    #: that a passing test expected (``pytest.raises(OracleFailure)``).
    failures: set[str] = field(default_factory=set)
    expected_failures: set[str] = field(default_factory=set)


_stats = FuzzStats()
_stats_lock = threading.Lock()
#: Failures raised since the current test started: the plugin marks them expected when
#: the test passes anyway.
_pending_failures: list[str] = []


def _record_failure(failure: OracleFailure) -> None:
    plan = failure.plan.to_dict() if failure.plan is not None else None
    faults = failure.fault_plan.to_dict() if failure.fault_plan is not None else None
    key = f"{failure.oracle}: {canonical({'plan': plan, 'faults': faults})}"
    with _stats_lock:
        _stats.failures.add(key)
        _pending_failures.append(key)


def _settle_failures(test_passed: bool) -> None:
    """At the end of a test: its failures were expected if it passed."""
    with _stats_lock:
        if test_passed:
            _stats.expected_failures.update(_pending_failures)
        _pending_failures.clear()


def stats() -> FuzzStats:
    """The running total of every ``fuzz`` call in this process."""
    return _stats


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


@contextlib.contextmanager
def _agent_threads_may_use_random(plans: Any) -> Iterator[None]:
    """Hypothesis warns when the global ``random`` state changes while a strategy draws,
    blaming the strategy. The harness's strategies never use it; a thread of the agent
    under test may (a runtime's poller with jitter), between two examples. With the
    harness's own plans that warning names no bug of the strategy: it is left out. A
    strategy of plans the caller gave keeps it."""
    from hypothesis.strategies import SearchStrategy

    if isinstance(plans, SearchStrategy):
        yield
        return
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Do not use the `random` module inside strategies")
        yield


#: The collector's first-generation threshold during a search (Python's default is 700).
#: A search allocates in bursts that mostly die young (requests, replies, timelines):
#: collecting them ten times less often cut 6% of a 400-example ``fuzz`` run's CPU time.
SEARCH_GC_THRESHOLD = 10_000


@contextlib.contextmanager
def _frozen_heap() -> Iterator[None]:
    """Leave the objects alive before a search (modules, the SDK, Hypothesis) out of the
    garbage collector's passes during it: its full passes over them were a tenth of a
    fuzz run, and they cannot become garbage meanwhile. The first generation is collected
    every ``SEARCH_GC_THRESHOLD`` allocations rather than every 700. Both are undone after
    the search; a process that froze its heap itself is left frozen, and a threshold of 0
    (collection off) or above ours is left as it is."""
    threshold = gc.get_threshold()
    if 0 < threshold[0] < SEARCH_GC_THRESHOLD:
        gc.set_threshold(SEARCH_GC_THRESHOLD, *threshold[1:])
    froze = not gc.get_freeze_count()
    if froze:
        gc.freeze()
    try:
        yield
    finally:
        if froze:
            gc.unfreeze()
        gc.set_threshold(*threshold)


def _streams(executor: _Executor) -> bool:
    """Whether the agent asks for streamed replies, seen in the crash-free run of a plan
    with no tool call (a run that fails says no: the search finds what fails)."""
    from reference_agent.scripted import Plan

    try:
        _, clean = executor.baseline(Plan((), "done"))
    except Exception:
        return False
    return bool(clean.streamed)


def _hide_oracle_failures(excinfo: Any) -> bool:
    """pytest's ``__tracebackhide__`` for the harness's frames: an oracle failure's report
    says what failed and how to reproduce it, so its traceback ends at the test's call; any
    other error (the harness's own, a bad argument) shows every frame."""
    return bool(excinfo.errisinstance(OracleFailure))


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
    systematic: bool = False,
) -> FuzzReport:
    __tracebackhide__ = _hide_oracle_failures
    from hypothesis import HealthCheck, Phase, given, reject, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis import strategies as st
    from hypothesis.errors import Flaky, Unsatisfiable

    from .fake_api import instant_retries
    from .strategies import fault_plans

    plan_strategy = _plan_strategy(tools, plans, max_steps, max_parallel)
    # Crash fractions need the order the crash-free run met its points in, which only the
    # in-process executor sees.
    fractions = executor.orders_points
    fault_strategy = fault_plans(max_crashes=crashes_max, kinds=kinds, fractions=fractions)
    scenario_strategy = st.tuples(plan_strategy, fault_strategy)
    # Two API fault kinds in eight cut a stream short: for an agent that streams, too few to
    # find what a cut reply does to it. One crash-free run of a plan with no tool call,
    # before the search (not inside a draw: the agent may use `random`), says whether it
    # streams; then half of its API faults are stream faults. For an agent that does not
    # stream, the draws are as they were.
    mixed = kinds & STREAM_FAULT_KINDS and kinds & (set(API_FAULT_KINDS) - STREAM_FAULT_KINDS)
    if mixed and not systematic and _streams(executor):
        scenario_strategy = st.tuples(
            plan_strategy, fault_plans(max_crashes=crashes_max, kinds=kinds, streamed=True, fractions=fractions)
        )
    local = FuzzStats()
    first_failure: list[int] = []
    infeasible: list[str] = []
    unsafe_found: dict[tuple[str, str], UnsafeTool] = {}
    not_checkable: dict[str, str] = {}
    advice: dict[str, Advice] = {}
    # The smallest failing verdict seen for each oracle, and verdicts that did not reproduce.
    smallest: dict[str, _Verdict] = {}
    unstable: list[tuple[_Verdict, _Verdict]] = []
    last_failed: list[_Verdict] = []
    test_id = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
    db = _database(database)
    mode = _search_mode(seed, test_id, db)
    reproduce = f"{mode.reproduce}\nsearch: {mode.describe}"

    def remember(verdict: _Verdict) -> None:
        for oracle in verdict.oracles:
            best = smallest.get(oracle)
            if best is None or _size(verdict) < _size(best):
                smallest[oracle] = verdict

    progress = _progress.Progress(
        test_id or getattr(agent, "__qualname__", "fuzz"), examples, out=_progress.sink, systematic=systematic
    )

    #: Set once the first failure is in: the search then goes on for oracles not yet failed.
    known: set[str] = set()
    following: list[bool] = [False]

    def check(scenario: tuple[Plan, FaultPlan]) -> None:
        plan, faults = scenario
        verdict = _evaluate(executor, plan, faults, budget)
        if verdict.outcome.infeasible is not None:
            infeasible[:] = [verdict.outcome.infeasible]
            local.plans_discarded += 1
            reject()
        _count(local, verdict.outcome, verdict.violations)
        progress.tick(local.scenarios, local.crashes, sum(local.violations.values()))
        for tool in verdict.unsafe:
            local.unsafe_tools.add(tool.tool)
            unsafe_found.setdefault((tool.tool, canonical(tool.input)), tool)
        for oracle, reason in verdict.not_checkable.items():
            not_checkable.setdefault(oracle, reason)
        for item in verdict.advice:
            advice.setdefault(item.topic, item)
        if verdict.violations and following[0]:
            new = set(verdict.oracles) - known
            if new:
                # Counted only if it fails again, as the first failure is.
                again = _evaluate(executor, plan, faults, budget)
                if not new <= set(again.oracles):
                    return
                known.update(new)
            remember(verdict)
            return
        if verdict.violations:
            # Agents with threads or tasks are nondeterministic: the first failure counts
            # only if the same scenario, run again, gives it again. (While Hypothesis
            # shrinks, it replays failures itself; a Flaky from it is converted below.)
            if not first_failure:
                again = _evaluate(executor, plan, faults, budget)
                if again.oracles != verdict.oracles:
                    unstable.append((verdict, again))
                    return
            remember(verdict)
            last_failed[:] = [verdict]
            first_failure[:] = first_failure or [local.scenarios]
            progress.found_after = first_failure[0]
            raise verdict.failure(reproduce, found_after=first_failure[0])

    points_checked: list[int] = [0]
    plans_checked: set[str] = set()

    def check_every_point(plan: Plan) -> None:
        # Systematic mode: one crash at each point the plan's crash-free run passes.
        from .chaos import single_crash_plans

        _, clean = executor.baseline(plan)
        if clean.infeasible is not None:
            infeasible[:] = [clean.infeasible]
            local.plans_discarded += 1
            reject()
        plans_checked.add(canonical(plan.to_dict()))
        progress.plans += 1
        # The points the task's run passes, not the run of the completed task after it
        # (that one is never given faults: a crash planned there would never come, and the
        # point be counted as checked, as an outside round saw).
        hits = clean.counts.hits if clean.counts is not None else clean.hits
        for faults in single_crash_plans(hits) or [FaultPlan()]:
            check((plan, faults))
            points_checked[0] += faults.size

    target: Callable[..., None] = check_every_point if systematic else check
    target._hypothesis_internal_add_digest = hashlib.sha256(  # type: ignore[attr-defined]
        f"{getattr(agent, '__module__', '')}.{getattr(agent, '__qualname__', repr(agent))}:"
        f"{sorted(executor.flags)}:{test_id}:{'systematic' if systematic else ''}".encode()
    ).digest()
    chosen_settings: dict[str, Any] = {
        "max_examples": examples,
        "deadline": deadline,
        # The report's replay line reproduces a failure; Hypothesis's blob needs an @given test.
        "print_blob": False,
        "report_multiple_bugs": False,
        "suppress_health_check": list(HealthCheck),
    }
    # No explain phase: it varies the shrunk example at length (most of a failing call's
    # time) for notes about Hypothesis's own arguments; the report explains the failure, and
    # the search for other oracles below is what finds the rest.
    chosen_settings["phases"] = [
        phase for phase in settings().phases if phase != Phase.explain and (shrink or phase != Phase.shrink)
    ]
    if db is not None:
        chosen_settings["database"] = db
    strategy = plan_strategy if systematic else scenario_strategy
    test = settings(**chosen_settings)(given(strategy)(target))
    if mode.seed is not None:
        test = hypothesis_seed(mode.seed)(test)
    try:
        with instant_retries(0.0), _frozen_heap(), _agent_threads_may_use_random(plans):
            # What follows a failure runs the agent again (the search on, the minimizer):
            # outside the `except` blocks, so that an exception the agent raises (and
            # logs) there does not carry this failure's report as its context.
            failed_with: OracleFailure | None = None
            flaky = False
            try:
                test()
            except Unsatisfiable:
                raise ValueError(
                    "fuzz: almost every plan drawn over these tools failed without any fault (a "
                    "tool's error the agent sent on to the model, or gave up on), so there is "
                    f"nothing to crash: {infeasible[0] if infeasible else 'tool errors'}. "
                    "Give the tools inputs they accept (tighter input_schema: enum, pattern) or "
                    "pass plans= that work"
                ) from None
            except OracleFailure as failure:
                failed_with = failure
            except Flaky:
                # The last failing scenario did not fail again when Hypothesis replayed it.
                if not last_failed:
                    raise
                flaky = True
            if failed_with is not None:
                if shrink:
                    known.update(smallest)
                    following[0] = True
                    _search_on(target, strategy, chosen_settings, mode.seed, min(examples - first_failure[0], _SEARCH_ON))
                raise _every_oracle(executor, budget, failed_with, smallest, reproduce, runs=150 if shrink else 16)
            if flaky:
                failed = last_failed[0]
                again = _evaluate(executor, failed.plan, failed.faults, budget)
                raise _unreproducible(failed, again, reproduce, found_after=first_failure[0])
    except OracleFailure as failure:
        _record_failure(failure)
        raise
    finally:
        progress.close()
        with _stats_lock:
            _stats.merge(local)
    if unstable:
        failed, again = unstable[0]
        unreproducible = _unreproducible(failed, again, reproduce, found_after=None)
        _record_failure(unreproducible)
        raise unreproducible
    found = list(unsafe_found.values())
    if found and unsafe_tools == "error":
        raise AssertionError("agentckpt: unsafe tools\n" + "\n".join(t.describe() for t in found))
    if found and unsafe_tools == "warn":
        for tool in found[:3]:
            warnings.warn(tool.describe(), UnsafeToolWarning, stacklevel=3)
    for oracle, reason in not_checkable.items():
        warnings.warn(f"agentckpt: {oracle} was not checkable: {reason}", NotCheckableWarning, stacklevel=3)
    if "resume_drift" in advice:
        warnings.warn(f"agentckpt: {advice['resume_drift'].describe()}", ResumeDriftWarning, stacklevel=3)
    return FuzzReport(
        examples=local.scenarios,
        stats=local,
        unsafe_tools=found,
        not_checkable=not_checkable,
        advice=list(advice.values()),
        single_crash_points=points_checked[0] if systematic else None,
        plans=len(plans_checked) if systematic else None,
        search=mode.describe,
    )


def _database(given: ExampleDatabase | None) -> ExampleDatabase | None:
    """``fuzz(database=)``, else the configured one, shared through Redis if asked."""
    from hypothesis import settings
    from hypothesis.database import MultiplexedDatabase

    if given is not None:
        return given
    local = settings().database  # the loaded profile's (default: .hypothesis/examples)
    shared = _session.database
    if shared is None:
        return local
    return shared if local is None else MultiplexedDatabase(local, shared)


@dataclass(frozen=True)
class _Mode:
    """How a ``fuzz`` call searches: seeded (reproducible) or with the example database."""

    seed: int | None  # applied with ``hypothesis.seed``; None: Hypothesis chooses
    describe: str
    reproduce: str


def _search_mode(seed: int | None, test_id: str, database: ExampleDatabase | None) -> _Mode:
    """Seeded by ``fuzz(seed=)``, else by ``--agentckpt-seed``, else by ``--hypothesis-seed``;
    without any seed Hypothesis keeps its example database: failures saved, replayed first.
    """
    from hypothesis import core, settings

    rerun = f"pytest '{test_id}'" if test_id else "the same test"
    if seed is not None:
        return _Mode(seed, f"seeded by fuzz(seed={seed}): reproducible, no example database", f"fuzz(..., seed={seed})")
    if _session.seed is not None:
        # The session seed (printed in the report header) reproduces every fuzz call.
        digest = hashlib.sha256(f"{_session.seed}:{test_id}".encode()).digest()
        derived = int.from_bytes(digest[:4], "big")
        return _Mode(
            derived,
            f"seeded by --agentckpt-seed={_session.seed}: reproducible, no example database",
            f"{rerun} --agentckpt-seed={_session.seed}  (or fuzz(..., seed={derived}))",
        )
    forced = core.global_force_seed
    if forced is not None:
        return _Mode(
            None,
            f"seeded by --hypothesis-seed={forced}: reproducible, no example database",
            f"{rerun} --hypothesis-seed={forced}",
        )
    if settings().derandomize:
        # Hypothesis seeds from the test's digest (as Hypothesis's ci profile does): not random.
        saved = "no example database" if database is None else f"with the example database {database!r}"
        return _Mode(None, f"derandomized (settings.derandomize=True): reproducible, {saved}", rerun)
    db = database
    if db is None:
        return _Mode(
            None,
            "random, no example database (settings.database is None): failures are not saved",
            "the replay line below; or fuzz(..., seed=N) for a reproducible search",
        )
    return _Mode(
        None,
        f"random, with the example database {db!r}: failures are saved and replayed first",
        f"{rerun} (it replays this failure first from the example database), or the replay line below",
    )


#: At most this many examples go on being drawn after the first failure (the ``quick``
#: profile's size): a nightly run that fails early stops soon after.
_SEARCH_ON = 200


def _search_on(
    target: Callable[..., None],
    strategy: SearchStrategy[Any],
    chosen: Mapping[str, Any],
    seed: int | None,
    examples: int,
) -> None:
    """Go on with the examples left after the first failure (at most :data:`_SEARCH_ON`),
    for oracles not yet failed.

    Hypothesis stops at the first failure and shrinks it; a bug that only other scenarios
    show (a resume bug behind a bug every run has) would go unreported. ``target`` records
    what fails and raises nothing. Generation only, with its own seed (derived from the
    search's, so a seeded call stays reproducible) and no example database.
    """
    from hypothesis import Phase, given, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis.errors import Unsatisfiable

    if examples <= 0:
        return
    follow = settings(
        **{
            **chosen,
            "max_examples": examples,
            "database": None,
            "phases": [Phase.generate],
        }
    )

    def search_on(scenario: Any) -> None:
        target(scenario)

    search_on._hypothesis_internal_add_digest = hashlib.sha256(  # type: ignore[attr-defined]
        b"search on:" + getattr(target, "_hypothesis_internal_add_digest", b"")
    ).digest()
    test = follow(given(strategy)(search_on))
    if seed is not None:
        test = hypothesis_seed(seed + 1)(test)
    with contextlib.suppress(Unsatisfiable):
        test()


def _size(verdict: _Verdict) -> tuple[int, int, int]:
    steps, calls = _plan_size(verdict.plan)
    return (verdict.faults.size, steps, calls)


def _plan_size(plan: Plan) -> tuple[int, int]:
    """Steps and calls of ``plan``, its sub-agents' plans (``ToolCall.plan``) included."""
    steps, calls = len(plan.steps), 0
    for step in plan.steps:
        for call in step.calls:
            calls += 1
            if call.plan is not None:
                more_steps, more_calls = _plan_size(call.plan)
                steps, calls = steps + more_steps, calls + more_calls
    return steps, calls


def _every_oracle(
    executor: _Executor,
    budget: int | None,
    failure: OracleFailure,
    smallest: Mapping[str, _Verdict],
    reproduce: str,
    *,
    runs: int,
) -> OracleFailure:
    """The failure with every distinct oracle that failed, each with its smallest example.

    Hypothesis shrinks towards whatever fails most simply; an oracle that only a larger
    scenario breaks would be hidden behind it, so each gets its own bounded shrink.
    """
    lead = sorted(smallest, key=_order)[0] if smallest else failure.oracle
    start = smallest.get(lead)
    best = _minimize(executor, budget, start if start is not None else failure, max_runs=runs, oracle=lead)
    if best is None:
        best = start
    if best is None:
        return failure
    best = _led_by(best, lead)
    others: list[_Verdict] = []
    for oracle in sorted(smallest, key=_order):
        if oracle == lead:
            continue
        if oracle in best.oracles and best.faults.size == 0:
            continue  # the lead example already shows it, with no fault at all
        smaller = _minimize(executor, budget, smallest[oracle], max_runs=max(runs // 4, 8), oracle=oracle)
        # Each section leads with the oracle it is for (a smaller example may break others first).
        others.append(_led_by(smaller if smaller is not None else smallest[oracle], oracle))
    better = best.failure(reproduce, found_after=failure.found_after, minimized=True, others=others)
    for note in getattr(failure, "__notes__", ()):
        # Hypothesis's own "Failing test case" block shows the example before agentckpt
        # shrank it further: a second, larger scenario under the report of the smaller one.
        if not note.startswith(("Failing test case", "Falsifying example")):
            better.add_note(note)
    return better


def _led_by(verdict: _Verdict, oracle: str) -> _Verdict:
    first = [v for v in verdict.violations if v.oracle == oracle]
    rest = [v for v in verdict.violations if v.oracle != oracle]
    return _Verdict(
        verdict.plan, verdict.faults, verdict.outcome, first + rest, verdict.unsafe, verdict.crash_free,
        verdict.not_checkable, verdict.advice, verdict.replay_args, verdict.fault_text,
    )


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

