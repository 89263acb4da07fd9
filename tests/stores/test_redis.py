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

from pytest_agentckpt.certify import StoreFactory, certify
from pytest_agentckpt.fixtures.backends import purge_namespace
from pytest_agentckpt.services import backend_unavailable, free_port
from pytest_agentckpt.services.redis import HOW_TO_ENABLE, PrivateRedis
from stores import (
    Checkpoint,
    CheckpointStore,
    ConflictError,
    CorruptCheckpointError,
    InvalidStoreURLError,
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
        # Arguments before the messages: a ttl store also sends the expiry.
        self._fixed = 7 if store.ttl is None else 8
        self.calls: list[tuple[str, int]] = []
        store._script = self  # type: ignore[assignment]

    def __call__(self, *, keys: list[str], args: list[Any]) -> Any:
        self.calls.append((str(args[1]), len(args) - self._fixed))
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


@pytest.mark.parametrize("client", [None, "redis://127.0.0.1:6379/0"])
def test_a_client_that_is_no_redis_client_is_a_type_error_saying_what_to_pass(client: Any) -> None:
    with pytest.raises(TypeError, match=r"client must be a redis\.Redis client.*RedisStore\.from_url"):
        RedisStore(client)


def test_an_index_key_of_another_kind_is_a_store_error_naming_the_prefix(
    fake_client: Any, fake_store: RedisStore
) -> None:
    # Another program wrote at the store's index key: listing and deleting were a bare
    # redis ResponseError (the CLI's "unexpected ResponseError").
    fake_store.save(Checkpoint(task_id="t"))
    index = fake_store.raw_keys("t")[2]
    fake_client.delete(index)
    fake_client.set(index, b"not a set")
    for call in (fake_store.list_checkpoints, lambda: fake_store.delete("t")):
        with pytest.raises(StoreUnavailableError, match="a key under key_prefix 'unit:' holds a value of another kind"):
            call()
    # A load or a save of any task names the index key, not the task: a CLI round's new
    # task was called corrupt, with a `delete` of it that could not help.
    for call in (lambda: fake_store.load("t"), lambda: fake_store.save(Checkpoint(task_id="w3"))):
        with pytest.raises(StoreUnavailableError, match=r"the index key .* holds a string, not a set.*deleting a task does not help"):
            call()
    assert fake_client.get(index) == b"not a set"


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


# -- retention (ttl) ------------------------------------------------------------------------


def _with(url: str, query: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{query}"


def _pttls(store: RedisStore, task_id: str) -> tuple[int, int, int]:
    """PTTL of the head, the messages and the index: -1 no expiry, -2 no such key."""
    head, msgs, index = store.raw_keys(task_id)
    return store.client.pttl(head), store.client.pttl(msgs), store.client.pttl(index)


def test_ttl_contract_passes_on_a_real_server(agentckpt_redis_url: str) -> None:
    namespaces: list[str] = []

    def make(namespace: str) -> CheckpointStore:
        namespaces.append(namespace)
        return open_store(_with(agentckpt_redis_url, f"key_prefix={namespace}:&ttl=1"))

    try:
        report = certify(
            StoreFactory("tests.stores.test_redis:ttl1", make), only=["ttl"], figures=False, quick=True
        )
    finally:
        for namespace in namespaces:
            purge_namespace(_with(agentckpt_redis_url, f"key_prefix={namespace}:"))
    result = report.result("ttl")
    assert result.outcome.value == "passed", f"{result.summary}\n{result.details}"
    assert report.store_url.endswith("ttl=1")


def test_ttl_keyword_and_url(fake_client: Any, real_url: str) -> None:
    assert RedisStore(fake_client, key_prefix="unit:").info().ttl is None
    assert RedisStore(fake_client, key_prefix="unit:", ttl="90m").info().ttl == 5400.0
    for bad in ("soon", 0, -5, True):
        with pytest.raises(ValueError, match="ttl"):
            RedisStore(fake_client, key_prefix="unit:", ttl=bad)
    try:
        for query, seconds in (("ttl=7d", 604800.0), ("ttl=3600", 3600.0), ("ttl=1.5", 1.5)):
            store = open_store(_with(real_url, query))
            try:
                info = store.info()
                assert info.ttl == seconds
                assert any("expire" in note for note in info.notes)
                store.save(Checkpoint(task_id="t", status="completed"))
                # The ttl was taken out of the URL, not handed to redis-py or lost.
                assert 0 < store.client.pttl(store.raw_keys("t")[0]) <= seconds * 1000
                store.delete("t")
            finally:
                store.close()
    finally:
        purge_namespace(real_url)


@pytest.mark.parametrize(
    ("query", "message"),
    [("ttl=soon", "is not a duration"), ("ttl=0", "positive duration"), ("ttl=99999999999999w", "longer")],
)
def test_bad_ttl_in_the_url_is_refused_before_connecting(query: str, message: str) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0?key_prefix=x:&{query}"
    with pytest.raises(InvalidStoreURLError, match=message):
        open_store(url)


def test_finished_checkpoints_expire_and_running_ones_do_not(real_url: str) -> None:
    store = open_store(_with(real_url, "ttl=60"))
    assert isinstance(store, RedisStore)
    try:
        cp = store.save(Checkpoint(task_id="t", messages=[_msg(0)]))
        assert _pttls(store, "t") == (-1, -1, -1)
        cp = store.save(cp.model_copy(update={"status": "completed"}))
        head, msgs, index = _pttls(store, "t")
        assert 0 < head <= 60_000 and 0 < msgs <= 60_000 and index == -1
        # One expiry time for both keys: neither can outlive the other.
        head_key, msgs_key, _ = store.raw_keys("t")
        assert store.client.pexpiretime(head_key) == store.client.pexpiretime(msgs_key)
        # An append while completed keeps the messages expiring with the head.
        cp = store.save(cp.model_copy(update={"messages": [_msg(0), _msg(1)]}))
        head, msgs, _ = _pttls(store, "t")
        assert head > 0 and msgs > 0
        # Saved back to running (a re-run): it must never expire.
        cp = store.save(cp.model_copy(update={"status": "running", "messages": [_msg(0), _msg(1), _msg(2)]}))
        assert _pttls(store, "t") == (-1, -1, -1)
        cp = store.save(cp.model_copy(update={"status": "failed"}))
        head, msgs, _ = _pttls(store, "t")
        assert head > 0 and msgs > 0
        # A rewrite (the stored history is not the one this store knows) expires too.
        rewritten = cp.model_copy(update={"messages": [{"role": "user", "content": "edited"}]})
        cp = store.save(rewritten)
        head, msgs, _ = _pttls(store, "t")
        assert head > 0 and msgs > 0
        # A store without ttl keeps what it writes, even over keys a ttl store set to expire.
        keeper = open_store(real_url)
        assert isinstance(keeper, RedisStore)
        try:
            keeper.save(cp.model_copy(update={"status": "completed", "iteration": 3}))
            assert _pttls(keeper, "t") == (-1, -1, -1)
        finally:
            keeper.close()
        # A completed checkpoint without messages still expires (its head does).
        store.save(Checkpoint(task_id="empty", status="completed"))
        head, msgs, _ = _pttls(store, "empty")
        assert head > 0 and msgs == -2
    finally:
        store.close()
        purge_namespace(real_url)


def test_expired_task_is_absent_and_its_index_entry_is_removed_by_a_listing(real_url: str) -> None:
    store = open_store(_with(real_url, "ttl=0.3"))
    assert isinstance(store, RedisStore)
    try:
        done = store.save(Checkpoint(task_id="done", status="completed", messages=[_msg(0)]))
        store.save(Checkpoint(task_id="live", messages=[_msg(0)]))
        _, _, index = store.raw_keys("done")
        time.sleep(0.6)
        assert store.client.sismember(index, "done")  # expiry leaves the index entry
        assert store.load("done") is None  # absent, not reported as damage
        assert [s.task_id for s in store.list_checkpoints()] == ["live"]
        assert not store.client.sismember(index, "done")
        assert store.client.sismember(index, "live")
        with pytest.raises(ConflictError) as caught:
            store.save(done)
        assert caught.value.actual is None
        again = store.save(Checkpoint(task_id="done", goal="again"))
        loaded = store.load("done")
        assert loaded is not None and loaded.version == again.version == 1 and loaded.messages == []
        assert [s.task_id for s in store.list_checkpoints()] == ["done", "live"]
    finally:
        store.close()
        purge_namespace(real_url)


def test_pruning_keeps_the_entry_of_a_task_that_exists(fake_client: Any) -> None:
    store = RedisStore(fake_client, key_prefix="unit:", ttl=60)
    store.save(Checkpoint(task_id="back", status="completed"))
    # A listing saw "back" gone, then a save created it again before the pruning ran.
    store._prune(["back", "never"])
    assert fake_client.sismember(store.raw_keys("back")[2], "back")
    assert [s.task_id for s in store.list_checkpoints()] == ["back"]


@pytest.mark.parametrize("prefix", ["", "a\x00b:", "app\n:"])
def test_an_empty_or_control_character_key_prefix_is_refused(fake_client: Any, prefix: str) -> None:
    with pytest.raises(ValueError, match="key_prefix"):
        RedisStore(fake_client, key_prefix=prefix)
    assert fake_client.keys("*") == []
