"""Fault injection: crashes at named points, store outages and slow stores.

The harness sees an agent only from outside, through three doors, and every fault point
is observed at one of them:

================================  ===========================================================
point                             where the harness observes it
================================  ===========================================================
``iteration_start``               model transport: a request whose ``messages`` differ from
                                  the previous request's (a retry of the same body after an
                                  API error is not a new iteration); fires before
                                  ``before_model_call``
``before_model_call``             model transport: a request arrived, before the model is
                                  consulted (the model never sees it)
``after_model_call``              model transport: the model answered, the response is built,
                                  but the agent never receives it
``between_parallel_tools``        toolbox: a tool call that is not the first since the last
                                  model response (the second and later calls of a batch);
                                  fires before ``before_tool_effect``
``before_tool_effect``            toolbox: the agent called the tool, before its function runs
``after_tool_effect``             toolbox: the function ran (an irreversible effect is in the
                                  World), before the result reaches the agent
``before_checkpoint_write``       store: ``save`` was called, nothing written
``after_checkpoint_write``        store: ``save`` wrote durably, then the crash: the agent
                                  never sees the acknowledgement
================================  ===========================================================

A crash is :class:`Crash`, a ``SystemExit``: ``except Exception`` in an agent cannot
swallow it, and raised in an asyncio task it stops the event loop. A crash ends the whole
attempt, as the death of a process does: after it every
model request, tool call, effect and store operation of that attempt, from any thread or
asyncio task, raises the crash again and does nothing. Then the harness drops the agent and
calls ``run`` again with the same task id. Which occurrence of which point crashes is a
:class:`FaultPlan`.

Only generations (``messages.create`` and ``messages.stream``) are model calls: a
``count_tokens`` request meets no fault point, is not numbered and counts toward no budget.

>>> plan = FaultPlan(crashes=(CrashAt("after_tool_effect", 1),))
>>> plan.describe()
'crash at after_tool_effect #1'

An occurrence may also count from the end of the plan's crash-free run: ``-1`` is the last
time that point (request, store operation) was met there, ``-2`` the one before. The
harness resolves such a plan against the crash-free run's counts before it runs it
(:meth:`FaultPlan.resolve`), so faults reach late in a long run too:

>>> FaultPlan(crashes=(CrashAt("after_checkpoint_write", -1),)).describe()
'crash at after_checkpoint_write, the last'

A crash may also be placed by where it falls in that run rather than by point: a fraction
of the way through the states it passed through (:attr:`FaultPlan.crash_fractions`; a state
is the points met between two saves, deletes or tool effects). Counts of one point from
either end reach only the first and last few of a long run; a fraction reaches its middle
too:

>>> FaultPlan(crash_fractions=(0.5,)).describe()
'crash halfway through the crash-free run'
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import json
import math
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, get_args

from pydantic_core import from_json as _from_json
from pydantic_core import to_json as _to_json

from .oracles import canonical
from .timeline import Event, Timeline

if TYPE_CHECKING:
    from reference_agent.toolbox import ToolResult, ToolSpec
    from stores import (
        Checkpoint,
        CheckpointStatus,
        CheckpointStore,
        CheckpointSummary,
        StoreInfo,
    )

__all__ = [
    "API_FAULT_KINDS",
    "DEFAULT_FAULT_KINDS",
    "FAULT_KINDS",
    "FAULT_POINTS",
    "OPT_IN_FAULT_KINDS",
    "STORE_FAULT_KINDS",
    "STREAM_FAULT_KINDS",
    "ApiFault",
    "ApiFaultKind",
    "Crash",
    "CrashAt",
    "FaultInjector",
    "FaultKind",
    "FaultPlan",
    "FaultPoint",
    "FaultyStore",
    "HistoryLocator",
    "InstrumentedToolbox",
    "PlanInfeasible",
    "RunCounts",
    "StoreFault",
    "StoreFaultKind",
    "StoreOperation",
    "WorldLike",
    "default_history",
    "instrument_toolbox",
    "is_generation",
]

FaultPoint = Literal[
    "iteration_start",
    "before_model_call",
    "after_model_call",
    "between_parallel_tools",
    "before_tool_effect",
    "after_tool_effect",
    "before_checkpoint_write",
    "after_checkpoint_write",
]
FAULT_POINTS: tuple[FaultPoint, ...] = get_args(FaultPoint)
"""Every crash point, in the order an iteration meets them."""

ApiFaultKind = Literal[
    "rate_limit",
    "server_error",
    "overloaded",
    "timeout",
    "disconnect",
    "lost_response",
    "stream_disconnect",
    "stream_error",
    "max_tokens",
    "api_outage",
]
API_FAULT_KINDS: tuple[ApiFaultKind, ...] = get_args(ApiFaultKind)
"""API faults, injected through the fake Messages API."""

#: API faults that cut a streamed reply short: the SDK does not retry them, the agent must.
STREAM_FAULT_KINDS: frozenset[str] = frozenset({"stream_disconnect", "stream_error"})

#: Fault kinds injected only when ``fault_kinds`` names them: ``max_tokens`` (a reply cut
#: by the token limit, ``stop_reason: "max_tokens"``) tests how an agent handles a stop
#: reason, which not every agent means to, so default verdicts and seeded draws stay as
#: they were without it.
#: ``api_outage`` (the API overloaded for longer than the SDK retries) tests what an agent
#: does when a model call fails for good, which fails only agents that give up.
#: ``store_down`` (the store failing for more saves or loads in a row than an agent
#: retries, 3 to 8) tests what an agent does when a store call fails for good: its
#: give-up or step-retry path, which shorter outages never reach in an agent that retries.
OPT_IN_FAULT_KINDS: frozenset[str] = frozenset({"max_tokens", "api_outage", "store_down"})

#: The requests an ``api_outage`` answers with 529 ``overloaded_error``: one more than the
#: SDK's default retries (``max_retries=2``), so that the SDK raises to the agent.
OUTAGE_REQUESTS = 3

StoreFaultKind = Literal["store_outage", "slow_store"]
STORE_FAULT_KINDS: tuple[StoreFaultKind, ...] = get_args(StoreFaultKind)
"""Store faults, injected by :class:`FaultyStore`."""

#: The store operations in a row a ``store_down`` fails (drawn from this range).
STORE_DOWN_OPERATIONS = (3, 8)

FaultKind = FaultPoint | ApiFaultKind | StoreFaultKind | Literal["store_down"]
FAULT_KINDS: tuple[str, ...] = FAULT_POINTS + API_FAULT_KINDS + STORE_FAULT_KINDS + ("store_down",)
"""Every name ``fuzz(fault_kinds=...)`` accepts."""

DEFAULT_FAULT_KINDS: tuple[str, ...] = tuple(k for k in FAULT_KINDS if k not in OPT_IN_FAULT_KINDS)
"""The kinds ``fuzz`` injects when ``fault_kinds`` is not given: all but
:data:`OPT_IN_FAULT_KINDS`. Add one with ``fault_kinds=[*DEFAULT_FAULT_KINDS, "max_tokens"]``."""


class PlanInfeasible(SystemExit):
    """A tool answered an error in a crash-free run and the agent did not get past it:
    the plan cannot be carried out.

    Raised when the agent sends the error on to the model, or gives up (raises) with the
    error unanswered: the scripted model retries a failed call for ever, so such a plan
    says nothing about resume; the harness discards it (a ``SystemExit``, as
    :class:`Crash`: the agent's ``except Exception`` cannot catch it, and asyncio lets it
    through the event loop). An error the agent's own retry gets past (the same call
    again, answered) is no reason: the plan goes on, and is fuzzed like any other.
    """


class Crash(SystemExit):
    """The agent process "dies" here: raised at a fault point by the harness.

    Not an ``Exception``, so that ``except Exception`` in the agent cannot swallow it,
    exactly as ``except Exception`` cannot catch a SIGKILL. A ``SystemExit``, so that
    asyncio lets it through: raised in a task, it stops the event loop at once, as the
    death of the process stops every task. (Any other ``BaseException`` raised in a task
    is kept on the task, and a framework that runs tools in tasks and does not read
    their exceptions would go on after the crash, writing what a dead process never
    writes.)

    >>> issubclass(Crash, Exception), issubclass(Crash, SystemExit)
    (False, True)
    """

    def __init__(self, point: FaultPoint, occurrence: int) -> None:
        super().__init__(f"injected crash at {point} #{occurrence}")
        self.point = point
        self.occurrence = occurrence


def crash_within(exc: BaseException) -> Crash | None:
    """The harness's :class:`Crash` in ``exc``, itself or inside an exception group.

    An ``asyncio.TaskGroup`` (or an anyio / trio task group) whose tasks die of a crash
    raises a ``BaseExceptionGroup`` of them: the agent died all the same.

    >>> crash = Crash("before_tool_effect", 1)
    >>> class Group(BaseException):
    ...     exceptions = (ValueError("a sibling"), crash)
    >>> crash_within(Group()) is crash, crash_within(ValueError("no crash"))
    (True, None)
    """
    if isinstance(exc, Crash):
        return exc
    inner = getattr(exc, "exceptions", None)  # BaseExceptionGroup, or its backport
    if isinstance(inner, (tuple, list)):
        for member in inner:
            found = crash_within(member) if isinstance(member, BaseException) else None
            if found is not None:
                return found
    return None


def _check_occurrence(name: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value == 0:
        raise ValueError(
            f"{name} must be >= 1 (the n-th time, counted from the start) or <= -1 (counted "
            f"from the end of the crash-free run: -1 is the last time), not {value!r}"
        )


def _ordinal(n: int) -> str:
    """``1`` -> ``1st``, ``2`` -> ``2nd``, ``11`` -> ``11th``."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _from_end(occurrence: int, count: int | None = None) -> str:
    """How an occurrence counted from the end reads: ``the last``, ``the 3rd from last``;
    with the crash-free run's ``count``, which one that is, or that it is never reached."""
    which = "the last" if occurrence == -1 else f"the {_ordinal(-occurrence)} from last"
    if count is None:
        return which
    resolved = count + occurrence + 1
    if resolved < 1:
        return f"{which} (never reached: the crash-free run has {count})"
    return f"#{resolved} ({which} of {count})"


#: How much likelier a crash fraction lands in a state after an unsaved change (a tool
#: effect, a delete) than in one after a save (:meth:`RunCounts.at_fraction`).
UNSAVED_WEIGHT = 4


@dataclass(frozen=True)
class RunCounts:
    """How many times a run met each fault point, store operation and model request: what
    occurrences counted from the end (negative) are resolved against (:meth:`FaultPlan.resolve`).

    ``streamed``: the model requests that asked for a streamed reply.
    """

    hits: Mapping[str, int]
    store_ops: Mapping[str, int]
    requests: int
    streamed: frozenset[int] = frozenset()
    #: Every fault point the run met, in the order it met them (in process mode, the
    #: points of both processes merged by when they were met).
    order: tuple[FaultPoint, ...] = ()
    #: For each point of :attr:`order`, the durable changes made before it (saves,
    #: deletes, tool effects): points with the same number leave the same state to resume
    #: from. Empty: every point is a state of its own.
    changes: tuple[int, ...] = ()
    #: The numbers of the changes that no save made (tool effects, deletes): after them
    #: the world or the store holds what no checkpoint records yet.
    unsaved: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        if self.changes and len(self.changes) != len(self.order):
            raise ValueError(
                f"changes: one count per point of order ({len(self.order)}), not {len(self.changes)}; "
                "or none, to make every point a state of its own"
            )

    @property
    def states(self) -> list[range]:
        """The spans of :attr:`order` (indices) met between two durable changes."""
        changes = self.changes or range(len(self.order))
        spans: list[range] = []
        start = 0
        for index in range(1, len(self.order) + 1):
            if index == len(self.order) or changes[index] != changes[start]:
                spans.append(range(start, index))
                start = index
        return spans

    def at_fraction(self, fraction: float) -> tuple[CrashAt, int, int] | None:
        """The crash ``fraction`` of the way through the states the run passed through, with
        the state's number (1-based) and how many there were (``None`` where the order of
        the points is not known).

        A state is the points met between two durable changes: a crash anywhere in it
        leaves the same checkpoint and the same world to resume from, so each state
        counts once, however many points it spans, and what is left of the fraction picks
        a point within it. A state after an unsaved change (a tool effect, a delete)
        counts :data:`UNSAVED_WEIGHT` times: there the world or the store holds what no
        checkpoint records yet, where resumes go wrong.

        >>> counts = RunCounts({}, {}, 0, order=("before_checkpoint_write", "after_checkpoint_write",
        ...     "iteration_start", "before_model_call"), changes=(0, 1, 1, 1))
        >>> counts.at_fraction(0.5)
        (CrashAt(point='before_checkpoint_write', occurrence=1), 1, 2)
        >>> counts.at_fraction(1.0)
        (CrashAt(point='before_model_call', occurrence=1), 2, 2)
        """
        states = self.states
        if not states:
            return None
        weights = [
            UNSAVED_WEIGHT if self.changes and self.changes[span.start] in self.unsaved else 1 for span in states
        ]
        scaled = fraction * sum(weights)
        number = len(states)
        for number, weight in enumerate(weights, 1):  # noqa: B007 (the last one if none is past)
            if scaled <= weight:
                break
            scaled -= weight
        span = states[number - 1]
        within = min(1.0, scaled / weights[number - 1])  # (0, 1] inside the state
        index = span[min(len(span) - 1, max(0, math.ceil(within * len(span)) - 1))]
        point = self.order[index]
        return CrashAt(point, self.order[: index + 1].count(point)), number, len(states)


@dataclass(frozen=True, order=True)
class CrashAt:
    """Crash at the ``occurrence``-th time (1-based, counted across resumes) ``point`` is met.

    A negative ``occurrence`` counts from the end of the plan's crash-free run: ``-1`` is
    the last time that run met ``point`` (resolved by :meth:`FaultPlan.resolve`).
    """

    point: FaultPoint
    occurrence: int = 1

    def __post_init__(self) -> None:
        if self.point not in FAULT_POINTS:
            raise ValueError(f"point must be one of {FAULT_POINTS}, not {self.point!r}")
        _check_occurrence("occurrence", self.occurrence)


@dataclass(frozen=True, order=True)
class ApiFault:
    """The ``request``-th model request (1-based, across resumes) fails with ``kind``.

    ``lost_response``: the model answers but the response never arrives (the SDK sees a
    dropped connection and retries). ``stream_disconnect`` / ``stream_error``: the model
    answers, and its streamed reply is cut after a few events (the connection drops, or an
    ``error`` event comes); the SDK does not retry a stream it has started to read. Only a
    streamed request can be cut: on any other, they inject nothing. ``max_tokens``
    (opt-in, see :data:`OPT_IN_FAULT_KINDS`): the model answers, and its reply, streamed
    or not, arrives cut by the token limit with ``stop_reason: "max_tokens"``; the agent
    must not run its cut tool call nor take its cut text for the answer. ``api_outage``
    (opt-in): this request and the :data:`OUTAGE_REQUESTS` - 1 after it are answered 529
    ``overloaded_error``, more than the SDK's default retries: the call fails for good,
    and a sound agent stops resumable (raises, or saves and stops) or waits longer.

    A negative ``request`` counts from the end of the plan's crash-free run: ``-1`` is its
    last model request.
    """

    kind: ApiFaultKind
    request: int = 1
    #: Injected as part of an ``api_outage`` (never set by hand; not in plans).
    outage: bool = field(default=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in API_FAULT_KINDS:
            raise ValueError(f"kind must be one of {API_FAULT_KINDS}, not {self.kind!r}")
        _check_occurrence("request", self.request)


StoreOperation = Literal["load", "save"]


@dataclass(frozen=True, order=True)
class StoreFault:
    """The ``occurrence``-th ``operation`` (``load`` or ``save``, counted across resumes)
    and the ``length - 1`` after it fail with ``StoreUnavailableError`` (``store_outage``)
    or take ``delay`` seconds longer (``slow_store``).

    ``StoreFault("store_outage", "load", 2)`` is the load of the first resume. A negative
    ``occurrence`` counts from the end of the plan's crash-free run:
    ``StoreFault("store_outage", "save", -1)`` is its last save.
    """

    kind: StoreFaultKind
    operation: StoreOperation = "save"
    occurrence: int = 1
    length: int = 1
    delay: float = 0.001

    def __post_init__(self) -> None:
        if self.kind not in STORE_FAULT_KINDS:
            raise ValueError(f"kind must be one of {STORE_FAULT_KINDS}, not {self.kind!r}")
        if self.operation not in ("load", "save"):
            raise ValueError(f"operation must be 'load' or 'save', not {self.operation!r}")
        _check_occurrence("occurrence", self.occurrence)
        if self.length < 1:
            raise ValueError(f"length must be >= 1, not {self.length}")
        if self.delay < 0:
            raise ValueError("delay must be >= 0")

    def covers(self, operation: str, n: int) -> bool:
        """Whether the ``n``-th ``operation`` is hit by this fault."""
        return operation == self.operation and self.occurrence <= n < self.occurrence + self.length


@dataclass(frozen=True)
class FaultPlan:
    """Which faults a scenario injects: crashes, API faults and store faults.

    Occurrences count across the whole scenario (the first run and every resume), so a
    plan names one moment in the life of the task however many times it crashed before.

    >>> FaultPlan(crashes=(CrashAt("before_model_call", 2),), api_faults=(ApiFault("rate_limit"),)).describe()
    'crash at before_model_call #2; API rate_limit on request #1'
    """

    crashes: tuple[CrashAt, ...] = ()
    api_faults: tuple[ApiFault, ...] = ()
    store_faults: tuple[StoreFault, ...] = ()
    #: Crashes placed by where they fall rather than by point: ``0.5`` crashes halfway
    #: through the states the crash-free run passed through (:meth:`RunCounts.at_fraction`).
    #: Resolved against that run into :attr:`crashes` (:meth:`resolve`), as occurrences
    #: counted from the end are.
    crash_fractions: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        for fraction in self.crash_fractions:
            if isinstance(fraction, bool) or not isinstance(fraction, int | float) or not 0 < fraction <= 1:
                raise ValueError(
                    f"crash_fractions: each must be a number in (0, 1] (how far through the "
                    f"crash-free run the crash falls), not {fraction!r}"
                )

    @property
    def size(self) -> int:
        """The number of faults in the plan (what shrinking minimises)."""
        return len(self.crashes) + len(self.crash_fractions) + len(self.api_faults) + len(self.store_faults)

    @property
    def attempts_needed(self) -> int:
        """Attempts a sound agent may need to finish under this plan: one per fault, one
        per operation a store outage fails beyond its first (each may end an attempt),
        and three to spare."""
        return self.size + sum(f.length - 1 for f in self.store_faults if f.kind == "store_outage") + 3

    @property
    def relative(self) -> bool:
        """Whether the plan names faults relative to the crash-free run (occurrences counted
        from the end, crash fractions): :meth:`resolve` turns them into counts from the start."""
        return self.from_end or bool(self.crash_fractions)

    @property
    def from_end(self) -> bool:
        """Whether an occurrence counts from the end of the crash-free run (is negative)."""
        return (
            any(c.occurrence < 0 for c in self.crashes)
            or any(f.request < 0 for f in self.api_faults)
            or any(s.occurrence < 0 for s in self.store_faults)
        )

    def describe(self, counts: RunCounts | None = None) -> str:
        """A one-line summary, the form failure reports show.

        With ``counts`` (the crash-free run's), an occurrence counted from the end says
        which one it is: ``crash at after_checkpoint_write #14 (the last of 14)``.

        >>> plan = FaultPlan(store_faults=(StoreFault("store_outage", "save", -2),))
        >>> plan.describe(RunCounts({}, {"save": 9}, 4))
        'store outage on save #8 (the 2nd from last of 9)'
        """

        def at(occurrence: int, count: int) -> str:
            if occurrence > 0:
                return f"#{occurrence}"
            return _from_end(occurrence, None if counts is None else count)

        def spaced(text: str) -> str:
            return f" {text}" if text.startswith("#") else f", {text}"

        hits = counts.hits if counts is not None else {}
        ops = counts.store_ops if counts is not None else {}
        requests = counts.requests if counts is not None else 0
        parts = [f"crash at {c.point}{spaced(at(c.occurrence, hits.get(c.point, 0)))}" for c in self.crashes]
        for fraction in self.crash_fractions:
            where = "halfway" if fraction == 0.5 else f"{fraction:.1%} of the way"
            placed = counts.at_fraction(fraction) if counts is not None else None
            if placed is None:
                parts.append(f"crash {where} through the crash-free run")
                continue
            crash, number, total = placed
            parts.append(f"crash at {crash.point} #{crash.occurrence} (in state {number} of {total} of the crash-free run)")
        parts += [
            f"API {f.kind} on request{spaced(at(f.request, requests))}" for f in self.api_faults
        ]
        for s in self.store_faults:
            what = "outage" if s.kind == "store_outage" else f"delay {s.delay}s"
            if s.occurrence > 0:
                span = f"#{s.occurrence}" if s.length == 1 else f"#{s.occurrence}-#{s.occurrence + s.length - 1}"
                parts.append(f"store {what} on {s.operation} {span}")
                continue
            span = at(s.occurrence, ops.get(s.operation, 0))
            if s.length > 1:
                span += f" and the {s.length - 1} after it"
            parts.append(f"store {what} on {s.operation}{spaced(span)}")
        return "; ".join(parts) or "no faults"

    def within(self, counts: RunCounts) -> FaultPlan:
        """This plan with every occurrence counted from further back than ``counts`` (the
        crash-free run) goes brought into that run, round and round: of a point met 3
        times, ``-4`` is ``-1`` and ``-5`` is ``-2``. A point the run never met is left as
        it is. An executor that places no crash by fraction uses it so that a drawn
        count from the end always falls in the run (:meth:`resolve` leaves out one that
        does not).

        >>> plan = FaultPlan(crashes=(CrashAt("after_tool_effect", -5),))
        >>> plan.within(RunCounts({"after_tool_effect": 3}, {}, 1)).describe()
        'crash at after_tool_effect, the 2nd from last'
        """

        def wrap(occurrence: int, count: int) -> int:
            return -((-occurrence - 1) % count + 1) if occurrence < 0 and count > 0 else occurrence

        return FaultPlan(
            tuple(sorted({CrashAt(c.point, wrap(c.occurrence, counts.hits.get(c.point, 0))) for c in self.crashes})),
            tuple(sorted({(n := wrap(f.request, counts.requests)): ApiFault(f.kind, n) for f in self.api_faults}.values())),
            tuple(
                StoreFault(s.kind, s.operation, wrap(s.occurrence, counts.store_ops.get(s.operation, 0)), s.length, s.delay)
                for s in self.store_faults
            ),
            crash_fractions=self.crash_fractions,
        )

    def resolve(self, counts: RunCounts) -> FaultPlan:
        """This plan with every occurrence counted from the end (negative) made a count from
        the start, against ``counts``, the plan's crash-free run: ``-1`` becomes the number
        of times that run met the point (made the request, the store operation).

        A crash fraction becomes the crash at the point met that far through the run
        (:meth:`RunCounts.at_fraction`).

        A fault counted from further back than the run goes (``-5`` of a point met 3 times)
        is never reached: it is left out, as a fault that cannot fire. So is a stream fault
        resolved onto a request that did not stream, and a crash fraction where the order
        of the points is not known. A plan with nothing relative to the run is returned as
        it is.

        >>> plan = FaultPlan(crashes=(CrashAt("after_tool_effect", -1), CrashAt("before_tool_effect", -4)))
        >>> plan.resolve(RunCounts({"after_tool_effect": 3, "before_tool_effect": 3}, {}, 4)).describe()
        'crash at after_tool_effect #3'
        """
        if not self.relative:
            return self

        def start(occurrence: int, count: int) -> int:
            return occurrence if occurrence > 0 else count + occurrence + 1

        crashes: dict[CrashAt, None] = {}
        for c in self.crashes:
            n = start(c.occurrence, counts.hits.get(c.point, 0))
            if n >= 1:
                crashes.setdefault(CrashAt(c.point, n))
        for fraction in self.crash_fractions:
            placed = counts.at_fraction(fraction)
            if placed is not None:
                crashes.setdefault(placed[0])
        api: dict[int, ApiFault] = {}
        for f in self.api_faults:
            n = start(f.request, counts.requests)
            if n < 1 or (f.request < 0 and f.kind in STREAM_FAULT_KINDS and n not in counts.streamed):
                continue
            api.setdefault(n, ApiFault(f.kind, n))
        store: list[StoreFault] = []
        for s in self.store_faults:
            n = start(s.occurrence, counts.store_ops.get(s.operation, 0))
            if n >= 1:
                store.append(StoreFault(s.kind, s.operation, n, s.length, s.delay))
        return FaultPlan(tuple(sorted(crashes)), tuple(sorted(api.values())), tuple(store))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe form (for process mode and reports)."""
        data: dict[str, Any] = {
            "crashes": [[c.point, c.occurrence] for c in self.crashes],
            "api_faults": [[f.kind, f.request] for f in self.api_faults],
            "store_faults": [
                [s.kind, s.operation, s.occurrence, s.length, s.delay] for s in self.store_faults
            ],
        }
        if self.crash_fractions:
            data["crash_fractions"] = list(self.crash_fractions)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FaultPlan:
        """The inverse of :meth:`to_dict`.

        A key it does not know (a typo such as ``crash``) or an entry of the wrong shape is
        a ``ValueError`` saying what each key holds: read as no faults, a replay of a
        failure would pass without a word.
        """
        # Each key: its shape, and how many items an entry has (None: a number, not a list).
        shapes: dict[str, tuple[str, range | None]] = {
            "crashes": ("[[point, occurrence], ...]", range(2, 3)),
            "api_faults": ("[[kind, request], ...]", range(2, 3)),
            "store_faults": ("[[kind, operation, occurrence, times, delay], ...]", range(1, 6)),
            "crash_fractions": ("[fraction, ...]", None),
        }
        example = "; it holds " + ", ".join(f"{key}: {shape}" for key, (shape, _) in shapes.items())
        if not isinstance(data, Mapping):
            raise ValueError(f"a fault plan is a dict (FaultPlan.to_dict()), not {data!r:.80}{example}")
        unknown = sorted(map(str, set(data) - set(shapes)))
        if unknown:
            raise ValueError(f"fault plan: unknown key(s) {', '.join(unknown)}{example}")
        entries: dict[str, list[Any]] = {}
        for key, (shape, sizes) in shapes.items():
            value = data.get(key, ())
            if isinstance(value, str | bytes) or not isinstance(value, Sequence):
                raise ValueError(f"fault plan[{key!r}] must be a list, {shape}, not {value!r:.80}")
            entries[key] = list(value)
            if sizes is None:
                continue
            for entry in value:
                if isinstance(entry, str | bytes) or not isinstance(entry, Sequence) or len(entry) not in sizes:
                    raise ValueError(f"fault plan[{key!r}]: each entry is a list, {shape}, not {entry!r:.80}")
        return cls(
            crashes=tuple(CrashAt(p, o) for p, o in entries["crashes"]),
            api_faults=tuple(ApiFault(k, r) for k, r in entries["api_faults"]),
            store_faults=tuple(StoreFault(*fault) for fault in entries["store_faults"]),
            crash_fractions=tuple(entries["crash_fractions"]),
        )


class WorldLike(Protocol):
    """What the harness needs of ``reference_agent.world.World``."""

    def perform(
        self,
        tool: str,
        input: Mapping[str, Any],
        *,
        idempotency_key: str | None,
        honour_key: bool,
        effect: Callable[[], str],
    ) -> str: ...


def is_generation(body: Any) -> bool:
    """Whether a request body the fake API saw asks for a generation.

    ``messages.create`` and ``messages.stream`` send ``max_tokens``; ``count_tokens`` does
    not (the API refuses it there), so this is how the harness tells them apart from the
    body alone. Listing models and reading batches never reach the hooks.

    >>> is_generation({"model": "m", "max_tokens": 8, "messages": []})
    True
    >>> is_generation({"model": "m", "messages": []})
    False
    """
    return isinstance(body, dict) and "max_tokens" in body


class FaultInjector:
    """The live state of one scenario's faults: occurrence counters and the timeline.

    One injector serves every attempt of a scenario, so counts span resumes. After the
    first crash of an attempt the attempt is dead (:attr:`dead`): every later hook of it
    raises the crash again, from whichever thread or task it comes, until
    :meth:`attempt_started` opens the next attempt.
    """

    def __init__(self, plan: FaultPlan | None = None, timeline: Timeline | None = None) -> None:
        if plan is not None and plan.relative:
            raise ValueError(
                f"fault plan {plan.describe()!r} places faults relative to the crash-free run "
                "(occurrences counted from the end, crash fractions): resolve it first with "
                "plan.resolve(counts of the crash-free run), or give it to replay/fuzz, which do"
            )
        self.plan = plan or FaultPlan()
        self.timeline = timeline if timeline is not None else Timeline()
        self.hits: Counter[str] = Counter()
        #: Every point met, in order, and the durable changes made before each (what crash
        #: fractions are resolved against).
        self.order: list[FaultPoint] = []
        self.changes: list[int] = []
        #: When each point of :attr:`order` was met (``time.monotonic_ns``): process mode
        #: merges the points met in two processes by it.
        self.order_t: list[int] = []
        self.crashes = 0
        self.store_ops: Counter[str] = Counter()
        self._armed: dict[tuple[str, int], CrashAt] = {(c.point, c.occurrence): c for c in self.plan.crashes}
        self._api_faults = {f.request: f for f in self.plan.api_faults}
        self._last_request: Any = None
        self._calls_since_response = 0
        self._request_index = 0
        #: The request index of each fake exchange a generation is in (popped at its reply).
        self._requests_by_exchange: dict[int, int] = {}
        #: The indices of the model requests that asked for a streamed reply.
        self.streamed: set[int] = set()
        #: The streamed replies not yet read to their end: reply id -> request index.
        self._streaming: dict[str, int] = {}
        #: Where API faults go: the fake API's ``fail_next`` (set by the harness), called
        #: with the kind and ``mid_reply`` (cut a stream in the middle of the reply).
        self.api_sink: Callable[..., None] | None = None
        #: Stop at a tool error the agent does not get past (the crash-free run of a plan).
        self.strict_tools = False
        #: Tool errors of a strict run not yet answered by the same call succeeding:
        #: (tool, input) -> what the tool answered.
        self._tool_errors: dict[tuple[str, str], str] = {}
        #: Called with the crash before it is raised (process mode kills the process).
        self.on_crash: Callable[[Crash], None] | None = None
        #: The crash that ended the current attempt, if one did.
        self.dead: Crash | None = None
        # Agents run tools in threads: counts and the crash decision must not interleave.
        self._lock = threading.RLock()

    def disarm(self) -> None:
        """Inject nothing more (for the run of a completed task)."""
        self._armed.clear()
        self._api_faults.clear()
        self.plan = FaultPlan()

    # -- crash points ------------------------------------------------------------------
    def hit(self, point: FaultPoint) -> None:
        """Count one occurrence of ``point``; raise :class:`Crash` if the plan says so."""
        with self._lock:
            self.check_alive()
            self.hits[point] += 1
            self.order.append(point)
            self.order_t.append(time.monotonic_ns())
            self.changes.append(self.timeline.changes)
            occurrence = self.hits[point]
            if self._armed.pop((point, occurrence), None) is None:
                return
            self.crashes += 1
            self.timeline.add("crash", point=point, occurrence=occurrence)
            # ``dead`` is never raised: the raised crash's traceback holds this frame (and
            # so this injector), and ``dead`` holding it would make a reference cycle of
            # every frame of the attempt, left to the garbage collector.
            self.dead = Crash(point, occurrence)
        if self.on_crash is not None:
            self.on_crash(self.dead)  # process mode: SIGKILL here
        raise Crash(point, occurrence)

    def check_alive(self) -> None:
        """Raise the attempt's crash again if it already crashed: a dead process does nothing."""
        dead = self.dead
        if dead is not None:
            raise Crash(dead.point, dead.occurrence)

    def attempt_started(self) -> None:
        """A new attempt: alive again; its first model request opens an iteration, and tool
        calls of an unfinished batch no longer count as parallel."""
        with self._lock:
            self.dead = None
            self._calls_since_response = 0
            self._last_request = None

    def model_replied(self) -> None:
        """A model reply reached the agent (seen by a process that does not serve the
        model): the tool calls after it are a new batch, none of them parallel to the last."""
        with self._lock:
            self._calls_since_response = 0

    @property
    def requests(self) -> int:
        """The model requests so far (generations, across resumes), as API faults count them."""
        return self._request_index

    # -- model transport -----------------------------------------------------------------
    def model_hook(self, event: str, index: int, body: Any) -> None:
        """The fake Messages API's hook: ``event`` is ``"request"`` or ``"response"``.

        Only generations are model calls; a ``count_tokens`` request is let through as it
        is (unless the attempt is already dead).
        """
        self.check_alive()
        if event == "request":
            if not is_generation(body):
                return
            self._model_request(body, index)
        elif event == "response":
            self._model_response(body, index)

    def _model_request(self, body: Any, exchange: int | None = None) -> None:
        self.model_request_sent()
        with self._lock:
            messages = body.get("messages", []) if isinstance(body, dict) else []
            self._request_index += 1
            if exchange is not None:
                # The reply to it is numbered by it, even when another worker's requests
                # came in between (two workers on one fake, in takeover).
                if len(self._requests_by_exchange) > 10_000:
                    self._requests_by_exchange.clear()
                self._requests_by_exchange[exchange] = self._request_index
            thinking = body.get("thinking") if isinstance(body, dict) else None
            thinks = isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")
            extra: dict[str, Any] = {}
            if thinks:
                from reference_agent.scripted import interleaved_thinking

                if interleaved_thinking(body):
                    # The open turn must bring back every thinking block as it came, in
                    # place (the valid_sequence oracle checks it against the replies).
                    extra["interleaved"] = True
            if isinstance(body, dict):
                # What else steers the model: compared with the crash-free run's after a
                # resume (resume_drift_advice). Shared with the request, not copied.
                extra["system"] = body.get("system")
                extra["tool_choice"] = body.get("tool_choice")
                tools = body.get("tools")
                extra["tools"] = (
                    tuple(str(t.get("name")) for t in tools if isinstance(t, dict)) if isinstance(tools, list) else ()
                )
            self.timeline.add(
                "model_request",
                index=self._request_index,
                messages=messages,
                thinking=thinks,
                **extra,
            )
            streamed = _streamed(body)
            if streamed:
                self.streamed.add(self._request_index)
            fault = self._api_faults.pop(self._request_index, None)
            if fault is not None and fault.kind in STREAM_FAULT_KINDS and not streamed:
                fault = None  # only a streamed reply can be cut short
            if fault is not None and fault.kind == "api_outage":
                # An outage: this request and the next ones are overloaded (a fault the plan
                # puts on one of them already is left as it is).
                for later in range(self._request_index + 1, self._request_index + OUTAGE_REQUESTS):
                    self._api_faults.setdefault(later, ApiFault("overloaded", later, outage=True))
                fault = ApiFault("overloaded", self._request_index, outage=True)
            if fault is not None and self.api_sink is not None:
                # The fake takes its queued fault after the hooks: it hits this request.
                if fault.outage:
                    self.timeline.add("api_fault", fault=fault.kind, index=self._request_index, outage=True)
                else:
                    self.timeline.add("api_fault", fault=fault.kind, index=self._request_index)
                # A dropped connection cuts the reply in the middle (a part of its text or
                # of its last call's input has come); an error event comes before any of it.
                self.api_sink(fault.kind, mid_reply=fault.kind == "stream_disconnect")
            if messages != self._last_request:
                self._last_request = messages
                self.hit("iteration_start")
            self.hit("before_model_call")

    def _model_response(self, body: Any, exchange: int | None = None) -> None:
        with self._lock:
            request_index = (
                self._requests_by_exchange.pop(exchange, self._request_index)
                if exchange is not None
                else self._request_index
            )
            status, payload = _response_parts(body)
            tool_uses = []
            text = ""
            stop_reason = None
            paused: list[Any] | None = None
            if isinstance(payload, dict):
                stop_reason = payload.get("stop_reason")
                for block in payload.get("content") or ():
                    if block.get("type") == "tool_use":
                        tool_uses.append((block.get("id"), block.get("name"), block.get("input")))
                    elif block.get("type") == "text":
                        text += block.get("text", "")
                if stop_reason in ("pause_turn", "max_tokens") and not tool_uses:
                    # A paused (or cut) turn goes back as it came, server tool blocks and
                    # all: the oracles tell it from a prefill by its content.
                    paused = list(payload.get("content") or ())
            extra: dict[str, Any] = {} if paused is None else {"content": paused}
            if request_index in self.streamed and status == 200 and isinstance(payload, dict):
                # Open until it is read to its end (model_delivered): a save before that
                # holds at most a draft of it.
                extra["streamed"] = True
                self._streaming[str(payload.get("id"))] = request_index
            if isinstance(payload, dict):
                from reference_agent.validation import thinking_shape

                # The reply's thinking and calls in order, for interleaved thinking's rule.
                shape = thinking_shape(payload.get("content"))
                if shape is not None:
                    extra["thinking_shape"] = shape
            self.timeline.add(
                "model_response",
                index=request_index,
                status=status,
                tool_uses=tool_uses,
                text=text,
                stop_reason=stop_reason,
                **extra,
            )
            if status == 200:
                self._calls_since_response = 0
                self.hit("after_model_call")

    def model_delivered(self, index: int, message: dict[str, Any]) -> None:
        """The fake API's delivery hook: a streamed reply was read to its end."""
        with self._lock:
            request = self._streaming.pop(str(message.get("id")), None)
            if request is not None:
                self.timeline.add("model_delivered", index=request)

    def receipts(self, events: list[Event]) -> list[Event]:
        """``events`` recorded elsewhere (a child process), each ``model_delivered`` by a
        message id turned into one by this injector's request index (or dropped, for a
        reply this injector does not know as streaming)."""
        kept = []
        with self._lock:
            for event in events:
                if event.kind == "model_delivered" and "message_id" in event.data:
                    request = self._streaming.pop(str(event.data["message_id"]), None)
                    if request is None:
                        continue
                    event = Event(event.seq, event.attempt, event.kind, {"index": request}, event.t)
                kept.append(event)
        return kept

    # -- toolbox ---------------------------------------------------------------------------
    def tool_called(self, tool: str, input: Mapping[str, Any], key: str | None) -> None:
        """The agent called a tool (before its function runs)."""
        with self._lock:
            self.check_alive()
            self.timeline.add("tool_call", tool=tool, input=dict(input), key=key)
            if self._calls_since_response > 0:
                self._calls_since_response += 1
                self.hit("between_parallel_tools")
            else:
                self._calls_since_response += 1
            self.hit("before_tool_effect")

    def tool_answered(self, tool: str, input: Mapping[str, Any], result: Any, *, known: bool = True) -> None:
        """The tool's result reached the agent; an error result is recorded.

        ``known``: whether the toolbox has the tool. A call of a tool it lacks is the
        agent's own (the scripted model asks only for toolbox tools: say, a server tool's
        ``server_tool_use`` run as a client tool), not a plan that cannot be carried out:
        the run goes on, and the oracles judge what the agent does with the error.
        """
        call = (tool, canonical(input))
        if getattr(result, "is_error", False):
            self.timeline.add("tool_error", tool=tool, input=dict(input), content=getattr(result, "content", ""))
            if self.strict_tools and known:
                # Not yet: the agent's own retry may get past it (an outside round's queue
                # worker retried a flaky send with tenacity, and every plan that sent was
                # discarded). It is decided at the next model request, or when the agent
                # gives up (unanswered_tool_error).
                with self._lock:
                    self._tool_errors[call] = f"tool {tool} answered an error: {getattr(result, 'content', '')}"
        elif self._tool_errors:
            with self._lock:
                self._tool_errors.pop(call, None)

    def unanswered_tool_error(self) -> str | None:
        """In a strict run, a tool error no later call of the same tool and input got past."""
        if not self._tool_errors:  # every model request asks: most runs have none
            return None
        with self._lock:
            return next(iter(self._tool_errors.values()), None) if self.strict_tools else None

    def gave_up(self, raised: BaseException) -> str | None:
        """What makes the plan infeasible when the agent raised ``raised`` in a strict run
        with a tool error unanswered (its retries ran out), if it did; ``None`` otherwise
        (a crash is no giving up)."""
        unanswered = self.unanswered_tool_error()
        if unanswered is None or isinstance(raised, Crash):
            return None
        return f"{unanswered} (the agent then raised {type(raised).__name__}: {raised})"

    def model_request_sent(self) -> None:
        """A generation request is on its way: in a strict run, one that follows a tool error
        the agent did not get past carries it to the model, which would ask again for ever
        (:class:`PlanInfeasible`)."""
        unanswered = self.unanswered_tool_error()
        if unanswered is not None:
            raise PlanInfeasible(unanswered)

    def effect_performed(self, tool: str, input: Mapping[str, Any], key: str | None, fresh: bool) -> None:
        """The tool's function ran; ``fresh`` is False when the World replayed a key."""
        if fresh:
            self.timeline.add("effect", tool=tool, input=dict(input), key=key)

    # -- store -------------------------------------------------------------------------------
    def store_operation(self, operation: str) -> None:
        """Count a load or save; inject the outage or delay the plan names for it."""
        with self._lock:
            self.check_alive()
            self.store_ops[operation] += 1
            n = self.store_ops[operation]
        for fault in self.plan.store_faults:
            if not fault.covers(operation, n):
                continue
            if fault.kind == "store_outage":
                from stores import StoreUnavailableError

                self.timeline.add("store_outage", operation=operation)
                raise StoreUnavailableError(f"injected store outage on {operation}")
            self.timeline.add("store_delay", operation=operation, seconds=fault.delay)
            time.sleep(fault.delay)


def _response_parts(body: Any) -> tuple[int | None, Any]:
    # The fake reports the response either as {"status", "body"} or as the bare body.
    if isinstance(body, dict) and "status" in body and ("body" in body or "json" in body):
        return body.get("status"), body.get("body", body.get("json"))
    if isinstance(body, dict) and body.get("type") == "error":
        return None, body
    return 200, body


#: Where a checkpoint keeps the message history: ``history(checkpoint)`` returns the list
#: of Messages-API messages, or ``None`` when this checkpoint holds none that it can find.
HistoryLocator = Callable[["Checkpoint"], "Sequence[Any] | None"]


def default_history(checkpoint: Checkpoint) -> Sequence[Any] | None:
    """The history where the checkpoint schema puts it: ``checkpoint.messages``.

    An agent that keeps its own state format (a session dict in ``artifacts``) leaves it
    empty; ``None`` then says "not found here", which the oracles report as not checkable.
    """
    return checkpoint.messages or None


def _streamed(body: Any) -> bool:
    """Whether a model request asks for its reply as a stream."""
    return isinstance(body, dict) and body.get("stream") is True


class FaultyStore:
    """A :class:`~stores.CheckpointStore` wrapper that injects store faults and crashes.

    Every successful save is recorded in the timeline as a durable write (the oracles use
    them); ``before_checkpoint_write`` and ``after_checkpoint_write`` crash around it.
    ``history`` says where a checkpoint keeps the message history (default:
    :func:`default_history`); a save whose history it cannot find is recorded with
    ``messages=None``.

    >>> from stores import open_store
    >>> store = FaultyStore(open_store("memory://"), FaultInjector())
    >>> store.load("t") is None
    True
    """

    def __init__(
        self, inner: CheckpointStore, injector: FaultInjector, *, history: HistoryLocator | None = None
    ) -> None:
        self.inner = inner
        self.injector = injector
        self.history = history or default_history
        #: Whether the history comes from a locator the caller gave (``history=``), and the
        #: first error it raised, for the report of a history it never found.
        self.located = history is not None
        self.history_error: str | None = None
        self.last_history_error: str | None = None
        # The JSON of the history the last save recorded, and its copy.
        self._last_history: tuple[bytes, list[Any]] = (b"[]", [])

    def load(self, task_id: str) -> Checkpoint | None:
        self.injector.store_operation("load")
        checkpoint = self.inner.load(task_id)
        self.injector.check_alive()  # another thread crashed the attempt meanwhile
        if checkpoint is None:
            self.injector.timeline.add("store_load", found=False, task_id=task_id)
        else:
            self.injector.timeline.add(
                "store_load",
                found=True,
                version=checkpoint.version,
                iteration=checkpoint.iteration,
                task_id=task_id,
            )
        return checkpoint

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        from stores import ConflictError, StoreUnavailableError

        injector = self.injector
        try:
            injector.store_operation("save")
        except StoreUnavailableError as exc:
            injector.timeline.add("store_save_failed", error=str(exc), reason="outage")
            raise
        injector.hit("before_checkpoint_write")
        try:
            saved = self.inner.save(checkpoint)
        except ConflictError as exc:
            injector.timeline.add("store_save_failed", error=str(exc), reason="conflict")
            raise
        except Exception as exc:
            injector.timeline.add("store_save_failed", error=f"{type(exc).__name__}: {exc}", reason="error")
            raise
        # A deep copy through JSON (what the store wrote): the agent may go on mutating
        # the message objects it saved, and the oracles need this save's view.
        injector.timeline.add(
            "store_save",
            task_id=saved.task_id,
            version=saved.version,
            iteration=saved.iteration,
            status=saved.status,
            messages=self._history(saved),
            # This save's own error (a string) when history= raised on it.
            **({"located": self.last_history_error or True} if self.located else {}),
        )
        injector.hit("after_checkpoint_write")
        return saved

    def _history(self, saved: Checkpoint) -> list[Any] | None:
        self.last_history_error = None
        try:
            found = self.history(saved)
        except Exception as exc:
            # A locator that cannot read this checkpoint has not found the history here.
            self.last_history_error = f"{type(exc).__name__}: {exc}"
            if self.history_error is None:
                self.history_error = self.last_history_error
            return None
        if found is None:
            return None
        encoded = _to_json(list(found), fallback=str)
        # Most saves repeat the last one's history and add a message or two: when this
        # history's JSON starts with the last one's, byte for byte, up to a message
        # boundary, those messages are the same JSON, so their copies are reused (the
        # events share them; nothing edits a timeline) and only the new ones are parsed.
        last_encoded, last_copied = self._last_history
        cut = len(last_encoded) - 1  # where the last history's closing bracket was
        if cut > 1 and encoded[cut : cut + 1] == b"," and encoded.startswith(last_encoded[:cut]):
            copied: list[Any] = [*last_copied, *_from_json(b"[" + encoded[cut + 1 :])]
        elif encoded == last_encoded:
            copied = list(last_copied)
        else:
            copied = _from_json(encoded)
        self._last_history = (encoded, copied)
        return copied

    def delete(self, task_id: str) -> None:
        self.injector.check_alive()
        self.inner.delete(task_id)
        self.injector.timeline.add("store_delete", task_id=task_id)

    def list_checkpoints(
        self,
        *,
        status: CheckpointStatus | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> list[CheckpointSummary]:
        self.injector.check_alive()
        return self.inner.list_checkpoints(status=status, metadata=metadata)

    def info(self) -> StoreInfo:
        self.injector.check_alive()
        return self.inner.info()

    def close(self) -> None:
        # The harness owns the inner store's lifetime; an agent closing it must not end it.
        return None


class _ToolError(Exception):
    """A tool answered with an error result: no effect to record."""

    def __init__(self, result: ToolResult) -> None:
        super().__init__("tool error")
        self.result = result


class _NotRecorded(Exception):
    """Raised inside ``World.perform`` to learn that a key was not honoured yet (rolls back)."""


class _Awaitable(Exception):
    """The effect turned out to be a coroutine: settle it on the async path."""

    def __init__(self, awaitable: Awaitable[Any]) -> None:
        super().__init__("async effect")
        self.awaitable = awaitable


class _Guarded:
    """An awaitable that checks, before each step of the one it wraps, that the attempt is
    alive: after a crash, a sibling task of a dead attempt goes no further, as the tasks
    of a killed process do not."""

    def __init__(self, awaitable: Awaitable[Any], injector: FaultInjector) -> None:
        self._awaitable = awaitable
        self._injector = injector

    def __await__(self) -> Any:
        steps = self._awaitable.__await__()
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            if thrown is None:
                # An exception thrown in (the cancellation of the tasks left when a crash
                # stopped the event loop) goes in as it is: the task ends as asyncio ends
                # it, in its own context, rather than dying again mid-cleanup.
                try:
                    self._injector.check_alive()
                except Crash:
                    steps.close()
                    raise
            try:
                yielded = steps.throw(thrown) if thrown is not None else steps.send(sent)
            except StopIteration as stop:
                return stop.value
            try:
                sent, thrown = (yield yielded), None
            except BaseException as exc:
                sent, thrown = None, exc


# The idempotency key of the call in progress, per thread and per asyncio task.
_current_key: contextvars.ContextVar[str | None] = contextvars.ContextVar("agentckpt_key", default=None)


def _reset_key(token: contextvars.Token[str | None]) -> None:
    # A coroutine closed outside its task's context (collected after its event loop was
    # closed) cannot reset it (ValueError): that context is gone with the task.
    with contextlib.suppress(ValueError):
        _current_key.reset(token)


class InstrumentedToolbox:
    """A toolbox that records every call and irreversible effect and injects crashes.

    It offers the toolbox contract (``definitions``, ``spec``, ``call``) and forwards
    anything else to the team's toolbox. Irreversible effects go through the World:
    ``world.perform`` honours idempotency keys for tools declared ``idempotent``. An async
    tool (its ``call`` returns an awaitable) gets an awaitable back; a crash inside it
    ends the attempt like any other. Calls from several threads or tasks at once are safe.
    """

    def __init__(self, tools: Any, world: WorldLike, injector: FaultInjector) -> None:
        self._tools = tools
        self._world = world
        self._injector = injector
        replace = getattr(tools, "replace_functions", None)
        # The reference Toolbox lets us wrap each function, which keeps its own error
        # handling; any other toolbox is wrapped at ``call``.
        self._inner = replace(self._wrap_function) if callable(replace) else None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tools, name)

    def __iter__(self) -> Any:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def definitions(self) -> list[dict[str, Any]]:
        return list(self._tools.definitions())

    def spec(self, name: str) -> ToolSpec:
        return self._tools.spec(name)  # type: ignore[no-any-return]

    def call(self, name: str, input: Mapping[str, Any], *, idempotency_key: str | None = None) -> Any:
        if self._is_async(name):
            # Observed when awaited, as the tool runs: creating the coroutine does nothing.
            return self._call_async(name, input, idempotency_key)
        return self._call(name, input, idempotency_key)

    def _is_async(self, name: str) -> bool:
        if inspect.iscoroutinefunction(getattr(self._tools, "call", None)):
            return True
        try:
            function = getattr(self._tools.spec(name), "function", None)
        except Exception:
            return False
        return inspect.iscoroutinefunction(function)

    async def _call_async(self, name: str, input: Mapping[str, Any], key: str | None) -> Any:
        result = self._call(name, input, key)
        if inspect.isawaitable(result):
            result = await _Guarded(result, self._injector)
        return result

    def _call(self, name: str, input: Mapping[str, Any], idempotency_key: str | None) -> Any:
        self._injector.tool_called(name, input, idempotency_key)
        token = _current_key.set(idempotency_key)
        try:
            if self._inner is not None:
                result = self._inner.call(name, input, idempotency_key=idempotency_key)
            else:
                result = self._call_wrapped(name, input, idempotency_key)
        finally:
            _current_key.reset(token)
        if inspect.isawaitable(result):
            return self._answered_later(name, input, idempotency_key, result)
        self._injector.tool_answered(name, input, result, known=self._knows(name))
        return result

    def _knows(self, name: str) -> bool:
        """Whether the toolbox has tool ``name`` (``True`` when it cannot tell)."""
        try:
            return name in self._tools
        except Exception:
            return True

    async def _answered_later(
        self, name: str, input: Mapping[str, Any], key: str | None, pending: Awaitable[Any]
    ) -> Any:
        token = _current_key.set(key)
        try:
            result = await _Guarded(pending, self._injector)
        finally:
            _reset_key(token)
        self._injector.check_alive()
        self._injector.tool_answered(name, input, result)
        return result

    # -- the reference Toolbox path: wrap each function ---------------------------------
    def _wrap_function(self, spec: ToolSpec) -> Callable[..., Any]:
        # The wrapped functions live in this toolbox's ``_inner``: they hold the world and
        # the injector, not this toolbox (that would be a reference cycle, each scenario's
        # toolbox left to the garbage collector).
        function = spec.function
        injector = self._injector
        world = self._world

        def split(kwargs: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
            key = kwargs.get("idempotency_key") if spec.idempotent else _current_key.get()
            tool_input = {k: v for k, v in kwargs.items() if not (spec.idempotent and k == "idempotency_key")}
            return key, tool_input

        if inspect.iscoroutinefunction(function):

            async def instrumented_async(**kwargs: Any) -> Any:
                key, tool_input = split(kwargs)
                call = _for_input(spec, tool_input)
                injector.check_alive()
                if not call.irreversible:
                    result = await _Guarded(function(**kwargs), injector)
                else:
                    result = await _perform_async(world, injector, call, tool_input, key, lambda: function(**kwargs))
                injector.hit("after_tool_effect")
                return result

            return instrumented_async

        def instrumented(**kwargs: Any) -> Any:
            key, tool_input = split(kwargs)
            call = _for_input(spec, tool_input)
            if not call.irreversible:
                injector.check_alive()
                result = function(**kwargs)
                injector.hit("after_tool_effect")
                return result
            value = _perform(world, injector, call, tool_input, key, lambda: function(**kwargs))
            injector.hit("after_tool_effect")
            return value

        return instrumented

    # -- any other toolbox: wrap ``call`` ------------------------------------------------
    def _call_wrapped(self, name: str, input: Mapping[str, Any], key: str | None) -> Any:
        spec = _for_input(self._tools.spec(name), input)
        if not spec.irreversible:
            result = self._tools.call(name, input, idempotency_key=key)
            if inspect.isawaitable(result):
                return self._after_effect_later(result)
            self._injector.hit("after_tool_effect")
            return result

        def effect() -> Any:
            result = self._tools.call(name, input, idempotency_key=key)
            if inspect.isawaitable(result):
                return result
            if result.is_error:
                raise _ToolError(result)
            return result

        try:
            value = _perform(self._world, self._injector, spec, dict(input), key, effect)
        except _ToolError as exc:
            return exc.result
        except _Awaitable as pending:
            return self._settle_wrapped(spec, dict(input), key, pending.awaitable)
        self._injector.hit("after_tool_effect")
        return _as_result(value)

    async def _after_effect_later(self, pending: Awaitable[Any]) -> Any:
        result = await _Guarded(pending, self._injector)
        self._injector.hit("after_tool_effect")
        return result

    async def _settle_wrapped(
        self, spec: ToolSpec, tool_input: dict[str, Any], key: str | None, pending: Awaitable[Any]
    ) -> Any:
        # World.perform found no honoured key (it called the effect): await the effect.
        result = await _Guarded(pending, self._injector)
        if getattr(result, "is_error", False):
            return result
        value = _record_done(self._world, self._injector, spec, tool_input, key, result)
        self._injector.hit("after_tool_effect")
        return _as_result(value)


def _for_input(spec: Any, tool_input: Mapping[str, Any]) -> Any:
    """The spec with the flags of this call: a client tool's command has a kind of its own
    (the editor's ``view`` changes nothing, its ``str_replace`` is not repeat-safe)."""
    for_input = getattr(spec, "for_input", None)
    return for_input(tool_input) if callable(for_input) else spec


def _as_result(value: Any) -> Any:
    if isinstance(value, str):
        from reference_agent.toolbox import ToolResult

        return ToolResult(value)
    return value


def _as_text(value: Any) -> str:
    content = getattr(value, "content", value)
    if isinstance(content, str):
        return content
    return json.dumps(content, sort_keys=True, default=str)


def _perform(
    world: WorldLike,
    injector: FaultInjector,
    spec: ToolSpec,
    tool_input: dict[str, Any],
    key: str | None,
    effect: Callable[[], Any],
) -> Any:
    """Run an irreversible effect through the World (which honours idempotency keys)."""
    produced: list[Any] = []

    def recorded() -> str:
        injector.check_alive()
        value = effect()
        if inspect.isawaitable(value):
            raise _Awaitable(value)
        produced.append(value)
        return value if isinstance(value, str) else _as_text(value)

    text = world.perform(spec.name, tool_input, idempotency_key=key, honour_key=spec.idempotent, effect=recorded)
    injector.effect_performed(spec.name, tool_input, key, fresh=bool(produced))
    return produced[0] if produced else text


async def _perform_async(
    world: WorldLike,
    injector: FaultInjector,
    spec: ToolSpec,
    tool_input: dict[str, Any],
    key: str | None,
    effect: Callable[[], Any],
) -> Any:
    """``_perform`` for an awaitable effect: ``World.perform`` takes only a plain
    function, so ask it first whether the effect is to happen (a key it honoured, or a
    World that leaves a repeat out: chaos mode's run without the unsafe repeats), then
    await, then record."""

    def probe() -> str:
        raise _NotRecorded

    try:
        text = world.perform(
            spec.name, tool_input, idempotency_key=key, honour_key=spec.idempotent and key is not None, effect=probe
        )
    except _NotRecorded:
        pass
    else:
        injector.effect_performed(spec.name, tool_input, key, fresh=False)
        return text
    injector.check_alive()
    value = effect()
    if inspect.isawaitable(value):
        value = await _Guarded(value, injector)
    return _record_done(world, injector, spec, tool_input, key, value)


def _record_done(
    world: WorldLike, injector: FaultInjector, spec: ToolSpec, tool_input: dict[str, Any], key: str | None, value: Any
) -> Any:
    text = value if isinstance(value, str) else _as_text(value)
    # The effect happened whether or not the attempt died while it ran: record it.
    world.perform(spec.name, tool_input, idempotency_key=key, honour_key=False, effect=lambda: text)
    injector.effect_performed(spec.name, tool_input, key, fresh=True)
    return value


def instrument_toolbox(tools: Any, world: WorldLike, injector: FaultInjector) -> InstrumentedToolbox:
    """Wrap a team's toolbox so that calls and effects are observed and crash points fire.

    >>> from reference_agent.toolbox import Toolbox, tool
    >>> class Log:
    ...     def perform(self, tool, input, *, idempotency_key, honour_key, effect):
    ...         return effect()
    >>> @tool(irreversible=True)
    ... def send(to: str) -> str:
    ...     return "sent"
    >>> box = instrument_toolbox(Toolbox([send]), Log(), FaultInjector())
    >>> box.call("send", {"to": "a"}).content
    'sent'
    """
    return InstrumentedToolbox(tools, world, injector)


def plan_crash_points(plan: FaultPlan) -> Sequence[FaultPoint]:
    """The points at which ``plan`` crashes, in plan order."""
    return [c.point for c in plan.crashes]


def parse_fault_kinds(kinds: Iterable[str] | None) -> frozenset[str]:
    """Validate ``fault_kinds``: every name must be a fault point, API fault or store fault.

    ``None``: :data:`DEFAULT_FAULT_KINDS` (the opt-in kinds only when named).

    >>> "max_tokens" in parse_fault_kinds(None), "max_tokens" in parse_fault_kinds(["max_tokens"])
    (False, True)
    """
    if kinds is None:
        return frozenset(DEFAULT_FAULT_KINDS)
    if isinstance(kinds, str):
        kinds = [kinds]
    chosen = frozenset(kinds)
    if not chosen:
        # No kind at all would inject nothing, and every run would pass unfuzzed.
        raise ValueError(
            "fault_kinds is empty: no fault would be injected; leave it out for the default "
            f"kinds or name some of {', '.join(FAULT_KINDS)}"
        )
    unknown = sorted(chosen - set(FAULT_KINDS))
    if unknown:
        raise ValueError(f"fault_kinds: unknown {unknown}; choose from {', '.join(FAULT_KINDS)}")
    return chosen
