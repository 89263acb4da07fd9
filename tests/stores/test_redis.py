"""The Redis store: script logic on fakeredis, guarantees on a real redis-server."""

from __future__ import annotations

import shutil
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_agentckpt.fixtures.backends import purge_namespace
from pytest_agentckpt.services import backend_unavailable, free_port
from pytest_agentckpt.services.redis import HOW_TO_ENABLE, PrivateRedis
from stores import (
    Checkpoint,
    ConflictError,
    CorruptCheckpointError,
    StoreUnavailableError,
    open_store,
)
from stores.redis import RedisNotDurableWarning, RedisStore

fakeredis = pytest.importorskip("fakeredis")
redis = pytest.importorskip("redis")


def _msg(i: int) -> dict[str, Any]:
    role = "user" if i % 2 == 0 else "assistant"
    return {"role": role, "content": [{"type": "text", "text": f"message {i} ✓"}]}


class _ScriptSpy:
    """Wraps the store's Lua script to record how many messages each call pushed."""

    def __init__(self, store: RedisStore) -> None:
        self._script = store._script
        self.calls: list[tuple[str, int]] = []
        store._script = self  # type: ignore[assignment]

    def __call__(self, *, keys: list[str], args: list[Any]) -> Any:
        self.calls.append((str(args[1]), len(args) - 7))
        return self._script(keys=keys, args=args)


@pytest.fixture
def fake_client() -> Any:
    return fakeredis.FakeRedis()


@pytest.fixture
def fake_store(fake_client: Any) -> RedisStore:
    return RedisStore(fake_client, key_prefix="unit:")


# -- script logic (fakeredis with Lua) ---------------------------------------------------


def test_save_appends_only_the_new_messages(fake_store: RedisStore) -> None:
    spy = _ScriptSpy(fake_store)
    cp = fake_store.save(Checkpoint(task_id="t", messages=[_msg(0)]))
    for i in range(1, 6):
        cp = fake_store.save(cp.model_copy(update={"messages": [*cp.messages, _msg(i)]}))
    assert spy.calls == [("r", 1)] + [("a", 1)] * 5
    loaded = fake_store.load("t")
    assert loaded is not None
    assert loaded.messages == [_msg(i) for i in range(6)]
    assert loaded.version == 6


def test_changed_prefix_rewrites_the_whole_history(fake_store: RedisStore) -> None:
    spy = _ScriptSpy(fake_store)
    cp = fake_store.save(Checkpoint(task_id="t", messages=[_msg(0), _msg(1)]))
    edited = [{"role": "user", "content": "rewritten"}, _msg(1), _msg(2)]
    fake_store.save(cp.model_copy(update={"messages": edited}))
    assert spy.calls[-1] == ("r", 3)
    loaded = fake_store.load("t")
    assert loaded is not None and loaded.messages == edited


def test_append_onto_a_recreated_record_rewrites_instead_of_mixing(fake_client: Any) -> None:
    writer = RedisStore(fake_client, key_prefix="unit:")
    other = RedisStore(fake_client, key_prefix="unit:")
    mine = writer.save(Checkpoint(task_id="t", messages=[_msg(0), _msg(1)]))
    # Another worker deletes the task and creates it again at the same version number,
    # with a different history: the writer's remembered prefix is no longer stored.
    other.delete("t")
    other.save(Checkpoint(task_id="t", messages=[{"role": "user", "content": "other"}]))
    spy = _ScriptSpy(writer)
    writer.save(mine.model_copy(update={"messages": [*mine.messages, _msg(2)]}))
    assert [mode for mode, _ in spy.calls] == ["a", "r"]
    loaded = other.load("t")
    assert loaded is not None
    assert loaded.messages == [_msg(0), _msg(1), _msg(2)]


def test_stale_save_conflicts_and_changes_nothing(fake_client: Any) -> None:
    first = RedisStore(fake_client, key_prefix="unit:")
    second = RedisStore(fake_client, key_prefix="unit:")
    base = first.save(Checkpoint(task_id="t", messages=[_msg(0)]))
    winner = second.save(base.model_copy(update={"messages": [_msg(0), _msg(1)], "iteration": 1}))
    before = {key: fake_client.dump(key) for key in first.raw_keys("t")}
    with pytest.raises(ConflictError) as caught:
        first.save(base.model_copy(update={"messages": [_msg(0), _msg(9)], "iteration": 7}))
    assert caught.value.actual == winner.version == 2
    assert {key: fake_client.dump(key) for key in first.raw_keys("t")} == before


def test_creating_an_existing_task_conflicts(fake_store: RedisStore) -> None:
    fake_store.save(Checkpoint(task_id="t", goal="first"))
    with pytest.raises(ConflictError):
        fake_store.save(Checkpoint(task_id="t", goal="second"))
    loaded = fake_store.load("t")
    assert loaded is not None and loaded.goal == "first"


def test_saving_at_a_version_that_does_not_exist_conflicts(fake_store: RedisStore) -> None:
    with pytest.raises(ConflictError) as caught:
        fake_store.save(Checkpoint(task_id="t", version=3))
    assert caught.value.actual is None
    assert fake_store.load("t") is None


def test_loaded_checkpoint_does_not_alias_the_store(fake_store: RedisStore) -> None:
    cp = fake_store.save(Checkpoint(task_id="t", messages=[_msg(0)]))
    loaded = fake_store.load("t")
    assert loaded is not None
    loaded.messages[0]["content"][0]["text"] = "mutated"
    cp.messages.append(_msg(1))
    again = fake_store.load("t")
    assert again is not None and again.messages == [_msg(0)]


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda c, h, m: c.hset(h, "body", b"{not json"), "not valid JSON"),
        (lambda c, h, m: c.hset(h, "body", b'{"task_id": "t"}'), "schema_version"),
        (lambda c, h, m: c.lset(m, 0, b"\xff\xfe"), "not valid JSON"),
        (lambda c, h, m: c.lset(m, 0, b"[1, 2]"), "not a JSON object"),
        (lambda c, h, m: c.delete(m), "messages"),
        (lambda c, h, m: c.rpush(m, b"{}"), "messages"),
        (lambda c, h, m: c.hdel(h, "lineage"), "lacks lineage"),
        (lambda c, h, m: c.hset(h, "version", b"seven"), "unreadable"),
        (lambda c, h, m: c.hset(h, "version", b"9"), "version"),
        (lambda c, h, m: c.delete(h), "head is missing"),
        (lambda c, h, m: (c.delete(h), c.set(h, b"a string")), "refused"),
    ],
    ids=[
        "garbage-head",
        "head-without-schema",
        "message-not-utf8",
        "message-not-object",
        "messages-deleted",
        "extra-message",
        "lineage-deleted",
        "version-not-integer",
        "version-disagrees-with-body",
        "head-deleted",
        "head-wrong-type",
    ],
)
def test_damaged_data_raises_corrupt_never_none(
    fake_client: Any, fake_store: RedisStore, damage: Any, reason: str
) -> None:
    fake_store.save(Checkpoint(task_id="t", messages=[_msg(0), _msg(1)]))
    head, msgs, _ = fake_store.raw_keys("t")
    damage(fake_client, head, msgs)
    with pytest.raises(CorruptCheckpointError, match=reason):
        fake_store.load("t")


def test_saving_over_a_non_integer_version_raises_corrupt(
    fake_client: Any, fake_store: RedisStore
) -> None:
    cp = fake_store.save(Checkpoint(task_id="t"))
    fake_client.hset(fake_store.raw_keys("t")[0], "version", b"x")
    with pytest.raises(CorruptCheckpointError):
        fake_store.save(cp)


def test_delete_is_idempotent_and_removes_every_key(
    fake_client: Any, fake_store: RedisStore
) -> None:
    fake_store.save(Checkpoint(task_id="t", messages=[_msg(0)]))
    fake_store.delete("t")
    fake_store.delete("t")
    assert fake_store.load("t") is None
    assert fake_client.keys("unit:task:*") == []
    assert fake_store.list_checkpoints() == []
    # Created again from scratch after a delete.
    assert fake_store.save(Checkpoint(task_id="t")).version == 1


def test_listing_filters_by_status_and_metadata(fake_store: RedisStore) -> None:
    fake_store.save(Checkpoint(task_id="b", metadata={"user": "ann", "n": 1}))
    fake_store.save(Checkpoint(task_id="a", metadata={"user": "bob"}, status="completed"))
    fake_store.save(Checkpoint(task_id="c", metadata={"user": "ann"}, status="failed"))
    assert [s.task_id for s in fake_store.list_checkpoints()] == ["a", "b", "c"]
    assert [s.task_id for s in fake_store.list_checkpoints(status="completed")] == ["a"]
    assert [s.task_id for s in fake_store.list_checkpoints(metadata={"user": "ann"})] == ["b", "c"]
    assert [
        s.task_id for s in fake_store.list_checkpoints(status="running", metadata={"user": "ann"})
    ] == ["b"]
    assert fake_store.list_checkpoints(metadata={"user": "ann", "n": 2}) == []


def test_key_prefixes_isolate_stores_on_one_server(fake_client: Any) -> None:
    one = RedisStore(fake_client, key_prefix="app1:")
    two = RedisStore(fake_client, key_prefix="app2:")
    one.save(Checkpoint(task_id="t", goal="one"))
    assert two.load("t") is None
    assert two.list_checkpoints() == []
    two.save(Checkpoint(task_id="t", goal="two"))
    loaded_one, loaded_two = one.load("t"), two.load("t")
    assert loaded_one is not None and loaded_one.goal == "one"
    assert loaded_two is not None and loaded_two.goal == "two"
    assert all(key.startswith((b"app1:", b"app2:")) for key in fake_client.keys("*"))


def test_server_without_config_command_reports_unknown_durability(fake_store: RedisStore) -> None:
    info = fake_store.info()
    assert info.backend == "redis" and info.incremental
    assert info.durable is None
    assert any("CONFIG" in note for note in info.notes)


def test_long_history_pushes_in_batches(fake_store: RedisStore) -> None:
    messages = [_msg(i) for i in range(1203)]
    fake_store.save(Checkpoint(task_id="t", messages=messages))
    loaded = fake_store.load("t")
    assert loaded is not None and loaded.messages == messages


# -- a real redis-server ------------------------------------------------------------------


@pytest.fixture
def real_url(agentckpt_redis_url: str) -> str:
    sep = "&" if "?" in agentckpt_redis_url else "?"
    return f"{agentckpt_redis_url}{sep}key_prefix=t{uuid.uuid4().hex[:12]}:"


@pytest.fixture
def real_store(real_url: str) -> Iterator[RedisStore]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RedisNotDurableWarning)
        store = open_store(real_url)
    assert isinstance(store, RedisStore)
    try:
        yield store
    finally:
        store.close()
        # Everything under the prefix, damaged keys included: the shared server keeps nothing.
        purge_namespace(real_url)


@pytest.fixture
def redis_server_binary() -> str:
    binary = shutil.which("redis-server")
    if binary is None:
        backend_unavailable("redis (private server)", "redis-server is not on PATH", HOW_TO_ENABLE)
    return binary


def test_real_server_round_trip_and_incremental_saves(real_store: RedisStore) -> None:
    spy = _ScriptSpy(real_store)
    cp = real_store.save(Checkpoint(task_id="t", goal="g", metadata={"big": 2**70}))
    for i in range(4):
        cp = real_store.save(cp.model_copy(update={"messages": [*cp.messages, _msg(i)]}))
    assert [n for _, n in spy.calls] == [0, 1, 1, 1, 1]
    loaded = real_store.load("t")
    assert loaded is not None
    assert loaded.messages == [_msg(i) for i in range(4)]
    assert loaded.metadata == {"big": 2**70}
    assert loaded.version == 5


def test_real_server_corruption_through_raw_client_raises_corrupt(real_store: RedisStore) -> None:
    real_store.save(Checkpoint(task_id="t", messages=[_msg(0)]))
    head, msgs, _ = real_store.raw_keys("t")
    real_store.client.lset(msgs, 0, b'{"role": "user", "content"')
    with pytest.raises(CorruptCheckpointError):
        real_store.load("t")
    real_store.client.delete(head)
    with pytest.raises(CorruptCheckpointError):
        real_store.load("t")


def test_key_prefix_from_url_isolates_real_stores(agentckpt_redis_url: str, real_url: str) -> None:
    sep = "&" if "?" in agentckpt_redis_url else "?"
    other_url = f"{agentckpt_redis_url}{sep}key_prefix=t{uuid.uuid4().hex[:12]}:"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RedisNotDurableWarning)
        one, two = open_store(real_url), open_store(other_url)
    try:
        one.save(Checkpoint(task_id="shared-id", goal="one"))
        assert two.load("shared-id") is None
        assert two.list_checkpoints() == []
    finally:
        one.delete("shared-id")
        one.close()
        two.close()


def test_unreachable_server_fails_fast_naming_the_redacted_url() -> None:
    url = f"redis://:s3cret@127.0.0.1:{free_port()}/0?key_prefix=x:"
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError) as caught:
        open_store(url)
    assert time.monotonic() - started < 5
    message = str(caught.value)
    assert "127.0.0.1" in message and "***" in message
    assert "s3cret" not in message
    assert "redis-server is running" in message


def test_server_with_aof_off_warns_and_reports_not_durable(
    redis_server_binary: str, tmp_path: Path
) -> None:
    with PrivateRedis(tmp_path, appendonly=False) as server:
        with pytest.warns(RedisNotDurableWarning, match="appendonly"):
            store = RedisStore.from_url(server.url)
        with warnings.catch_warnings():
            warnings.simplefilter("error", RedisNotDurableWarning)
            info = store.info()  # once per store: info() does not warn again
        store.close()
    assert info.durable is False
    assert any("loses every checkpoint on restart" in note for note in info.notes)


def test_aof_off_loses_saves_on_restart(redis_server_binary: str, tmp_path: Path) -> None:
    with PrivateRedis(tmp_path, appendonly=False) as server:
        with pytest.warns(RedisNotDurableWarning):
            store = RedisStore.from_url(server.url)
        store.save(Checkpoint(task_id="t", messages=[_msg(0)]))
        server.restart()
        assert store.load("t") is None
        store.close()


def test_aof_on_saves_survive_restart_and_sigkill(redis_server_binary: str, tmp_path: Path) -> None:
    with PrivateRedis(tmp_path, appendonly=True) as server:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RedisNotDurableWarning)
            store = RedisStore.from_url(server.url)
        assert store.info().durable is True
        cp = store.save(Checkpoint(task_id="t", messages=[_msg(0)]))
        server.restart()
        # The same store object reconnects and keeps appending.
        cp = store.save(cp.model_copy(update={"messages": [_msg(0), _msg(1)]}))
        server.kill()
        server.start()
        loaded = store.load("t")
        store.close()
    assert loaded is not None
    assert loaded.version == cp.version == 2
    assert loaded.messages == [_msg(0), _msg(1)]


def test_operations_while_the_server_is_down_raise_unavailable(
    redis_server_binary: str, tmp_path: Path
) -> None:
    with PrivateRedis(tmp_path) as server:
        store = RedisStore.from_url(server.url)
        store.save(Checkpoint(task_id="t"))
        server.stop()
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError, match="unreachable"):
            store.load("t")
        with pytest.raises(StoreUnavailableError):
            store.save(Checkpoint(task_id="u"))
        assert time.monotonic() - started < 10
        server.start()
        assert store.load("t") is not None
        store.close()
