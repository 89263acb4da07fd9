"""SQLite-specific behaviour: the file, its URL, damage on disk, several processes."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

import stores.sqlite
from pytest_agentckpt.certify import Outcome, StoreFactory, certify
from stores import (
    ActionRecord,
    Checkpoint,
    CheckpointStore,
    ConflictError,
    CorruptCheckpointError,
    InvalidStoreURLError,
    InvalidTaskIdError,
    StoreNotFoundError,
    StoreUnavailableError,
    open_store,
)
from stores.sqlite import SQLiteStore

from .clock import FakeClock, fake_clock


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


def test_three_slashes_before_a_root_directory_name_is_refused_as_an_absolute_path_meant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # sqlite:///tmp/x.db is tmp/x.db under the working directory: written with /tmp in
    # mind, it made a tree of directories here, and a run started elsewhere lost the task.
    root_dir = next(p.name for p in Path("/").iterdir() if p.is_dir() and not p.is_symlink())
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{root_dir}/agent/c.db"
    with pytest.raises(InvalidStoreURLError, match=f"use four slashes: sqlite:////{root_dir}/agent/c.db"):
        open_store(url)
    assert list(tmp_path.iterdir()) == []  # nothing was created
    (tmp_path / root_dir).mkdir()  # the relative path, meant: its first directory exists
    store = open_store(url)
    try:
        store.save(Checkpoint(task_id="t"))
    finally:
        store.close()
    assert (tmp_path / root_dir / "agent" / "c.db").is_file()
    with pytest.raises(StoreNotFoundError):  # create=False keeps its own error
        open_store(f"sqlite:///{root_dir}x/c.db", create=False)


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
        ("sqlite:///x.db?synchronous=off", "synchronous=off is refused.*Use normal"),
        ("sqlite:///x.db?synchronous=OFF", "synchronous=off is refused"),
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


@pytest.mark.parametrize(("kwargs", "says"), [
    ({"synchronous": 1}, "synchronous must be one of"),        # was an AttributeError
    ({"synchronous": "off"}, "synchronous=off is refused"),    # was accepted, durable=False
    ({"busy_timeout_ms": "5000"}, "busy_timeout_ms must be an int >= 0"),  # a TypeError from '<'
    ({"busy_timeout_ms": -1}, "busy_timeout_ms must be an int >= 0"),
])
def test_bad_constructor_options_are_a_value_error_naming_them(
    tmp_path: Path, kwargs: dict[str, Any], says: str
) -> None:
    with pytest.raises(ValueError, match=says):
        SQLiteStore(tmp_path / "c.db", **kwargs)
    assert not (tmp_path / "c.db").exists()


@pytest.mark.parametrize("key", ["actions", "status", "iteration", "completed_tasks", "version"])
def test_a_head_missing_a_key_every_save_writes_is_corrupt_not_filled_with_a_default(
    store: SQLiteStore, db_path: Path, key: str
) -> None:
    # A default would turn a lost ledger into an empty one, or a completed task into a
    # running one: the resume would repeat irreversible actions.
    checkpoint = _saved_with_messages(store)
    checkpoint.status = "completed"
    checkpoint.iteration = 3
    checkpoint.actions = [ActionRecord(tool_use_id="toolu_1", tool_name="send", input={},
                                       idempotency_key="k1", state="done")]
    store.save(checkpoint)
    with _raw(db_path) as raw:
        raw.execute("UPDATE checkpoints SET head = CAST(json_remove(CAST(head AS TEXT), ?) AS BLOB)",
                    (f"$.{key}",))
    with pytest.raises(CorruptCheckpointError, match=f"stored head has no {key}"):
        store.load("t1")
    with pytest.raises(CorruptCheckpointError, match=f"stored head has no {key}"):
        store.list_checkpoints()


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


# -- retention (ttl) -----------------------------------------------------------------------


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    return fake_clock(monkeypatch, stores.sqlite)


@pytest.fixture
def ttl_store(db_path: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(db_path, ttl=60)
    try:
        yield opened
    finally:
        opened.close()


def _rows(path: Path, task_id: str) -> tuple[int, int]:
    """How many head rows and message rows are stored for ``task_id``."""
    with closing(_raw(path)) as raw:
        (heads,) = raw.execute(
            "SELECT count(*) FROM checkpoints WHERE task_id = ?", (task_id,)
        ).fetchone()
        (messages,) = raw.execute(
            "SELECT count(*) FROM messages WHERE task_id = ?", (task_id,)
        ).fetchone()
    return heads, messages


def test_the_ttl_contract_passes_with_a_ttl(tmp_path: Path) -> None:
    def make(namespace: str) -> CheckpointStore:
        return SQLiteStore(tmp_path / f"{namespace}.db", ttl=1)

    report = certify(
        StoreFactory("tests.stores.test_sqlite:ttl1", make), only=["ttl"], figures=False, quick=True
    )
    result = report.result("ttl")
    assert result.outcome is Outcome.PASSED, f"{result.summary}\n{result.details}"
    # The run purged its files (nothing is left even in this test's own directory).
    assert list(tmp_path.glob("*.db*")) == []


@pytest.mark.parametrize(
    ("query", "seconds"),
    [("ttl=7d", 604800.0), ("ttl=3600", 3600.0), ("synchronous=normal&ttl=90m", 5400.0)],
)
def test_ttl_in_the_url_is_applied_and_reported(db_path: Path, query: str, seconds: float) -> None:
    store = open_store(f"sqlite:///{db_path}?{query}")
    try:
        assert isinstance(store, SQLiteStore)
        assert store.ttl == seconds
        assert store.info().ttl == seconds
    finally:
        store.close()


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("ttl=soon", "ttl 'soon' is not a duration"),
        ("ttl=0", "positive duration"),
        ("ttl=-5", "ttl"),
    ],
)
def test_bad_ttl_in_the_url_is_refused(db_path: Path, query: str, message: str) -> None:
    with pytest.raises(InvalidStoreURLError, match=message):
        open_store(f"sqlite:///{db_path}?{query}")
    assert not db_path.exists()  # refused before the file was made


@pytest.mark.parametrize("bad", ["soon", 0, -1.0, True])
def test_bad_ttl_keyword_is_a_value_error(db_path: Path, bad: Any) -> None:
    with pytest.raises(ValueError, match="ttl"):
        SQLiteStore(db_path, ttl=bad)


def test_an_expired_checkpoint_is_gone_and_deleted_when_touched(
    ttl_store: SQLiteStore, db_path: Path, clock: FakeClock
) -> None:
    old = [_user("old news")]
    ttl_store.save(Checkpoint(task_id="loaded", status="completed", messages=old))
    stale = ttl_store.save(Checkpoint(task_id="saved", status="failed", messages=old))
    ttl_store.save(Checkpoint(task_id="created", status="completed", messages=old))
    clock.advance(61)
    # Hidden at once, deleted only when touched.
    assert ttl_store.list_checkpoints() == []
    assert ttl_store.list_checkpoints(status="completed") == []
    assert _rows(db_path, "loaded") == (1, 1)
    assert ttl_store.load("loaded") is None
    assert _rows(db_path, "loaded") == (0, 0)
    # A save expecting the old version conflicts with nothing, and deletes it.
    with pytest.raises(ConflictError) as raised:
        ttl_store.save(stale)
    assert (raised.value.expected, raised.value.actual) == (1, None)
    assert _rows(db_path, "saved") == (0, 0)
    # A save at version 0 creates it afresh: version 1, none of the old messages.
    reborn = ttl_store.save(Checkpoint(task_id="created", goal="again"))
    assert reborn.version == 1
    assert _rows(db_path, "created") == (1, 0)
    again = ttl_store.load("created")
    assert again is not None
    assert (again.version, again.goal, again.messages) == (1, "again", [])


def test_a_checkpoint_created_again_after_it_expired_never_mixes_histories(
    ttl_store: SQLiteStore, db_path: Path, clock: FakeClock
) -> None:
    other = SQLiteStore(db_path, ttl=60)
    try:
        ttl_store.save(Checkpoint(task_id="t", status="completed", messages=[_user("old")]))
        known = other.load("t")  # other remembers version 1 of this record and its history
        assert known is not None
        clock.advance(61)
        ttl_store.save(Checkpoint(task_id="t", messages=[_user("new")]))  # version 1 again
        # A new record, a new lineage: other's append must not land on the new history.
        known.messages.append(_user("appended"))
        other.save(known)
        loaded = ttl_store.load("t")
        assert loaded is not None
        assert loaded.messages == [_user("old"), _user("appended")]
    finally:
        other.close()


def test_the_ttl_counts_from_the_last_save_to_the_microsecond(
    ttl_store: SQLiteStore, db_path: Path, clock: FakeClock
) -> None:
    saved = ttl_store.save(Checkpoint(task_id="t", status="completed"))
    clock.advance(50)
    saved = ttl_store.save(saved.model_copy(update={"iteration": 1}))  # at a whole second
    with closing(_raw(db_path)) as raw:
        (updated,) = raw.execute("SELECT updated_at FROM checkpoints").fetchone()
    assert updated == "2030-01-01T00:00:50.000000+00:00"  # text order is time order
    clock.advance(60)  # exactly the ttl: updated_at equals the cutoff, not before it
    loaded = ttl_store.load("t")
    assert loaded is not None and loaded.iteration == 1
    assert [s.task_id for s in ttl_store.list_checkpoints()] == ["t"]
    clock.advance(0.000001)
    assert ttl_store.list_checkpoints() == []
    assert ttl_store.load("t") is None


def test_sweep_expired_deletes_exactly_the_expired_finished_checkpoints(
    ttl_store: SQLiteStore, db_path: Path, clock: FakeClock
) -> None:
    two = [_user("a"), _user("b")]
    for status in ("completed", "failed", "running"):
        ttl_store.save(Checkpoint(task_id=status, status=status, messages=two))
    clock.advance(30)
    ttl_store.save(Checkpoint(task_id="recent", status="completed", messages=[_user("c")]))
    clock.advance(31)  # the first three are 61 s old, "recent" 31 s
    assert [_rows(db_path, t) for t in ("completed", "failed")] == [(1, 2), (1, 2)]
    assert ttl_store.sweep_expired() == 2
    assert [_rows(db_path, t) for t in ("completed", "failed")] == [(0, 0), (0, 0)]
    assert _rows(db_path, "running") == (1, 2)
    assert _rows(db_path, "recent") == (1, 1)
    assert ttl_store.sweep_expired() == 0
    running = ttl_store.load("running")
    assert running is not None and running.messages == two
    clock.advance(30)
    assert ttl_store.sweep_expired() == 1
    assert _rows(db_path, "recent") == (0, 0)
    assert [s.task_id for s in ttl_store.list_checkpoints()] == ["running"]


def test_a_status_column_edited_apart_from_its_head_never_expires_a_running_checkpoint(
    ttl_store: SQLiteStore, db_path: Path, clock: FakeClock
) -> None:
    # A CLI round: a running task whose status column was edited to 'completed' expired,
    # and the read-only `status` command's load deleted it; a listing hid it without a word.
    from stores.errors import StatusOutOfStepError

    two = [_user("a"), _user("b")]
    ttl_store.save(Checkpoint(task_id="live", status="running", messages=two, iteration=3))
    ttl_store.save(Checkpoint(task_id="done", status="completed", messages=two))
    with closing(_raw(db_path)) as raw, raw:
        raw.execute("UPDATE checkpoints SET status = 'completed' WHERE task_id = 'live'")
    clock.advance(61)
    loaded = ttl_store.load("live")
    assert loaded is not None and (loaded.status, loaded.messages) == ("running", two)
    assert [(s.task_id, s.status) for s in ttl_store.list_checkpoints()] == [("live", "running")]
    with pytest.raises(StatusOutOfStepError):
        ttl_store.list_checkpoints(status="completed")  # what a prune of finished tasks lists
    assert ttl_store.sweep_expired() == 1  # "done" only
    assert _rows(db_path, "live") == (1, 2) and _rows(db_path, "done") == (0, 0)


@pytest.mark.parametrize("ttl", [None, 1e15])
def test_without_a_ttl_nothing_expires(db_path: Path, clock: FakeClock, ttl: float | None) -> None:
    store = SQLiteStore(db_path, ttl=ttl)  # None, or longer than the calendar goes back
    try:
        assert store.info().ttl == ttl
        done = store.save(Checkpoint(task_id="done", status="completed", messages=[_user("kept")]))
        clock.advance(200 * 365 * 86400)
        loaded = store.load("done")
        assert loaded is not None and loaded.messages == done.messages
        assert [s.task_id for s in store.list_checkpoints(status="completed")] == ["done"]
        assert store.sweep_expired() == 0
        assert store.save(loaded).version == 2
        assert _rows(db_path, "done") == (1, 1)
    finally:
        store.close()


def test_a_ttl_adds_conditions_not_statements(tmp_path: Path) -> None:
    statements: dict[float | None, list[str]] = {}
    for ttl in (None, 60.0):
        store = SQLiteStore(tmp_path / f"ttl-{ttl}.db", ttl=ttl)
        try:
            checkpoint = store.save(Checkpoint(task_id="t", messages=[_user("a")]))
            checkpoint.messages.append(_user("b"))
            traced = statements[ttl] = []
            store._connect().set_trace_callback(traced.append)
            store.save(checkpoint)
            store.load("t")
            store._connect().set_trace_callback(None)
        finally:
            store.close()
    assert len(statements[60.0]) == len(statements[None])
    assert not any("updated_at <" in s for s in statements[None])
    assert any("updated_at <" in s for s in statements[60.0])


def test_a_nul_task_id_an_older_version_saved_can_still_be_loaded_and_deleted(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Saves now refuse NUL; an older version saved such ids. They are not stranded.
    monkeypatch.setattr(stores.sqlite, "check_task_id", lambda task_id, saving=False: task_id)
    saved = store.save(Checkpoint(task_id="old\x00id", goal="from before"))
    monkeypatch.undo()
    with pytest.raises(InvalidTaskIdError, match="NUL"):
        store.save(saved)
    assert store.load("old\x00id") == saved
    store.delete("old\x00id")
    assert store.load("old\x00id") is None
