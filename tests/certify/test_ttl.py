"""The ttl contract: a correct store passes, each way of getting retention wrong is caught."""

from __future__ import annotations

import pytest

from pytest_agentckpt.certify import Outcome, certify
from stores.memory import MemoryStore


def _ttl_result(spec: str) -> tuple[Outcome, str]:
    result = certify(spec, quick=True, seed=1, only=["ttl"], figures=False).result("ttl")
    return result.outcome, result.summary


def test_the_in_process_store_with_a_ttl_passes() -> None:
    outcome, summary = _ttl_result("tests.certify.test_ttl:_memory_with_ttl")
    assert outcome is Outcome.PASSED, summary
    assert "a running one kept" in summary


def _memory_with_ttl() -> MemoryStore:
    return MemoryStore(ttl=1)


def _memory_declaring_ttl_without_saying_how_long() -> MemoryStore:
    store = MemoryStore()
    store.certify_capabilities = frozenset({"ttl"})  # type: ignore[attr-defined]
    return store


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("expires_running", "a running checkpoint expired"),
        ("first_save_ttl", "the ttl counts from the last save"),
        ("lists_expired", "is still listed"),
        ("reviving", "of an expired checkpoint succeeded"),
    ],
)
def test_each_retention_bug_is_caught(name: str, reason: str) -> None:
    outcome, summary = _ttl_result(f"tests.certify.buggy_stores:make_{name}")
    assert outcome is Outcome.FAILED, summary
    assert reason in summary


def test_a_store_without_ttl_is_not_judged_and_one_that_declares_it_must_say_how_long() -> None:
    outcome, summary = _ttl_result("stores.memory:MemoryStore")
    assert outcome is Outcome.NOT_APPLICABLE, summary
    outcome, summary = _ttl_result("tests.certify.test_ttl:_memory_declaring_ttl_without_saying_how_long")
    assert outcome is Outcome.NOT_CHECKABLE, summary
    assert "StoreInfo.ttl" in summary


def test_a_ttl_longer_than_the_suite_waits_is_reported_not_checkable() -> None:
    outcome, summary = _ttl_result("tests.certify.test_ttl:_memory_with_a_week")
    assert outcome is Outcome.NOT_CHECKABLE
    assert "certify a store built with a short ttl" in summary


def _memory_with_a_week() -> MemoryStore:
    return MemoryStore(ttl="7d")
