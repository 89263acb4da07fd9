"""The CLI on damaged checkpoints, and the demo's store URL.

``inspect`` shows a damaged checkpoint (the corruption error tells the user to inspect
it), ``list`` names a task whose head breaks the checkpoint's rules as ``status`` does,
and the demo keeps a store password off its agent processes' command lines.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from pytest_agentckpt.certify.hooks import hooks_for
from reference_agent.cli import _PROG, _child_command, main
from stores import Checkpoint, CheckpointStore, CorruptCheckpointError, open_store
from stores.postgresql import PostgresStore
from stores.redis import RedisStore
from stores.sqlite import SQLiteStore

_PASSWORD = "hunter2secret"


def _opened(url: str) -> CheckpointStore:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a Redis without AOF warns on open
        return open_store(url)


@pytest.fixture(params=["sqlite", "postgresql", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh store URL on each backend whose stored rows a test edits by hand."""
    ns = "t" + uuid.uuid4().hex[:12]
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'c.db'}"
        return
    if request.param == "postgresql":
        url = f"{request.getfixturevalue('agentckpt_postgres_url')}?table_prefix={ns}_"
    else:
        url = f"{request.getfixturevalue('agentckpt_redis_url').split('?')[0]}?key_prefix={ns}:"
    yield url
    store = _opened(url)
    try:
        purge = hooks_for(store).purge
        assert purge is not None
        purge()
    finally:
        store.close()


def _edit_head(store: CheckpointStore, task_id: str, change: Callable[[bytes], bytes]) -> None:
    """Rewrite the stored head bytes of ``task_id`` as an outside hand would."""
    if isinstance(store, SQLiteStore):
        with sqlite3.connect(store.path) as db:
            (head,) = db.execute("SELECT head FROM checkpoints WHERE task_id = ?", (task_id,)).fetchone()
            db.execute("UPDATE checkpoints SET head = ? WHERE task_id = ?", (change(bytes(head)), task_id))
        db.close()
    elif isinstance(store, PostgresStore):
        table = store.tables["checkpoints"]
        with store._connect() as conn:
            (head,) = conn.execute(f"SELECT head FROM {table} WHERE task_id = %s".encode(), (task_id,)).fetchone()
            conn.execute(f"UPDATE {table} SET head = %s WHERE task_id = %s".encode(),
                         (change(bytes(head)), task_id))
    else:
        assert isinstance(store, RedisStore)
        key = store.raw_keys(task_id)[0]
        store.client.hset(key, "body", change(store.client.hget(key, "body")))  # type: ignore[arg-type]


def _damage_messages(store: CheckpointStore, task_id: str) -> None:
    """Turn the first stored message of ``task_id`` into bytes that are not JSON."""
    if isinstance(store, SQLiteStore):
        with sqlite3.connect(store.path) as db:
            db.execute("UPDATE messages SET body = ? WHERE task_id = ?", (b"\x00 not json", task_id))
        db.close()
    elif isinstance(store, PostgresStore):
        with store._connect() as conn:
            conn.execute(f"UPDATE {store.tables['messages']} SET body = %s WHERE task_id = %s".encode(),
                         (b"\x00 not json", task_id))
    else:
        assert isinstance(store, RedisStore)
        store.client.lset(store.raw_keys(task_id)[1], 0, b"\x00 not json")


def _stored_state(url: str, task_id: str) -> tuple[str, list[str]]:
    """What the store holds for ``task_id`` and the tasks it lists: to show nothing changed."""
    store = _opened(url)
    try:
        with pytest.raises(CorruptCheckpointError) as raised:
            store.load(task_id)
        listed = [s.task_id for s in store.list_checkpoints(on_unreadable=lambda exc: None)]  # type: ignore[call-arg]
        return str(raised.value), listed
    finally:
        store.close()


# -- inspect shows what a damaged checkpoint still holds ---------------------------------


def test_inspect_shows_a_checkpoint_whose_messages_are_damaged_and_changes_nothing(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _opened(store_url)
    store.save(Checkpoint(task_id="t", goal="g", status="completed", iteration=4, metadata={"team": "ops"},
                          messages=[{"role": "user", "content": "go"}]))
    _damage_messages(store, "t")
    store.close()
    before = _stored_state(store_url, "t")

    assert main(["inspect", "t", "--store", store_url]) == 1
    out, err = capsys.readouterr()
    assert "task t  DAMAGED: its checkpoint cannot be loaded" in out
    assert "why: stored message 0 is not" in out
    assert "saved head (read apart from the message history): status=completed  iteration=4  version=1" in out
    assert 'metadata: {"team": "ops"}' in out
    assert f"{_PROG} delete t --store" in out
    errors = err.strip().splitlines()
    assert len(errors) == 1 and errors[0].startswith("error: checkpoint 't' is corrupt: stored message 0")
    assert "Traceback" not in out + err

    assert main(["inspect", "t", "--store", store_url, "--json"]) == 1
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert (report["ok"], report["damaged"], report["exit_status"], report["head_error"]) == (False, True, 1, None)
    assert report["error"] == err.strip().removeprefix("error: ")
    assert report["reason"].startswith("stored message 0 is not")
    assert {k: report["head"][k] for k in ("task_id", "status", "iteration", "version", "metadata")} == {
        "task_id": "t", "status": "completed", "iteration": 4, "version": 1, "metadata": {"team": "ops"}}

    # The status command agrees (exit status 1), and the store holds what it held.
    assert main(["status", "t", "--store", store_url]) == 1
    assert "checkpoint 't' is corrupt" in capsys.readouterr().err
    assert _stored_state(store_url, "t") == before


def test_inspect_shows_a_checkpoint_whose_head_is_damaged_on_every_backend(
    any_checkpoint_store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = any_checkpoint_store_url
    if url.startswith("memory:"):
        pytest.skip("memory:// stores share nothing between instances")
    store = _opened(url)
    store.save(Checkpoint(task_id="bad", status="running"))
    corrupt = hooks_for(store).corrupt
    assert corrupt is not None
    corrupt("bad")
    try:
        assert main(["inspect", "bad", "--store", url]) == 1
        out, err = capsys.readouterr()
        assert "task bad  DAMAGED: its checkpoint cannot be loaded" in out
        assert "saved head: unreadable too (" in out
        assert "Traceback" not in out + err
        assert len(err.strip().splitlines()) == 1 and "checkpoint 'bad' is corrupt" in err

        assert main(["inspect", "bad", "--store", url, "--json"]) == 1
        report = json.loads(capsys.readouterr().out)
        assert (report["damaged"], report["head"], report["task_id"]) == (True, None, "bad")
        assert report["head_error"]
        with pytest.raises(CorruptCheckpointError):
            store.load("bad")  # left as it is
    finally:
        store.close()


# -- list agrees with status on a head whose fields break the checkpoint's rules ---------


def test_list_names_a_task_whose_iteration_was_edited_below_0_as_damaged_as_status_does(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _opened(store_url)
    store.save(Checkpoint(task_id="edited", iteration=5))
    store.save(Checkpoint(task_id="fine", iteration=2))
    _edit_head(store, "edited", lambda head: head.replace(b'"iteration":5', b'"iteration":-3'))
    try:
        with pytest.raises(CorruptCheckpointError, match="greater than or equal to 0"):
            store.list_checkpoints()  # what every listing of the store sees
    finally:
        store.close()

    assert main(["status", "edited", "--store", store_url]) == 1
    assert "checkpoint 'edited' is corrupt" in capsys.readouterr().err

    assert main(["list", "--store", store_url]) == 1
    out, err = capsys.readouterr()
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["fine"]
    assert "skipped edited: unreadable, left as it is" in err
    assert f"{_PROG} inspect edited --store" in err and f"{_PROG} delete edited --store" in err

    assert main(["list", "--store", store_url, "--json"]) == 1
    assert [row["task_id"] for row in json.loads(capsys.readouterr().out)] == ["fine"]


# -- the demo keeps the store URL off its agent processes' command lines ------------------


def _with_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        return url
    user = parts.username or "postgres"
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{user}:{_PASSWORD}@{host}"))


def test_the_demo_child_command_carries_no_store_url() -> None:
    url = f"redis://agent:{_PASSWORD}@127.0.0.1:6379/0"
    command, env = _child_command("t", "goal", url, "http://127.0.0.1:1", Path("w.db"), pause_at="iteration:2")
    assert not any(_PASSWORD in word for word in command) and "--store" not in command
    assert env["AGENTCKPT_STORE_URL"] == url
    assert command[-2:] == ["--pause-at", "iteration:2"]


def test_the_demo_on_a_store_url_with_a_password_works_and_no_child_argv_shows_it(
    agentckpt_postgres_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The server trusts loopback connections, so any password is accepted: the URL is one a
    # user with a password-protected server gives, and ps showed it to every user.
    base = _with_password(agentckpt_postgres_url)
    url = f"{base}{'&' if '?' in base else '?'}table_prefix=t{uuid.uuid4().hex[:12]}_"
    started: list[list[str]] = []
    real_popen = subprocess.Popen

    def recording_popen(command: list[str], *args: Any, **kwargs: Any) -> Any:
        started.append(list(command))
        return real_popen(command, *args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", recording_popen)
    try:
        assert main(["demo", "--seed", "5", "--store", url, "--json"]) == 0
    finally:
        store = PostgresStore.from_url(url)
        store.drop_tables()
        store.close()
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert report["ok"] and len(report["processes"]) == len(started) == 2
    assert all(_PASSWORD not in word for command in started for word in command)
    assert _PASSWORD not in out + err
