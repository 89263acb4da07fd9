"""Every built-in store passes every required contract against its real server.

Parametrised over ``--agentckpt-backends`` (the project's pytest config selects all):
memory, SQLite, PostgreSQL, Redis, and S3 on SeaweedFS and on moto. Under CI a backend
that cannot run fails instead of skipping. S3 on moto runs on demand (``pytest -m slow``,
see ``conftest.py``): the same store is certified on SeaweedFS in every run.
"""

from __future__ import annotations

import pytest

from pytest_agentckpt.certify import CONTRACTS, Outcome, certify
from pytest_agentckpt.certify.report import to_text

REQUIRED = [c.id for c in CONTRACTS if c.required]
IN_PROCESS_ONLY = {"lost_update_processes", "atomic_under_kill", "acknowledged_survive_kill",
                   "fresh_reads", "aba_recreated"}


@pytest.mark.filterwarnings("ignore::UserWarning")  # the shared Redis runs without AOF
def test_builtin_store_passes_every_required_contract(
    any_checkpoint_store_backend: str,
    any_checkpoint_store_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The child processes read the URL from the environment they inherit.
    monkeypatch.setenv("AGENTCKPT_CERTIFY_URL", any_checkpoint_store_url)
    report = certify("pytest_agentckpt.certify.builtin:from_env", quick=True, seed=2024)
    with capsys.disabled():
        print("\n" + to_text(report))
    for contract in REQUIRED:
        result = report.result(contract)
        if any_checkpoint_store_backend == "memory" and contract in IN_PROCESS_ONLY:
            # Data that never leaves the process: no evidence, so no pass either.
            assert result.outcome is Outcome.NOT_CHECKABLE, (contract, result.summary)
            continue
        assert result.outcome is Outcome.PASSED, (contract, result.summary, result.details)
    assert report.result("durable_restart").outcome is not Outcome.FAILED
    assert report.exit_code() == (3 if any_checkpoint_store_backend == "memory" else 0)
