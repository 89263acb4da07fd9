"""Certification touches only what it wrote: a store holding a user's tasks is refused.

Each test seeds a store with a user's task first (a SQLite file in a project directory,
a PostgreSQL table prefix, a Redis key prefix of the test's own), runs certification
through the CLI and through pytest, and checks the user's data byte for byte afterwards.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_agentckpt.certify import (
    CONTRACTS,
    CertifyContext,
    StoreFactory,
    StoreNotEmptyError,
    certify,
)
from pytest_agentckpt.certify.context import QUICK
from pytest_agentckpt.certify.factory import is_certify_task, new_run_id
from pytest_agentckpt.fixtures.backends import purge_namespace
from stores import Checkpoint, open_store
from stores.memory import MemoryStore

REPO = Path(__file__).resolve().parents[2]
USER_TASK = "invoice-42"
#: A few contracts that write, race and kill processes: enough to show what a run leaves.
SOME = "round_trip,lost_update_processes,atomic_under_kill,corruption_reported,listing"


def _user_checkpoint() -> Checkpoint:
    return Checkpoint(
        task_id=USER_TASK, goal="pay the supplier's invoice",
        messages=[{"role": "user", "content": "pay invoice 42 ✓"},
                  {"role": "assistant", "content": [{"type": "text", "text": "on it"}]}],
        metadata={"user": "alice"},
    )


@dataclass
class Seeded:
    """A store holding the user's task, and a way to read its raw bytes."""

    url: str
    cwd: Path
    snapshot: Callable[[], Any]


def _sqlite_snapshot(path: Path) -> Callable[[], Any]:
    def snapshot() -> Any:
        conn = sqlite3.connect(path)
        try:
            tables = {t: conn.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall()
                      for t in ("checkpoints", "messages")}
        finally:
            conn.close()
        return hashlib.sha256(path.read_bytes()).hexdigest(), tables

    return snapshot


def _postgres_snapshot(base: str, prefix: str) -> Callable[[], Any]:
    import psycopg

    def snapshot() -> Any:
        with psycopg.connect(base) as conn:
            return {t: conn.execute(f'SELECT * FROM "{prefix}{t}" ORDER BY 1').fetchall()
                    for t in ("checkpoints", "messages")}

    return snapshot


def _redis_snapshot(base: str, prefix: str) -> Callable[[], Any]:
    import redis

    def snapshot() -> Any:
        client = redis.Redis.from_url(base)
        try:
            return {key: client.dump(key) for key in sorted(client.scan_iter(match=prefix + "*"))}
        finally:
            client.close()

    return snapshot


def _with(url: str, param: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{param}"


@pytest.fixture(params=["sqlite", "postgresql", "redis"])
def seeded(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Seeded]:
    """The user's task in the default SQLite file of a project, or a prefix of the test's own."""
    name = "u" + uuid.uuid4().hex[:10]
    project = tmp_path / "project"
    project.mkdir()
    if request.param == "sqlite":
        url = "sqlite:///.agentckpt/checkpoints.db"  # relative: the project's default store
        cleanup: Callable[[], None] = lambda: None  # noqa: E731
    elif request.param == "postgresql":
        base = request.getfixturevalue("agentckpt_postgres_url")
        url = _with(base, f"table_prefix={name}_")
        cleanup = lambda: purge_namespace(url)  # noqa: E731
    else:
        base = request.getfixturevalue("agentckpt_redis_url")
        url = _with(base, f"key_prefix={name}:")
        cleanup = lambda: purge_namespace(url)  # noqa: E731
    cwd = Path.cwd()
    os.chdir(project)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the shared Redis runs without AOF
            store = open_store(url)
        store.save(_user_checkpoint())
        store.close()
    finally:
        os.chdir(cwd)
    if request.param == "sqlite":
        snapshot = _sqlite_snapshot(project / ".agentckpt" / "checkpoints.db")
    elif request.param == "postgresql":
        snapshot = _postgres_snapshot(base, f"{name}_")
    else:
        snapshot = _redis_snapshot(base, f"{name}:")
    try:
        yield Seeded(url, project, snapshot)
    finally:
        cleanup()


def _env(url: str) -> dict[str, str]:
    env = {**os.environ, "USER_STORE_URL": url, "AGENTCKPT_STORE_URL": url,
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    env.pop("CI", None)
    return env


def _cli(seeded: Seeded, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_agentckpt.cli", "certify", *args],
        cwd=seeded.cwd, env=_env(seeded.url), capture_output=True, text=True, timeout=300,
        check=False,
    )


def _pytest(seeded: Seeded, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-rfs",
         "--rootdir", str(seeded.cwd), "-c", os.devnull, *args],
        cwd=seeded.cwd, env=_env(seeded.url), capture_output=True, text=True, timeout=300,
        check=False,
    )


def _user_task_intact(seeded: Seeded, before: Any) -> None:
    assert seeded.snapshot() == before  # byte for byte
    cwd = Path.cwd()
    os.chdir(seeded.cwd)
    try:
        store = open_store(seeded.url)
        try:
            loaded = store.load(USER_TASK)
            listed = [s.task_id for s in store.list_checkpoints()]
        finally:
            store.close()
    finally:
        os.chdir(cwd)
    assert loaded is not None
    assert loaded.model_dump(exclude={"version", "created_at", "updated_at"}) == \
        _user_checkpoint().model_dump(exclude={"version", "created_at", "updated_at"})
    assert listed == [USER_TASK]


@pytest.mark.filterwarnings("ignore::UserWarning")  # the shared Redis runs without AOF
@pytest.mark.parametrize("factory", ["stores:open_store", "tests.certify.user_stores:make",
                                     "tests.certify.user_stores:make_ignoring_namespace"])
def test_cli_refuses_a_store_holding_a_users_task_with_exit_2_and_touches_nothing(
    seeded: Seeded, factory: str
) -> None:
    before = seeded.snapshot()
    result = _cli(seeded, factory, "--quick")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "already holds checkpoints certification did not write ('invoice-42')" in result.stderr
    for how in ("a fresh SQLite file", "table_prefix", "key_prefix", "an S3 prefix", "--scratch"):
        assert how in result.stderr
    # A factory that takes a namespace was given a new one: the store ignores it.
    ignores = "list_checkpoints() ignores the namespace" in result.stderr
    assert ignores == factory.endswith("make_ignoring_namespace"), result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""  # no report: nothing ran
    _user_task_intact(seeded, before)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_pytest_option_refuses_a_store_holding_a_users_task_as_a_usage_error(seeded: Seeded) -> None:
    before = seeded.snapshot()
    result = _pytest(seeded, "--agentckpt-certify", "tests.certify.user_stores:make",
                     "--agentckpt-certify-quick")
    assert result.returncode == 4, result.stdout + result.stderr  # pytest's usage-error status
    assert "already holds checkpoints certification did not write ('invoice-42')" in result.stderr
    assert "--agentckpt-certify-scratch" in result.stderr
    _user_task_intact(seeded, before)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_importable_test_fails_every_contract_on_a_store_holding_a_users_task(seeded: Seeded) -> None:
    (seeded.cwd / "test_my_store.py").write_text(
        "import pytest\n"
        "from pytest_agentckpt.fixtures.certify import test_checkpoint_store_contract  # noqa\n"
        "@pytest.fixture(scope='session')\n"
        "def certify_store_factory():\n"
        "    return 'tests.certify.user_stores:make_ignoring_namespace'\n"
    )
    before = seeded.snapshot()
    result = _pytest(seeded, "--agentckpt-certify-quick", "test_my_store.py")
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{len(CONTRACTS)} failed" in result.stdout
    # The refusal is said once, in full; the other contracts point to it in a line.
    assert result.stdout.count("certify_store_scratch fixture returning True") == 1, result.stdout
    assert result.stdout.count("not run, for the reason given in full at") == len(CONTRACTS) - 1
    _user_task_intact(seeded, before)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_scratch_certifies_beside_a_users_task_and_deletes_only_its_own(seeded: Seeded) -> None:
    result = _cli(seeded, "tests.certify.user_stores:make", "--quick", "--scratch",
                  "--no-figures", "--seed", "7", "--only", SOME)
    assert result.returncode == 0, result.stdout + result.stderr
    # Only some contracts ran: they passed, and that is not called a certification.
    assert "NOT a certification" in result.stdout
    assert "on a scratch store" in result.stderr
    # The user's rows are as they were (the run wrote and deleted rows of its own around them).
    cwd = Path.cwd()
    os.chdir(seeded.cwd)
    try:
        store = open_store(seeded.url)
        try:
            loaded = store.load(USER_TASK)
            listed = [s.task_id for s in store.list_checkpoints()]
        finally:
            store.close()
    finally:
        os.chdir(cwd)
    assert listed == [USER_TASK]
    assert loaded is not None and loaded.version == 1
    assert loaded.messages == _user_checkpoint().messages


def test_scratch_on_an_empty_default_store_certifies_and_leaves_no_checkpoint(tmp_path: Path) -> None:
    project = tmp_path / "empty-project"
    project.mkdir()
    env = _env("")
    env.pop("AGENTCKPT_STORE_URL")
    result = subprocess.run(
        [sys.executable, "-m", "pytest_agentckpt.cli", "certify", "stores:open_store", "--quick",
         "--scratch", "--no-figures", "--seed", "3"],
        cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "CERTIFIED: every required contract passed" in result.stdout
    conn = sqlite3.connect(project / ".agentckpt" / "checkpoints.db")
    try:
        assert conn.execute("SELECT count(*) FROM checkpoints").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM messages").fetchone() == (0,)
    finally:
        conn.close()


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("backend", ["postgresql", "redis"])
def test_scratch_on_an_empty_prefix_leaves_nothing_behind(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    name = "u" + uuid.uuid4().hex[:10]
    if backend == "postgresql":
        base = request.getfixturevalue("agentckpt_postgres_url")
        url = _with(base, f"table_prefix={name}_")
        snapshot = _postgres_snapshot(base, f"{name}_")
    else:
        base = request.getfixturevalue("agentckpt_redis_url")
        url = _with(base, f"key_prefix={name}:")
        snapshot = _redis_snapshot(base, f"{name}:")
    try:
        result = _cli(Seeded(url, tmp_path, snapshot), "tests.certify.user_stores:make", "--quick",
                      "--scratch", "--no-figures", "--seed", "5", "--only", SOME)
        assert result.returncode == 0, result.stdout + result.stderr
        if backend == "postgresql":
            assert snapshot() == {"checkpoints": [], "messages": []}
        else:
            assert snapshot() == {}
    finally:
        purge_namespace(url)


def test_checkpoints_of_earlier_certification_runs_are_not_someone_elses(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    leftover = f"{new_run_id()}-rt-0"
    assert is_certify_task(leftover) and not is_certify_task(USER_TASK)
    store = open_store(url)
    store.save(Checkpoint(task_id=leftover, goal="left by a run that was killed"))
    store.close()
    factory = StoreFactory("leftovers:make", lambda: open_store(url))
    report = certify(factory, quick=True, only=["delete_idempotent"], figures=False)
    assert report.passed
    store = open_store(url)
    try:
        # Not this run's: left alone (it may be another run's, still going).
        assert [s.task_id for s in store.list_checkpoints()] == [leftover]
    finally:
        store.close()


def test_a_factory_ignoring_namespaces_is_never_purged_whole(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'one.db'}"
    ctx = CertifyContext(StoreFactory("one:make", lambda namespace: open_store(url)), seed=1,
                         budget=QUICK)
    first = ctx.prepare()
    assert ctx.namespaces_isolated is False
    first.save(Checkpoint(task_id=ctx.task_id("mine"), goal="the run's own"))
    # Written by someone else while the run goes on: the clean-up must not take it along.
    other = open_store(url)
    other.save(Checkpoint(task_id=USER_TASK, goal="written during the run"))
    ctx.close()
    assert [s.task_id for s in other.list_checkpoints()] == [USER_TASK]
    other.close()
    assert (tmp_path / "one.db").exists()


def test_namespaces_of_its_own_are_purged_whole(tmp_path: Path) -> None:
    made: list[Path] = []

    def make(namespace: str) -> Any:
        made.append(tmp_path / f"{namespace}.db")
        return open_store(f"sqlite:///{made[-1]}")

    ctx = CertifyContext(StoreFactory("ns:make", make), seed=1, budget=QUICK)
    ctx.prepare().save(Checkpoint(task_id=ctx.task_id("mine"), goal="x"))
    assert ctx.namespaces_isolated is True
    ctx.close()
    assert made and not any(path.exists() for path in made)


def test_a_store_met_mid_run_with_someone_elses_data_stops_the_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'late.db'}"
    calls: list[str] = []

    def make(namespace: str) -> Any:
        calls.append(namespace)
        if len(calls) == 4:  # after the checks of prepare(): someone's store turns up
            store = open_store(url)
            store.save(_user_checkpoint())
            return store
        return open_store(f"sqlite:///{tmp_path / (namespace + '.db')}")

    with pytest.raises(StoreNotEmptyError, match="invoice-42"):
        certify(StoreFactory("late:make", make), quick=True, figures=False,
                only=["compare_and_set", "delete_idempotent", "no_aliasing"])
    store = open_store(url)
    try:
        assert [s.task_id for s in store.list_checkpoints()] == [USER_TASK]
    finally:
        store.close()


class _Closing:
    """A store whose close() really closes (any use after it raises), with a purge hook,
    over data shared by the instances of one namespace, as a server's would be."""

    def __init__(self, data: MemoryStore) -> None:
        self._data, self._closed = data, False

    def __getattr__(self, name: str) -> Any:
        if self._closed:
            raise RuntimeError("store is closed")
        return getattr(self._data, name)

    def certify_purge(self) -> None:
        if self._closed:
            raise RuntimeError("store is closed")
        for summary in self._data.list_checkpoints():
            self._data.delete(summary.task_id)

    def close(self) -> None:
        self._closed = True


def test_a_namespace_whose_purging_instance_a_contract_closed_is_still_cleaned_up() -> None:
    # durable_restart closes the first store of its namespace and reopens it: the purge
    # fell to the closed instance, failed, and the run's checkpoints stayed behind.
    shared: dict[str, MemoryStore] = {}
    ctx = CertifyContext(
        StoreFactory("closing:make", lambda namespace: _Closing(shared.setdefault(namespace, MemoryStore(namespace)))),
        seed=1, budget=QUICK,
    )
    ctx.prepare()
    assert ctx.namespaces_isolated is True
    first = ctx.new_store("restarted")
    first.save(Checkpoint(task_id=ctx.task_id("durable"), goal="outlives its instance"))
    first.close()
    reopened = ctx.new_store("restarted")
    assert reopened.list_checkpoints()
    ctx.close()
    assert all(store.list_checkpoints() == [] for store in shared.values())


class _BlocksOnceClosed(_Closing):
    """A store whose calls after ``close()`` would block (its event loop is stopped): each
    such call is recorded here instead."""

    used_after_close: list[str] = []

    def __getattr__(self, name: str) -> Any:
        if self._closed:
            self.used_after_close.append(name)
            raise RuntimeError("would block for ever")
        return getattr(self._data, name)

    def certify_purge(self) -> None:
        if self._closed:
            self.used_after_close.append("certify_purge")
            raise RuntimeError("would block for ever")
        super().certify_purge()

    def close(self) -> None:
        if self._closed:
            self.used_after_close.append("close")
        self._closed = True


def test_the_clean_up_never_calls_an_instance_a_contract_closed() -> None:
    # An outside round's sound store (an asyncio facade whose loop stops on close) hung the
    # pytest form for ever and the CLI for its whole time limit, and left its tables: the
    # clean-up purged with the instance durable_restart had closed.
    shared: dict[str, MemoryStore] = {}
    _BlocksOnceClosed.used_after_close = []
    ctx = CertifyContext(
        StoreFactory("blocking:make", lambda namespace: _BlocksOnceClosed(shared.setdefault(namespace, MemoryStore(namespace)))),
        seed=1, budget=QUICK,
    )
    ctx.prepare()
    first = ctx.new_store("restarted")
    first.save(Checkpoint(task_id=ctx.task_id("durable"), goal="outlives its instance"))
    ctx.close_store(first)
    ctx.close()
    assert _BlocksOnceClosed.used_after_close == []
    assert all(store.list_checkpoints() == [] for store in shared.values())


def test_scratch_beside_a_users_damaged_checkpoint_blames_it_and_leaves_nothing_of_its_own(tmp_path: Path) -> None:
    # A CLI round: certify --scratch on a store holding one damaged user task ended NOT
    # CERTIFIED, said the store had called certification's own writing corrupt, and left
    # 129 running certify tasks behind (its clean-up's listing stopped at the damaged one).
    from pytest_agentckpt.certify import Outcome

    db = tmp_path / "users.db"
    store = open_store(f"sqlite:///{db}")
    store.save(Checkpoint(task_id="x2", goal="the user's"))
    store.close()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE checkpoints SET head = x'7b' WHERE task_id = 'x2'")
    conn.close()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AGENTCKPT_STORE_URL", f"sqlite:///{db}")
        report = certify("stores:open_store", quick=True, seed=3, scratch=True, figures=False,
                         only=["listing", "compare_and_set"])
    listing = report.result("listing")
    assert listing.outcome is Outcome.ERROR, listing.summary
    assert "a checkpoint certification did not write ('x2') cannot be read" in listing.summary
    assert report.left_behind is None
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT task_id, head FROM checkpoints").fetchall()
    conn.close()
    assert rows == [("x2", b"{")]  # the user's row as it was, and nothing of the run's
