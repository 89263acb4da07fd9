"""The Hypothesis search over plans and fault plans, session settings and statistics."""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import threading
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._judge import OracleFailure, _evaluate
from ._scenario import _Executor, _Outcome
from ._shrink import _minimize
from .faults import (
    FaultPlan,
)
from .oracles import (
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


class UnsafeToolWarning(UserWarning):
    """A tool's effect was repeated because it gives no agent a way to know its outcome."""


@dataclass
class FuzzReport:
    """What a passing ``fuzz`` call did."""

    examples: int
    stats: FuzzStats
    unsafe_tools: list[UnsafeTool]


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

