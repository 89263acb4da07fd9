"""PostgreSQL-specific behaviour: URLs and settings, damage in the tables, unreachable
servers, restarts and kills of a private server."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import stores.postgresql
from pytest_agentckpt.certify import Outcome, StoreFactory, certify
from stores import (
    Checkpoint,
    CheckpointStore,
    ConflictError,
    CorruptCheckpointError,
    InvalidStoreURLError,
    StoreUnavailableError,
    open_store,
)
from stores.postgresql import PostgresStore

from .clock import FakeClock, fake_clock

pytest.importorskip("psycopg")

from pytest_agentckpt.services import free_port
from pytest_agentckpt.services.postgres import PrivatePostgres


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _prefix() -> str:
    return "t" + uuid.uuid4().hex[:12] + "_"


def _with_params(base: str, **params: str) -> str:
    sep = "&" if "?" in base else "?"
    return base + sep + "&".join(f"{k}={v}" for k, v in params.items())


@pytest.fixture
def pg_url(agentckpt_postgres_url: str) -> Iterator[str]:
    """A URL with a table prefix of its own; its tables are dropped afterwards."""
    url = _with_params(agentckpt_postgres_url, table_prefix=_prefix())
    yield url
    cleanup = PostgresStore.from_url(url)
    try:
        cleanup.drop_tables()
    finally:
        cleanup.close()


@pytest.fixture
def store(pg_url: str) -> Iterator[PostgresStore]:
    opened = PostgresStore.from_url(pg_url)
    try:
        yield opened
    finally:
        opened.close()


def _execute(store: PostgresStore, statement: str, params: tuple[Any, ...] = ()) -> None:
    """Run ``statement`` with ``{cp}`` and ``{msg}`` standing for the store's tables."""
    tables = store.tables
    text = statement.format(cp=tables["checkpoints"], msg=tables["messages"])
    with store._connect() as conn:
        conn.execute(text.encode(), params)  # bytes: a raw statement, not a template


def _saved_with_messages(store: PostgresStore, task_id: str = "t1", n: int = 3) -> Checkpoint:
    return store.save(Checkpoint(task_id=task_id, messages=[_user(f"m{i}") for i in range(n)]))


# -- URLs and settings -------------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["Upper_", "1abc_", "a-b_", "a;drop table x;--", "x" * 41])
def test_unsafe_table_prefix_is_refused(agentckpt_postgres_url: str, prefix: str) -> None:
    with pytest.raises(InvalidStoreURLError, match="table_prefix"):
        open_store(_with_params(agentckpt_postgres_url, table_prefix=prefix))


def test_unsafe_schema_is_refused(agentckpt_postgres_url: str) -> None:
    with pytest.raises(InvalidStoreURLError, match="schema"):
        open_store(_with_params(agentckpt_postgres_url, schema="Public"))


def test_non_numeric_pool_size_is_refused(agentckpt_postgres_url: str) -> None:
    with pytest.raises(InvalidStoreURLError, match="pool"):
        open_store(_with_params(agentckpt_postgres_url, pool_max_size="many"))


def test_tables_use_the_prefix_and_schema(agentckpt_postgres_url: str) -> None:
    schema, prefix = "agentckpt_test_schema", _prefix()
    url = _with_params(agentckpt_postgres_url, table_prefix=prefix, schema=schema)
    store = PostgresStore.from_url(url)
    try:
        store.save(Checkpoint(task_id="t1"))
        with store._connect() as conn:
            rows = conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s"
                " AND table_name LIKE %s ORDER BY table_name",
                (schema, prefix + "%"),
            ).fetchall()
        assert [r[0] for r in rows] == [
            prefix + "checkpoints",
            prefix + "messages",
            prefix + "migrations",
        ]
        assert store.info().durable is True
    finally:
        store.drop_tables()
        store.close()


def test_other_url_parameters_reach_libpq(agentckpt_postgres_url: str) -> None:
    url = _with_params(agentckpt_postgres_url, table_prefix=_prefix(), application_name="ckpt_test")
    store = PostgresStore.from_url(url)
    try:
        with store._connect() as conn:
            row = conn.execute("SELECT current_setting('application_name')").fetchone()
        assert row == ("ckpt_test",)
    finally:
        store.drop_tables()
        store.close()


def test_concurrent_first_use_of_the_same_tables_is_safe(pg_url: str) -> None:
    errors: list[BaseException] = []
    stores: list[PostgresStore] = []
    lock = threading.Lock()

    def open_one() -> None:
        try:
            opened = PostgresStore.from_url(pg_url)
            with lock:
                stores.append(opened)
        except BaseException as exc:
            with lock:
                errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    try:
        assert errors == []
        assert len(stores) == 4
        stores[0].save(Checkpoint(task_id="t1"))
        assert stores[3].load("t1") is not None
        with stores[0]._connect() as conn:
            rows = conn.execute(
                f"SELECT version FROM {stores[0].tables['migrations']}".encode()
            ).fetchall()
        assert rows == [(1,), (2,)]
    finally:
        for opened in stores:
            opened.close()


def test_an_older_table_layout_is_upgraded_on_first_use(store: PostgresStore, pg_url: str) -> None:
    store.save(Checkpoint(task_id="t1", messages=[_user("kept")]))
    # Roll the tables back to layout 1, as an older release left them.
    _execute(store, "ALTER TABLE {msg} RESET (toast_tuple_target)")
    with store._connect() as conn:
        conn.execute(f"DELETE FROM {store.tables['migrations']} WHERE version = 2".encode())
    upgraded = PostgresStore.from_url(pg_url)
    try:
        with upgraded._connect() as conn:
            versions = conn.execute(
                f"SELECT version FROM {upgraded.tables['migrations']} ORDER BY 1".encode()
            ).fetchall()
            options = conn.execute(
                "SELECT reloptions FROM pg_class WHERE oid = %s::regclass",
                (upgraded.tables["messages"],),
            ).fetchone()
        assert versions == [(1,), (2,)]
        assert options == (["toast_tuple_target=8160"],)
        loaded = upgraded.load("t1")
        assert loaded is not None
        assert loaded.messages == [_user("kept")]
    finally:
        upgraded.close()


def test_a_newer_table_layout_is_refused(store: PostgresStore, pg_url: str) -> None:
    with store._connect() as conn:
        conn.execute(f"INSERT INTO {store.tables['migrations']} (version) VALUES (99)".encode())
    with pytest.raises(StoreUnavailableError, match="newer"):
        PostgresStore.from_url(pg_url)
    # A read-only open too (it read and deleted rows of the newer layout).
    with pytest.raises(StoreUnavailableError, match="layout 99, newer than this code's"):
        PostgresStore.from_url(pg_url, create=False)
    with store._connect() as conn:
        conn.execute(f"DELETE FROM {store.tables['migrations']} WHERE version = 99".encode())


# -- unreachable or wrong servers --------------------------------------------------------


def test_unreachable_server_fails_fast_with_the_redacted_url() -> None:
    url = f"postgresql://app:hunter2@127.0.0.1:{free_port()}/agents?connect_timeout=2"
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError) as raised:
        open_store(url)
    assert time.monotonic() - started < 5
    message = str(raised.value)
    assert "hunter2" not in message
    assert "app:***@127.0.0.1" in message
    assert "accepts TCP connections" in message


def test_wrong_database_names_the_cause(agentckpt_postgres_url: str) -> None:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(agentckpt_postgres_url)
    url = urlunsplit(parts._replace(path="/no_such_db_" + uuid.uuid4().hex[:8]))
    with pytest.raises(StoreUnavailableError, match="does not exist"):
        open_store(url)


def test_wrong_user_names_the_cause(agentckpt_postgres_url: str) -> None:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(agentckpt_postgres_url)
    netloc = f"no_such_role_x:wrong-pw@{parts.hostname}:{parts.port or 5432}"
    with pytest.raises(StoreUnavailableError) as raised:
        open_store(urlunsplit(parts._replace(netloc=netloc)))
    assert "no_such_role_x" in str(raised.value)
    assert "wrong-pw" not in str(raised.value)


# -- incremental writes ------------------------------------------------------------------


def test_an_append_writes_only_the_new_messages(store: PostgresStore) -> None:
    checkpoint = _saved_with_messages(store, n=3)
    # Change message 0 behind the store's back (still valid JSON): an append that
    # rewrote the history would restore it.
    _execute(
        store,
        "UPDATE {msg} SET body = %s WHERE task_id = 't1' AND idx = 0",
        (b'{"role":"user","content":"planted"}',),
    )
    checkpoint.messages.append(_user("m3"))
    store.save(checkpoint)
    loaded = store.load("t1")
    assert loaded is not None
    assert [m["content"] for m in loaded.messages] == ["planted", "m1", "m2", "m3"]


def test_an_append_onto_a_history_of_another_length_rewrites(store: PostgresStore) -> None:
    checkpoint = _saved_with_messages(store, n=3)
    _execute(store, "DELETE FROM {msg} WHERE task_id = 't1' AND idx = 2")
    _execute(store, "UPDATE {cp} SET message_count = 2 WHERE task_id = 't1'")
    checkpoint.messages.append(_user("m3"))
    store.save(checkpoint)
    loaded = store.load("t1")
    assert loaded is not None
    assert [m["content"] for m in loaded.messages] == ["m0", "m1", "m2", "m3"]


def test_metadata_that_jsonb_cannot_hold_is_still_listed_and_filtered(store: PostgresStore) -> None:
    store.save(Checkpoint(task_id="nul", metadata={"user": "a\x00b"}))
    store.save(Checkpoint(task_id="plain", metadata={"user": "ab"}))
    assert [s.task_id for s in store.list_checkpoints(metadata={"user": "a\x00b"})] == ["nul"]
    assert [s.task_id for s in store.list_checkpoints(metadata={"user": "ab"})] == ["plain"]
    loaded = store.load("nul")
    assert loaded is not None
    assert loaded.metadata == {"user": "a\x00b"}


def test_metadata_and_status_are_queryable_in_sql(store: PostgresStore) -> None:
    store.save(Checkpoint(task_id="t1", status="failed", metadata={"user": "u1", "n": 2**60}))
    with store._connect() as conn:
        row = conn.execute(
            f"SELECT task_id FROM {store.tables['checkpoints']}"
            " WHERE status = 'failed' AND metadata @> '{\"user\": \"u1\"}'::jsonb".encode()
        ).fetchone()
    assert row == ("t1",)


def test_task_id_with_nul_is_refused_clearly(store: PostgresStore) -> None:
    with pytest.raises(ValueError, match="NUL"):
        store.save(Checkpoint(task_id="a\x00b"))
    assert store.load("a\x00b") is None
    store.delete("a\x00b")


# -- damage is reported, never taken for absence ------------------------------------------


@pytest.mark.parametrize(
    ("statement", "params"),
    [
        ("UPDATE {cp} SET head = %s", (b"\x00\xff not json",)),
        ("UPDATE {cp} SET head = %s", (b'["a list, not an object"]',)),
        ("UPDATE {cp} SET head = %s", (b'{"schema_version": 1, "task_id": "other"}',)),
        (
            "UPDATE {cp} SET head = %s",
            (b'{"schema_version": 1, "task_id": "t1", "iteration": -4}',),
        ),
        ("UPDATE {cp} SET head = substring(head from 1 for 20)", ()),
        ("UPDATE {msg} SET body = %s WHERE idx = 1", (b'{"role": "user", "content": "trunc',)),
        ("UPDATE {msg} SET body = %s WHERE idx = 1", (b"[1, 2]",)),
        ("UPDATE {msg} SET body = %s WHERE idx = 1", (b"\xc3\x28",)),
        ("DELETE FROM {msg} WHERE idx = 1", ()),
        ("UPDATE {msg} SET idx = 7 WHERE idx = 2", ()),
        ("UPDATE {cp} SET message_count = 9", ()),
    ],
)
def test_damaged_rows_raise_corrupt_checkpoint(
    store: PostgresStore, pg_url: str, statement: str, params: tuple[Any, ...]
) -> None:
    _saved_with_messages(store)
    _execute(store, statement, params)
    with pytest.raises(CorruptCheckpointError) as raised:
        store.load("t1")
    assert raised.value.task_id == "t1"
    other = PostgresStore.from_url(pg_url)
    try:
        with pytest.raises(CorruptCheckpointError):
            other.load("t1")
    finally:
        other.close()


def test_a_history_read_in_another_order_than_its_indexes_loads_in_index_order(
    store: PostgresStore, pg_url: str
) -> None:
    # A load reads the bodies in one aggregate, in the order the rows come (no sort): an
    # update moves a row to the end of the heap, and the indexes put it back in place.
    messages = [_user(f"message {i} " + "x" * (i * 37)) for i in range(12)]
    store.save(Checkpoint(task_id="t1", messages=messages))
    for idx in (0, 5, 3):
        _execute(
            store,
            "WITH gone AS (DELETE FROM {msg} WHERE idx = %s RETURNING *)"
            " INSERT INTO {msg} SELECT * FROM gone",
            (idx,),
        )
    with store._connect() as conn:
        (order,) = conn.execute(
            f"SELECT array_agg(idx) FROM {store.tables['messages']} WHERE task_id = 't1'".encode()
        ).fetchone()
    assert order != list(range(12))  # the order an aggregate sees did change
    for reader in (store, PostgresStore.from_url(pg_url)):
        loaded = reader.load("t1")
        assert loaded is not None
        assert loaded.messages == messages


def test_a_non_ascii_history_read_in_one_value_splits_on_byte_lengths(
    store: PostgresStore, pg_url: str
) -> None:
    messages = [_user("é" * i + "🎉 " + "ascii") for i in range(1, 6)] + [_user("plain")]
    store.save(Checkpoint(task_id="t1", messages=messages))
    other = PostgresStore.from_url(pg_url)
    try:
        loaded = other.load("t1")
    finally:
        other.close()
    assert loaded is not None and loaded.messages == messages


def test_damaged_head_is_reported_by_listing_too(store: PostgresStore) -> None:
    _saved_with_messages(store)
    _execute(store, "UPDATE {cp} SET head = %s", (b"{broken",))
    with pytest.raises(CorruptCheckpointError):
        store.list_checkpoints()


def test_a_failed_save_leaves_no_partial_rows(store: PostgresStore) -> None:
    checkpoint = _saved_with_messages(store, n=2)
    checkpoint.messages += [_user("m2"), _user("m3")]
    # Make the head update fail after the statement began: the new message rows must
    # not stay behind.
    _execute(
        store,
        "ALTER TABLE {cp} ADD CONSTRAINT no_v2 CHECK (version < 2)",
    )
    with pytest.raises(StoreUnavailableError, match="no_v2"):
        store.save(checkpoint)
    _execute(store, "ALTER TABLE {cp} DROP CONSTRAINT no_v2")
    loaded = store.load("t1")
    assert loaded is not None
    assert (loaded.version, len(loaded.messages)) == (1, 2)
    assert store.save(checkpoint).version == 2
    again = store.load("t1")
    assert again is not None
    assert [m["content"] for m in again.messages] == ["m0", "m1", "m2", "m3"]


# -- retention (ttl) -----------------------------------------------------------------------


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    return fake_clock(monkeypatch, stores.postgresql)


@pytest.fixture
def ttl_store(pg_url: str) -> Iterator[PostgresStore]:
    """A store with ttl=60 on the tables of ``pg_url`` (dropped by that fixture)."""
    opened = PostgresStore.from_url(_with_params(pg_url, ttl="60"))
    try:
        yield opened
    finally:
        opened.close()


def _rows(store: PostgresStore, task_id: str) -> tuple[int, int]:
    """How many head rows and message rows are stored for ``task_id``."""
    tables = store.tables
    with store._connect() as conn:
        heads = conn.execute(
            f"SELECT count(*) FROM {tables['checkpoints']} WHERE task_id = %s".encode(),
            (task_id,),
        ).fetchone()
        messages = conn.execute(
            f"SELECT count(*) FROM {tables['messages']} WHERE task_id = %s".encode(),
            (task_id,),
        ).fetchone()
    assert heads is not None and messages is not None
    return int(heads[0]), int(messages[0])


def _tables_named(base_url: str, prefixes: list[str]) -> list[str]:
    """The tables on the server whose names start with one of ``prefixes``."""
    import psycopg

    with psycopg.connect(base_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_name LIKE ANY(%s)",
            ([prefix.replace("_", "\\_") + "%" for prefix in prefixes],),
        ).fetchall()
    return [row[0] for row in rows]


def test_the_ttl_contract_passes_with_a_ttl(agentckpt_postgres_url: str) -> None:
    prefixes: list[str] = []

    def make(namespace: str) -> CheckpointStore:
        prefixes.append(f"{namespace}_")
        return open_store(
            _with_params(agentckpt_postgres_url, table_prefix=f"{namespace}_", ttl="1")
        )

    try:
        report = certify(
            StoreFactory("tests.stores.test_postgresql:ttl1", make),
            only=["ttl"],
            figures=False,
            quick=True,
        )
        result = report.result("ttl")
        assert result.outcome is Outcome.PASSED, f"{result.summary}\n{result.details}"
        assert report.store_url.endswith("ttl=1")
        assert prefixes and _tables_named(agentckpt_postgres_url, prefixes) == []
    finally:
        for prefix in prefixes:  # leave nothing behind even if the run failed half-way
            cleanup = PostgresStore.from_url(
                _with_params(agentckpt_postgres_url, table_prefix=prefix)
            )
            try:
                cleanup.drop_tables()
            finally:
                cleanup.close()


@pytest.mark.parametrize(("ttl", "seconds"), [("7d", 604800.0), ("3600", 3600.0), ("90m", 5400.0)])
def test_ttl_in_the_url_is_applied_and_reported(pg_url: str, ttl: str, seconds: float) -> None:
    store = open_store(_with_params(pg_url, ttl=ttl))
    try:
        assert isinstance(store, PostgresStore)
        assert store.ttl == seconds
        assert store.info().ttl == seconds
        # Taken out of the URL, not handed to libpq (which refuses unknown options).
        store.save(Checkpoint(task_id="t"))
    finally:
        store.close()


@pytest.mark.parametrize(
    ("ttl", "message"),
    [("soon", "ttl 'soon' is not a duration"), ("0", "positive duration"), ("-5", "ttl")],
)
def test_bad_ttl_in_the_url_is_refused_before_connecting(ttl: str, message: str) -> None:
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/test?ttl={ttl}"
    with pytest.raises(InvalidStoreURLError, match=message):
        open_store(url)


@pytest.mark.parametrize("bad", ["soon", 0, -1.0, True])
def test_bad_ttl_keyword_is_a_value_error(bad: Any) -> None:
    with pytest.raises(ValueError, match="ttl"):
        PostgresStore(f"postgresql://postgres@127.0.0.1:{free_port()}/test", ttl=bad)


def test_an_expired_checkpoint_is_gone_and_deleted_when_touched(
    ttl_store: PostgresStore, clock: FakeClock
) -> None:
    old = [_user("old news")]
    ttl_store.save(Checkpoint(task_id="loaded", status="completed", messages=old))
    stale = ttl_store.save(Checkpoint(task_id="saved", status="failed", messages=old))
    appended = ttl_store.save(Checkpoint(task_id="appended", status="completed", messages=old))
    ttl_store.save(Checkpoint(task_id="created", status="completed", messages=old))
    clock.advance(61)
    # Hidden at once, deleted only when touched.
    assert ttl_store.list_checkpoints() == []
    assert ttl_store.list_checkpoints(status="completed") == []
    assert _rows(ttl_store, "loaded") == (1, 1)
    assert ttl_store.load("loaded") is None
    assert _rows(ttl_store, "loaded") == (0, 0)
    # A save expecting the old version conflicts with nothing, and deletes it: a rewrite
    # and an append (the store knows that history) alike.
    with pytest.raises(ConflictError) as raised:
        ttl_store.save(stale.model_copy(update={"messages": [_user("other")]}))
    assert (raised.value.expected, raised.value.actual) == (1, None)
    assert _rows(ttl_store, "saved") == (0, 0)
    appended.messages.append(_user("more"))
    with pytest.raises(ConflictError) as raised:
        ttl_store.save(appended)
    assert (raised.value.expected, raised.value.actual) == (1, None)
    assert _rows(ttl_store, "appended") == (0, 0)
    # A save at version 0 creates it afresh: version 1, none of the old messages.
    reborn = ttl_store.save(Checkpoint(task_id="created", goal="again"))
    assert reborn.version == 1
    assert _rows(ttl_store, "created") == (1, 0)
    again = ttl_store.load("created")
    assert again is not None
    assert (again.version, again.goal, again.messages) == (1, "again", [])
    # ... in a new lineage: the next append is checked against the new record.
    again.messages.append(_user("new"))
    assert ttl_store.save(again).version == 2
    latest = ttl_store.load("created")
    assert latest is not None and latest.messages == [_user("new")]


def test_a_checkpoint_created_again_after_it_expired_never_mixes_histories(
    ttl_store: PostgresStore, pg_url: str, clock: FakeClock
) -> None:
    other = PostgresStore.from_url(_with_params(pg_url, ttl="60"))
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
    ttl_store: PostgresStore, clock: FakeClock
) -> None:
    saved = ttl_store.save(Checkpoint(task_id="t", status="completed"))
    clock.advance(50)
    saved = ttl_store.save(saved.model_copy(update={"iteration": 1}))
    clock.advance(60)  # exactly the ttl: updated_at equals the cutoff, not before it
    loaded = ttl_store.load("t")
    assert loaded is not None and loaded.iteration == 1
    assert [s.task_id for s in ttl_store.list_checkpoints()] == ["t"]
    clock.advance(0.000001)
    assert ttl_store.list_checkpoints() == []
    assert ttl_store.load("t") is None


def test_a_status_column_edited_apart_from_its_head_never_expires_a_running_checkpoint(
    ttl_store: PostgresStore, clock: FakeClock
) -> None:
    # A CLI round: a running task whose status column was edited to 'completed' expired,
    # and the read-only `status` command's load deleted it.
    from stores.errors import StatusOutOfStepError

    two = [_user("a"), _user("b")]
    ttl_store.save(Checkpoint(task_id="live", status="running", messages=two, iteration=3))
    ttl_store.save(Checkpoint(task_id="done", status="completed", messages=two))
    with ttl_store._connect() as conn:
        conn.execute(
            f"UPDATE {ttl_store.tables['checkpoints']} SET status = 'completed' WHERE task_id = 'live'".encode()
        )
    clock.advance(61)
    loaded = ttl_store.load("live")
    assert loaded is not None and (loaded.status, loaded.messages) == ("running", two)
    assert [(s.task_id, s.status) for s in ttl_store.list_checkpoints()] == [("live", "running")]
    with pytest.raises(StatusOutOfStepError):
        ttl_store.list_checkpoints(status="completed")  # what a prune of finished tasks lists
    assert ttl_store.sweep_expired() == 1  # "done" only
    assert _rows(ttl_store, "live") == (1, 2) and _rows(ttl_store, "done") == (0, 0)


def test_sweep_expired_deletes_exactly_the_expired_finished_checkpoints(
    ttl_store: PostgresStore, clock: FakeClock
) -> None:
    two = [_user("a"), _user("b")]
    for status in ("completed", "failed", "running"):
        ttl_store.save(Checkpoint(task_id=status, status=status, messages=two))
    clock.advance(30)
    ttl_store.save(Checkpoint(task_id="recent", status="completed", messages=[_user("c")]))
    clock.advance(31)  # the first three are 61 s old, "recent" 31 s
    assert [_rows(ttl_store, t) for t in ("completed", "failed")] == [(1, 2), (1, 2)]
    assert ttl_store.sweep_expired() == 2
    assert [_rows(ttl_store, t) for t in ("completed", "failed")] == [(0, 0), (0, 0)]
    assert _rows(ttl_store, "running") == (1, 2)
    assert _rows(ttl_store, "recent") == (1, 1)
    assert ttl_store.sweep_expired() == 0
    running = ttl_store.load("running")
    assert running is not None and running.messages == two
    clock.advance(30)
    assert ttl_store.sweep_expired() == 1
    assert _rows(ttl_store, "recent") == (0, 0)
    assert [s.task_id for s in ttl_store.list_checkpoints()] == ["running"]


@pytest.mark.parametrize(
    ("ttl", "seconds"), [(None, None), ("99999999999w", 99999999999 * 604800.0)]
)
def test_without_a_ttl_nothing_expires(
    pg_url: str, clock: FakeClock, ttl: str | None, seconds: float | None
) -> None:
    # No ttl, or one longer than the calendar goes back.
    store = PostgresStore.from_url(pg_url if ttl is None else _with_params(pg_url, ttl=ttl))
    try:
        assert store.info().ttl == seconds
        done = store.save(Checkpoint(task_id="done", status="completed", messages=[_user("kept")]))
        clock.advance(200 * 365 * 86400)
        loaded = store.load("done")
        assert loaded is not None and loaded.messages == done.messages
        assert [s.task_id for s in store.list_checkpoints(status="completed")] == ["done"]
        assert store.sweep_expired() == 0
        loaded.messages.append(_user("more"))
        assert store.save(loaded).version == 2
        assert _rows(store, "done") == (1, 2)
    finally:
        store.close()


# -- a private server: restarts and kills ------------------------------------------------


@pytest.fixture(scope="module")
def private_postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivatePostgres]:
    try:
        server = PrivatePostgres(tmp_path_factory.mktemp("private-postgres"))
        server.start()
    except RuntimeError as exc:
        from pytest_agentckpt.services import backend_unavailable
        from pytest_agentckpt.services.postgres import HOW_TO_ENABLE

        backend_unavailable("postgresql (private server)", str(exc), HOW_TO_ENABLE)
    try:
        yield server
    finally:
        server.remove()


def test_a_store_keeps_working_across_a_server_restart(private_postgres: PrivatePostgres) -> None:
    store = PostgresStore.from_url(_with_params(private_postgres.url, pool_min_size="2"))
    try:
        checkpoint = _saved_with_messages(store)
        private_postgres.restart()
        # Pooled connections died with the server; the store replaces them unasked.
        loaded = store.load("t1")
        assert loaded is not None
        assert loaded.messages == checkpoint.messages
        checkpoint.messages.append(_user("after restart"))
        assert store.save(checkpoint).version == 2
    finally:
        store.close()


def test_acknowledged_saves_survive_sigkill_of_the_server(
    private_postgres: PrivatePostgres,
) -> None:
    url = _with_params(private_postgres.url, table_prefix=_prefix(), pool_timeout="2")
    store = PostgresStore.from_url(url)
    try:
        checkpoint = store.save(Checkpoint(task_id="t1"))
        for i in range(20):
            checkpoint.messages.append(_user(f"m{i}"))
            checkpoint = store.save(checkpoint)
        private_postgres.kill()
        with pytest.raises(StoreUnavailableError, match="save"):
            store.save(checkpoint)
        private_postgres.start()
        # The pool reconnects in the background with backoff after failed attempts, so
        # the same store object recovers within a few seconds without being reopened.
        deadline, loaded = time.monotonic() + 20, None
        while loaded is None and time.monotonic() < deadline:
            try:
                loaded = store.load("t1")
            except StoreUnavailableError:
                time.sleep(0.2)
        assert loaded is not None
        assert (loaded.version, len(loaded.messages)) == (21, 20)
    finally:
        store.close()


def test_a_status_column_edited_apart_from_the_head_is_damage_not_a_listed_match(store: PostgresStore) -> None:
    # list_checkpoints(status="completed") returned a task whose head says running (an
    # outside round edited the status column): what a prune by that listing would delete.
    store.save(Checkpoint(task_id="t1", status="running", iteration=3))
    _execute(store, "UPDATE {cp} SET status = 'completed' WHERE task_id = 't1'")
    with pytest.raises(CorruptCheckpointError, match="the status column says 'completed' but the stored head says 'running'"):
        store.list_checkpoints(status="completed")
    reported: list[Exception] = []
    assert store.list_checkpoints(status="completed", on_unreadable=reported.append) == []
    assert [getattr(error, "task_id", None) for error in reported] == ["t1"]
    loaded = store.load("t1")
    assert loaded is not None and (loaded.status, loaded.iteration) == ("running", 3)  # reads changed nothing


def test_a_version_column_below_one_is_damage(store: PostgresStore) -> None:
    # It loaded as a Checkpoint of version -3, which the model itself refuses to build.
    store.save(Checkpoint(task_id="t1"))
    _execute(store, "UPDATE {cp} SET version = -3 WHERE task_id = 't1'")
    with pytest.raises(CorruptCheckpointError, match="the version column holds -3, which no save writes"):
        store.load("t1")
    with pytest.raises(CorruptCheckpointError, match="the version column holds -3"):
        store.list_checkpoints()
