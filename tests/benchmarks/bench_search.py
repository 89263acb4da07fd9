"""Benchmark of the search: how many examples ``fuzz`` needs to find each known bug.

Run: ``python -m tests.benchmarks.bench_search [--seeds S] [--examples N] [--only NAME,...]``
(not collected by the test run). For every buggy agent of the test suite (the known-buggy
agents and the naive twins of the zoo), and seeds 1..S, it runs ``fuzz`` with at most N
examples and prints the examples it took to the first failure (``-`` where none failed: a
missed bug), twice in the same run:

1. **occurrences only**: every crash drawn as a point and its occurrence, 1..6 from the
   start or from the end of the plan's crash-free run (the search before crash fractions);
2. **with fractions**: half the crashes placed by a fraction of the states the crash-free
   run passed through (:attr:`~pytest_agentckpt.FaultPlan.crash_fractions`), states after
   an unsaved change weighted four times.

Shrinking is off (it does not change when a bug is first found). The last lines give the
misses and the total examples of each search, and their ratio. Counts of examples, not
seconds: the figures are the same on a busy machine (but for agents with threads, whose
runs are not the same from one run to the next).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import logging
import statistics
import warnings
from collections.abc import Callable, Iterator
from typing import Any

#: The known-buggy agents (``tests/buggy_agents``) fuzzed over the suite's toolbox.
BUGGY = (
    "no_repair", "repair_last_assistant_only", "budget_resets", "load_error_is_none", "checkpoint_after_result",
    "delete_on_success", "answer_changes_on_resume", "key_per_attempt", "common_design",
)


def _cases() -> dict[str, tuple[Callable[..., Any], Callable[[], Any], dict[str, Any]]]:
    """name -> (agent, toolbox factory, fuzz's glue for it), as the suite fuzzes each."""
    from pytest_agentckpt import sub_agent_plans
    from pytest_agentckpt.strategies import plans
    from tests.harness.toolkit import safe_toolbox, toolbox
    from tests.zoo import agents as zoo
    from tests.zoo import client_tool_agents as client_tools
    from tests.zoo import history_agents as history
    from tests.zoo import outside_agents as outside
    from tests.zoo import subagent_agents as subagents
    from tests.zoo.test_false_alarms import GLUE as ZOO_GLUE
    from tests.zoo.test_false_alarms import _tools as zoo_tools
    from tests.zoo.test_outside import GLUE as OUTSIDE_GLUE
    from tests.zoo.test_outside import desktop_tools

    cases: dict[str, tuple[Callable[..., Any], Callable[[], Any], dict[str, Any]]] = {}
    for name in BUGGY:
        cases[f"buggy/{name}"] = (importlib.import_module(f"tests.buggy_agents.{name}").run, toolbox, {})
    cases["buggy/save_after_tools"] = (importlib.import_module("tests.buggy_agents.save_after_tools").run, safe_toolbox, {})
    # Its bug shows only after its sixth irreversible call: plans of four steps or more.
    cases["buggy/ledger_cap"] = (
        importlib.import_module("tests.buggy_agents.ledger_cap").run, toolbox, {"plans": lambda tools: plans(tools, min_steps=4)}
    )
    for design, twin in zoo.TWINS.items():
        client = {} if design in ("gather", "streams") else {"client": "direct"}
        cases[f"zoo/{design}"] = (twin, functools.partial(zoo_tools, design), {**client, **ZOO_GLUE[design]})
    for design, twin in client_tools.TWINS.items():
        cases[f"client_tools/{design}"] = (twin, client_tools.TOOLS[design], {})
    for design, twin in outside.TWINS.items():
        tools = toolbox if design in ("sdk_objects", "trajectory") else desktop_tools
        cases[f"outside/{design}"] = (twin, tools, OUTSIDE_GLUE[design])
    cases["history/summarises"] = (history.summarising_agent(late_compaction=True), history.shop_tools, {})
    cases["history/drafts"] = (history.drafting_agent(keeps_draft=True), history.shop_tools, {})
    cases["history/taskgroup"] = (history.taskgroup_agent(count_pending=True), history.async_shop_tools, {})
    for design, twin in subagents.TWINS.items():
        cases[f"subagents/{design}"] = (
            twin, toolbox, {"client": "direct", "plans": lambda tools: sub_agent_plans(tools, subagents.DELEGATE)}
        )
    return cases


@contextlib.contextmanager
def _no_shrinking() -> Iterator[None]:
    # The first failure is what is measured: no shrinking, no search for other oracles.
    from hypothesis import Phase, settings

    import pytest_agentckpt._search as search

    saved = search._search_on, search._every_oracle, settings.get_current_profile_name()
    search._search_on = lambda *args, **kwargs: None  # type: ignore[assignment]
    search._every_oracle = lambda executor, budget, failure, *args, **kwargs: failure  # type: ignore[assignment]
    settings.register_profile("bench_search", phases=[Phase.explicit, Phase.reuse, Phase.generate])
    settings.load_profile("bench_search")
    try:
        yield
    finally:
        search._search_on, search._every_oracle = saved[0], saved[1]  # type: ignore[assignment]
        settings.load_profile(saved[2])


@contextlib.contextmanager
def _fractions(on: bool) -> Iterator[None]:
    from pytest_agentckpt._scenario import _Executor

    saved = _Executor.orders_points
    _Executor.orders_points = on
    try:
        yield
    finally:
        _Executor.orders_points = saved


def _first_failure(agent: Callable[..., Any], make_tools: Callable[[], Any], glue: dict[str, Any], seed: int, examples: int) -> int | None:
    from hypothesis.database import InMemoryExampleDatabase

    from pytest_agentckpt.harness import OracleFailure, fuzz

    tools = make_tools()
    glue = dict(glue)
    if callable(glue.get("plans")):
        glue["plans"] = glue["plans"](tools)
    try:
        fuzz(agent, tools, seed=seed, database=InMemoryExampleDatabase(), unsafe_tools="ignore", max_examples=examples, **glue)
    except OracleFailure as failure:
        return failure.found_after
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=6, help="seeds 1..S for each agent (default 6)")
    parser.add_argument("--examples", type=int, default=300, help="examples per fuzz call (default 300)")
    parser.add_argument("--only", default="", help="comma-separated parts of the agents' names to run")
    args = parser.parse_args()
    if args.seeds < 1 or args.examples < 1:
        parser.error("--seeds and --examples must be at least 1")
    logging.disable(logging.WARNING)  # agents report every injected store outage
    warnings.simplefilter("ignore")
    only = [part for part in args.only.split(",") if part]
    cases = {name: case for name, case in _cases().items() if not only or any(part in name for part in only)}
    if not cases:
        parser.error(f"--only {args.only!r} names none of: {', '.join(_cases())}")
    seeds = range(1, args.seeds + 1)
    totals = {False: [0, 0], True: [0, 0]}  # examples, misses
    print(f"examples to the first failure, seeds 1-{args.seeds}, at most {args.examples} ('-': missed)\n")
    print(f"{'agent':36s} {'occurrences only':>28s}   {'with fractions':>28s}")
    with _no_shrinking():
        for name, (agent, make_tools, glue) in cases.items():
            row = []
            for on in (False, True):
                with _fractions(on):
                    found = [_first_failure(agent, make_tools, glue, seed, args.examples) for seed in seeds]
                totals[on][0] += sum(args.examples if f is None else f for f in found)
                totals[on][1] += sum(f is None for f in found)
                cells = " ".join("-" if f is None else str(f) for f in found)
                median = statistics.median(args.examples if f is None else f for f in found)
                row.append(f"{cells} (median {median:g})")
            print(f"{name:36s} {row[0]:>28s}   {row[1]:>28s}", flush=True)
    runs = len(cases) * len(seeds)
    for on in (False, True):
        label = "with fractions" if on else "occurrences only"
        print(f"\n{label}: {totals[on][1]} missed of {runs}; {totals[on][0]} examples in all (a miss counts {args.examples})")
    print(f"\nexamples, with fractions / occurrences only: {totals[True][0] / totals[False][0]:.2f}x")


if __name__ == "__main__":
    main()
