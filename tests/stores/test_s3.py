"""The S3 store on both test servers (SeaweedFS and moto): conditional writes, atomic
heads over immutable chunks, garbage collection, clear errors."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from pytest_agentckpt.services import free_port
from pytest_agentckpt.services.s3 import ensure_bucket, s3_client
from stores import (
    Checkpoint,
    ConflictError,
    CorruptCheckpointError,
    InvalidStoreURLError,
    StoreUnavailableError,
    open_store,
)
from stores.codec import dumps, encode_head, encode_messages
from stores.s3 import _FAN_IN, _GARBAGE_GRACE, S3Store

botocore = pytest.importorskip("botocore")

BUCKET = "agentckpt-tests"


def _msg(i: int, tag: str = "") -> dict[str, Any]:
    role = "user" if i % 2 == 0 else "assistant"
    return {"role": role, "content": f"{tag}message {i} ✓"}


@pytest.fixture(params=["seaweedfs", "moto"])
def s3_endpoint(request: pytest.FixtureRequest) -> str:
    fixture = f"agentckpt_{request.param}_endpoint"
    endpoint: str = request.getfixturevalue(fixture)
    ensure_bucket(endpoint, BUCKET)
    return endpoint


@pytest.fixture
def store_url(s3_endpoint: str) -> str:
    return f"s3://{BUCKET}/t{uuid.uuid4().hex[:12]}?endpoint_url={s3_endpoint}"


@pytest.fixture
def store(store_url: str) -> Iterator[S3Store]:
    opened = open_store(store_url)
    assert isinstance(opened, S3Store)
    try:
        yield opened
    finally:
        # Remove every object of this test (damaged ones included) from the shared bucket.
        pages = opened.client.get_paginator("list_objects_v2").paginate(
            Bucket=BUCKET, Prefix=opened.prefix + "/"
        )
        for page in pages:
            for obj in page.get("Contents", ()):
                opened.client.delete_object(Bucket=BUCKET, Key=obj["Key"])
        opened.close()


@pytest.fixture
def other(store_url: str) -> Iterator[S3Store]:
    """A second store on the same URL: another worker."""
    opened = open_store(store_url)
    assert isinstance(opened, S3Store)
    try:
        yield opened
    finally:
        opened.close()


def _grow(store: S3Store, checkpoint: Checkpoint, n: int, tag: str = "") -> Checkpoint:
    for _ in range(n):
        messages = [*checkpoint.messages, _msg(len(checkpoint.messages), tag)]
        checkpoint = store.save(checkpoint.model_copy(update={"messages": messages}))
    return checkpoint


def _raw(store: S3Store, key: str) -> bytes:
    body: bytes = store.client.get_object(Bucket=store.bucket, Key=key)["Body"].read()
    return body


def _put_raw(store: S3Store, key: str, body: bytes) -> None:
    store.client.put_object(Bucket=store.bucket, Key=key, Body=body)


def _chunks(store: S3Store, task_id: str) -> list[str]:
    return [key for key in store.chunk_keys(task_id) if "/msgs/" in key]


def _head(store: S3Store, task_id: str) -> dict[str, Any]:
    head: dict[str, Any] = json.loads(_raw(store, store.head_key(task_id)))
    return head


def _named(store: S3Store, task_id: str) -> list[str]:
    """The keys of the chunks the stored head names."""
    head = _head(store, task_id)
    base = store.task_prefix(task_id) + f"msgs/{head['lineage']}/"
    return [f"{base}{s:08d}-{e:08d}-{t}.json" for s, e, t in head["chunks"]]


def _garbage(store: S3Store, task_id: str) -> set[str]:
    """The keys of the retired chunks the stored head lists."""
    head = _head(store, task_id)
    base = store.task_prefix(task_id) + f"msgs/{head['lineage']}/"
    return {f"{base}{s:08d}-{e:08d}-{t}.json" for s, e, t, _ in head["garbage"]}


def _write_legacy(store: S3Store, checkpoint: Checkpoint, lineage: str = "0123abcd") -> None:
    """``checkpoint`` stored as the code before compaction stored it after one save per
    message: one chunk per message (``[`` + messages joined by ``,`` + ``]``), every 64
    chunk entries of the head moved into an index object, a head without ``tiers``."""
    base = store.task_prefix(checkpoint.task_id)
    chunks: list[list[Any]] = []
    indexes: list[list[Any]] = []
    for i, encoded in enumerate(encode_messages(checkpoint.messages)):
        entry = [i, i + 1, f"c{i:07d}"]
        _put_raw(
            store,
            f"{base}msgs/{lineage}/{i:08d}-{i + 1:08d}-{entry[2]}.json",
            b"[" + encoded + b"]",
        )
        if len(chunks) >= 64:
            index = [chunks[0][0], chunks[-1][1], f"i{i:07d}"]
            key = f"{base}index/{lineage}/{index[0]:08d}-{index[1]:08d}-{index[2]}.json"
            _put_raw(store, key, dumps(chunks))
            indexes.append(index)
            chunks = []
        chunks.append(entry)
    envelope = dumps(
        {
            "format": 1,
            "lineage": lineage,
            "count": len(checkpoint.messages),
            "chunks": chunks,
            "indexes": indexes,
        }
    )
    _put_raw(
        store,
        store.head_key(checkpoint.task_id),
        envelope[:-1] + b',"head":' + encode_head(checkpoint) + b"}",
    )


class _Calls:
    """Counts the requests a store sends, by operation."""

    def __init__(self, store: S3Store) -> None:
        self.names: list[str] = []
        #: Bytes of the message chunks uploaded.
        self.chunk_bytes = 0
        store.client.meta.events.register("provide-client-params.s3", self._seen)

    def _seen(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        self.names.append(model.name)
        if model.name == "PutObject" and "/msgs/" in params["Key"]:
            self.chunk_bytes += len(params["Body"])


# -- the servers ------------------------------------------------------------------------


def test_server_refuses_conditional_writes_that_do_not_hold_with_412(s3_endpoint: str) -> None:
    client = s3_client(s3_endpoint)
    key = f"conditional/{uuid.uuid4().hex}"
    created = client.put_object(Bucket=BUCKET, Key=key, Body=b"one", IfNoneMatch="*")
    with pytest.raises(botocore.exceptions.ClientError) as exists:
        client.put_object(Bucket=BUCKET, Key=key, Body=b"two", IfNoneMatch="*")
    assert exists.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    with pytest.raises(botocore.exceptions.ClientError) as wrong:
        client.put_object(Bucket=BUCKET, Key=key, Body=b"two", IfMatch='"0123456789abcdef"')
    assert wrong.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    replaced = client.put_object(Bucket=BUCKET, Key=key, Body=b"two", IfMatch=created["ETag"])
    with pytest.raises(botocore.exceptions.ClientError) as stale:
        client.put_object(Bucket=BUCKET, Key=key, Body=b"three", IfMatch=created["ETag"])
    assert stale.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert client.get_object(Bucket=BUCKET, Key=key)["ETag"] == replaced["ETag"]
    client.delete_object(Bucket=BUCKET, Key=key)


def test_the_moto_server_decides_racing_conditional_writes_one_at_a_time(
    agentckpt_moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # moto checks a PUT's condition, then writes, with nothing held in between; its own
    # server runs requests in threads of their own. Under load two racing compare-and-sets
    # were both told they won, and a sound store certified on it could fail a concurrency
    # contract for the server's race. The window is widened here (the write waits 0.3 s
    # after the check) so that the race is certain without the project's lock.
    from moto.s3.models import S3Backend

    put_object = S3Backend.put_object

    def slow_put(self: Any, *args: Any, **kwargs: Any) -> Any:
        time.sleep(0.3)
        return put_object(self, *args, **kwargs)

    monkeypatch.setattr(S3Backend, "put_object", slow_put)  # the server runs in this process
    ensure_bucket(agentckpt_moto_endpoint, BUCKET)
    key = f"race/{uuid.uuid4().hex}"
    # (No racer writes these bytes: a write of the same bytes keeps the ETag, and a racer
    # after it would rightly win too.)
    created = s3_client(agentckpt_moto_endpoint).put_object(Bucket=BUCKET, Key=key, Body=b"initial")
    won: list[int] = []
    refused: list[int] = []
    barrier = threading.Barrier(3)

    def racer(n: int) -> None:
        client = s3_client(agentckpt_moto_endpoint)
        barrier.wait(10)
        try:
            client.put_object(Bucket=BUCKET, Key=key, Body=str(n).encode(), IfMatch=created["ETag"])
            won.append(n)
        except botocore.exceptions.ClientError as exc:
            refused.append(exc.response["ResponseMetadata"]["HTTPStatusCode"])

    threads = [threading.Thread(target=racer, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(won) == 1, f"racing compare-and-sets that each won: {won}"
    assert refused == [412, 412]
    body = s3_client(agentckpt_moto_endpoint).get_object(Bucket=BUCKET, Key=key)["Body"].read()
    assert body == str(won[0]).encode()


# -- CAS and incremental writes ---------------------------------------------------------------


def test_round_trip_with_incremental_chunks(store: S3Store) -> None:
    cp = store.save(Checkpoint(task_id="a/../b c", goal="g", metadata={"big": 2**70}))
    cp = _grow(store, cp, 5)
    loaded = store.load("a/../b c")
    assert loaded is not None
    assert loaded == cp
    assert loaded.version == 6
    # One chunk per save that added messages; the odd task id stays inside its folder.
    assert len(_chunks(store, "a/../b c")) == 5
    assert all(
        key.startswith(store.task_prefix("a/../b c")) for key in store.chunk_keys("a/../b c")
    )


def test_head_size_stays_bounded_as_the_history_grows(store: S3Store) -> None:
    cp = _grow(store, store.save(Checkpoint(task_id="t")), 64)
    size_at_64 = len(_raw(store, store.head_key("t")))
    sizes = []
    for _ in range(150):
        cp = _grow(store, cp, 1)
        sizes.append(len(_raw(store, store.head_key("t"))))
    # Chunk lists move into index objects: the head never grows much past 64 entries.
    assert max(sizes) < size_at_64 + 300
    loaded = store.load("t")
    assert loaded is not None and loaded.messages == cp.messages


def test_bytes_written_per_save_do_not_grow_with_the_history(store: S3Store) -> None:
    cp = _grow(store, store.save(Checkpoint(task_id="t")), 10)
    before = store.bytes_written
    cp = _grow(store, cp, 10)
    early = store.bytes_written - before
    cp = _grow(store, cp, 180)
    before = store.bytes_written
    cp = _grow(store, cp, 10)
    late = store.bytes_written - before
    # Messages 200-210 are as long as messages 10-20 (give or take digits and the head).
    assert late < early * 1.5


def test_stale_save_conflicts_and_leaves_the_head_untouched(store: S3Store, other: S3Store) -> None:
    base = store.save(Checkpoint(task_id="t", messages=[_msg(0)]))
    seen = other.load("t")
    assert seen is not None
    other.save(seen.model_copy(update={"messages": [_msg(0), _msg(1)], "iteration": 1}))
    head_before = _raw(store, store.head_key("t"))
    chunks_before = _chunks(store, "t")
    with pytest.raises(ConflictError) as caught:
        store.save(base.model_copy(update={"messages": [_msg(0), _msg(9)]}))
    assert caught.value.actual == 2
    assert _raw(store, store.head_key("t")) == head_before
    # The loser's chunk was written before its head PUT failed, and is collected.
    assert _chunks(store, "t") == chunks_before


def test_creating_an_existing_task_conflicts(store: S3Store, other: S3Store) -> None:
    store.save(Checkpoint(task_id="t", goal="first"))
    with pytest.raises(ConflictError):
        other.save(Checkpoint(task_id="t", goal="second"))
    loaded = other.load("t")
    assert loaded is not None and loaded.goal == "first"


def test_a_save_after_a_save_sends_if_match_without_reading_the_head(store: S3Store) -> None:
    cp = store.save(Checkpoint(task_id="t"))
    calls: list[str] = []
    real_get, real_put = store.client.get_object, store.client.put_object

    def get_object(**kwargs: Any) -> Any:
        calls.append("GET " + kwargs["Key"])
        return real_get(**kwargs)

    def put_object(**kwargs: Any) -> Any:
        calls.append("PUT " + kwargs["Key"] + (" if-match" if "IfMatch" in kwargs else ""))
        return real_put(**kwargs)

    store.client.get_object, store.client.put_object = get_object, put_object
    try:
        _grow(store, cp, 1)
    finally:
        store.client.get_object, store.client.put_object = real_get, real_put
    assert [c.split(" ")[0] for c in calls] == ["PUT", "PUT"]
    assert calls[1] == f"PUT {store.head_key('t')} if-match"


def test_a_retried_head_put_whose_first_attempt_landed_is_not_a_conflict(store: S3Store) -> None:
    cp = store.save(Checkpoint(task_id="t"))
    real_put = store.client.put_object

    def put_twice(**kwargs: Any) -> Any:
        # The first attempt lands but its answer is lost; the retry then fails If-Match.
        result = real_put(**kwargs)
        if kwargs["Key"] == store.head_key("t"):
            return real_put(**kwargs)
        return result

    store.client.put_object = put_twice
    try:
        saved = _grow(store, cp, 1)
    finally:
        store.client.put_object = real_put
    loaded = store.load("t")
    assert loaded is not None and loaded == saved and loaded.version == 2


# -- atomicity ------------------------------------------------------------------------------


def test_a_reader_never_sees_a_mix_while_a_writer_saves(store: S3Store, other: S3Store) -> None:
    """Each checkpoint's messages all carry its generation tag, and ``iteration`` is its
    length; appends keep the tag, rewrites change every message. A mix of two saves
    breaks one of those."""
    cp = store.save(Checkpoint(task_id="t", metadata={"gen": 0}, messages=[_msg(0, "g0-")]))
    done = threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        nonlocal cp
        try:
            for step in range(1, 41):
                gen = cp.metadata["gen"]
                if step % 7 == 0:  # a rewrite: every message changes, old chunks collected
                    gen += 1
                    messages = [_msg(i, f"g{gen}-") for i in range(len(cp.messages) + 1)]
                else:
                    messages = [*cp.messages, _msg(len(cp.messages), f"g{gen}-")]
                cp = store.save(
                    cp.model_copy(
                        update={
                            "messages": messages,
                            "iteration": len(messages) - 1,
                            "metadata": {"gen": gen},
                        }
                    )
                )
        except BaseException as exc:
            errors.append(exc)
        finally:
            done.set()

    writer = threading.Thread(target=write)
    writer.start()
    reads = 0
    while not done.is_set() and reads < 2000:
        seen = other.load("t")
        reads += 1
        assert seen is not None
        gen = seen.metadata["gen"]
        assert len(seen.messages) == seen.iteration + 1
        assert seen.messages == [_msg(i, f"g{gen}-") for i in range(len(seen.messages))]
    writer.join(60)
    assert not errors, errors
    assert reads > 1


# -- damage -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "damage",
    [
        "head-garbage",
        "head-no-chunks",
        "head-wrong-count",
        "head-other-task",
        "chunk-garbage",
        "chunk-short",
        "chunk-bad-line",
        "chunk-deleted",
        "index-deleted",
    ],
)
def test_damaged_objects_raise_corrupt_never_none(store: S3Store, damage: str) -> None:
    if damage == "index-deleted":  # only a head written before compaction has indexes
        _write_legacy(store, Checkpoint(task_id="t", messages=[_msg(i) for i in range(70)]))
    else:
        _grow(store, store.save(Checkpoint(task_id="t", messages=[_msg(0)])), 70)
    head_key = store.head_key("t")
    head = json.loads(_raw(store, head_key))
    chunk = sorted(_chunks(store, "t"))[-1]
    if damage == "head-garbage":
        _put_raw(store, head_key, b"\x00not json")
    elif damage == "head-no-chunks":
        del head["chunks"]
        _put_raw(store, head_key, json.dumps(head).encode())
    elif damage == "head-wrong-count":
        head["count"] += 1
        _put_raw(store, head_key, json.dumps(head).encode())
    elif damage == "head-other-task":
        head["head"]["task_id"] = "someone-else"
        _put_raw(store, head_key, json.dumps(head).encode())
    elif damage == "chunk-garbage":
        _put_raw(store, chunk, b"[{")
    elif damage == "chunk-short":
        _put_raw(store, chunk, b"[]")
    elif damage == "chunk-bad-line":  # the one-message-per-line layout, a line broken
        lines = _raw(store, chunk).split(b"\n")
        lines[0] = b'[{"role":"user",,' if len(lines) > 1 else b'[{"role":]'
        _put_raw(store, chunk, b"\n".join(lines))
    elif damage == "chunk-deleted":
        store.client.delete_object(Bucket=store.bucket, Key=chunk)
    elif damage == "index-deleted":
        index = next(key for key in store.chunk_keys("t") if "/index/" in key)
        store.client.delete_object(Bucket=store.bucket, Key=index)
    with pytest.raises(CorruptCheckpointError):
        store.load("t")


# -- garbage collection ------------------------------------------------------------------------


def test_a_rewrite_collects_the_chunks_it_supersedes(store: S3Store) -> None:
    cp = _grow(store, store.save(Checkpoint(task_id="t", messages=[_msg(0)])), 69)
    old_objects = [key for key in store.chunk_keys("t") if key != store.head_key("t")]
    # Named chunks and chunks a compaction retired lately (still kept for readers).
    assert len(old_objects) > len(_named(store, "t"))
    edited = [{"role": "user", "content": "edited"}, *cp.messages[1:]]
    store.save(cp.model_copy(update={"messages": edited}))
    remaining = store.chunk_keys("t")
    assert not set(old_objects) & set(remaining)
    assert len(remaining) == 2  # the head and one chunk holding the whole history
    loaded = store.load("t")
    assert loaded is not None and loaded.messages == edited


def _digits(n: int, base: int) -> list[int]:
    digits = []
    while n:
        n, digit = divmod(n, base)
        digits.append(digit)
    return digits


def test_compaction_keeps_the_chunks_a_load_reads_few(store: S3Store) -> None:
    cp = store.save(Checkpoint(task_id="t", messages=[_msg(0)]))
    calls = _Calls(store)
    cp = _grow(store, cp, 300)
    # The first chunk (written whole), then tiers of at most _FAN_IN - 1 chunks: the
    # 300 one-message saves leave as many as the sum of the digits of 300 in base
    # _FAN_IN (like a counter: _FAN_IN chunks of a tier become one of the next).
    named = _named(store, "t")
    assert len(named) == 1 + sum(_digits(300, _FAN_IN))
    assert len(named) < 20
    # Each message is written at most once per tier (as many as the digits of 300 in
    # base _FAN_IN), plus two bytes of array syntax each time.
    floor = sum(len(m) + 2 for m in encode_messages(cp.messages[1:], 1))
    assert floor < calls.chunk_bytes <= len(_digits(300, _FAN_IN)) * floor
    # A load: the head, then each named chunk once.
    reader = open_store(store.url.split("?")[0] + "?endpoint_url=" + store.client.meta.endpoint_url)
    assert isinstance(reader, S3Store)
    try:
        calls = _Calls(reader)
        loaded = reader.load("t")
        assert calls.names == ["GetObject"] * (1 + len(named))
    finally:
        reader.close()
    assert loaded is not None and loaded == cp
    # Nothing is left but the head, the named chunks and the retired ones it lists.
    garbage = _garbage(store, "t")
    assert set(store.chunk_keys("t")) == {store.head_key("t"), *named, *garbage}


def test_a_history_of_one_chunk_loads_with_two_gets(store: S3Store, other: S3Store) -> None:
    cp = _grow(store, store.save(Checkpoint(task_id="t", messages=[_msg(0)])), 20)
    edited = [{"role": "user", "content": "edited"}, *cp.messages[1:]]
    cp = store.save(cp.model_copy(update={"messages": edited}))  # a rewrite: one chunk
    calls = _Calls(other)
    loaded = other.load("t")
    assert loaded is not None and loaded == cp
    assert calls.names == ["GetObject", "GetObject"]


def test_chunks_a_compaction_retires_stay_readable_for_a_grace_then_go(store: S3Store) -> None:
    cp = _grow(store, store.save(Checkpoint(task_id="t", messages=[_msg(0)])), _FAN_IN - 1)
    before = _named(store, "t")
    assert len(before) == _FAN_IN  # the first chunk and _FAN_IN - 1 of tier 0
    cp = _grow(store, cp, 1)  # the _FAN_IN-th chunk of tier 0: merged with them
    retired = before[1:]
    assert len(_named(store, "t")) == 2
    assert not set(retired) & set(_named(store, "t"))
    # A reader that read the older head still finds its chunks for a while...
    for _ in range(_GARBAGE_GRACE - 1):
        assert all(_raw(store, key) for key in retired)
        cp = _grow(store, cp, 1)
    assert all(_raw(store, key) for key in retired)
    assert set(retired) <= _garbage(store, "t")
    # ...and the save _GARBAGE_GRACE versions after the compaction removes them.
    cp = _grow(store, cp, 1)
    assert not set(retired) & set(store.chunk_keys("t"))
    assert not set(retired) & _garbage(store, "t")
    loaded = store.load("t")
    assert loaded is not None and loaded == cp


def test_a_damaged_garbage_list_never_costs_a_live_chunk(store: S3Store, other: S3Store) -> None:
    cp = _grow(store, store.save(Checkpoint(task_id="t", messages=[_msg(0)])), 3)
    head = _head(store, "t")
    head["garbage"] = [[*entry, 0] for entry in head["chunks"]] + [["x", 1, "bad", 0], 7]
    _put_raw(store, store.head_key("t"), json.dumps(head).encode())
    seen = other.load("t")
    assert seen is not None and seen.messages == cp.messages
    saved = _grow(other, seen, 1)
    assert set(_named(store, "t")) <= set(store.chunk_keys("t"))
    loaded = store.load("t")
    assert loaded is not None and loaded == saved


def test_a_head_written_before_compaction_loads_and_becomes_one_chunk(
    store: S3Store, other: S3Store
) -> None:
    """The layout of the code before compaction (index objects, no tiers, chunks
    without newlines) loads; the first save rewrites it into one chunk, once."""
    legacy = Checkpoint(task_id="t", version=70, goal="old", messages=[_msg(i) for i in range(70)])
    _write_legacy(store, legacy)
    old_objects = store.chunk_keys("t")
    assert any("/index/" in key for key in old_objects)
    loaded = store.load("t")
    assert loaded is not None and loaded == legacy
    saved = _grow(store, loaded, 1)
    assert saved.version == 71
    assert not set(old_objects) - {store.head_key("t")} & set(store.chunk_keys("t"))
    assert len(_named(store, "t")) == 1 and _head(store, "t")["indexes"] == []
    saved = _grow(store, saved, 1)  # and from then on, an append of one chunk
    assert len(_named(store, "t")) == 2
    again = other.load("t")
    assert again is not None and again == saved


def test_delete_removes_every_object_and_is_idempotent(store: S3Store) -> None:
    _grow(store, store.save(Checkpoint(task_id="t", messages=[_msg(0)])), 70)
    store.delete("t")
    store.delete("t")
    assert store.chunk_keys("t") == []
    assert store.load("t") is None
    assert store.save(Checkpoint(task_id="t")).version == 1


def test_listing_filters_and_prefixes_isolate(store: S3Store, s3_endpoint: str) -> None:
    store.save(Checkpoint(task_id="b", metadata={"user": "ann"}))
    store.save(Checkpoint(task_id="a/x", metadata={"user": "bob"}, status="completed"))
    store.save(Checkpoint(task_id="c", metadata={"user": "ann"}, status="failed"))
    assert [s.task_id for s in store.list_checkpoints()] == ["a/x", "b", "c"]
    assert [s.task_id for s in store.list_checkpoints(status="completed")] == ["a/x"]
    assert [s.task_id for s in store.list_checkpoints(metadata={"user": "ann"})] == ["b", "c"]
    elsewhere = open_store(f"s3://{BUCKET}/t{uuid.uuid4().hex[:12]}?endpoint_url={s3_endpoint}")
    try:
        assert elsewhere.list_checkpoints() == []
        assert elsewhere.load("b") is None
    finally:
        elsewhere.close()


def test_info_reports_durable_and_incremental(store: S3Store) -> None:
    info = store.info()
    assert (info.backend, info.durable, info.incremental) == ("s3", True, True)
    assert info.ttl is None


@pytest.mark.parametrize("ttl", ["7d", "3600", "soon"])
def test_ttl_is_refused_explaining_how_to_remove_finished_checkpoints(ttl: str) -> None:
    # Refused from the URL alone: no server answers on this port.
    url = f"s3://{BUCKET}/x?endpoint_url=http://127.0.0.1:{free_port()}&ttl={ttl}"
    with pytest.raises(InvalidStoreURLError) as caught:
        open_store(url)
    message = str(caught.value)
    assert "do not support ttl" in message
    assert "until they are deleted" in message
    assert "lifecycle rule" in message
    assert "list_checkpoints(status='completed')" in message


def test_an_unknown_query_parameter_is_refused_not_ignored(store_url: str) -> None:
    # Ignored, a typo such as endpont_url= would send the checkpoints to AWS instead.
    with pytest.raises(InvalidStoreURLError, match=r"unknown parameter\(s\) endpont_url") as caught:
        open_store(f"{store_url}&endpont_url=http://127.0.0.1:1")
    assert "did you mean 'endpoint_url'" in str(caught.value)
    assert "supported: endpoint_url, region" in str(caught.value)


# -- errors ---------------------------------------------------------------------------------


def test_unreachable_endpoint_fails_fast_naming_the_url() -> None:
    url = f"s3://{BUCKET}/x?endpoint_url=http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError) as caught:
        open_store(url)
    assert time.monotonic() - started < 10
    message = str(caught.value)
    assert f"s3://{BUCKET}/x" in message
    assert "endpoint_url" in message


def test_missing_bucket_is_a_clear_error(s3_endpoint: str) -> None:
    url = f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/x?endpoint_url={s3_endpoint}"
    with pytest.raises(StoreUnavailableError, match=r"does not exist.*create it"):
        open_store(url)


def test_the_bucket_is_kept_as_written_not_lowercased(s3_endpoint: str) -> None:
    # urlsplit's hostname lowercases: s3://AGENTCKPT-TESTS opened the bucket agentckpt-tests.
    url = f"s3://{BUCKET.upper()}/t{uuid.uuid4().hex[:12]}?endpoint_url={s3_endpoint}"
    with pytest.raises(StoreUnavailableError, match="case-sensitive") as raised:
        open_store(url)
    assert repr(BUCKET.upper()) in str(raised.value)


def test_a_lowercase_bucket_and_a_prefix_still_open(store_url: str) -> None:
    opened = open_store(store_url)
    assert isinstance(opened, S3Store)
    assert (opened.bucket, opened.prefix) == (BUCKET, urlsplit(store_url).path.strip("/"))
    opened.close()


@pytest.mark.parametrize(
    ("netloc", "match"),
    [
        ("my%20bucket", "not a valid S3 bucket name"),
        ("bad!name", "not a valid S3 bucket name"),
        ("b" * 256, "not a valid S3 bucket name"),
        ("bucket:9000", "a bucket has no port"),
        ("key:hunter2-5ec4e7@bucket", "credentials before the bucket"),
    ],
)
def test_a_url_that_names_no_valid_bucket_is_refused(netloc: str, match: str) -> None:
    with pytest.raises(InvalidStoreURLError, match=match) as raised:
        open_store(f"s3://{netloc}/p?endpoint_url=http://127.0.0.1:1")
    assert "hunter2" not in str(raised.value)
