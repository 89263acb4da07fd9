"""``open_store``: one URL parser for every backend, clear errors, the memory store."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from stores import (
    Checkpoint,
    InvalidStoreURLError,
    MissingDriverError,
    open_store,
    redact_url,
)
from stores.memory import MemoryStore
from stores.sqlite import SQLiteStore


@pytest.mark.parametrize("url", ["ftp://host/x", "mysql://u@h/db", "sqlite3:///x.db"])
def test_unknown_scheme_lists_the_supported_ones(url: str) -> None:
    with pytest.raises(InvalidStoreURLError) as raised:
        open_store(url)
    message = str(raised.value)
    for scheme in ("memory://", "sqlite:///", "postgresql://", "redis://", "s3://"):
        assert scheme in message


@pytest.mark.parametrize("url", ["", "just-a-path.db", "/abs/path.db"])
def test_a_string_that_is_not_a_url_is_refused(url: str) -> None:
    with pytest.raises(InvalidStoreURLError, match="not a store URL"):
        open_store(url)


def test_errors_about_urls_never_show_the_password() -> None:
    with pytest.raises(InvalidStoreURLError) as raised:
        open_store("nosuch://user:hunter2@host/db")
    assert "hunter2" not in str(raised.value)
    assert "user:***@host" in str(raised.value)


def test_redact_url_replaces_only_the_password() -> None:
    assert redact_url("postgresql://u:secret@h:5432/db?x=1") == "postgresql://u:***@h:5432/db?x=1"
    assert redact_url("postgresql://u@h/db") == "postgresql://u@h/db"
    assert redact_url("redis://:pw@h:6379/0") == "redis://:***@h:6379/0"


def test_memory_url_opens_a_fresh_private_store() -> None:
    first = open_store("memory://same-name")
    second = open_store("memory://same-name")
    assert isinstance(first, MemoryStore)
    first.save(Checkpoint(task_id="t1"))
    assert second.load("t1") is None
    assert first.info().durable is False


def test_memory_store_counts_only_new_messages_on_append() -> None:
    store = MemoryStore()
    checkpoint = store.save(
        Checkpoint(task_id="t1", messages=[{"role": "user", "content": "x" * 1000}] * 10)
    )
    before = store.bytes_written
    checkpoint.messages.append({"role": "assistant", "content": "y" * 1000})
    store.save(checkpoint)
    # Head plus one 1 KB message, not eleven.
    assert 1000 < store.bytes_written - before < 3000


def test_environment_variable_chooses_the_default_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTCKPT_STORE_URL", f"sqlite:///{tmp_path / 'env.db'}")
    store = open_store()
    try:
        assert isinstance(store, SQLiteStore)
        assert store.path == tmp_path / "env.db"
    finally:
        store.close()


@pytest.mark.parametrize("url", ["postgresql://u@127.0.0.1/db", "postgres://u@127.0.0.1/db"])
def test_missing_postgres_driver_names_the_extra(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules makes "import psycopg" fail as if it were not installed.
    monkeypatch.setitem(sys.modules, "psycopg", None)
    monkeypatch.setitem(sys.modules, "psycopg_pool", None)
    with pytest.raises(MissingDriverError, match=r"pytest-agentckpt\[postgres\]") as raised:
        open_store(url)
    assert raised.value.extra == "postgres"
