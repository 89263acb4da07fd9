"""Certification tests: buggy stores write under a temporary directory of this session."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _store_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # Environment variables reach the spawned writer processes too.
    base: Path = tmp_path_factory.getbasetemp()
    monkeypatch.setenv("BUGGY_STORE_DIR", str(base / "buggy"))
    monkeypatch.setenv("MY_STORE_DIR", str(base / "my-store"))
    monkeypatch.setenv("AGENTCKPT_CERTIFY_DIR", str(base / "sqlite"))
