"""Correct stores pass: the in-memory store, SQLite and the documented example store."""

from __future__ import annotations

from pytest_agentckpt.certify import CONTRACTS, Outcome, certify

REQUIRED = [c.id for c in CONTRACTS if c.required]
PROCESS_CONTRACTS = {"lost_update_processes", "atomic_under_kill", "acknowledged_survive_kill",
                     "fresh_reads", "aba_recreated"}


def test_memory_store_passes_every_contract_it_can_show_and_is_not_certified_for_the_rest() -> None:
    report = certify("pytest_agentckpt.certify.builtin:memory", quick=True, seed=1)
    outcomes = {r.contract: r.outcome for r in report.results}
    for contract in REQUIRED:
        want = Outcome.NOT_CHECKABLE if contract in PROCESS_CONTRACTS else Outcome.PASSED
        assert outcomes[contract] is want, (contract, report.result(contract).summary)
    assert outcomes["incremental"] is Outcome.PASSED
    assert report.exit_code() == 3  # in-process data: nothing to show across processes


def test_memory_store_full_run_stays_well_under_a_minute() -> None:
    report = certify("pytest_agentckpt.certify.builtin:memory", seed=2)
    assert not any(r.outcome in (Outcome.FAILED, Outcome.ERROR) for r in report.results)
    assert report.seconds < 30


def test_figures_cover_10_100_and_1000_messages_with_bytes_per_save() -> None:
    report = certify("pytest_agentckpt.certify.builtin:memory", quick=True, seed=3,
                     only=["delete_idempotent"])
    rows = report.figures["latency"]
    assert [row["messages"] for row in rows] == [10, 100, 1000]
    for row in rows:
        assert 0 < row["save_p50_ms"] <= row["save_p99_ms"]
        assert 0 < row["load_p50_ms"] <= row["load_p99_ms"]
        # Incremental: one appended message costs the same at 10 and at 1000 messages.
        assert row["bytes_per_save"] < 2000


def test_sqlite_store_passes_every_required_contract_including_process_ones() -> None:
    report = certify("pytest_agentckpt.certify.builtin:sqlite", quick=True, seed=4, figures=False)
    for contract in REQUIRED:
        result = report.result(contract)
        assert result.outcome is Outcome.PASSED, (contract, result.summary, result.details)


def test_documented_example_store_passes_every_required_contract() -> None:
    # docs/examples is put on sys.path by tests/certify/buggy_stores.py's import.
    import tests.certify.buggy_stores  # noqa: F401

    report = certify("my_store:make_store", quick=True, seed=5, figures=False)
    for contract in REQUIRED:
        result = report.result(contract)
        assert result.outcome is Outcome.PASSED, (contract, result.summary, result.details)
    assert report.result("durable_restart").outcome is Outcome.PASSED
