"""The session totals: what an xdist worker sends is what the controller adds up."""

from __future__ import annotations

from collections import Counter

from pytest_agentckpt.chaos import ChaosStats
from pytest_agentckpt.harness import FuzzStats


def test_fuzz_stats_round_trip_through_json_and_add_up() -> None:
    a = FuzzStats(scenarios=3, crashes=2, fault_points_hit=Counter(iteration_start=4),
                  violations=Counter(valid_sequence=1), unsafe_tools={"send"}, failures={"x"})
    b = FuzzStats(scenarios=1, fault_points_hit=Counter(iteration_start=1, after_model_call=2),
                  unsafe_tools={"create"}, expected_failures={"y"})
    assert FuzzStats.from_dict(a.to_dict()) == a
    assert FuzzStats.from_dict({}) == FuzzStats()
    a.merge(FuzzStats.from_dict(b.to_dict()))
    assert (a.scenarios, a.crashes) == (4, 2)
    assert a.fault_points_hit == Counter(iteration_start=5, after_model_call=2)
    assert a.unsafe_tools == {"send", "create"}
    assert (a.failures, a.expected_failures) == ({"x"}, {"y"})
    assert a.to_dict()["unsafe_tools"] == ["create", "send"]


def test_chaos_stats_round_trip_through_json_and_add_up() -> None:
    a = ChaosStats(tests=2, points_run=9, passed=8, failed=1, unsafe_tools={"send"})
    assert ChaosStats.from_dict(a.to_dict()) == a
    a.merge(ChaosStats(tests=1, points_found=3, resumes=2))
    assert (a.tests, a.points_found, a.points_run, a.resumes) == (3, 3, 9, 2)
