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

import datetime as _dt
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from ._judge import Example, NondeterministicFailure, OracleFailure, _evaluate, _ignored_oracles
from ._scenario import (
    ClientPath,
    Mode,
    _check_client,
    _check_count,
    _check_goal,
    _check_tools,
    _Executor,
    _import_object,
    _is_async,
    _load_tools,
    _open_store_source,
    _resolve_run,
)
from ._search import (
    PROFILES,
    FuzzReport,
    FuzzStats,
    NotCheckableWarning,
    Profile,
    ResumeDriftWarning,
    UnsafeToolWarning,
    _examples,
    _fuzz_with,
    _hide_oracle_failures,
    _session,
    configure,
    stats,
)
from .faults import (
    FaultPlan,
    HistoryLocator,
    parse_fault_kinds,
)

if TYPE_CHECKING:
    from hypothesis.database import ExampleDatabase
    from hypothesis.strategies import SearchStrategy

    from reference_agent.scripted import Plan

__all__ = [
    "PROFILES",
    "Example",
    "FuzzReport",
    "FuzzStats",
    "NondeterministicFailure",
    "NotCheckableWarning",
    "OracleFailure",
    "Profile",
    "ResumeDriftWarning",
    "UnsafeToolWarning",
    "configure",
    "fuzz",
    "replay",
    "stats",
]


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
    ignore_oracles: Sequence[str] | None = (),
    history: HistoryLocator | str | None = None,
    systematic: bool = False,
    shrink: bool = True,
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
    ``history``: where the agent's checkpoints keep the message history, for an agent with
    its own state format: ``history=lambda cp: cp.artifacts["session"]["messages"]`` or a
    ``"module:attr"`` naming such a function (default ``checkpoint.messages``); an oracle
    that cannot find it is reported not checkable, never passed. In process mode it runs
    in the parent, on the checkpoints the child saved. ``systematic=True``: instead of
    drawing fault plans, crash each plan drawn (``max_examples`` plans) once at every
    single fault point its crash-free run passes, one point at a time; ``max_crashes`` and
    ``fault_kinds`` do not apply, and :meth:`FuzzReport.describe` says how many points were
    checked. ``shrink=False``: report the first failure as it was found, for an agent slow
    enough that the default costs minutes: no Hypothesis shrinking, no search on for other
    oracles, a short minimizer (16 runs, not 150); process mode always works so. Every
    argument works in both modes.

    >>> from pytest_agentckpt import fuzz
    >>> from reference_agent import run, demo_toolbox
    >>> report = fuzz(run, demo_toolbox(), max_examples=5)    # doctest: +SKIP

    Called from a running event loop (an ``async def`` test), it runs in a worker thread,
    where the agent gets its own loop; the test's loop waits for it.
    """
    if _loop_running():
        arguments = dict(locals())
        return _off_loop(lambda: fuzz(**arguments))
    __tracebackhide__ = _hide_oracle_failures
    if mode not in ("memory", "process"):
        raise ValueError(f"mode must be 'memory' or 'process', not {mode!r}")
    _check_client(client)
    if unsafe_tools not in ("warn", "error", "ignore"):
        raise ValueError(f"unsafe_tools must be 'warn', 'error' or 'ignore', not {unsafe_tools!r}")
    _check_count("max_examples", max_examples, 1, optional=True)
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
    _check_count("max_steps", max_steps, 0)
    _check_count("max_parallel", max_parallel, 1)
    goal = _check_goal(goal)
    kinds = parse_fault_kinds(fault_kinds)
    ignored = _ignored_oracles(ignore_oracles)
    locator = _resolve_history(history)
    if not isinstance(systematic, bool):
        raise ValueError(f"systematic must be True or False, not {systematic!r}")
    if not isinstance(shrink, bool):
        raise ValueError(f"shrink must be True or False, not {shrink!r}")
    if mode == "process":
        from ._process import fuzz_process

        return fuzz_process(
            run,
            tools,
            max_examples=max_examples or _session.examples or min(_examples(None), 10),
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
            ignore_oracles=ignored,
            history=locator,
            systematic=systematic,
        )
    agent = _resolve_run(run)
    if isinstance(tools, str):
        tools = _load_tools(tools)
    _check_tools(tools)
    _open_store_source(store)  # validates the argument before any example runs
    examples = _examples(max_examples)
    if client == "direct" and _is_async(agent):
        raise ValueError("client='direct' is for sync agents; an async agent gets the SDK's async client")
    executor = _Executor(
        agent, tools, store=store, budget=budget, max_resumes=max_resumes, goal=goal, client=client,
        ignore_oracles=ignored, history=locator,
    )
    try:
        return _fuzz_with(
            executor, agent, tools, examples=examples, crashes_max=crashes_max, kinds=kinds,
            deadline=deadline, plans=plans, seed=seed, budget=budget, max_steps=max_steps,
            max_parallel=max_parallel, unsafe_tools=unsafe_tools, database=database,
            systematic=systematic, shrink=shrink,
        )
    finally:
        executor.close()


def _resolve_history(history: HistoryLocator | str | None) -> HistoryLocator | None:
    """``history=``: a function ``checkpoint -> messages``, or a ``"module:attr"`` naming one."""
    if history is None:
        return None
    if isinstance(history, str):
        found = _import_object(history, "history")
        if not callable(found):
            raise ValueError(f"history: {history!r} is a {type(found).__name__}, not a function checkpoint -> messages")
        return found  # type: ignore[no-any-return]
    if not callable(history):
        raise ValueError(
            "history must be a function checkpoint -> messages (history=lambda cp: cp.artifacts[...]) "
            f"or a 'module:attr' string naming one, not {type(history).__name__}"
        )
    return history


def _loop_running() -> bool:
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _off_loop(call: Callable[[], FuzzReport]) -> FuzzReport:
    """``call()`` in a worker thread with no event loop: an async agent needs its own."""
    import threading

    result: list[FuzzReport] = []
    error: list[BaseException] = []

    def work() -> None:
        try:
            result.append(call())
        except BaseException as exc:  # re-raised in the caller's thread, as it is
            error.append(exc)

    worker = threading.Thread(target=work, name="agentckpt-fuzz")
    worker.start()
    worker.join()
    if error:
        raise error[0]
    return result[0]


def replay(
    run: Callable[..., Any] | str,
    tools: Any,
    plan: Plan,
    fault_plan: FaultPlan,
    *,
    store: Any = None,
    budget: int | None = None,
    goal: str = "Carry out the task.",
    ignore_oracles: Sequence[str] | None = (),
    history: HistoryLocator | str | None = None,
) -> None:
    """Run one scenario (a plan and a fault plan) and check the oracles, as ``fuzz`` does.

    What a failure report's "replay" line calls; raises :class:`OracleFailure`.

    >>> from pytest_agentckpt import replay, FaultPlan, CrashAt, Plan
    >>> replay(my_agent, my_tools, Plan((), "done"), FaultPlan((CrashAt("after_model_call"),)))  # doctest: +SKIP
    """
    __tracebackhide__ = _hide_oracle_failures
    from reference_agent.scripted import Plan as _Plan

    agent = _resolve_run(run)
    _check_tools(tools)
    # Checked before anything runs: a dict or None was an AttributeError deep in a run.
    if not isinstance(plan, _Plan):
        raise TypeError(f"plan must be a Plan (Plan.from_dict(d) for a report's dict), not {type(plan).__name__}")
    if not isinstance(fault_plan, FaultPlan):
        raise TypeError(
            f"fault_plan must be a FaultPlan (FaultPlan.from_dict(d) for a report's dict), not {type(fault_plan).__name__}"
        )
    executor = _Executor(
        agent, tools, store=store, budget=budget, max_resumes=None, goal=goal,
        ignore_oracles=_ignored_oracles(ignore_oracles), history=_resolve_history(history),
    )
    try:
        from .fake_api import instant_retries

        with instant_retries(0.0):
            verdict = _evaluate(executor, plan, fault_plan, budget)
    finally:
        executor.close()
    if verdict.violations:
        raise verdict.failure("replay(...)", found_after=None)


