"""SQLite-specific behaviour: the file, its URL, damage on disk, several processes."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stores import (
    Checkpoint,
    ConflictError,
    CorruptCheckpointError,
    InvalidStoreURLError,
    StoreUnavailableError,
    open_store,
)
from stores.sqlite import SQLiteStore


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "checkpoints.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(db_path)
    try:
        yield opened
    finally:
        opened.close()


def _raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def _saved_with_messages(store: SQLiteStore, task_id: str = "t1", n: int = 3) -> Checkpoint:
    return store.save(Checkpoint(task_id=task_id, messages=[_user(f"m{i}") for i in range(n)]))


# -- URLs --------------------------------------------------------------------------------


def test_relative_url_is_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_store("sqlite:///sub/dir/c.db")
    try:
        assert isinstance(store, SQLiteStore)
        store.save(Checkpoint(task_id="t"))
    finally:
        store.close()
    assert (tmp_path / "sub" / "dir" / "c.db").is_file()


def test_absolute_url_uses_four_slashes(tmp_path: Path) -> None:
    target = tmp_path / "abs.db"
    store = open_store(f"sqlite:///{target}")  # target starts with "/": four slashes
    try:
        store.save(Checkpoint(task_id="t"))
    finally:
        store.close()
    assert target.is_file()


def test_default_url_creates_its_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGENTCKPT_STORE_URL", raising=False)
    store = open_store()
    try:
        assert isinstance(store, SQLiteStore)
        store.save(Checkpoint(task_id="t"))
    finally:
        store.close()
    assert (tmp_path / ".agentckpt" / "checkpoints.db").is_file()


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("sqlite://host/x.db", "host part"),
        ("sqlite://", "names no file"),
        ("sqlite:///", "names no file"),
        ("sqlite:///:memory:", "memory://"),
        ("sqlite:///x.db?busy_timeout=soon", "busy_timeout"),
        ("sqlite:///x.db?synchronous=sometimes", "synchronous"),
        ("sqlite:///x.db?journal=delete", "unknown parameter"),
    ],
)
def test_bad_sqlite_urls_are_refused_with_the_reason(url: str, complaint: str) -> None:
    with pytest.raises(InvalidStoreURLError, match=complaint):
        open_store(url)


def test_url_parameters_are_applied(db_path: Path) -> None:
    store = open_store(f"sqlite:///{db_path}?busy_timeout=1234&synchronous=normal")
    try:
        assert isinstance(store, SQLiteStore)
        conn = store._connect()
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 1234
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        assert store.info().durable is False
    finally:
        store.close()


def test_file_is_in_wal_mode_and_saves_are_fully_synchronous(store: SQLiteStore) -> None:
    conn = store._connect()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    info = store.info()
    assert (info.backend, info.durable, info.incremental) == ("sqlite", True, True)


def test_unusable_path_is_a_clear_unavailable_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where a directory should be")
    with pytest.raises(StoreUnavailableError, match="not-a-dir"):
        open_store(f"sqlite:///{blocker}/c.db")


def test_a_file_that_is_not_a_database_is_unavailable_not_empty(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    path.write_bytes(b"this is not an SQLite file" * 100)
    with pytest.raises(StoreUnavailableError, match=r"garbage\.db"):
        SQLiteStore(path)


# -- incremental writes ------------------------------------------------------------------


def test_an_append_writes_only_the_new_messages(store: SQLiteStore, db_path: Path) -> None:
    checkpoint = _saved_with_messages(store, n=3)
    # Change message 0 behind the store's back (still valid JSON). An append that
    # rewrote the history would restore it; an append that only adds rows leaves it.
    with _raw(db_path) as raw:
        raw.execute(
            "UPDATE messages SET body = ? WHERE task_id = 't1' AND idx = 0",
            (b'{"role":"user","content":"planted"}',),
        )
    checkpoint.messages.append(_user("m3"))
    store.save(checkpoint)
    loaded = store.load("t1")
    assert loaded is not None
    assert [m["content"] for m in loaded.messages] == ["planted", "m1", "m2", "m3"]


def test_an_append_onto_a_history_of_another_length_rewrites(
    store: SQLiteStore, db_path: Path
) -> None:
    checkpoint = _saved_with_messages(store, n=3)
    # Someone removed the last row and fixed the count: the store's snapshot no longer
    # matches what is stored, so the next save must rewrite, not append after index 1.
    with _raw(db_path) as raw:
        raw.execute("DELETE FROM messages WHERE task_id = 't1' AND idx = 2")
        raw.execute("UPDATE checkpoints SET message_count = 2 WHERE task_id = 't1'")
    checkpoint.messages.append(_user("m3"))
    store.save(checkpoint)
    loaded = store.load("t1")
    assert loaded is not None
    assert [m["content"] for m in loaded.messages] == ["m0", "m1", "m2", "m3"]


# -- damage is reported, never taken for absence ------------------------------------------


@pytest.mark.parametrize(
    ("statement", "params"),
    [
        ("UPDATE checkpoints SET head = ?", (b"\x00\xff not json",)),
        ("UPDATE checkpoints SET head = ?", (b'["a list, not an object"]',)),
        ("UPDATE checkpoints SET head = ?", (b'{"schema_version": 1, "task_id": "other"}',)),
        (
            "UPDATE checkpoints SET head = ?",
            (b'{"schema_version": 1, "task_id": "t1", "iteration": -4}',),
        ),
        ("UPDATE checkpoints SET head = ?", (12345,)),
        ("UPDATE checkpoints SET head = substr(head, 1, 20)", ()),
        ("UPDATE messages SET body = ? WHERE idx = 1", (b'{"role": "user", "content": "trunc',)),
        ("UPDATE messages SET body = ? WHERE idx = 1", (b"[1, 2]",)),
        ("UPDATE messages SET body = ? WHERE idx = 1", (b"\xc3\x28",)),
        ("DELETE FROM messages WHERE idx = 1", ()),
        ("UPDATE messages SET idx = 7 WHERE idx = 2", ()),
        ("UPDATE checkpoints SET message_count = 9", ()),
        ("UPDATE checkpoints SET version = 'x'", ()),
    ],
)
def test_damaged_rows_raise_corrupt_checkpoint(
    store: SQLiteStore, db_path: Path, statement: str, params: tuple[Any, ...]
) -> None:
    _saved_with_messages(store)
    with _raw(db_path) as raw:
        raw.execute(statement, params)
    with pytest.raises(CorruptCheckpointError) as raised:
        store.load("t1")
    assert raised.value.task_id == "t1"
    # A fresh store on the same file says the same: nothing is cached.
    with SQLiteStoreContext(db_path) as other, pytest.raises(CorruptCheckpointError):
        other.load("t1")


def test_damaged_head_is_reported_by_listing_too(store: SQLiteStore, db_path: Path) -> None:
    _saved_with_messages(store)
    with _raw(db_path) as raw:
        raw.execute("UPDATE checkpoints SET head = ?", (b"{broken",))
    with pytest.raises(CorruptCheckpointError):
        store.list_checkpoints()


def test_damage_is_left_in_place_for_inspection(store: SQLiteStore, db_path: Path) -> None:
    _saved_with_messages(store)
    with _raw(db_path) as raw:
        raw.execute("UPDATE checkpoints SET head = ?", (b"{broken",))
    for _ in range(2):
        with pytest.raises(CorruptCheckpointError):
            store.load("t1")
    with _raw(db_path) as raw:
        assert raw.execute("SELECT head FROM checkpoints").fetchone()[0] == b"{broken"


class SQLiteStoreContext:
    """A second store on a file, closed on exit."""

    def __init__(self, path: Path) -> None:
        self.store = SQLiteStore(path)

    def __enter__(self) -> SQLiteStore:
        return self.store

    def __exit__(self, *exc: object) -> None:
        self.store.close()


# -- atomicity, several writers ----------------------------------------------------------


def test_a_failed_save_leaves_no_partial_rows(store: SQLiteStore, db_path: Path) -> None:
    checkpoint = _saved_with_messages(store, n=2)
    # A trigger that fails the head update after the message rows were inserted: the
    # whole transaction must roll back.
    with _raw(db_path) as raw:
        raw.execute(
            "CREATE TRIGGER fail_update BEFORE UPDATE ON checkpoints "
            "BEGIN SELECT RAISE(ABORT, 'disk on fire'); END"
        )
    checkpoint.messages += [_user("m2"), _user("m3")]
    with pytest.raises(StoreUnavailableError, match="nothing was written"):
        store.save(checkpoint)
    with _raw(db_path) as raw:
        raw.execute("DROP TRIGGER fail_update")
        assert raw.execute("SELECT count(*) FROM messages").fetchone()[0] == 2
    loaded = store.load("t1")
    assert loaded is not None
    assert (loaded.version, len(loaded.messages)) == (1, 2)
    # The failed save left the store usable and its next save correct.
    assert store.save(checkpoint).version == 2
    again = store.load("t1")
    assert again is not None
    assert len(again.messages) == 4


def test_a_writer_blocked_past_busy_timeout_gets_unavailable_not_a_hang(db_path: Path) -> None:
    store = SQLiteStore(db_path, busy_timeout_ms=200)
    try:
        store.save(Checkpoint(task_id="t1"))
        holder = _raw(db_path)
        holder.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StoreUnavailableError, match="locked"):
                store.save(Checkpoint(task_id="t2"))
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert store.save(Checkpoint(task_id="t2")).version == 1
    finally:
        store.close()


def _increment_in_process(path: str, task_id: str, increments: int, max_attempts: int) -> int:
    store = SQLiteStore(path)
    done = attempts = 0
    try:
        while done < increments and attempts < max_attempts:
            attempts += 1
            current = store.load(task_id)
            assert current is not None
            current.artifacts["counter"] += 1
            current.messages.append(_user(f"{os.getpid()}-{done}"))
            try:
                store.save(current)
            except ConflictError:
                continue
            done += 1
    finally:
        store.close()
    return done


def test_no_lost_update_across_processes(store: SQLiteStore, db_path: Path) -> None:
    store.save(Checkpoint(task_id="shared", artifacts={"counter": 0}))
    processes, increments = 3, 10
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        results = pool.starmap(
            _increment_in_process, [(str(db_path), "shared", increments, 1000)] * processes
        )
    final = store.load("shared")
    assert final is not None
    # No lost update: every acknowledged save is counted...
    assert final.artifacts["counter"] == sum(results)
    # ...and every process got its saves in within its bounded attempts.
    assert results == [increments] * processes
    assert len({m["content"] for m in final.messages}) == processes * increments


def test_a_store_used_after_fork_opens_its_own_connection(store: SQLiteStore) -> None:
    parent_conn = store._connect()
    store.save(Checkpoint(task_id="t1"))
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()

    def child() -> None:
        queue.put(store._connect() is not parent_conn and store.load("t1") is not None)

    proc = ctx.Process(target=child)
    proc.start()
    proc.join(timeout=30)
    assert proc.exitcode == 0
    assert queue.get(timeout=5) is True


def test_closed_store_refuses_use(db_path: Path) -> None:
    store = SQLiteStore(db_path)
    store.close()
    with pytest.raises(StoreUnavailableError, match="closed"):
        store.load("t1")


def test_new_files_use_small_pages_to_write_fewer_bytes(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'pages.db'}")
    try:
        store.save(Checkpoint(task_id="t"))
    finally:
        store.close()
    conn = sqlite3.connect(tmp_path / "pages.db")
    try:
        assert conn.execute("PRAGMA page_size").fetchone() == (1024,)
    finally:
        conn.close()
