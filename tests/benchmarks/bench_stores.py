"""Checkpoint-store benchmark: saves, loads and bytes against the physical floor, in one run.

Not part of the test run (the file name does not match ``test_*.py``). Run it as::

    python -m tests.benchmarks.bench_stores
    python -m tests.benchmarks.bench_stores --backends sqlite,postgresql,redis

The workload is an agent run: each iteration appends an assistant ``tool_use`` and a user
``tool_result`` message of about 2 KB of random text each, then saves. Per backend, on a
private server of its own (so that other clients' traffic cannot pollute the byte
counts), every figure below is measured in the same process, and each ratio divides two
figures of the same run:

- **save p50/p99** of a save that brings a history to 10, 100, 1,000 and 5,000 messages
  (the long tasks are grown as a run grows them, a save per iteration), against the
  **one-row append**: a bare ``INSERT`` (``RPUSH``, ``PUT``) of the same new bytes in one
  transaction on the same backend, with the store's durability settings. The jobs of a
  round run in a shuffled order, so that the noise of a shared machine falls on every
  figure alike. The same rounds also time a save whose prefix check is *assumed*
  (skipped: unsound, for comparison only), to show what the check costs;
- **load p50** of a 1,000- and a 5,000-message checkpoint against a **one-blob read** of
  the same JSON (one row, key or object read, then one ``json.loads``), interleaved. The
  load is *cold*: by a store that holds no snapshot of the task, as after a restart, so
  it makes the snapshot it keeps for incremental saves. A *warm* load (the version this
  store has just loaded, as a resume in the same process) keeps the snapshot it holds
  and is printed below it;
- **bytes** over a 200-iteration run by the backend's own count (PostgreSQL WAL bytes,
  Redis ``total_net_input_bytes``, SQLite bytes written by ``write()`` calls, S3 request
  bytes) against the **append-only floor** (the same run writing only each iteration's
  new bytes, one append per iteration) and a full-snapshot baseline (the whole record
  upserted at each save, the common design in DESIGN.md);
- **peers**, when LangGraph is installed (``pip install -e '.[bench]'``; skipped with a
  note otherwise): LangGraph's ``PostgresSaver`` and ``SqliteSaver`` with the usual
  ``operator.add`` messages channel, and on PostgreSQL its ``DeltaChannel`` (a channel
  that stores only each step's writes plus a full snapshot every 100 updates, and
  rebuilds the value by replaying the writes), run as a graph whose one node appends an
  iteration per superstep, ``durability="sync"``. A peer's save is the time spent in the
  saver's ``put`` and ``put_writes`` for one superstep (serialisation included, graph
  overhead excluded); its load is ``graph.get_state``. Peers run after our rounds, not
  interleaved with them.

Targets (issue 14): save p50 at 1,000 messages within 2x the one-row append (SQLite,
PostgreSQL) and flat in the history length; load at 1,000 messages within 2x the
one-blob read on every backend, and ahead of DeltaChannel at 5,000 messages on
PostgreSQL; bytes within 1.2x of the append-only floor (PostgreSQL, Redis).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import functools
import itertools
import json
import operator
import os
import random
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypedDict

from stores import Checkpoint, CheckpointStore, open_store
from stores.codec import encode_messages
from stores.incremental import PrefixTracker, WritePlan

BACKENDS = ("sqlite", "postgresql", "redis", "s3-seaweedfs", "s3-moto")


# -- the workload ------------------------------------------------------------------------


def _payload(size: int) -> str:
    # Random text: a compressible payload would flatter full snapshots (TOAST, Redis
    # and S3 do not compress, PostgreSQL does) and hide the quadratic growth.
    return base64.b64encode(os.urandom(size * 3 // 4)).decode("ascii")[:size]


def iteration_messages(i: int, payload_size: int) -> list[dict[str, Any]]:
    """One model turn and its tool result (about ``payload_size`` bytes each)."""
    tool_id = f"toolu_{i:05d}_{uuid.uuid4().hex[:8]}"
    return [
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": tool_id,
                    "name": "write_file",
                    "input": {"path": f"notes/{i}.md", "content": _payload(payload_size)},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": tool_id, "content": _payload(payload_size)}
            ],
        },
    ]


def add_iteration(checkpoint: Checkpoint, i: int, payload_size: int) -> None:
    """Append one model turn and its tool result (about ``payload_size`` bytes each)."""
    checkpoint.messages.extend(iteration_messages(i, payload_size))
    checkpoint.iteration = i + 1


def _new_bytes(checkpoint: Checkpoint) -> bytes:
    """The last iteration's two messages as they are stored (the append floor's row)."""
    return b"\n".join(encode_messages(checkpoint.messages[-2:]))


class AssumingTracker(PrefixTracker):
    """The store's tracker, but with ``assume`` set it skips the prefix comparison.

    Unsound (an edit of an earlier message would be lost): it exists only so that the
    benchmark can show what the check costs.
    """

    assume = False

    def plan(self, checkpoint: Checkpoint, *, stored_lineage: str | None = None) -> WritePlan:
        known = self._known.get(checkpoint.task_id) if self.assume else None
        if (
            known is not None
            and checkpoint.version > 0
            and known.version == checkpoint.version
            and len(checkpoint.messages) >= len(known.messages)
        ):
            start = len(known.messages)
            encoded = encode_messages(checkpoint.messages[start:], start)
            return WritePlan(False, start, encoded, known.lineage)
        return super().plan(checkpoint, stored_lineage=stored_lineage)


# -- backends ----------------------------------------------------------------------------


@dataclass
class Bench:
    """One backend under test: the store URL and the backend's own instruments."""

    name: str
    url: str
    #: Bytes the backend has written (or received) so far, by its own count.
    meter: Callable[[], int]
    meter_name: str
    #: Upsert the whole record for ``task_id`` (the full-snapshot baseline).
    full_snapshot: Callable[[str, bytes], None]
    #: Append one row (key, object) holding ``data`` in one transaction: the floor.
    append: Callable[[str, bytes], None]
    #: Write and read one blob under a key (the one-blob read floor of a load).
    put_blob: Callable[[str, bytes], None]
    get_blob: Callable[[str], bytes]
    #: Called with each store opened, so that meters that hook a client can attach.
    attach: Callable[[CheckpointStore], None] = lambda store: None
    notes: list[str] = field(default_factory=list)
    #: The server's own URL, for LangGraph's PostgresSaver (None: no peer run).
    postgres_url: str | None = None
    sqlite_dir: Path | None = None


def _wchar() -> int:
    with open("/proc/self/io", encoding="ascii") as io:
        for line in io:
            if line.startswith("wchar:"):
                return int(line.split()[1])
    raise RuntimeError("/proc/self/io has no wchar line")


@contextlib.contextmanager
def sqlite_bench(workdir: Path) -> Iterator[Bench]:
    import sqlite3

    path = workdir / "bench.db"
    conn = sqlite3.connect(workdir / "baseline.db", isolation_level=None)
    conn.execute("PRAGMA page_size = 1024")  # as the store's files
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")  # as the store: every commit durable
    conn.execute("CREATE TABLE snapshots (task_id TEXT PRIMARY KEY, data BLOB NOT NULL)")
    conn.execute("CREATE TABLE appended (task_id TEXT NOT NULL, idx INTEGER NOT NULL, body BLOB)")
    conn.execute("CREATE TABLE blobs (k TEXT PRIMARY KEY, v BLOB NOT NULL)")
    counter = iter(range(10**9))

    def full(task_id: str, data: bytes) -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO snapshots (task_id, data) VALUES (?, ?)"
            " ON CONFLICT (task_id) DO UPDATE SET data = excluded.data",
            (task_id, data),
        )
        conn.execute("COMMIT")

    def append(task_id: str, data: bytes) -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO appended (task_id, idx, body) VALUES (?, ?, ?)",
            (task_id, next(counter), data),
        )
        conn.execute("COMMIT")

    def put_blob(key: str, data: bytes) -> None:
        conn.execute("INSERT OR REPLACE INTO blobs (k, v) VALUES (?, ?)", (key, data))

    def get_blob(key: str) -> bytes:
        row = conn.execute("SELECT v FROM blobs WHERE k = ?", (key,)).fetchone()
        return bytes(row[0])

    try:
        yield Bench(
            "sqlite",
            f"sqlite:///{path}",
            _wchar,
            "bytes written (write() calls, /proc/self/io wchar)",
            full,
            append,
            put_blob,
            get_blob,
            notes=["WAL mode, synchronous=FULL, 1 KiB pages, on this machine's disk"],
            sqlite_dir=workdir,
        )
    finally:
        conn.close()


@contextlib.contextmanager
def postgresql_bench(workdir: Path, url: str | None) -> Iterator[Bench]:
    import psycopg

    from pytest_agentckpt.services.postgres import PrivatePostgres

    server: PrivatePostgres | None = None
    notes = []
    if url is None:
        server = PrivatePostgres(workdir / "postgres")
        server.start()
        url = server.url
        notes.append("private server (fsync=on, synchronous_commit=on), WAL of this server only")
    else:
        notes.append("given server: its WAL counts every client's writes; no peers run")
    conn = psycopg.connect(url, autocommit=True)
    prefix = "bench" + uuid.uuid4().hex[:8] + "_"
    conn.execute(f"CREATE TABLE {prefix}snapshots (task_id text PRIMARY KEY, data jsonb NOT NULL)")
    conn.execute(
        f"CREATE TABLE {prefix}appended (task_id text NOT NULL, idx bigint NOT NULL,"  # type: ignore[arg-type]
        " body bytea NOT NULL, PRIMARY KEY (task_id, idx))"
        " WITH (toast_tuple_target = 8160)"  # as the store's messages table
    )
    conn.execute(f"CREATE TABLE {prefix}blobs (k text PRIMARY KEY, v bytea NOT NULL)")
    counter = iter(range(10**9))

    def meter() -> int:
        row = conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint").fetchone()
        assert row is not None
        return int(row[0])

    def full(task_id: str, data: bytes) -> None:
        conn.execute(
            f"INSERT INTO {prefix}snapshots (task_id, data) VALUES (%s, %s::jsonb)"  # type: ignore[arg-type]
            " ON CONFLICT (task_id) DO UPDATE SET data = EXCLUDED.data",
            (task_id, data.decode("utf-8")),
            prepare=True,
        )

    def append(task_id: str, data: bytes) -> None:
        conn.execute(
            f"INSERT INTO {prefix}appended (task_id, idx, body) VALUES (%s, %s, %s)",  # type: ignore[arg-type]
            (task_id, next(counter), data),
            prepare=True,
        )

    def put_blob(key: str, data: bytes) -> None:
        conn.execute(
            f"INSERT INTO {prefix}blobs (k, v) VALUES (%s, %s)"  # type: ignore[arg-type]
            " ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v",
            (key, data),
        )

    def get_blob(key: str) -> bytes:
        cur = conn.cursor(binary=True)
        row = cur.execute(
            f"SELECT v FROM {prefix}blobs WHERE k = %s",  # type: ignore[arg-type]
            (key,),
            prepare=True,
        ).fetchone()
        assert row is not None
        return bytes(row[0])

    try:
        yield Bench(
            "postgresql",
            f"{url}{'&' if '?' in url else '?'}table_prefix={prefix}",
            meter,
            "WAL bytes (pg_current_wal_lsn)",
            full,
            append,
            put_blob,
            get_blob,
            notes=notes,
            postgres_url=url if server is not None else None,
        )
    finally:
        with contextlib.suppress(psycopg.Error):
            for table in (
                "snapshots",
                "appended",
                "blobs",
                "checkpoints",
                "messages",
                "migrations",
            ):
                conn.execute(f"DROP TABLE IF EXISTS {prefix}{table}")  # type: ignore[arg-type]
        conn.close()
        if server is not None:
            server.remove()


@contextlib.contextmanager
def redis_bench(workdir: Path) -> Iterator[Bench]:
    import redis

    from pytest_agentckpt.services.redis import PrivateRedis

    server = PrivateRedis(workdir / "redis", appendonly=True)
    server.start()
    client = redis.Redis.from_url(server.url)

    def meter() -> int:
        return int(client.info("stats")["total_net_input_bytes"])

    def full(task_id: str, data: bytes) -> None:
        client.set(f"snapshot:{task_id}", data)

    def append(task_id: str, data: bytes) -> None:
        client.rpush(f"appended:{task_id}", data)

    def put_blob(key: str, data: bytes) -> None:
        client.set(f"blob:{key}", data)

    def get_blob(key: str) -> bytes:
        data = client.get(f"blob:{key}")
        assert isinstance(data, bytes)
        return data

    try:
        yield Bench(
            "redis",
            f"{server.url}?key_prefix=bench:",
            meter,
            "bytes received by the server (INFO total_net_input_bytes)",
            full,
            append,
            put_blob,
            get_blob,
            notes=["private server, appendonly yes, appendfsync always"],
        )
    finally:
        client.close()
        server.stop()


@contextlib.contextmanager
def s3_bench(workdir: Path, flavour: str) -> Iterator[Bench]:
    from pytest_agentckpt.services import s3

    server: Any
    server = s3.SeaweedFS(workdir / "seaweedfs") if flavour == "seaweedfs" else s3.MotoServer()
    server.start()
    endpoint = server.endpoint_url
    bucket = s3.ensure_bucket(endpoint, "agentckpt-bench")
    uploaded = [0]

    def count_upload(request: Any, **_: Any) -> None:
        length = request.headers.get("Content-Length")
        if length is not None:
            uploaded[0] += int(length)
        elif isinstance(request.body, bytes | bytearray):
            uploaded[0] += len(request.body)

    def attach(store: CheckpointStore) -> None:
        store.client.meta.events.register("before-send.s3", count_upload)  # type: ignore[attr-defined]

    client = s3.s3_client(endpoint)
    client.meta.events.register("before-send.s3", count_upload)
    counter = iter(range(10**9))

    def full(task_id: str, data: bytes) -> None:
        client.put_object(Bucket=bucket, Key=f"snapshots/{task_id}.json", Body=data)

    def append(task_id: str, data: bytes) -> None:
        client.put_object(Bucket=bucket, Key=f"appended/{task_id}/{next(counter)}", Body=data)

    def put_blob(key: str, data: bytes) -> None:
        client.put_object(Bucket=bucket, Key=f"blobs/{key}", Body=data)

    def get_blob(key: str) -> bytes:
        body: bytes = client.get_object(Bucket=bucket, Key=f"blobs/{key}")["Body"].read()
        return body

    try:
        yield Bench(
            f"s3-{flavour}",
            f"s3://{bucket}/bench-{uuid.uuid4().hex[:8]}?endpoint_url={endpoint}",
            lambda: uploaded[0],
            "request bytes uploaded (botocore hook)",
            full,
            append,
            put_blob,
            get_blob,
            attach=attach,
            notes=[f"{flavour} on loopback"],
        )
    finally:
        server.stop()


def open_bench(
    name: str, workdir: Path, postgres_url: str | None
) -> contextlib.AbstractContextManager[Bench]:
    if name == "sqlite":
        return sqlite_bench(workdir)
    if name == "postgresql":
        return postgresql_bench(workdir, postgres_url)
    if name == "redis":
        return redis_bench(workdir)
    if name in ("s3-seaweedfs", "s3-moto"):
        return s3_bench(workdir, name.split("-", 1)[1])
    raise ValueError(f"unknown backend {name!r}; choose from {', '.join(BACKENDS)}")


# -- measurements ------------------------------------------------------------------------


def percentile(samples: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``samples``, nearest-rank."""
    ordered = sorted(samples)
    if not ordered:
        return float("nan")
    rank = max(0, min(len(ordered) - 1, round(q * len(ordered) + 0.5) - 1))
    return ordered[rank]


def p50(samples: list[float]) -> float:
    return percentile(samples, 0.5)


@dataclass
class Peer:
    """A LangGraph saver's figures."""

    name: str
    messages: int
    save_ms: list[float] = field(default_factory=list)
    load_ms: list[float] = field(default_factory=list)
    bytes_run: int | None = None
    note: str = ""
    #: Our load of a history of the same length, interleaved with the peer's loads.
    ours_load_ms: list[float] = field(default_factory=list)


@dataclass
class Result:
    backend: str
    meter_name: str
    notes: list[str]
    bytes_incremental: int = 0
    bytes_floor: int = 0
    bytes_full: int = 0
    append_ms: list[float] = field(default_factory=list)
    saves: dict[int, list[float]] = field(default_factory=dict)
    assumed: dict[int, list[float]] = field(default_factory=dict)
    loads: dict[int, list[float]] = field(default_factory=dict)
    blob_reads: dict[int, list[float]] = field(default_factory=dict)
    #: Loads of the version the store has just loaded (its snapshot is kept).
    warm_loads: dict[int, list[float]] = field(default_factory=dict)
    first_save_after_load_ms: list[float] = field(default_factory=list)
    peers: list[Peer] = field(default_factory=list)
    peer_note: str = ""


def _read_blob(bench: Bench, key: str) -> Any:
    """The one-blob read: one read of the whole checkpoint's JSON, one ``json.loads``."""
    return json.loads(bench.get_blob(key).decode("utf-8"))


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = fn()
    return (time.perf_counter() - started) * 1000, value


def _grow(store: CheckpointStore, task: Checkpoint, iterations: int, payload: int) -> Checkpoint:
    """``iterations`` more iterations of a run, a save after each."""
    first = task.iteration
    for i in range(first, first + iterations):
        add_iteration(task, i, payload)
        task = store.save(task)
    return task


def measure(bench: Bench, args: argparse.Namespace) -> Result:
    result = Result(bench.name, bench.meter_name, bench.notes)
    store = open_store(bench.url)
    tracker = AssumingTracker()
    store._tracker = tracker  # type: ignore[attr-defined]
    bench.attach(store)
    try:
        # Warm up connections, prepared statements and caches on a throwaway task.
        warm = store.save(Checkpoint(task_id="warmup"))
        for i in range(5):
            add_iteration(warm, i, args.payload)
            warm = store.save(warm)
            bench.full_snapshot("warmup", warm.model_dump_json().encode())
            bench.append("warmup", _new_bytes(warm))

        # Bytes: one task, ``iterations`` iterations, a save after each; then the same
        # run appending only the new bytes (the floor) and upserting the whole record.
        before = bench.meter()
        checkpoint = store.save(Checkpoint(task_id="bytes-run", goal="benchmark"))
        for i in range(args.iterations):
            add_iteration(checkpoint, i, args.payload)
            checkpoint = store.save(checkpoint)
        result.bytes_incremental = bench.meter() - before
        before = bench.meter()
        for i in range(args.iterations):
            bench.append(
                "bytes-run-floor",
                b"\n".join(encode_messages(checkpoint.messages[2 * i : 2 * i + 2])),
            )
        result.bytes_floor = bench.meter() - before
        before = bench.meter()
        snapshot = Checkpoint(task_id="bytes-run-full", goal="benchmark")
        for i in range(args.iterations):
            add_iteration(snapshot, i, args.payload)
            bench.full_snapshot("bytes-run-full", snapshot.model_dump_json().encode())
        result.bytes_full = bench.meter() - before

        # Saves by history length, in interleaved rounds. Each round appends an
        # iteration to a fresh task of 10 and 100 messages, and twice to one long task
        # of about 1,000 and to the flat task of about 5,000 (once with the prefix check,
        # once with it assumed), and times a bare append of the same new bytes; in a
        # shuffled order.
        rounds, long_count = args.rounds, args.latency_tasks
        per_long = 2 * -(-rounds // long_count)  # iterations each long task gets in the rounds
        tasks = [
            store.save(Checkpoint(task_id=f"long-{t}", goal="benchmark")) for t in range(long_count)
        ]
        for t in range(long_count):
            tasks[t] = _grow(store, tasks[t], args.long_messages // 2 - per_long, args.payload)
        flat: Checkpoint | None = None
        if args.flat_messages:
            flat = store.save(Checkpoint(task_id="flat", goal="benchmark"))
            flat = _grow(store, flat, args.flat_messages // 2 - 2 * rounds, args.payload)
        sizes = [10, 100, args.long_messages] + ([args.flat_messages] if flat else [])
        result.saves = {size: [] for size in sizes}
        result.assumed = {size: [] for size in sizes[2:]}
        rng = random.Random(args.seed)

        def save_job(size: int, task_ref: list[Checkpoint], assume: bool) -> Callable[[], None]:
            def job() -> None:
                task = task_ref[0]
                add_iteration(task, task.iteration, args.payload)
                tracker.assume = assume
                try:
                    ms, task_ref[0] = _timed(lambda: store.save(task))
                finally:
                    tracker.assume = False
                (result.assumed if assume else result.saves)[size].append(ms)

            return job

        for r in range(rounds):
            jobs: list[Callable[[], None]] = []
            for size in (10, 100):
                task = Checkpoint(task_id=f"fresh-{size}-{r}", goal="benchmark")
                for i in range(size // 2 - 1):
                    add_iteration(task, i, args.payload)
                jobs.append(save_job(size, [store.save(task)], False))
            t = r % long_count
            long_ref = [tasks[t]]
            jobs += [save_job(args.long_messages, long_ref, a) for a in (False, True)]
            flat_ref = [flat] if flat else []
            if flat:
                jobs += [save_job(args.flat_messages, flat_ref, a) for a in (False, True)]  # type: ignore[list-item]
            new = _new_bytes(tasks[t])

            def bare(new: bytes = new) -> None:
                ms, _ = _timed(lambda: bench.append("bare", new))
                result.append_ms.append(ms)

            jobs.append(bare)
            rng.shuffle(jobs)
            for job in jobs:
                job()
            tasks[t] = long_ref[0]
            if flat_ref:
                flat = flat_ref[0]
            for size in (10, 100):
                store.delete(f"fresh-{size}-{r}")

        # Loads against a one-blob read of the same JSON, interleaved.
        targets = [(args.long_messages, task) for task in tasks]
        if flat is not None:
            targets.append((args.flat_messages, flat))
        for size, task in targets:
            bench.put_blob(task.task_id, task.model_dump_json().encode())
            result.loads.setdefault(size, [])
            result.blob_reads.setdefault(size, [])
        reader = open_store(bench.url)

        def cold(task_id: str) -> Callable[[], Any]:
            # A load by a store that holds no snapshot of the task, as after a restart:
            # it copies what it decodes. (Forgetting is outside the timed call.)
            reader._tracker.forget(task_id)  # type: ignore[attr-defined]
            return lambda: reader.load(task_id)

        try:
            for _ in range(args.loads):
                for size, task in targets:
                    # Cold, then warm (the version this store has just loaded, as a
                    # resume in the same process: the snapshot held is kept), with the
                    # one-blob read at a random place among them.
                    order = ["cold", "warm"]
                    order.insert(rng.randrange(3), "blob")
                    for name in order:
                        if name == "cold":
                            fn = cold(task.task_id)
                        elif name == "warm":
                            fn = functools.partial(reader.load, task.task_id)
                        else:
                            fn = functools.partial(_read_blob, bench, task.task_id)
                        ms, value = _timed(fn)
                        if name == "blob":
                            assert len(value["messages"]) == len(task.messages)
                            result.blob_reads[size].append(ms)
                        else:
                            assert value is not None and value.messages == task.messages
                            (result.loads if name == "cold" else result.warm_loads).setdefault(
                                size, []
                            ).append(ms)
            # The first save after a load pays for nothing more than any other (the
            # tracker's snapshot was made during the load): shown, not assumed.
            for t, task in enumerate(tasks):
                loaded = reader.load(task.task_id)
                assert loaded is not None
                add_iteration(loaded, loaded.iteration, args.payload)
                ms, tasks[t] = _timed(lambda loaded=loaded: reader.save(loaded))
                result.first_save_after_load_ms.append(ms)
            if args.peers:
                by_size = {size: task.task_id for size, task in targets}

                def ours(size: int) -> float | None:
                    if size not in by_size:
                        return None
                    ms, _ = _timed(cold(by_size[size]))
                    return ms

                run_peers(bench, args, result, ours)
        finally:
            reader.close()
    finally:
        store.close()
    return result


# -- LangGraph peers ---------------------------------------------------------------------


def _extend(state: list[Any], writes: list[list[Any]]) -> list[Any]:
    """DeltaChannel's reducer: append every write's messages (batching-invariant)."""
    merged = list(state)
    for write in writes:
        merged.extend(write)
    return merged


class _PlainState(TypedDict):
    messages: Annotated[list[Any], operator.add]
    i: int


def _delta_state() -> Any:
    from langgraph.channels.delta import DeltaChannel

    # The functional form: its annotations are evaluated here, where DeltaChannel is bound.
    return TypedDict(
        "_DeltaState", {"messages": Annotated[list[Any], DeltaChannel(_extend)], "i": int}
    )


class _SaverClock:
    """Wraps a saver's ``put`` and ``put_writes``: the time each superstep spends in them."""

    def __init__(self, saver: Any) -> None:
        self.calls: list[float] = []
        self.marks: list[int] = []
        for name in ("put", "put_writes"):
            method = getattr(saver, name)
            setattr(saver, name, self._wrap(method))

    def _wrap(self, method: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*a: Any, **k: Any) -> Any:
            started = time.perf_counter()
            try:
                return method(*a, **k)
            finally:
                self.calls.append((time.perf_counter() - started) * 1000)

        return timed

    def mark(self) -> None:
        """Called by the node at the start of each superstep."""
        self.marks.append(len(self.calls))

    def steps(self) -> list[float]:
        """Saver time per superstep (what was saved between two runs of the node)."""
        bounds = [*self.marks, len(self.calls)]
        return [sum(self.calls[a:b]) for a, b in itertools.pairwise(bounds)][1:]


def _graph(state: Any, saver: Any, clock: _SaverClock, until: int, payload: int) -> Any:
    from langgraph.graph import END, START, StateGraph

    def step(values: dict[str, Any]) -> dict[str, Any]:
        clock.mark()
        return {"messages": iteration_messages(values["i"], payload), "i": values["i"] + 1}

    graph = StateGraph(state)
    graph.add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", lambda values: END if values["i"] >= until else "step")
    return graph.compile(checkpointer=saver)


def _peer_run(
    saver: Any,
    state: Any,
    name: str,
    messages: int,
    args: argparse.Namespace,
    *,
    grow: bool,
    meter: Callable[[], int] | None,
    ours: Callable[[int], float | None],
) -> Peer:
    """One peer: bytes over ``args.iterations`` iterations, saves up to ``messages``, loads.

    ``grow``: the history is grown as a run grows it (DeltaChannel's cost depends on the
    writes since its last snapshot); else it starts with all but the last window of
    iterations in one input (a full-snapshot saver's cost depends on the size only).
    """
    peer = Peer(name, messages)
    clock = _SaverClock(saver)
    thread = uuid.uuid4().hex[:8]
    limit = {"recursion_limit": messages + 100}
    if meter is not None:
        graph = _graph(state, saver, clock, args.iterations, args.payload)
        before = meter()
        config = {"configurable": {"thread_id": f"{name}-bytes-{thread}"}, **limit}
        graph.invoke({"messages": [], "i": 0}, config, durability="sync")
        peer.bytes_run = meter() - before
    window = args.peer_window
    iterations = messages // 2
    start = 0 if grow else iterations - window
    initial: list[Any] = []
    for i in range(start):
        initial.extend(iteration_messages(i, args.payload))
    clock.calls.clear()
    clock.marks.clear()
    graph = _graph(state, saver, clock, iterations, args.payload)
    config = {"configurable": {"thread_id": f"{name}-{thread}"}, **limit}
    graph.invoke({"messages": initial, "i": start}, config, durability="sync")
    peer.save_ms = clock.steps()[-window:]
    rng = random.Random(args.seed)
    for _ in range(args.peer_loads):
        order = [True, False]
        rng.shuffle(order)
        for theirs in order:
            if theirs:
                ms, got = _timed(lambda: graph.get_state(config))
                assert len(got.values["messages"]) == messages, len(got.values["messages"])
                peer.load_ms.append(ms)
            elif (mine := ours(messages)) is not None:
                peer.ours_load_ms.append(mine)
    if not grow:
        peer.note = f"started from {2 * start} messages in one input"
    return peer


def run_peers(
    bench: Bench,
    args: argparse.Namespace,
    result: Result,
    ours: Callable[[int], float | None],
) -> None:
    """LangGraph's savers on ``bench``'s server; ``ours`` times our load of a length."""
    try:
        import langgraph  # noqa: F401
    except ImportError:
        result.peer_note = "LangGraph not installed (pip install -e '.[bench]'): peers skipped"
        return
    if bench.name == "postgresql":
        if bench.postgres_url is None:
            result.peer_note = "peers need the private server: skipped"
            return
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(bench.postgres_url) as saver:
            saver.setup()
            result.peers.append(
                _peer_run(
                    saver,
                    _PlainState,
                    "LangGraph PostgresSaver",
                    args.long_messages,
                    args,
                    grow=False,
                    meter=bench.meter,
                    ours=ours,
                )
            )
        if args.flat_messages:
            with PostgresSaver.from_conn_string(bench.postgres_url) as saver:
                result.peers.append(
                    _peer_run(
                        saver,
                        _delta_state(),
                        "LangGraph DeltaChannel (PostgresSaver)",
                        args.flat_messages,
                        args,
                        grow=True,
                        meter=bench.meter,
                        ours=ours,
                    )
                )
    elif bench.name == "sqlite" and bench.sqlite_dir is not None:
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(bench.sqlite_dir / "langgraph.db", check_same_thread=False)
        try:
            saver = SqliteSaver(conn)
            saver.setup()
            conn.execute("PRAGMA synchronous = FULL")
            result.peers.append(
                _peer_run(
                    saver,
                    _PlainState,
                    "LangGraph SqliteSaver",
                    args.long_messages,
                    args,
                    grow=False,
                    meter=bench.meter,
                    ours=ours,
                )
            )
        finally:
            conn.close()


# -- report ------------------------------------------------------------------------------


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB"


def _pp(samples: list[float]) -> str:
    if not samples:
        return "n/a"
    return f"{p50(samples):.2f} / {percentile(samples, 0.99):.2f} ms (n={len(samples)})"


def _verdict(ratio: float, target: float) -> str:
    return f"{ratio:.2f}x ({'meets' if ratio <= target else 'MISSES'} {target:g}x)"


def report(result: Result, args: argparse.Namespace) -> str:
    out = [f"== {result.backend}  ({'; '.join(result.notes)})"]
    bare = p50(result.append_ms)
    out.append(f"  one-row append of the new bytes   p50/p99 {_pp(result.append_ms)}")
    for size, samples in result.saves.items():
        ratio = p50(samples) / bare
        out.append(
            f"  save at {size:>5} messages          p50/p99 {_pp(samples)}  "
            f"save/append {_verdict(ratio, 2) if size == args.long_messages else f'{ratio:.2f}x'}"
        )
    for size, samples in result.assumed.items():
        out.append(
            f"  same, prefix ASSUMED (unsound) at {size:>5}: p50 {p50(samples):.2f} ms, "
            f"{p50(samples) / bare:.2f}x the append; the check costs "
            f"{p50(result.saves[size]) - p50(samples):+.3f} ms at p50"
        )
    if result.first_save_after_load_ms:
        out.append(
            f"  first save after a load at ~{args.long_messages} messages: p50 "
            f"{p50(result.first_save_after_load_ms):.2f} ms (n={len(result.first_save_after_load_ms)})"
        )
    for size, samples in result.loads.items():
        blob = p50(result.blob_reads[size])
        out.append(
            f"  load at {size:>5} messages          p50/p99 {_pp(samples)}  one-blob read "
            f"{blob:.2f} ms  load/blob {_verdict(p50(samples) / blob, 2) if size == args.long_messages else f'{p50(samples) / blob:.2f}x'}"
        )
        warm = result.warm_loads.get(size)
        if warm:
            out.append(
                f"    (the same version loaded again by the same store, snapshot kept: p50 "
                f"{p50(warm):.2f} ms, {p50(warm) / blob:.2f}x)"
            )
    out.append(f"  bytes ({result.meter_name}), {args.iterations} iterations:")
    floor = result.bytes_floor or 1
    out.append(
        f"    ours {_mb(result.bytes_incremental)}, append-only floor {_mb(result.bytes_floor)}: "
        f"ours/floor {_verdict(result.bytes_incremental / floor, 1.2)}; full snapshots "
        f"{_mb(result.bytes_full)} ({result.bytes_full / max(1, result.bytes_incremental):.1f}x ours)"
    )
    if result.peer_note:
        out.append(f"  peers: {result.peer_note}")
    for peer in result.peers:
        ours_save = result.saves.get(peer.messages) or result.saves[args.long_messages]
        ours_load = peer.ours_load_ms or result.loads.get(peer.messages) or []
        line = (
            f"  peer {peer.name} at {peer.messages} messages: save p50/p99 {_pp(peer.save_ms)} "
            f"({p50(peer.save_ms) / bare:.2f}x the append, {p50(peer.save_ms) / p50(ours_save):.1f}x ours); "
            f"load (get_state) p50 {p50(peer.load_ms):.2f} ms"
        )
        if ours_load:
            line += f", ours {p50(ours_load):.2f} ms interleaved, ours/peer {p50(ours_load) / p50(peer.load_ms):.2f}x"
            line += " (ours ahead)" if p50(ours_load) < p50(peer.load_ms) else " (PEER AHEAD)"
        if peer.bytes_run is not None:
            line += (
                f"; bytes over {args.iterations} iterations {_mb(peer.bytes_run)} "
                f"({peer.bytes_run / max(1, result.bytes_incremental):.0f}x ours)"
            )
        if peer.note:
            line += f"; {peer.note}"
        out.append(line)
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.benchmarks.bench_stores", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--backends",
        default=",".join(BACKENDS),
        help=f"comma-separated, from {', '.join(BACKENDS)}",
    )
    parser.add_argument(
        "--iterations", type=int, default=200, help="iterations of the bytes run (default 200)"
    )
    parser.add_argument(
        "--payload", type=int, default=2048, help="bytes of random text per message (default 2048)"
    )
    parser.add_argument(
        "--latency-tasks", type=int, default=4, help="long tasks interleaved in the rounds"
    )
    parser.add_argument(
        "--long-messages", type=int, default=1000, help="messages of the long tasks (default 1000)"
    )
    parser.add_argument(
        "--flat-messages",
        type=int,
        default=5000,
        help="messages of the flat-history task (default 5000; 0 to skip)",
    )
    parser.add_argument("--rounds", type=int, default=100, help="save rounds (default 100)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the order within rounds")
    parser.add_argument("--loads", type=int, default=10, help="load rounds (default 10)")
    parser.add_argument(
        "--no-peers", dest="peers", action="store_false", help="skip the LangGraph peers"
    )
    parser.add_argument(
        "--peer-window", type=int, default=50, help="peer supersteps measured (the last ones)"
    )
    parser.add_argument("--peer-loads", type=int, default=10, help="peer loads (default 10)")
    parser.add_argument(
        "--full-s3",
        action="store_true",
        help="on S3 too, the 5,000-message task (growing it takes a minute or more per server)",
    )
    parser.add_argument(
        "--postgres-url",
        default=None,
        help="use this server instead of a private one (its WAL counts every client)",
    )
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.backends.split(",") if n.strip()]
    unknown = sorted(set(names) - set(BACKENDS))
    if unknown:
        parser.error(f"unknown backend(s) {unknown}; choose from {', '.join(BACKENDS)}")
    if args.flat_messages and args.flat_messages // 2 <= 2 * args.rounds:
        parser.error("--flat-messages must exceed 4 x --rounds (the rounds append to it)")

    print(
        f"pytest-agentckpt store benchmark: iterations of 2 messages x {args.payload} B random "
        f"text, a save after each; {args.rounds} save rounds, {args.latency_tasks} tasks of "
        f"{args.long_messages} messages and one of {args.flat_messages}; medians of interleaved "
        f"repetitions; python {sys.version.split()[0]}, {os.cpu_count()} CPUs",
        flush=True,
    )
    failures = 0
    workdir = Path(tempfile.mkdtemp(prefix="agentckpt-bench-"))
    try:
        for name in names:
            started = time.monotonic()
            (workdir / name).mkdir()
            run_args = argparse.Namespace(**vars(args))
            if name.startswith("s3") and not args.full_s3 and args.flat_messages:
                # Growing the 5,000-message task is 2,500 saves of two requests each:
                # a minute or more per server. Skipped here unless asked (--full-s3).
                run_args.flat_messages = 0
                print(f"== {name}: no 5,000-message task (--full-s3 for it)", flush=True)
            try:
                with open_bench(name, workdir / name, args.postgres_url) as bench:
                    result = measure(bench, run_args)
            except Exception as exc:  # one backend's failure must not hide the others
                failures += 1
                print(f"== {name}: not measured: {type(exc).__name__}: {exc}", flush=True)
                continue
            print(report(result, run_args), flush=True)
            print(f"  ({time.monotonic() - started:.0f} s)", flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
