"""Each known-buggy store fails the contract it breaks, and only that one.

A no-CAS store is the exception that proves the rule: compare-and-set is what the
state-machine and both lost-update contracts exercise, so it fails all four.
"""

from __future__ import annotations

import pytest

from pytest_agentckpt.certify import CONTRACTS, CertificationReport, Outcome, certify

SEED = 20240601

EXPECTED_FAILURES = {
    "no_cas": {"compare_and_set", "model_based", "lost_update_threads", "lost_update_processes"},
    "torn": {"atomic_under_kill"},
    "aliasing": {"no_aliasing"},
    "none_on_corrupt": {"corruption_reported"},
    "lossy": {"round_trip"},
    "write_behind": {"acknowledged_survive_kill"},
    "stale_cache": {"fresh_reads"},
}

REQUIRED = {c.id for c in CONTRACTS if c.required}


def _certify(name: str) -> CertificationReport:
    return certify(f"tests.certify.buggy_stores:make_{name}", quick=True, seed=SEED, figures=False)


def _failed(report: CertificationReport) -> set[str]:
    return {r.contract for r in report.results if r.outcome in (Outcome.FAILED, Outcome.ERROR)}


@pytest.mark.parametrize("name", sorted(EXPECTED_FAILURES))
def test_buggy_store_fails_exactly_the_contracts_it_breaks(name: str) -> None:
    report = _certify(name)
    details = {r.contract: r.summary for r in report.results if r.outcome is not Outcome.PASSED}
    assert _failed(report) == EXPECTED_FAILURES[name], details
    passed = {r.contract for r in report.results if r.outcome is Outcome.PASSED} & REQUIRED
    # Everything else required was actually checked and held: nothing skipped.
    assert passed == REQUIRED - EXPECTED_FAILURES[name], details
    assert report.exit_code() == 1


def test_failure_names_the_contract_and_how_to_reproduce_it() -> None:
    report = _certify("lossy")
    result = report.result("round_trip")
    assert result.outcome is Outcome.FAILED
    assert "9007199254740993" in result.details or "expected" in result.details
    assert f"--seed {SEED}" in result.reproduce
    assert "--only round_trip" in result.reproduce


def test_lossy_store_is_caught_on_a_big_integer_in_the_fixed_examples() -> None:
    # The hand-written block-type history holds 2**64 + 1: caught even with no examples.
    report = certify("tests.certify.buggy_stores:make_lossy", quick=True, seed=1,
                     only=["round_trip"], figures=False)
    assert report.result("round_trip").outcome is Outcome.FAILED


def test_store_declaring_incremental_saves_but_rewriting_fails_only_incremental() -> None:
    report = _certify("rewriting")
    assert _failed(report) == {"incremental"}
    assert "quadratically" in report.result("incremental").summary
    # An optional contract failing does not block certification of the required ones.
    assert report.exit_code() == 0
