"""The retention rule (stores/retention.py) and the in-process store's ttl."""

from __future__ import annotations

import datetime as _dt

import pytest

import stores.memory
from stores import Checkpoint, ConflictError, InvalidStoreURLError, open_store
from stores.checkpoint import utcnow
from stores.memory import MemoryStore
from stores.retention import is_expired, parse_ttl

from .clock import FakeClock, fake_clock


@pytest.mark.parametrize(
    ("given", "seconds"),
    [(3600, 3600.0), (0.5, 0.5), ("45", 45.0), ("45s", 45.0), ("90m", 5400.0), ("12h", 43200.0),
     ("7d", 604800.0), ("2w", 1209600.0), (" 1.5H ", 5400.0), (".5s", 0.5)],
)
def test_ttl_is_seconds_or_a_duration(given: float | str, seconds: float) -> None:
    assert parse_ttl(given) == seconds


@pytest.mark.parametrize("given", ["soon", "7 days", "1d2h", "-5", "0", 0, -1.0, float("inf"), float("nan"), True, [1]])
def test_a_bad_ttl_is_refused_with_the_accepted_forms(given: object) -> None:
    with pytest.raises(ValueError, match="ttl"):
        parse_ttl(given)  # type: ignore[arg-type]


def test_only_finished_checkpoints_expire_and_only_after_the_ttl() -> None:
    now = utcnow()
    old = now - _dt.timedelta(seconds=61)
    assert is_expired("completed", old, 60, now) and is_expired("failed", old, 60, now)
    assert not is_expired("running", old, 60, now)
    assert not is_expired("completed", now - _dt.timedelta(seconds=59), 60, now)
    assert not is_expired("completed", old, None, now)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    return fake_clock(monkeypatch, stores.memory)


def test_memory_store_forgets_finished_checkpoints_after_the_ttl_and_keeps_running_ones(clock: FakeClock) -> None:
    store = MemoryStore(ttl=60)
    done = store.save(Checkpoint(task_id="done", status="completed", messages=[{"role": "user", "content": "x"}]))
    running = store.save(Checkpoint(task_id="running"))
    clock.advance(59)
    assert store.load("done") is not None
    clock.advance(2)
    assert [s.task_id for s in store.list_checkpoints()] == ["running"]
    assert store.load("done") is None
    assert store.load("running") == running
    with pytest.raises(ConflictError):
        store.save(done)
    reborn = store.save(Checkpoint(task_id="done"))
    assert reborn.version == 1 and store.load("done").messages == []  # type: ignore[union-attr]


def test_memory_store_ttl_counts_from_the_last_save(clock: FakeClock) -> None:
    store = MemoryStore(ttl=60)
    saved = store.save(Checkpoint(task_id="t", status="completed"))
    clock.advance(50)
    store.save(saved.model_copy(update={"iteration": 2}))
    clock.advance(50)
    loaded = store.load("t")
    assert loaded is not None and loaded.iteration == 2


def test_memory_store_without_ttl_keeps_everything(clock: FakeClock) -> None:
    store = MemoryStore()
    store.save(Checkpoint(task_id="t", status="completed"))
    clock.advance(10**9)
    assert store.load("t") is not None and store.info().ttl is None


def test_ttl_in_a_memory_url() -> None:
    assert open_store("memory://x?ttl=7d").info().ttl == 604800.0
    with pytest.raises(InvalidStoreURLError, match="ttl 'soon' is not a duration"):
        open_store("memory://x?ttl=soon")
    with pytest.raises(InvalidStoreURLError, match=r"unknown parameter.*tll.*supported: ttl"):
        open_store("memory://x?tll=7d")


def test_memory_store_sweep_drops_only_expired_finished_checkpoints(clock: FakeClock) -> None:
    store = MemoryStore(ttl=60)
    for task_id, status in (("done", "completed"), ("failed", "failed"), ("running", "running")):
        store.save(Checkpoint(task_id=task_id, status=status))  # type: ignore[arg-type]
    clock.advance(30)
    store.save(Checkpoint(task_id="recent", status="completed"))
    clock.advance(31)
    assert store.sweep_expired() == 2
    assert sorted(store._records) == ["recent", "running"]
    assert store.sweep_expired() == 0


def test_a_ttl_longer_than_the_calendar_expires_nothing_instead_of_overflowing() -> None:
    now = utcnow()
    assert not is_expired("completed", _dt.datetime(1, 1, 2, tzinfo=_dt.timezone.utc), 1e15, now)
    assert MemoryStore(ttl="99999999999w").sweep_expired() == 0
