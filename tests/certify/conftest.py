"""Certification tests: buggy stores write under a temporary directory of this session."""

from __future__ import annotations

from pathlib import Path

import pytest

#: Backends whose full certification runs on demand (``pytest -m slow``), not in every run.
#: The S3 store is certified on SeaweedFS, a real server, in every run; on moto, which
#: answers one request at a time, the same contracts take a minute of the suite's budget.
_ON_DEMAND_CERTIFY = {"s3-moto"}


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        if (
            item.name.startswith("test_builtin_store_passes_every_required_contract")
            and callspec is not None
            and callspec.params.get("any_checkpoint_store_backend") in _ON_DEMAND_CERTIFY
        ):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _store_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # Environment variables reach the spawned writer processes too.
    base: Path = tmp_path_factory.getbasetemp()
    monkeypatch.setenv("BUGGY_STORE_DIR", str(base / "buggy"))
    monkeypatch.setenv("MY_STORE_DIR", str(base / "my-store"))
    monkeypatch.setenv("AGENTCKPT_CERTIFY_DIR", str(base / "sqlite"))
