"""Checkpoint-store benchmark: incremental saves against full snapshots and a bare write.

Not part of the test run (the file name does not match ``test_*.py``). Run it as::

    python -m tests.benchmarks.bench_stores
    python -m tests.benchmarks.bench_stores --backends sqlite,postgresql --iterations 200

Per backend, on a private server of its own (so that other clients' traffic cannot
pollute the byte counts), it measures:

- **bytes**: a 200-iteration run (each iteration appends an assistant ``tool_use`` and a
  user ``tool_result`` message of about 2 KB, then saves), counted by the backend itself:
  PostgreSQL WAL bytes (``pg_current_wal_lsn()``), Redis ``total_net_input_bytes``, S3
  request bytes uploaded (a botocore hook), SQLite bytes written by ``write()`` calls
  (``wchar`` of ``/proc/self/io``: WAL frames and checkpoints into the database file);
  the same run with a full-snapshot baseline that upserts the whole record each time (the
  common design in DESIGN.md), on the same server, in the same process;
- **save latency** p50/p99 of a save that brings a history to 10, 100 and about 1,000
  messages (the long tasks are grown as a run grows them, a save per iteration, and end
  at 1,000), measured in interleaved rounds together with the bare write, so that the
  noise of a shared machine falls on every figure alike;
- **load latency** p50/p99 of a 1,000-message checkpoint;
- **bare round trip**: p50/p99 of a trivial one-row write on the same backend.

Targets (issue 2): at least 50x fewer bytes than full snapshots at 200 iterations; save
p50 within 2x of the bare round trip; p99 within 3x of p50.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import functools
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
from typing import Any

from stores import Checkpoint, CheckpointStore, open_store

BACKENDS = ("sqlite", "postgresql", "redis", "s3-seaweedfs", "s3-moto")


# -- the workload ------------------------------------------------------------------------


def _payload(size: int) -> str:
    # Random text: a compressible payload would flatter full snapshots (TOAST, Redis
    # and S3 do not compress, PostgreSQL does) and hide the quadratic growth.
    return base64.b64encode(os.urandom(size * 3 // 4)).decode("ascii")[:size]


def add_iteration(checkpoint: Checkpoint, i: int, payload_size: int) -> None:
    """Append one model turn and its tool result (about ``payload_size`` bytes each)."""
    tool_id = f"toolu_{i:05d}_{uuid.uuid4().hex[:8]}"
    checkpoint.messages.append(
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
        }
    )
    checkpoint.messages.append(
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": tool_id, "content": _payload(payload_size)}
            ],
        }
    )
    checkpoint.iteration = i + 1


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
    #: A trivial one-row write.
    bare_write: Callable[[], None]
    #: Called with each store opened, so that meters that hook a client can attach.
    attach: Callable[[CheckpointStore], None] = lambda store: None
    notes: list[str] = field(default_factory=list)


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
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")  # as the store: every commit durable
    conn.execute("CREATE TABLE snapshots (task_id TEXT PRIMARY KEY, data BLOB NOT NULL)")
    conn.execute("CREATE TABLE bare (k INTEGER PRIMARY KEY, v INTEGER NOT NULL)")
    counter = iter(range(10**9))

    def full(task_id: str, data: bytes) -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO snapshots (task_id, data) VALUES (?, ?)"
            " ON CONFLICT (task_id) DO UPDATE SET data = excluded.data",
            (task_id, data),
        )
        conn.execute("COMMIT")

    def bare() -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO bare (k, v) VALUES (1, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
            (next(counter),),
        )
        conn.execute("COMMIT")

    try:
        yield Bench(
            "sqlite",
            f"sqlite:///{path}",
            _wchar,
            "bytes written (write() calls, /proc/self/io wchar)",
            full,
            bare,
            notes=["WAL mode, synchronous=FULL, on this machine's disk"],
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
        notes.append("given server: its WAL counts every client's writes")
    conn = psycopg.connect(url, autocommit=True)
    prefix = "bench" + uuid.uuid4().hex[:8] + "_"
    conn.execute(f"CREATE TABLE {prefix}snapshots (task_id text PRIMARY KEY, data jsonb NOT NULL)")
    conn.execute(f"CREATE TABLE {prefix}bare (k integer PRIMARY KEY, v bigint NOT NULL)")
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

    def bare() -> None:
        conn.execute(
            f"INSERT INTO {prefix}bare (k, v) VALUES (1, %s)"  # type: ignore[arg-type]
            " ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v",
            (next(counter),),
            prepare=True,
        )

    try:
        yield Bench(
            "postgresql",
            f"{url}{'&' if '?' in url else '?'}table_prefix={prefix}",
            meter,
            "WAL bytes (pg_current_wal_lsn)",
            full,
            bare,
            notes=notes,
        )
    finally:
        with contextlib.suppress(psycopg.Error):
            for table in ("snapshots", "bare", "checkpoints", "messages", "migrations"):
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
    counter = iter(range(10**9))

    def meter() -> int:
        return int(client.info("stats")["total_net_input_bytes"])

    def full(task_id: str, data: bytes) -> None:
        client.set(f"snapshot:{task_id}", data)

    def bare() -> None:
        client.set("bare", next(counter))

    try:
        yield Bench(
            "redis",
            f"{server.url}?key_prefix=bench:",
            meter,
            "bytes received by the server (INFO total_net_input_bytes)",
            full,
            bare,
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

    def bare() -> None:
        client.put_object(Bucket=bucket, Key="bare", Body=str(next(counter)).encode())

    try:
        yield Bench(
            f"s3-{flavour}",
            f"s3://{bucket}/bench-{uuid.uuid4().hex[:8]}?endpoint_url={endpoint}",
            lambda: uploaded[0],
            "request bytes uploaded (botocore hook)",
            full,
            bare,
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


@dataclass
class Result:
    backend: str
    meter_name: str
    notes: list[str]
    bytes_incremental: int = 0
    bytes_full: int = 0
    bare_ms: list[float] = field(default_factory=list)
    windows: dict[int, list[float]] = field(default_factory=dict)
    full_windows: dict[int, list[float]] = field(default_factory=dict)
    load_ms: list[float] = field(default_factory=list)
    run_save_ms: list[float] = field(default_factory=list)
    full_run_ms: list[float] = field(default_factory=list)
    load_messages: int = 0


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = fn()
    return (time.perf_counter() - started) * 1000, value


def measure(bench: Bench, args: argparse.Namespace) -> Result:
    result = Result(bench.name, bench.meter_name, bench.notes)
    store = open_store(bench.url)
    bench.attach(store)
    try:
        # Warm up connections, prepared statements and caches on a throwaway task.
        warm = store.save(Checkpoint(task_id="warmup"))
        for i in range(5):
            add_iteration(warm, i, args.payload)
            warm = store.save(warm)
            bench.full_snapshot("warmup", warm.model_dump_json().encode())
            bench.bare_write()

        # Bytes: one task, ``iterations`` iterations, a save after each.
        before = bench.meter()
        checkpoint = store.save(Checkpoint(task_id="bytes-run", goal="benchmark"))
        for i in range(args.iterations):
            add_iteration(checkpoint, i, args.payload)
            ms, checkpoint = _timed(lambda cp=checkpoint: store.save(cp))
            result.run_save_ms.append(ms)
        result.bytes_incremental = bench.meter() - before

        before = bench.meter()
        snapshot = Checkpoint(task_id="bytes-run-full", goal="benchmark")
        for i in range(args.iterations):
            add_iteration(snapshot, i, args.payload)
            data = snapshot.model_dump_json().encode()
            ms, _ = _timed(lambda data=data: bench.full_snapshot("bytes-run-full", data))
            result.full_run_ms.append(ms)
        result.bytes_full = bench.meter() - before

        # Latency by history length, in interleaved rounds so that the noise of a shared
        # machine falls on every size alike. Each round times, in a shuffled order: a
        # save that brings a fresh task to 10 messages, one that brings a fresh task to
        # 100, an append to one of the long tasks (which end at 1,000 messages), and a
        # bare one-row write.
        rounds, long_count = args.rounds, args.latency_tasks
        appends_each = -(-rounds // long_count)
        tasks = [
            store.save(Checkpoint(task_id=f"long-{t}", goal="benchmark")) for t in range(long_count)
        ]
        grown = args.long_messages // 2 - appends_each
        for i in range(grown):  # grown as a run grows them: a save per iteration
            for t, task in enumerate(tasks):
                add_iteration(task, i, args.payload)
                tasks[t] = store.save(task)
        result.windows = {10: [], 100: [], args.long_messages: []}
        rng = random.Random(args.seed)
        for r in range(rounds):
            fresh: dict[int, Checkpoint] = {}
            for size in (10, 100):
                task = Checkpoint(task_id=f"fresh-{size}-{r}", goal="benchmark")
                for i in range(size // 2 - 1):
                    add_iteration(task, i, args.payload)
                task = store.save(task)  # unmeasured: the history before the last turn
                add_iteration(task, size // 2, args.payload)
                fresh[size] = task
            t = r % long_count
            add_iteration(tasks[t], grown + r // long_count, args.payload)
            jobs: list[tuple[str, Callable[[], Any]]] = [
                ("10", functools.partial(store.save, fresh[10])),
                ("100", functools.partial(store.save, fresh[100])),
                ("long", functools.partial(store.save, tasks[t])),
                ("bare", bench.bare_write),
            ]
            rng.shuffle(jobs)
            for name, job in jobs:
                ms, value = _timed(job)
                if name == "bare":
                    result.bare_ms.append(ms)
                elif name == "long":
                    tasks[t] = value
                    result.windows[args.long_messages].append(ms)
                else:
                    result.windows[int(name)].append(ms)
            for size in (10, 100):
                store.delete(f"fresh-{size}-{r}")

        # Load latency of the longest histories.
        result.load_messages = len(tasks[0].messages)
        reader = open_store(bench.url)
        try:
            for _ in range(args.loads):
                for task in tasks:
                    ms, loaded = _timed(lambda task=task: reader.load(task.task_id))
                    assert loaded is not None and loaded.messages == task.messages
                    result.load_ms.append(ms)
        finally:
            reader.close()
    finally:
        store.close()
    return result


# -- report ------------------------------------------------------------------------------


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB"


def _pp(samples: list[float]) -> str:
    if not samples:
        return "n/a"
    return f"{percentile(samples, 0.5):.2f} / {percentile(samples, 0.99):.2f} ms (n={len(samples)})"


def report(result: Result, args: argparse.Namespace) -> str:
    lines = [f"== {result.backend}  ({'; '.join(result.notes)})"]
    ratio = (
        result.bytes_full / result.bytes_incremental if result.bytes_incremental else float("inf")
    )
    ok = "meets" if ratio >= 50 else "MISSES"
    lines.append(f"  measure: {result.meter_name}")
    lines.append(
        f"  bytes over {args.iterations} iterations: incremental {_mb(result.bytes_incremental)}, "
        f"full snapshots {_mb(result.bytes_full)}, ratio {ratio:.1f}x ({ok} the 50x target)"
    )
    bare50 = percentile(result.bare_ms, 0.5)
    lines.append(f"  bare one-row write          p50/p99 {_pp(result.bare_ms)}")
    lines.append(f"  save, {args.iterations}-iteration run       p50/p99 {_pp(result.run_save_ms)}")
    lines.append(f"  full snapshot, same run     p50/p99 {_pp(result.full_run_ms)}")
    for label, samples in result.windows.items():
        if not samples:
            continue
        p50, p99 = percentile(samples, 0.5), percentile(samples, 0.99)
        verdict_bare = "ok" if p50 <= 2 * bare50 else "over 2x"
        verdict_tail = "ok" if p99 <= 3 * p50 else "over 3x"
        lines.append(
            f"  save at {label:>4} messages    p50/p99 {_pp(samples)}  "
            f"p50/bare {p50 / bare50:.2f}x ({verdict_bare}), p99/p50 {p99 / p50:.2f}x ({verdict_tail})"
        )
    lines.append(f"  load at {result.load_messages} messages      p50/p99 {_pp(result.load_ms)}")
    return "\n".join(lines)


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
        "--latency-tasks", type=int, default=4, help="tasks interleaved in the latency run"
    )
    parser.add_argument(
        "--long-messages",
        type=int,
        default=1000,
        help="messages of the long tasks at the end (default 1000)",
    )
    parser.add_argument("--rounds", type=int, default=100, help="latency rounds (default 100)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the order within rounds")
    parser.add_argument("--loads", type=int, default=10, help="loads per latency task at the end")
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

    print(
        f"pytest-agentckpt store benchmark: {args.iterations} iterations x 2 messages of "
        f"{args.payload} B random text, save after each; latency: {args.rounds} rounds, "
        f"{args.latency_tasks} long tasks ending at {args.long_messages} messages; python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs",
        flush=True,
    )
    failures = 0
    workdir = Path(tempfile.mkdtemp(prefix="agentckpt-bench-"))
    try:
        for name in names:
            started = time.monotonic()
            (workdir / name).mkdir()
            try:
                with open_bench(name, workdir / name, args.postgres_url) as bench:
                    result = measure(bench, args)
            except Exception as exc:  # one backend's failure must not hide the others
                failures += 1
                print(f"== {name}: not measured: {type(exc).__name__}: {exc}", flush=True)
                continue
            print(report(result, args), flush=True)
            print(f"  ({time.monotonic() - started:.0f} s)", flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
